//! The unmodified Debian programs the tests run, by package: one list each, for the
//! prerequisite checks (`have_tools`, `binaries`) of the tool matrix and the loader tests.

/// ibverbs-utils: the device listings and the four ping-pongs.
pub const IBVERBS_UTILS: &[&str] = &[
    "ibv_devices",
    "ibv_devinfo",
    "ibv_rc_pingpong",
    "ibv_uc_pingpong",
    "ibv_ud_pingpong",
    "ibv_srq_pingpong",
];

/// perftest: the bandwidth and latency tests of WRITE, READ, SEND and atomics.
pub const PERFTEST: &[&str] = &[
    "ib_write_bw",
    "ib_read_bw",
    "ib_send_bw",
    "ib_atomic_bw",
    "ib_write_lat",
    "ib_read_lat",
    "ib_send_lat",
    "ib_atomic_lat",
];

/// rdmacm-utils: RDMA CM programs, which load the drop-in library as librdmacm.so.1 too.
pub const RDMACM_UTILS: &[&str] = &["rping", "ucmatose", "udaddy", "rdma_server", "rdma_client"];
