//! Connecting queue pairs on the simulated network: the INIT → RTR → RTS sequence a program
//! makes with `ibv_modify_qp` (or RDMA CM makes for it), with the attribute masks the IBA
//! requires for each QP type, in one place for tests, fuzz targets, benches and examples.
//!
//! ```
//! use roce_emu::sim::{connect_pair, ConnectAttr, LinkConfig, SimNet};
//! use roce_emu::*;
//! # use std::sync::Arc;
//! let mut net = SimNet::new(1, LinkConfig::default());
//! let mut qp = |net: &mut SimNet, ip: &str| {
//!     let i = net.add_nic(Nic::new(NicConfig::new(ip.parse().unwrap())));
//!     let n = &mut net.nics[i];
//!     let pd = n.alloc_pd().unwrap();
//!     let cq = n.create_cq(16).unwrap();
//!     let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
//!     let init = QpInitAttr { send_cq: cq, recv_cq: cq, srq: None, cap, qp_type: QpType::Rc, sq_sig_all: true };
//!     (i, n.create_qp(pd, &init).unwrap())
//! };
//! let a = qp(&mut net, "10.0.0.1");
//! let b = qp(&mut net, "10.0.0.2");
//! connect_pair(&mut net, a, b, &ConnectAttr::default()).unwrap();
//! assert_eq!(net.nics[a.0].query_qp(a.1).unwrap().qp_state, QpState::Rts);
//! assert_eq!(net.nics[b.0].query_qp(b.1).unwrap().qp_state, QpState::Rts);
//! ```
use super::SimNet;
use crate::{AccessFlags, AhAttr, Mtu, Nic, QpAttr, QpAttrMask, QpState, QpType, Result};
use std::net::IpAddr;

/// What [`connect_qp`] and [`connect_pair`] set, seen from the QP being connected (its send
/// PSN, the PSN it expects, the atomics it may have outstanding, …).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConnectAttr {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// Move the QP to RESET first (so a QP in any state, even ERR, is connected afresh).
    pub reset_first: bool,
    /// Remote access the QP grants (RC and UC; INIT).
    pub access: AccessFlags,
    /// Q_Key (UD; INIT).
    pub qkey: u32,
    /// Path MTU (RC and UC; RTR).
    pub mtu: Mtu,
    /// First PSN this QP sends (RTS).
    pub sq_psn: u32,
    /// First PSN this QP expects (RC and UC; RTR).
    pub rq_psn: u32,
    /// RDMA READs and atomics this QP may have outstanding as requester (RC; RTS).
    pub max_rd_atomic: u8,
    /// RDMA READs and atomics it accepts outstanding as responder (RC; RTR).
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code it sends (RC; RTR).
    pub min_rnr_timer: u8,
    /// Local ACK timeout code, 4.096 µs × 2^timeout (RC; RTS).
    pub timeout: u8,
    /// Retries after a local ACK timeout (RC; RTS; 7 retries forever, as on rxe).
    pub retry_cnt: u8,
    /// Retries after an RNR NAK (RC; RTS; 7 retries forever).
    pub rnr_retry: u8,
}

impl Default for ConnectAttr {
    /// RC, every remote access, Q_Key 0x11111111, MTU 1024, both PSNs 0, 16 outstanding READs
    /// and atomics either way, RNR timer code 1, timeout code 14, retry and RNR retry 7.
    fn default() -> Self {
        ConnectAttr {
            qp_type: QpType::Rc,
            reset_first: false,
            access: AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
            qkey: 0x1111_1111,
            mtu: Mtu::Mtu1024,
            sq_psn: 0,
            rq_psn: 0,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            min_rnr_timer: 1,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
        }
    }
}

impl ConnectAttr {
    /// The same settings seen from the peer: the send and expected PSNs swapped.
    pub fn for_peer(&self) -> ConnectAttr {
        ConnectAttr {
            sq_psn: self.rq_psn,
            rq_psn: self.sq_psn,
            ..*self
        }
    }
}

/// Moves QP `qpn` of `nic` through INIT, RTR and RTS toward QP `peer_qpn` at `peer_ip` (from
/// RESET, or from any state with [`ConnectAttr::reset_first`]), with the attribute masks the
/// IBA requires for its type. A UD QP's RTR and RTS carry no peer: `peer_ip` and `peer_qpn` are
/// not used for it.
pub fn connect_qp(
    nic: &mut Nic,
    qpn: u32,
    peer_ip: IpAddr,
    peer_qpn: u32,
    c: &ConnectAttr,
) -> Result<()> {
    use QpAttrMask as M;
    if c.reset_first {
        let reset = QpAttr {
            qp_state: QpState::Reset,
            ..Default::default()
        };
        nic.modify_qp(qpn, &reset, M::STATE)?;
    }
    let ud = c.qp_type == QpType::Ud;
    let mut a = QpAttr {
        qp_state: QpState::Init,
        port_num: 1,
        qp_access_flags: c.access,
        qkey: c.qkey,
        ..Default::default()
    };
    let init = M::STATE | M::PKEY_INDEX | M::PORT;
    nic.modify_qp(qpn, &a, init | if ud { M::QKEY } else { M::ACCESS_FLAGS })?;
    a.qp_state = QpState::Rtr;
    a.ah_attr = AhAttr::to_ip(peer_ip);
    a.path_mtu = c.mtu;
    a.dest_qp_num = peer_qpn;
    a.rq_psn = c.rq_psn;
    a.max_dest_rd_atomic = c.max_dest_rd_atomic;
    a.min_rnr_timer = c.min_rnr_timer;
    let connected = M::STATE | M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN;
    let rtr = match c.qp_type {
        QpType::Rc => connected | M::MAX_DEST_RD_ATOMIC | M::MIN_RNR_TIMER,
        QpType::Uc => connected,
        QpType::Ud => M::STATE,
    };
    nic.modify_qp(qpn, &a, rtr)?;
    a.qp_state = QpState::Rts;
    a.timeout = c.timeout;
    a.retry_cnt = c.retry_cnt;
    a.rnr_retry = c.rnr_retry;
    a.sq_psn = c.sq_psn;
    a.max_rd_atomic = c.max_rd_atomic;
    let rts = match c.qp_type {
        QpType::Rc => {
            M::STATE | M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC
        }
        _ => M::STATE | M::SQ_PSN,
    };
    nic.modify_qp(qpn, &a, rts)
}

/// Connects QP `a.1` of NIC `a.0` and QP `b.1` of NIC `b.0` of `net` to each other: `a` with
/// `c`, `b` with [`ConnectAttr::for_peer`] (so what `a` sends first is what `b` expects).
pub fn connect_pair(
    net: &mut SimNet,
    a: (usize, u32),
    b: (usize, u32),
    c: &ConnectAttr,
) -> Result<()> {
    let (ip_a, ip_b) = (net.nics[a.0].config().ip, net.nics[b.0].config().ip);
    connect_qp(&mut net.nics[a.0], a.1, ip_b, b.1, c)?;
    connect_qp(&mut net.nics[b.0], b.1, ip_a, a.1, &c.for_peer())
}
