//! Verbs-shaped types: work requests, completions, attributes and their ibverbs numeric values
//! (rdma-core `verbs.h`, roce-spec-notes E.5). Numeric enums are `#[repr(u32)]`/`#[repr(u8)]`
//! with the exact libibverbs discriminants so the C ABI can cast them.
use std::net::IpAddr;

macro_rules! flags {
    ($(#[$m:meta])* $name:ident: $t:ty { $($(#[$fm:meta])* $f:ident = $v:expr;)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub $t);
        impl $name {
            $($(#[$fm])* pub const $f: $name = $name($v);)*
            /// No bits.
            pub const EMPTY: $name = $name(0);
            /// All bits of `o` set in `self`.
            #[inline] pub const fn contains(self, o: $name) -> bool { self.0 & o.0 == o.0 }
            /// Any bit of `o` set in `self`.
            #[inline] pub const fn intersects(self, o: $name) -> bool { self.0 & o.0 != 0 }
            /// Raw bits.
            #[inline] pub const fn bits(self) -> $t { self.0 }
        }
        impl core::ops::BitOr for $name { type Output = $name; fn bitor(self, o: $name) -> $name { $name(self.0 | o.0) } }
        impl core::ops::BitOrAssign for $name { fn bitor_assign(&mut self, o: $name) { self.0 |= o.0 } }
        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{}(", stringify!($name))?;
                let mut first = true;
                $(if self.0 & $v != 0 && $v != 0 { if !first { write!(f, "|")?; } first = false; write!(f, stringify!($f))?; })*
                let _ = first;
                write!(f, ")")
            }
        }
    };
}

flags! {
    /// `enum ibv_access_flags`.
    AccessFlags: u32 {
        /// IBV_ACCESS_LOCAL_WRITE
        LOCAL_WRITE = 1;
        /// IBV_ACCESS_REMOTE_WRITE
        REMOTE_WRITE = 2;
        /// IBV_ACCESS_REMOTE_READ
        REMOTE_READ = 4;
        /// IBV_ACCESS_REMOTE_ATOMIC
        REMOTE_ATOMIC = 8;
        /// IBV_ACCESS_MW_BIND
        MW_BIND = 16;
        /// IBV_ACCESS_ZERO_BASED
        ZERO_BASED = 32;
        /// IBV_ACCESS_ON_DEMAND
        ON_DEMAND = 64;
        /// IBV_ACCESS_FLUSH_GLOBAL (RDMA FLUSH for global visibility may target the region)
        FLUSH_GLOBAL = 1 << 8;
        /// IBV_ACCESS_FLUSH_PERSISTENT (RDMA FLUSH for persistence; only persistent memory,
        /// which this device has none of)
        FLUSH_PERSISTENT = 1 << 9;
    }
}

impl AccessFlags {
    /// Local write and every remote access (write, read, atomic): a region any peer
    /// operation may target.
    pub const ALL_REMOTE: AccessFlags = AccessFlags(
        AccessFlags::LOCAL_WRITE.0
            | AccessFlags::REMOTE_WRITE.0
            | AccessFlags::REMOTE_READ.0
            | AccessFlags::REMOTE_ATOMIC.0,
    );
}

flags! {
    /// `enum ibv_send_flags`.
    SendFlags: u32 {
        /// IBV_SEND_FENCE
        FENCE = 1;
        /// IBV_SEND_SIGNALED
        SIGNALED = 2;
        /// IBV_SEND_SOLICITED
        SOLICITED = 4;
        /// IBV_SEND_INLINE
        INLINE = 8;
        /// IBV_SEND_IP_CSUM
        IP_CSUM = 16;
    }
}

flags! {
    /// `enum ibv_wc_flags`.
    WcFlags: u32 {
        /// IBV_WC_GRH
        GRH = 1;
        /// IBV_WC_WITH_IMM
        WITH_IMM = 2;
        /// IBV_WC_IP_CSUM_OK
        IP_CSUM_OK = 4;
        /// IBV_WC_WITH_INV
        WITH_INV = 8;
    }
}

flags! {
    /// `enum ibv_qp_attr_mask`.
    QpAttrMask: u32 {
        /// IBV_QP_STATE
        STATE = 1 << 0;
        /// IBV_QP_CUR_STATE
        CUR_STATE = 1 << 1;
        /// IBV_QP_EN_SQD_ASYNC_NOTIFY
        EN_SQD_ASYNC_NOTIFY = 1 << 2;
        /// IBV_QP_ACCESS_FLAGS
        ACCESS_FLAGS = 1 << 3;
        /// IBV_QP_PKEY_INDEX
        PKEY_INDEX = 1 << 4;
        /// IBV_QP_PORT
        PORT = 1 << 5;
        /// IBV_QP_QKEY
        QKEY = 1 << 6;
        /// IBV_QP_AV
        AV = 1 << 7;
        /// IBV_QP_PATH_MTU
        PATH_MTU = 1 << 8;
        /// IBV_QP_TIMEOUT
        TIMEOUT = 1 << 9;
        /// IBV_QP_RETRY_CNT
        RETRY_CNT = 1 << 10;
        /// IBV_QP_RNR_RETRY
        RNR_RETRY = 1 << 11;
        /// IBV_QP_RQ_PSN
        RQ_PSN = 1 << 12;
        /// IBV_QP_MAX_QP_RD_ATOMIC
        MAX_QP_RD_ATOMIC = 1 << 13;
        /// IBV_QP_ALT_PATH
        ALT_PATH = 1 << 14;
        /// IBV_QP_MIN_RNR_TIMER
        MIN_RNR_TIMER = 1 << 15;
        /// IBV_QP_SQ_PSN
        SQ_PSN = 1 << 16;
        /// IBV_QP_MAX_DEST_RD_ATOMIC
        MAX_DEST_RD_ATOMIC = 1 << 17;
        /// IBV_QP_PATH_MIG_STATE
        PATH_MIG_STATE = 1 << 18;
        /// IBV_QP_CAP
        CAP = 1 << 19;
        /// IBV_QP_DEST_QPN
        DEST_QPN = 1 << 20;
        /// IBV_QP_RATE_LIMIT
        RATE_LIMIT = 1 << 25;
    }
}

/// `enum ibv_qp_type` (the ones we implement).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum QpType {
    /// Reliable connected.
    Rc = 2,
    /// Unreliable connected.
    Uc = 3,
    /// Unreliable datagram.
    Ud = 4,
}

/// `enum ibv_qp_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum QpState {
    /// IBV_QPS_RESET
    #[default]
    Reset = 0,
    /// IBV_QPS_INIT
    Init = 1,
    /// IBV_QPS_RTR
    Rtr = 2,
    /// IBV_QPS_RTS
    Rts = 3,
    /// IBV_QPS_SQD
    Sqd = 4,
    /// IBV_QPS_SQE
    Sqe = 5,
    /// IBV_QPS_ERR
    Err = 6,
}

/// `enum ibv_wr_opcode` (the ones we implement).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum WrOpcode {
    /// IBV_WR_RDMA_WRITE
    RdmaWrite = 0,
    /// IBV_WR_RDMA_WRITE_WITH_IMM
    RdmaWriteWithImm = 1,
    /// IBV_WR_SEND
    #[default]
    Send = 2,
    /// IBV_WR_SEND_WITH_IMM
    SendWithImm = 3,
    /// IBV_WR_RDMA_READ
    RdmaRead = 4,
    /// IBV_WR_ATOMIC_CMP_AND_SWP
    AtomicCmpAndSwp = 5,
    /// IBV_WR_ATOMIC_FETCH_AND_ADD
    AtomicFetchAndAdd = 6,
    /// IBV_WR_LOCAL_INV (a local operation: invalidates a type 2 memory window's rkey)
    LocalInv = 7,
    /// IBV_WR_BIND_MW (a local operation: binds a memory window, `SendWr::bind`)
    BindMw = 8,
    /// IBV_WR_SEND_WITH_INV
    SendWithInv = 9,
    /// IBV_WR_FLUSH (IBA 1.5 RDMA FLUSH, RC: `SendWr::flush`, `remote_addr`, `rkey`)
    Flush = 14,
    /// IBV_WR_ATOMIC_WRITE (IBA 1.5, RC: the 8 bytes of `compare_add`, host order, written
    /// at `remote_addr` as one store)
    AtomicWrite = 15,
}

impl WrOpcode {
    /// From the libibverbs value.
    pub fn from_raw(v: u32) -> Option<WrOpcode> {
        Some(match v {
            0 => WrOpcode::RdmaWrite,
            1 => WrOpcode::RdmaWriteWithImm,
            2 => WrOpcode::Send,
            3 => WrOpcode::SendWithImm,
            4 => WrOpcode::RdmaRead,
            5 => WrOpcode::AtomicCmpAndSwp,
            6 => WrOpcode::AtomicFetchAndAdd,
            7 => WrOpcode::LocalInv,
            8 => WrOpcode::BindMw,
            9 => WrOpcode::SendWithInv,
            14 => WrOpcode::Flush,
            15 => WrOpcode::AtomicWrite,
            _ => return None,
        })
    }
    /// SEND family.
    pub fn is_send(self) -> bool {
        matches!(
            self,
            WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv
        )
    }
    /// RDMA WRITE family.
    pub fn is_write(self) -> bool {
        matches!(self, WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm)
    }
    /// Atomics.
    pub fn is_atomic(self) -> bool {
        matches!(
            self,
            WrOpcode::AtomicCmpAndSwp | WrOpcode::AtomicFetchAndAdd
        )
    }
    /// READ or atomic: answered with data (a READ response or an atomic ACK), never
    /// completed by a plain or implicit ACK.
    pub fn is_rd_atomic(self) -> bool {
        self == WrOpcode::RdmaRead || self.is_atomic()
    }
    /// RDMA FLUSH or ATOMIC WRITE (IBA 1.5): answered by a zero-length RDMA READ response.
    pub fn is_flush_or_atomic_write(self) -> bool {
        matches!(self, WrOpcode::Flush | WrOpcode::AtomicWrite)
    }
    /// Takes an initiator depth (`max_rd_atomic`) credit and a responder resource: READ,
    /// atomics, ATOMIC WRITE (as rxe) and FLUSH (rxe: none; emu README, deviations).
    pub fn takes_rd_atomic_credit(self) -> bool {
        self.is_rd_atomic() || self.is_flush_or_atomic_write()
    }
    /// A local operation (bind a memory window, local invalidate): executed by the requester
    /// when it reaches the WQE, no packet, no PSN (rxe `WR_LOCAL_OP_MASK`).
    pub fn is_local(self) -> bool {
        matches!(self, WrOpcode::LocalInv | WrOpcode::BindMw)
    }
    /// Carries immediate data.
    pub fn has_imm(self) -> bool {
        matches!(self, WrOpcode::SendWithImm | WrOpcode::RdmaWriteWithImm)
    }
    /// The send-side completion opcode.
    pub fn wc_opcode(self) -> WcOpcode {
        match self {
            WrOpcode::RdmaWrite | WrOpcode::RdmaWriteWithImm => WcOpcode::RdmaWrite,
            WrOpcode::Send | WrOpcode::SendWithImm | WrOpcode::SendWithInv => WcOpcode::Send,
            WrOpcode::RdmaRead => WcOpcode::RdmaRead,
            WrOpcode::AtomicCmpAndSwp => WcOpcode::CompSwap,
            WrOpcode::AtomicFetchAndAdd => WcOpcode::FetchAdd,
            WrOpcode::Flush => WcOpcode::Flush,
            WrOpcode::AtomicWrite => WcOpcode::AtomicWrite,
            WrOpcode::LocalInv => WcOpcode::LocalInv,
            WrOpcode::BindMw => WcOpcode::BindMw,
        }
    }
}

/// `enum ibv_wc_opcode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum WcOpcode {
    /// IBV_WC_SEND
    #[default]
    Send = 0,
    /// IBV_WC_RDMA_WRITE
    RdmaWrite = 1,
    /// IBV_WC_RDMA_READ
    RdmaRead = 2,
    /// IBV_WC_COMP_SWAP
    CompSwap = 3,
    /// IBV_WC_FETCH_ADD
    FetchAdd = 4,
    /// IBV_WC_BIND_MW
    BindMw = 5,
    /// IBV_WC_LOCAL_INV
    LocalInv = 6,
    /// IBV_WC_FLUSH (rdma-core 45+; kernel `IB_UVERBS_WC_FLUSH`)
    Flush = 8,
    /// IBV_WC_ATOMIC_WRITE
    AtomicWrite = 9,
    /// IBV_WC_RECV
    Recv = 128,
    /// IBV_WC_RECV_RDMA_WITH_IMM
    RecvRdmaWithImm = 129,
}

/// `enum ibv_wc_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
#[allow(missing_docs)]
pub enum WcStatus {
    #[default]
    Success = 0,
    LocLenErr = 1,
    LocQpOpErr = 2,
    LocEecOpErr = 3,
    LocProtErr = 4,
    WrFlushErr = 5,
    MwBindErr = 6,
    BadRespErr = 7,
    LocAccessErr = 8,
    RemInvReqErr = 9,
    RemAccessErr = 10,
    RemOpErr = 11,
    RetryExcErr = 12,
    RnrRetryExcErr = 13,
    LocRddViolErr = 14,
    RemInvRdReqErr = 15,
    RemAbortErr = 16,
    InvEecnErr = 17,
    InvEecStateErr = 18,
    FatalErr = 19,
    RespTimeoutErr = 20,
    GeneralErr = 21,
}

/// `enum ibv_mtu`: 1 = 256 … 5 = 4096.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(u32)]
#[allow(missing_docs)]
pub enum Mtu {
    Mtu256 = 1,
    Mtu512 = 2,
    #[default]
    Mtu1024 = 3,
    Mtu2048 = 4,
    Mtu4096 = 5,
}

impl Mtu {
    /// Bytes.
    pub const fn bytes(self) -> u32 {
        128 << (self as u32)
    }
    /// From the libibverbs value.
    pub fn from_raw(v: u32) -> Option<Mtu> {
        Some(match v {
            1 => Mtu::Mtu256,
            2 => Mtu::Mtu512,
            3 => Mtu::Mtu1024,
            4 => Mtu::Mtu2048,
            5 => Mtu::Mtu4096,
            _ => return None,
        })
    }
    /// Largest IB MTU that fits a netdev MTU (rxe: netdev MTU − 80 header bytes).
    pub fn from_netdev_mtu(mtu: u32) -> Mtu {
        let room = mtu.saturating_sub(80);
        [Mtu::Mtu4096, Mtu::Mtu2048, Mtu::Mtu1024, Mtu::Mtu512]
            .into_iter()
            .find(|m| m.bytes() <= room)
            .unwrap_or(Mtu::Mtu256)
    }
}

/// `enum ibv_event_type` values we raise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
#[allow(missing_docs)]
pub enum EventType {
    CqErr = 0,
    QpFatal = 1,
    QpReqErr = 2,
    QpAccessErr = 3,
    CommEst = 4,
    SqDrained = 5,
    PortActive = 9,
    PortErr = 10,
    SrqLimitReached = 15,
    QpLastWqeReached = 16,
}

/// An asynchronous event (`struct ibv_async_event`): the element and the type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncEvent {
    /// A QP event (fatal, access error, SQ drained, last WQE reached, …).
    Qp {
        /// QP number.
        qpn: u32,
        /// Event.
        event: EventType,
    },
    /// CQ overflow (IBV_EVENT_CQ_ERR).
    CqErr(crate::Cq),
    /// SRQ limit reached.
    SrqLimitReached(crate::Srq),
}

/// `struct ibv_sge`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sge {
    /// Address (iova) inside a registered region.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key.
    pub lkey: u32,
}

/// `struct ibv_send_wr` (the `next` chain is the caller's loop; `sg_list` is borrowed).
#[derive(Clone, Copy, Debug, Default)]
pub struct SendWr<'a> {
    /// Caller's id, returned in the completion.
    pub wr_id: u64,
    /// Gather list (or the inline data's source with `SendFlags::INLINE`).
    pub sg_list: &'a [Sge],
    /// Operation.
    pub opcode: WrOpcode,
    /// Flags.
    pub send_flags: SendFlags,
    /// Immediate data as a host-order value (goes on the wire big-endian).
    pub imm_data: u32,
    /// R_Key to invalidate (SEND_WITH_INV).
    pub invalidate_rkey: u32,
    /// `wr.rdma.remote_addr` / `wr.atomic.remote_addr`.
    pub remote_addr: u64,
    /// `wr.rdma.rkey` / `wr.atomic.rkey`.
    pub rkey: u32,
    /// `wr.atomic.compare_add`.
    pub compare_add: u64,
    /// `wr.atomic.swap`.
    pub swap: u64,
    /// `wr.ud.ah`.
    pub ah: Option<crate::Ah>,
    /// `wr.ud.remote_qpn`.
    pub remote_qpn: u32,
    /// `wr.ud.remote_qkey`.
    pub remote_qkey: u32,
    /// `bind_mw` (IBV_WR_BIND_MW).
    pub bind: MwBind,
    /// What an RDMA FLUSH asks for (IBV_WR_FLUSH).
    pub flush: FlushWr,
}

/// `ibv_wr_flush`'s arguments besides the key and address: the RETH length and the FETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FlushWr {
    /// Bytes from `remote_addr` (ignored by the responder for [`FlushWr::level`] MR).
    pub length: u32,
    /// Placement type: `IBV_FLUSH_GLOBAL` (1), `IBV_FLUSH_PERSISTENT` (2), or both.
    pub placement_type: u8,
    /// Selectivity level: `IBV_FLUSH_RANGE` (0) or `IBV_FLUSH_MR` (1).
    pub level: u8,
}

/// `enum ibv_mw_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum MwType {
    /// IBV_MW_TYPE_1: bound by `ibv_bind_mw`, not tied to a QP, never invalidated.
    #[default]
    Type1 = 1,
    /// IBV_MW_TYPE_2 (rxe's type 2B): bound by a BIND_MW work request to the QP that posted it,
    /// invalidated by LOCAL_INV or SEND with invalidate.
    Type2 = 2,
}

/// `ibv_send_wr.bind_mw`: which window, its new rkey and `struct ibv_mw_bind_info`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct MwBind {
    /// The window's current rkey (`bind_mw.mw->rkey`).
    pub mw_rkey: u32,
    /// The rkey after the bind (`bind_mw.rkey`): only its low byte, the consumer's key, is used.
    pub rkey: u32,
    /// `bind_info.mr->lkey`.
    pub mr_lkey: u32,
    /// `bind_info.addr`.
    pub addr: u64,
    /// `bind_info.length` (0 unbinds a type 1 window).
    pub length: u64,
    /// `bind_info.mw_access_flags`.
    pub access: AccessFlags,
}

/// `struct ibv_recv_wr`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RecvWr<'a> {
    /// Caller's id.
    pub wr_id: u64,
    /// Scatter list.
    pub sg_list: &'a [Sge],
}

/// `struct ibv_wc`. `imm_data` is the host-order value of the big-endian wire field (the C ABI
/// stores `imm_data.to_be()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[allow(missing_docs)]
pub struct WorkCompletion {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Immediate data, or the invalidated R_Key with `WcFlags::WITH_INV`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: WcFlags,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// A 16-byte GID.
pub type Gid = [u8; 16];

/// The IPv4-mapped GID `::ffff:a.b.c.d` of an IPv4 address, or the IPv6 address itself.
pub fn gid_from_ip(ip: IpAddr) -> Gid {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The IP address a RoCEv2 GID stands for (IPv4-mapped GIDs give IPv4).
pub fn ip_from_gid(gid: &Gid) -> IpAddr {
    let v6 = std::net::Ipv6Addr::from(*gid);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// `struct ibv_global_route` + `struct ibv_ah_attr` (RoCE fields only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[allow(missing_docs)]
pub struct AhAttr {
    pub dgid: Gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub is_global: bool,
    pub sl: u8,
    pub port_num: u8,
}

impl AhAttr {
    /// An AH toward `ip` with rxe-ish defaults: hop limit 64, source GID index 1 (the device's
    /// configured address; index 0 is its link-local IPv6 GID).
    pub fn to_ip(ip: IpAddr) -> AhAttr {
        AhAttr {
            dgid: gid_from_ip(ip),
            sgid_index: 1,
            hop_limit: 64,
            is_global: true,
            port_num: 1,
            ..Default::default()
        }
    }
}

/// `struct ibv_qp_cap`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[allow(missing_docs)]
pub struct QpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct QpInitAttr {
    pub send_cq: crate::Cq,
    pub recv_cq: crate::Cq,
    pub srq: Option<crate::Srq>,
    pub cap: QpCap,
    pub qp_type: QpType,
    pub sq_sig_all: bool,
}

/// `struct ibv_qp_attr` (RoCE-relevant fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[allow(missing_docs)]
pub struct QpAttr {
    pub qp_state: QpState,
    pub cur_qp_state: QpState,
    pub path_mtu: Mtu,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: AccessFlags,
    pub cap: QpCap,
    pub ah_attr: AhAttr,
    pub pkey_index: u16,
    pub en_sqd_async_notify: bool,
    pub sq_draining: bool,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
}

/// `struct ibv_srq_attr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[allow(missing_docs)]
pub struct SrqAttr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `enum ibv_srq_attr_mask`.
pub mod srq_attr_mask {
    /// IBV_SRQ_MAX_WR (resize; unsupported, like rxe without resize).
    pub const MAX_WR: u32 = 1;
    /// IBV_SRQ_LIMIT
    pub const LIMIT: u32 = 2;
}

/// The subset of `struct ibv_device_attr` a program looks at; rxe's defaults (C.14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct DeviceAttr {
    pub fw_ver: u64,
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: u32,
    pub max_qp_wr: u32,
    pub device_cap_flags: u32,
    pub max_sge: u32,
    pub max_sge_rd: u32,
    pub max_cq: u32,
    pub max_cqe: u32,
    pub max_mr: u32,
    pub max_mw: u32,
    pub max_pd: u32,
    pub max_qp_rd_atom: u32,
    pub max_ee_rd_atom: u32,
    pub max_res_rd_atom: u32,
    pub max_qp_init_rd_atom: u32,
    pub atomic_cap: u32,
    pub max_ah: u32,
    pub max_srq: u32,
    pub max_srq_wr: u32,
    pub max_srq_sge: u32,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
    pub max_inline_data: u32,
}

impl Default for DeviceAttr {
    fn default() -> Self {
        DeviceAttr {
            fw_ver: 0,
            node_guid: 0,
            sys_image_guid: 0,
            max_mr_size: u64::MAX,
            page_size_cap: 0xffff_f000,
            vendor_id: 0xFF_FFFF,
            vendor_part_id: 0,
            hw_ver: 0,
            max_qp: 0x10000,
            max_qp_wr: 0x4000,
            device_cap_flags: 0,
            max_sge: 32,
            max_sge_rd: 32,
            max_cq: 16384,
            max_cqe: (1 << 15) - 1,
            max_mr: 2048,
            max_mw: 4096,
            max_pd: 0x7ffc,
            max_qp_rd_atom: 128,
            max_ee_rd_atom: 0,
            max_res_rd_atom: 0x3f000,
            max_qp_init_rd_atom: 128,
            atomic_cap: 1,
            max_ah: 100,
            max_srq: 960,
            max_srq_wr: 0x4000,
            max_srq_sge: 27,
            max_pkeys: 64,
            local_ca_ack_delay: 15,
            phys_port_cnt: 1,
            max_inline_data: 400,
        }
    }
}

/// The subset of `struct ibv_port_attr` that matters for RoCE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct PortAttr {
    /// IBV_PORT_ACTIVE = 4.
    pub state: u32,
    pub max_mtu: Mtu,
    pub active_mtu: Mtu,
    pub gid_tbl_len: u32,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    /// IBV_LINK_LAYER_ETHERNET = 2.
    pub link_layer: u8,
    pub phys_state: u8,
}
