//! Once-per-process setup (the environment the library reads) and harness constants.

use super::*;

pub(super) struct Setup;

/// Once per process: the environment the library reads (before its first call).
pub(super) fn setup() -> &'static Setup {
    static S: OnceLock<Setup> = OnceLock::new();
    S.get_or_init(|| {
        let pid = std::process::id();
        let ip = Ipv4Addr::new(
            127,
            100 + ((pid >> 16) % 100) as u8,
            (pid >> 8) as u8,
            (pid as u8).max(1),
        );
        for k in [
            "ROCE_LOSS",
            "ROCE_REORDER",
            "ROCE_PCAP",
            "ROCE_LOG",
            "ROCE_FAULT_ALL",
            "ROCE_FAULT_ACKS",
            "ROCE_DEV_NAME",
            "ROCE_ICRC_POLICY",
        ] {
            std::env::remove_var(k);
        }
        std::env::set_var("ROCE_IP", ip.to_string());
        std::env::set_var("ROCE_MTU", "1024");
        std::env::set_var("ROCE_PROGRESS_THREAD", "0");
        std::env::set_var("ROCE_QUIET", "1");
        Setup
    })
}

pub(super) const QKEY: u32 = 0x1111_1111;

/// The `send_ops_flags` the library supports on a QP of type `t` (what the engine executes;
/// anything else is refused at creation with EOPNOTSUPP).
pub(super) fn wr_ops(t: u32) -> u64 {
    const UD: u64 = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
    const UC: u64 = UD | IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    match t {
        IBV_QPT_RC => {
            UC | IBV_QP_EX_WITH_RDMA_READ
                | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
                | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
                | IBV_QP_EX_WITH_SEND_WITH_INV
        }
        IBV_QPT_UC => UC,
        IBV_QPT_UD => UD,
        _ => 0,
    }
}
