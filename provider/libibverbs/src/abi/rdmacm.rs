//! `#[repr(C)]` mirrors of the structs `librdmacm.so.1` shares with programs, as rdma-core v44's
//! `<rdma/rdma_cma.h>` lays them out on x86_64 (rdma-cm-notes §7; every size and offset is
//! asserted below and compared with the installed header by `tests/abi_layout.rs`).
use super::*;
use core::ffi::{c_char, c_int, c_void};
use core::mem::{offset_of, size_of};

/// `struct rdma_event_channel`: programs read `fd` directly (poll, O_NONBLOCK).
#[repr(C)]
pub struct rdma_event_channel {
    pub fd: c_int,
}

/// `struct rdma_ib_addr`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct rdma_ib_addr {
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
    /// `__be16`.
    pub pkey: u16,
}

/// `struct rdma_addr`: the source and destination unions are `sockaddr_storage`-sized.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_addr {
    pub src_addr: libc::sockaddr_storage,
    pub dst_addr: libc::sockaddr_storage,
    pub ibaddr: rdma_ib_addr,
}

/// `struct rdma_route`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_route {
    pub addr: rdma_addr,
    pub path_rec: *mut ibv_sa_path_rec,
    pub num_paths: c_int,
}

/// `struct ibv_sa_path_rec` (`<infiniband/sa.h>`), 64 bytes; big-endian fields are stored as
/// they are on the wire.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_sa_path_rec {
    pub dgid: ibv_gid,
    pub sgid: ibv_gid,
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: c_int,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reversible: c_int,
    pub numb_path: u8,
    pub pkey: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

/// `struct rdma_cm_id`.
#[repr(C)]
pub struct rdma_cm_id {
    pub verbs: *mut ibv_context,
    pub channel: *mut rdma_event_channel,
    pub context: *mut c_void,
    pub qp: *mut ibv_qp,
    pub route: rdma_route,
    /// `enum rdma_port_space`.
    pub ps: u32,
    pub port_num: u8,
    pub event: *mut rdma_cm_event,
    pub send_cq_channel: *mut ibv_comp_channel,
    pub send_cq: *mut ibv_cq,
    pub recv_cq_channel: *mut ibv_comp_channel,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub pd: *mut ibv_pd,
    /// `enum ibv_qp_type`.
    pub qp_type: u32,
}

/// `struct rdma_conn_param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_conn_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct rdma_ud_param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ud_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: ibv_ah_attr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// The `param` union of `struct rdma_cm_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_cm_event_param {
    pub conn: rdma_conn_param,
    pub ud: rdma_ud_param,
}

/// `struct rdma_cm_event`.
#[repr(C)]
pub struct rdma_cm_event {
    pub id: *mut rdma_cm_id,
    pub listen_id: *mut rdma_cm_id,
    /// `enum rdma_cm_event_type`.
    pub event: u32,
    pub status: c_int,
    pub param: rdma_cm_event_param,
}

/// `struct rdma_addrinfo`.
#[repr(C)]
pub struct rdma_addrinfo {
    pub ai_flags: c_int,
    pub ai_family: c_int,
    pub ai_qp_type: c_int,
    pub ai_port_space: c_int,
    pub ai_src_len: libc::socklen_t,
    pub ai_dst_len: libc::socklen_t,
    pub ai_src_addr: *mut libc::sockaddr,
    pub ai_dst_addr: *mut libc::sockaddr,
    pub ai_src_canonname: *mut c_char,
    pub ai_dst_canonname: *mut c_char,
    pub ai_route_len: usize,
    pub ai_route: *mut c_void,
    pub ai_connect_len: usize,
    pub ai_connect: *mut c_void,
    pub ai_next: *mut rdma_addrinfo,
}

/// `enum rdma_port_space`.
pub const RDMA_PS_IPOIB: u32 = 0x0002;
pub const RDMA_PS_IB: u32 = 0x013F;
pub const RDMA_PS_TCP: u32 = 0x0106;
pub const RDMA_PS_UDP: u32 = 0x0111;
/// `RDMA_MAX_RESP_RES`, `RDMA_MAX_INIT_DEPTH`: "as many as the device allows".
pub const RDMA_MAX_RESP_RES: u8 = 0xFF;
pub const RDMA_MAX_INIT_DEPTH: u8 = 0xFF;
/// `RDMA_UDP_QKEY`.
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;
/// `rdma_addrinfo.ai_flags`.
pub const RAI_PASSIVE: c_int = 1;
pub const RAI_NUMERICHOST: c_int = 2;
pub const RAI_NOROUTE: c_int = 4;
pub const RAI_FAMILY: c_int = 8;
/// `rdma_set_option` levels and names.
pub const RDMA_OPTION_ID: c_int = 0;
pub const RDMA_OPTION_IB: c_int = 1;
pub const RDMA_OPTION_ID_TOS: c_int = 0;
pub const RDMA_OPTION_ID_REUSEADDR: c_int = 1;
pub const RDMA_OPTION_ID_AFONLY: c_int = 2;
pub const RDMA_OPTION_ID_ACK_TIMEOUT: c_int = 3;
pub const RDMA_OPTION_IB_PATH: c_int = 1;

macro_rules! assert_layout {
    ($t:ty, $size:expr $(, $field:ident = $off:expr)* $(,)?) => {
        const _: () = {
            assert!(size_of::<$t>() == $size, concat!("sizeof ", stringify!($t)));
            $(assert!(offset_of!($t, $field) == $off, concat!(stringify!($t), ".", stringify!($field)));)*
        };
    };
}
assert_layout!(rdma_event_channel, 4, fd = 0);
assert_layout!(rdma_ib_addr, 40, sgid = 0, dgid = 16, pkey = 32);
assert_layout!(rdma_addr, 296, src_addr = 0, dst_addr = 128, ibaddr = 256);
assert_layout!(rdma_route, 312, addr = 0, path_rec = 296, num_paths = 304);
assert_layout!(
    ibv_sa_path_rec,
    64,
    dlid = 32,
    flow_label = 40,
    hop_limit = 44,
    reversible = 48,
    pkey = 54,
    sl = 56,
    mtu = 58,
    packet_life_time = 62,
    preference = 63
);
assert_layout!(
    rdma_cm_id,
    416,
    verbs = 0,
    channel = 8,
    context = 16,
    qp = 24,
    route = 32,
    ps = 344,
    port_num = 348,
    event = 352,
    send_cq_channel = 360,
    send_cq = 368,
    recv_cq_channel = 376,
    recv_cq = 384,
    srq = 392,
    pd = 400,
    qp_type = 408
);
assert_layout!(
    rdma_conn_param,
    24,
    private_data_len = 8,
    responder_resources = 9,
    initiator_depth = 10,
    flow_control = 11,
    retry_count = 12,
    rnr_retry_count = 13,
    srq = 14,
    qp_num = 16
);
assert_layout!(rdma_ud_param, 56, ah_attr = 16, qp_num = 48, qkey = 52);
assert_layout!(
    rdma_cm_event,
    80,
    listen_id = 8,
    event = 16,
    status = 20,
    param = 24
);
assert_layout!(
    rdma_addrinfo,
    96,
    ai_src_len = 16,
    ai_dst_len = 20,
    ai_src_addr = 24,
    ai_dst_addr = 32,
    ai_route_len = 56,
    ai_connect_len = 72,
    ai_next = 88
);
