//! Queue pairs: builder → [`PreparedQueuePair`] → `handshake(remote)` → [`QueuePair`], as in
//! the `ibverbs` crate, and typed work requests.
use super::cq::{CompletionQueue, CqInner};
use super::error::{post_reason, Error, Result};
use super::mr::{LocalSlice, RemoteSlice};
use super::pd::{AddressHandle, PdInner, ProtectionDomain};
use super::srq::{SharedReceiveQueue, SrqInner};
use roce_emu::{
    AccessFlags, AhAttr, Gid, Mtu, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpState, QpType, RecvWr,
    SendFlags, SendWr, Sge, WrOpcode,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The Q_Key UD queue pairs built here use unless told otherwise (`ibv_ud_pingpong`'s value).
pub const DEFAULT_QKEY: u32 = 0x1111_1111;

/// What a peer needs to connect to a queue pair (exchange it out of band, see
/// [`super::exchange`]): QP number, first PSN, GID (RoCEv2: the IP address) and LID (always 0
/// on RoCE, kept for the `ibverbs` shape).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct QueuePairEndpoint {
    /// QP number.
    pub qpn: u32,
    /// The first PSN this QP sends with (the peer expects it).
    pub psn: u32,
    /// GID (`::ffff:a.b.c.d` for an IPv4 device).
    pub gid: Gid,
    /// LID (0 on RoCE).
    pub lid: u16,
}

impl QueuePairEndpoint {
    /// Encoded length of [`QueuePairEndpoint::to_bytes`].
    pub const BYTES: usize = 26;

    /// Fixed 26-byte big-endian encoding: qpn (4), psn (4), lid (2), gid (16).
    pub fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut b = [0u8; Self::BYTES];
        b[0..4].copy_from_slice(&self.qpn.to_be_bytes());
        b[4..8].copy_from_slice(&self.psn.to_be_bytes());
        b[8..10].copy_from_slice(&self.lid.to_be_bytes());
        b[10..26].copy_from_slice(&self.gid);
        b
    }

    /// Decodes [`QueuePairEndpoint::to_bytes`].
    pub fn from_bytes(b: &[u8]) -> Result<QueuePairEndpoint> {
        if b.len() != Self::BYTES {
            return Err(Error::Decode(format!(
                "expected {} bytes, got {}",
                Self::BYTES,
                b.len()
            )));
        }
        let qpn = u32::from_be_bytes(b[0..4].try_into().expect("4"));
        let psn = u32::from_be_bytes(b[4..8].try_into().expect("4"));
        if qpn >= 1 << 24 || psn >= 1 << 24 {
            return Err(Error::Decode("QPN and PSN are 24-bit values".into()));
        }
        Ok(QueuePairEndpoint {
            qpn,
            psn,
            lid: u16::from_be_bytes(b[8..10].try_into().expect("2")),
            gid: b[10..26].try_into().expect("16"),
        })
    }

    /// JSON, e.g. `{"qpn":17,"psn":1234,"gid":[0,…],"lid":0}`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("endpoint serialises")
    }

    /// Decodes [`QueuePairEndpoint::to_json`].
    pub fn from_json(s: &str) -> Result<QueuePairEndpoint> {
        serde_json::from_str(s).map_err(|e| Error::Decode(e.to_string()))
    }

    /// The peer's IP address (from the GID).
    pub fn ip(&self) -> std::net::IpAddr {
        roce_emu::ip_from_gid(&self.gid)
    }
}

/// Builder for a queue pair (`ibv_create_qp` + the attributes the handshake will use).
pub struct QueuePairBuilder<'a> {
    pd: &'a ProtectionDomain,
    send_cq: &'a CompletionQueue,
    recv_cq: &'a CompletionQueue,
    qp_type: QpType,
    cap: QpCap,
    srq: Option<&'a SharedReceiveQueue>,
    access: AccessFlags,
    path_mtu: Option<Mtu>,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    min_rnr_timer: u8,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    qkey: u32,
    psn: Option<u32>,
    sq_sig_all: bool,
}

impl<'a> QueuePairBuilder<'a> {
    pub(crate) fn new(
        pd: &'a ProtectionDomain,
        send_cq: &'a CompletionQueue,
        recv_cq: &'a CompletionQueue,
        qp_type: QpType,
    ) -> Self {
        QueuePairBuilder {
            pd,
            send_cq,
            recv_cq,
            qp_type,
            cap: QpCap {
                max_send_wr: 128,
                max_recv_wr: 128,
                max_send_sge: 4,
                max_recv_sge: 4,
                max_inline_data: 64,
            },
            srq: None,
            access: AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
            path_mtu: None,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            qkey: DEFAULT_QKEY,
            psn: None,
            sq_sig_all: false,
        }
    }

    /// Send queue depth (default 128).
    pub fn set_max_send_wr(mut self, n: u32) -> Self {
        self.cap.max_send_wr = n;
        self
    }
    /// Receive queue depth (default 128; ignored with an SRQ).
    pub fn set_max_recv_wr(mut self, n: u32) -> Self {
        self.cap.max_recv_wr = n;
        self
    }
    /// Scatter/gather entries per send (default 4).
    pub fn set_max_send_sge(mut self, n: u32) -> Self {
        self.cap.max_send_sge = n;
        self
    }
    /// Scatter/gather entries per receive (default 4).
    pub fn set_max_recv_sge(mut self, n: u32) -> Self {
        self.cap.max_recv_sge = n;
        self
    }
    /// Largest inline send (default 64, device limit 400).
    pub fn set_max_inline_data(mut self, n: u32) -> Self {
        self.cap.max_inline_data = n;
        self
    }
    /// Receives come from `srq` instead of the QP's own receive queue.
    pub fn set_srq(mut self, srq: &'a SharedReceiveQueue) -> Self {
        self.srq = Some(srq);
        self
    }
    /// What the peer may do to this side's memory (RC/UC; default: everything).
    pub fn set_access(mut self, access: AccessFlags) -> Self {
        self.access = access;
        self
    }
    /// Path MTU (default: the port's active MTU).
    pub fn set_path_mtu(mut self, mtu: Mtu) -> Self {
        self.path_mtu = Some(mtu);
        self
    }
    /// Local ACK timeout exponent: 4.096 µs × 2^t (default 14 ≈ 67 ms).
    pub fn set_timeout(mut self, t: u8) -> Self {
        self.timeout = t;
        self
    }
    /// Transport retries (default 7).
    pub fn set_retry_count(mut self, n: u8) -> Self {
        self.retry_cnt = n;
        self
    }
    /// RNR retries (default 7 = infinite).
    pub fn set_rnr_retry(mut self, n: u8) -> Self {
        self.rnr_retry = n;
        self
    }
    /// Minimum RNR NAK timer code (default 12 = 0.64 ms).
    pub fn set_min_rnr_timer(mut self, code: u8) -> Self {
        self.min_rnr_timer = code;
        self
    }
    /// Outstanding READ/atomic requests as initiator and as responder (default 16 each).
    pub fn set_rd_atomic(mut self, initiator: u8, responder: u8) -> Self {
        self.max_rd_atomic = initiator;
        self.max_dest_rd_atomic = responder;
        self
    }
    /// UD Q_Key (default [`DEFAULT_QKEY`]).
    pub fn set_qkey(mut self, qkey: u32) -> Self {
        self.qkey = qkey;
        self
    }
    /// First send PSN (default: derived from the QPN and device seed).
    pub fn set_psn(mut self, psn: u32) -> Self {
        self.psn = Some(psn & 0xFF_FFFF);
        self
    }
    /// Signal every send, whatever the request says (`sq_sig_all`).
    pub fn set_signal_all(mut self, on: bool) -> Self {
        self.sq_sig_all = on;
        self
    }

    /// Creates the QP and moves it to INIT (receives can be posted from now on).
    pub fn build(self) -> Result<PreparedQueuePair> {
        let pdi = &self.pd.inner;
        let ctx = &pdi.ctx;
        if !self.send_cq.same_device(ctx) || !self.recv_cq.same_device(ctx) {
            return Err(Error::WrongPd(
                "create_qp with a completion queue of another device",
            ));
        }
        if let Some(s) = self.srq {
            if !Arc::ptr_eq(&s.inner.pd, pdi) {
                return Err(Error::WrongPd(
                    "create_qp with a shared receive queue of another protection domain",
                ));
            }
        }
        let init = QpInitAttr {
            send_cq: self.send_cq.inner.cq,
            recv_cq: self.recv_cq.inner.cq,
            srq: self.srq.map(|s| s.inner.srq),
            cap: self.cap,
            qp_type: self.qp_type,
            sq_sig_all: self.sq_sig_all,
        };
        let qp_type = self.qp_type;
        let qpn = ctx
            .nic(|n| n.create_qp(pdi.pd, &init))
            .map_err(|source| Error::CreateQp { qp_type, source })?;
        let port_mtu = ctx.nic(|n| n.query_port().active_mtu);
        let psn = self.psn.unwrap_or_else(|| {
            (roce_emu::net::hash_32(qpn ^ (ctx.cfg.seed as u32), 24) ^ (ctx.cfg.seed >> 32) as u32)
                & 0xFF_FFFF
        });
        let inner = Arc::new(QpInner {
            pd: pdi.clone(),
            send_cq: self.send_cq.inner.clone(),
            recv_cq: self.recv_cq.inner.clone(),
            srq: self.srq.map(|s| s.inner.clone()),
            qpn,
            qp_type,
            cap: self.cap,
            psn,
            qkey: self.qkey,
        });
        let qp = QueuePair { inner };
        let mut a = QpAttr {
            qp_state: QpState::Init,
            pkey_index: 0,
            port_num: 1,
            ..Default::default()
        };
        let mut mask = QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT;
        if qp_type == QpType::Ud {
            a.qkey = self.qkey;
            mask |= QpAttrMask::QKEY;
        } else {
            a.qp_access_flags = self.access;
            mask |= QpAttrMask::ACCESS_FLAGS;
        }
        qp.modify(&a, mask)?;
        Ok(PreparedQueuePair {
            qp,
            path_mtu: self.path_mtu.unwrap_or(port_mtu),
            timeout: self.timeout,
            retry_cnt: self.retry_cnt,
            rnr_retry: self.rnr_retry,
            min_rnr_timer: self.min_rnr_timer,
            max_rd_atomic: self.max_rd_atomic,
            max_dest_rd_atomic: self.max_dest_rd_atomic,
        })
    }
}

/// A QP in INIT that knows how it will connect: hand [`PreparedQueuePair::endpoint`] to the
/// peer, post receives if you like, then [`PreparedQueuePair::handshake`] with the peer's
/// endpoint.
///
/// ```
/// use roce_provider::verbs::{sim::SimFabric, DeviceConfig, QpType};
/// let fabric = SimFabric::new(1, Default::default());
/// let (a, b) = (fabric.open(DeviceConfig::new("10.0.0.1".parse().unwrap()))?,
///               fabric.open(DeviceConfig::new("10.0.0.2".parse().unwrap()))?);
/// let (pa, pb) = (a.alloc_pd()?, b.alloc_pd()?);
/// let (ca, cb) = (a.create_cq(16).build()?, b.create_cq(16).build()?);
/// let qa = pa.create_qp(&ca, &ca, QpType::Rc).build()?;
/// let qb = pb.create_qp(&cb, &cb, QpType::Rc).build()?;
/// let (ea, eb) = (qa.endpoint(), qb.endpoint());
/// let qa = qa.handshake(eb)?;
/// let qb = qb.handshake(ea)?;
/// assert_eq!(qa.remote().unwrap().qpn, qb.qpn());
/// # Ok::<(), roce_provider::verbs::Error>(())
/// ```
pub struct PreparedQueuePair {
    qp: QueuePair,
    path_mtu: Mtu,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    min_rnr_timer: u8,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
}

impl PreparedQueuePair {
    /// This QP's endpoint, for the peer.
    pub fn endpoint(&self) -> QueuePairEndpoint {
        self.qp.endpoint()
    }
    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qp.qpn()
    }
    /// Posts a receive before connecting (so a peer's first SEND finds it).
    pub fn post_receive(&self, local: &[LocalSlice<'_>], wr_id: u64) -> Result<()> {
        self.qp.post_receive(local, wr_id)
    }

    /// Connects to `remote` (RC/UC: INIT → RTR → RTS with its QPN, PSN and GID; UD: to RTS,
    /// `remote` unused) and returns the ready QP.
    pub fn handshake(self, remote: QueuePairEndpoint) -> Result<QueuePair> {
        let qp_type = self.qp.inner.qp_type;
        if qp_type == QpType::Ud {
            return self.activate();
        }
        let mut rtr = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: self.path_mtu,
            dest_qp_num: remote.qpn,
            rq_psn: remote.psn,
            ah_attr: AhAttr {
                dgid: remote.gid,
                ..AhAttr::to_ip(remote.ip())
            },
            ..Default::default()
        };
        let mut mask = QpAttrMask::STATE
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN;
        if qp_type == QpType::Rc {
            rtr.max_dest_rd_atomic = self.max_dest_rd_atomic;
            rtr.min_rnr_timer = self.min_rnr_timer;
            mask |= QpAttrMask::MAX_DEST_RD_ATOMIC | QpAttrMask::MIN_RNR_TIMER;
        }
        self.qp.modify(&rtr, mask)?;
        let mut rts = QpAttr {
            qp_state: QpState::Rts,
            sq_psn: self.qp.inner.psn,
            ..Default::default()
        };
        let mut mask = QpAttrMask::STATE | QpAttrMask::SQ_PSN;
        if qp_type == QpType::Rc {
            rts.timeout = self.timeout;
            rts.retry_cnt = self.retry_cnt;
            rts.rnr_retry = self.rnr_retry;
            rts.max_rd_atomic = self.max_rd_atomic;
            mask |= QpAttrMask::TIMEOUT
                | QpAttrMask::RETRY_CNT
                | QpAttrMask::RNR_RETRY
                | QpAttrMask::MAX_QP_RD_ATOMIC;
        }
        self.qp.modify(&rts, mask)?;
        Ok(self.qp)
    }

    /// UD: INIT → RTR → RTS (no peer; every send names its destination).
    pub fn activate(self) -> Result<QueuePair> {
        self.qp.modify(
            &QpAttr {
                qp_state: QpState::Rtr,
                ..Default::default()
            },
            QpAttrMask::STATE,
        )?;
        let rts = QpAttr {
            qp_state: QpState::Rts,
            sq_psn: self.qp.inner.psn,
            ..Default::default()
        };
        self.qp
            .modify(&rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN)?;
        Ok(self.qp)
    }

    /// The QP in INIT, for driving the state machine by hand with [`QueuePair::modify`].
    pub fn into_inner(self) -> QueuePair {
        self.qp
    }
}

pub(crate) struct QpInner {
    pd: Arc<PdInner>,
    #[allow(dead_code)] // keeps the CQs alive while the QP exists
    send_cq: Arc<CqInner>,
    #[allow(dead_code)]
    recv_cq: Arc<CqInner>,
    #[allow(dead_code)]
    srq: Option<Arc<SrqInner>>,
    qpn: u32,
    qp_type: QpType,
    cap: QpCap,
    psn: u32,
    qkey: u32,
}

impl Drop for QpInner {
    fn drop(&mut self) {
        let qpn = self.qpn;
        let _ = self.pd.ctx.nic(|n| n.destroy_qp(qpn));
    }
}

/// The operation of a [`SendRequest`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    /// SEND: consumes a receive on the peer.
    Send,
    /// SEND with 32-bit immediate data.
    SendWithImm(u32),
    /// RDMA WRITE of the local data to `remote`.
    Write(RemoteSlice),
    /// RDMA WRITE with immediate data (consumes a receive on the peer).
    WriteWithImm(RemoteSlice, u32),
    /// RDMA READ of `remote` into the local buffers.
    Read(RemoteSlice),
    /// 64-bit compare-and-swap at `remote`; the old value lands in the 8-byte local buffer.
    CompareSwap {
        /// 8 bytes, 8-byte aligned.
        remote: RemoteSlice,
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// 64-bit fetch-and-add at `remote`; the old value lands in the 8-byte local buffer.
    FetchAdd {
        /// 8 bytes, 8-byte aligned.
        remote: RemoteSlice,
        /// Addend.
        add: u64,
    },
}

impl Opcode {
    fn name(&self) -> &'static str {
        match self {
            Opcode::Send => "SEND",
            Opcode::SendWithImm(_) => "SEND with immediate",
            Opcode::Write(_) => "RDMA WRITE",
            Opcode::WriteWithImm(..) => "RDMA WRITE with immediate",
            Opcode::Read(_) => "RDMA READ",
            Opcode::CompareSwap { .. } => "atomic compare-and-swap",
            Opcode::FetchAdd { .. } => "atomic fetch-and-add",
        }
    }
}

/// Where a UD send goes.
#[derive(Clone, Copy, Debug)]
pub struct UdDest<'a> {
    /// The destination device.
    pub ah: &'a AddressHandle,
    /// The destination QP.
    pub remote_qpn: u32,
    /// Its Q_Key.
    pub remote_qkey: u32,
}

/// A typed send work request (`struct ibv_send_wr`).
///
/// ```
/// # use roce_provider::verbs::{SendRequest, RemoteSlice, Opcode};
/// let remote = RemoteSlice { addr: 0x1000, rkey: 0x42, len: 4096 };
/// let wr = SendRequest::write(7, &[], remote).unsignaled();
/// assert_eq!(wr.op, Opcode::Write(remote));
/// assert!(!wr.signaled);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SendRequest<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Gather list (READ / atomics: where the result lands).
    pub local: &'a [LocalSlice<'a>],
    /// The operation.
    pub op: Opcode,
    /// Generate a completion (default true).
    pub signaled: bool,
    /// Ask the peer's CQ to raise a solicited event.
    pub solicited: bool,
    /// Wait for earlier READs/atomics first.
    pub fence: bool,
    /// Inline payload copied at post time instead of `local` (SEND/WRITE only).
    pub inline: Option<&'a [u8]>,
    /// UD destination.
    pub ud: Option<UdDest<'a>>,
}

impl<'a> SendRequest<'a> {
    fn new(wr_id: u64, local: &'a [LocalSlice<'a>], op: Opcode) -> Self {
        SendRequest {
            wr_id,
            local,
            op,
            signaled: true,
            solicited: false,
            fence: false,
            inline: None,
            ud: None,
        }
    }
    /// SEND of `local`.
    pub fn send(wr_id: u64, local: &'a [LocalSlice<'a>]) -> Self {
        Self::new(wr_id, local, Opcode::Send)
    }
    /// SEND with immediate data.
    pub fn send_with_imm(wr_id: u64, local: &'a [LocalSlice<'a>], imm: u32) -> Self {
        Self::new(wr_id, local, Opcode::SendWithImm(imm))
    }
    /// SEND of `data` copied inline at post time (at most the QP's `max_inline_data`).
    pub fn send_inline(wr_id: u64, data: &'a [u8]) -> Self {
        SendRequest {
            inline: Some(data),
            ..Self::new(wr_id, &[], Opcode::Send)
        }
    }
    /// RDMA WRITE of `local` to `remote`.
    pub fn write(wr_id: u64, local: &'a [LocalSlice<'a>], remote: RemoteSlice) -> Self {
        Self::new(wr_id, local, Opcode::Write(remote))
    }
    /// RDMA WRITE with immediate data.
    pub fn write_with_imm(
        wr_id: u64,
        local: &'a [LocalSlice<'a>],
        remote: RemoteSlice,
        imm: u32,
    ) -> Self {
        Self::new(wr_id, local, Opcode::WriteWithImm(remote, imm))
    }
    /// RDMA READ of `remote` into `local`.
    pub fn read(wr_id: u64, local: &'a [LocalSlice<'a>], remote: RemoteSlice) -> Self {
        Self::new(wr_id, local, Opcode::Read(remote))
    }
    /// Atomic compare-and-swap; the old value lands in `local` (8 bytes).
    pub fn compare_swap(
        wr_id: u64,
        local: &'a [LocalSlice<'a>],
        remote: RemoteSlice,
        compare: u64,
        swap: u64,
    ) -> Self {
        Self::new(
            wr_id,
            local,
            Opcode::CompareSwap {
                remote,
                compare,
                swap,
            },
        )
    }
    /// Atomic fetch-and-add; the old value lands in `local` (8 bytes).
    pub fn fetch_add(
        wr_id: u64,
        local: &'a [LocalSlice<'a>],
        remote: RemoteSlice,
        add: u64,
    ) -> Self {
        Self::new(wr_id, local, Opcode::FetchAdd { remote, add })
    }
    /// No completion on success (errors still complete).
    pub fn unsignaled(mut self) -> Self {
        self.signaled = false;
        self
    }
    /// Solicited event at the peer.
    pub fn solicited(mut self) -> Self {
        self.solicited = true;
        self
    }
    /// Fence behind earlier READs/atomics.
    pub fn fence(mut self) -> Self {
        self.fence = true;
        self
    }
    /// Copy the local data inline at post time (small SEND/WRITE).
    pub fn inline_data(mut self, data: &'a [u8]) -> Self {
        self.inline = Some(data);
        self
    }
    /// UD: send to `remote_qpn` (Q_Key `remote_qkey`) on the device `ah` points at.
    pub fn to(mut self, ah: &'a AddressHandle, remote_qpn: u32, remote_qkey: u32) -> Self {
        self.ud = Some(UdDest {
            ah,
            remote_qpn,
            remote_qkey,
        });
        self
    }
}

const MAX_SGE: usize = 32;

/// A connected (RC/UC) or datagram (UD) queue pair (`struct ibv_qp`). Cheap to clone.
///
/// Posting is safe: every buffer a request names is a [`LocalSlice`] of a registered region
/// whose memory the device co-owns, so nothing a request does can reach freed memory.
#[derive(Clone)]
pub struct QueuePair {
    pub(crate) inner: Arc<QpInner>,
}

impl QueuePair {
    /// QP number.
    pub fn qpn(&self) -> u32 {
        self.inner.qpn
    }
    /// Transport.
    pub fn qp_type(&self) -> QpType {
        self.inner.qp_type
    }
    /// The capabilities it was created with.
    pub fn cap(&self) -> QpCap {
        self.inner.cap
    }
    /// UD Q_Key.
    pub fn qkey(&self) -> u32 {
        self.inner.qkey
    }
    /// This QP's endpoint (QPN, first send PSN, GID index 1).
    pub fn endpoint(&self) -> QueuePairEndpoint {
        let ctx = &self.inner.pd.ctx;
        QueuePairEndpoint {
            qpn: self.inner.qpn,
            psn: self.inner.psn,
            gid: ctx.nic(|n| n.query_gid(1)),
            lid: 0,
        }
    }
    /// The connected peer (RC/UC after the handshake).
    pub fn remote(&self) -> Option<QueuePairEndpoint> {
        let a = self.query().ok()?;
        (self.inner.qp_type != QpType::Ud
            && matches!(a.qp_state, QpState::Rtr | QpState::Rts | QpState::Sqd))
        .then_some(QueuePairEndpoint {
            qpn: a.dest_qp_num,
            psn: a.rq_psn,
            gid: a.ah_attr.dgid,
            lid: 0,
        })
    }
    /// `ibv_query_qp`.
    pub fn query(&self) -> Result<QpAttr> {
        let qpn = self.inner.qpn;
        self.inner
            .pd
            .ctx
            .nic(|n| n.query_qp(qpn))
            .map_err(|source| Error::ModifyQp {
                qpn,
                to: QpState::Reset,
                source,
            })
    }
    /// Current state.
    pub fn state(&self) -> QpState {
        self.query().map(|a| a.qp_state).unwrap_or(QpState::Err)
    }
    /// `ibv_modify_qp`, the escape hatch for driving the state machine by hand.
    pub fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let qpn = self.inner.qpn;
        self.inner
            .pd
            .ctx
            .nic(|n| n.modify_qp(qpn, attr, mask))
            .map_err(|source| Error::ModifyQp {
                qpn,
                to: attr.qp_state,
                source,
            })
    }
    /// Per-QP memory in bytes: (state, queue storage).
    pub fn memory(&self) -> (usize, usize) {
        let qpn = self.inner.qpn;
        self.inner
            .pd
            .ctx
            .nic(|n| n.qp_memory(qpn))
            .unwrap_or((0, 0))
    }

    fn check_local(
        &self,
        local: &[LocalSlice<'_>],
        sges: &mut [Sge; MAX_SGE],
        what: &'static str,
    ) -> Result<usize> {
        if local.len() > MAX_SGE {
            return Err(Error::PostSend {
                qpn: self.qpn(),
                reason: format!("{} SGEs (at most {MAX_SGE})", local.len()),
            });
        }
        for (i, l) in local.iter().enumerate() {
            if !Arc::ptr_eq(&l.mr.pd, &self.inner.pd) {
                return Err(Error::WrongPd(what));
            }
            sges[i] = l.sge();
        }
        Ok(local.len())
    }

    /// Posts one send work request (`ibv_post_send`).
    pub fn post(&self, wr: &SendRequest<'_>) -> Result<()> {
        self.post_one(wr, None)
    }

    /// Posts several send work requests, then transmits once; stops at the first error.
    pub fn post_batch(&self, wrs: &[SendRequest<'_>]) -> Result<()> {
        let ctx = &self.inner.pd.ctx;
        let mut r = Ok(());
        ctx.engine.with_nic_dyn(&mut |nic| {
            r = wrs
                .iter()
                .try_for_each(|w| self.post_one(w, Some(&mut *nic)));
        });
        r
    }

    fn post_one(&self, wr: &SendRequest<'_>, locked: Option<&mut roce_emu::Nic>) -> Result<()> {
        let qpn = self.qpn();
        let qp_type = self.inner.qp_type;
        let allowed = match (qp_type, &wr.op) {
            (QpType::Ud, Opcode::Send | Opcode::SendWithImm(_)) => true,
            (QpType::Ud, _) => false,
            (
                QpType::Uc,
                Opcode::Read(_) | Opcode::CompareSwap { .. } | Opcode::FetchAdd { .. },
            ) => false,
            _ => true,
        };
        if !allowed {
            return Err(Error::WrongTransport {
                op: wr.op.name(),
                qp_type,
            });
        }
        let mut sges = [Sge::default(); MAX_SGE];
        let n = self.check_local(
            wr.local,
            &mut sges,
            "post_send with a memory region of another protection domain",
        )?;
        let mut e = SendWr {
            wr_id: wr.wr_id,
            sg_list: &sges[..n],
            ..Default::default()
        };
        if wr.signaled {
            e.send_flags |= SendFlags::SIGNALED;
        }
        if wr.solicited {
            e.send_flags |= SendFlags::SOLICITED;
        }
        if wr.fence {
            e.send_flags |= SendFlags::FENCE;
        }
        let remote = |r: &RemoteSlice, e: &mut SendWr<'_>| {
            e.remote_addr = r.addr;
            e.rkey = r.rkey;
        };
        match wr.op {
            Opcode::Send => e.opcode = WrOpcode::Send,
            Opcode::SendWithImm(i) => {
                e.opcode = WrOpcode::SendWithImm;
                e.imm_data = i;
            }
            Opcode::Write(r) => {
                e.opcode = WrOpcode::RdmaWrite;
                remote(&r, &mut e);
            }
            Opcode::WriteWithImm(r, i) => {
                e.opcode = WrOpcode::RdmaWriteWithImm;
                e.imm_data = i;
                remote(&r, &mut e);
            }
            Opcode::Read(r) => {
                e.opcode = WrOpcode::RdmaRead;
                remote(&r, &mut e);
            }
            Opcode::CompareSwap {
                remote: r,
                compare,
                swap,
            } => {
                e.opcode = WrOpcode::AtomicCmpAndSwp;
                e.compare_add = compare;
                e.swap = swap;
                remote(&r, &mut e);
            }
            Opcode::FetchAdd { remote: r, add } => {
                e.opcode = WrOpcode::AtomicFetchAndAdd;
                e.compare_add = add;
                remote(&r, &mut e);
            }
        }
        if let Opcode::CompareSwap { remote: r, .. } | Opcode::FetchAdd { remote: r, .. } = wr.op {
            let local_ok = n == 1 && sges[0].length == 8 && sges[0].addr % 8 == 0;
            if !local_ok || r.addr % 8 != 0 || r.len < 8 {
                return Err(Error::MisalignedAtomic);
            }
        }
        if let Some(d) = wr.ud {
            if !Arc::ptr_eq(&d.ah.pd, &self.inner.pd) {
                return Err(Error::WrongPd(
                    "post_send with an address handle of another protection domain",
                ));
            }
            e.ah = Some(d.ah.ah);
            e.remote_qpn = d.remote_qpn;
            e.remote_qkey = d.remote_qkey;
        } else if qp_type == QpType::Ud {
            return Err(Error::PostSend {
                qpn,
                reason: "a UD send needs a destination (SendRequest::to)".into(),
            });
        }
        let inline = match wr.inline {
            Some(d) => {
                if d.len() > self.inner.cap.max_inline_data as usize {
                    return Err(Error::InlineTooLarge {
                        len: d.len(),
                        max: self.inner.cap.max_inline_data,
                    });
                }
                e.send_flags |= SendFlags::INLINE;
                Some(d)
            }
            None => None,
        };
        let r = match locked {
            Some(nic) => nic.post_send_inline(qpn, &e, inline),
            None => self.inner.pd.ctx.engine.post_send(qpn, &e, inline),
        };
        r.map_err(|err| match err {
            roce_emu::Error::NoMem => Error::QueueFull { qpn, queue: "send" },
            other => Error::PostSend {
                qpn,
                reason: post_reason(other),
            },
        })
    }

    /// SEND of `local`.
    pub fn post_send(&self, local: &[LocalSlice<'_>], wr_id: u64) -> Result<()> {
        self.post(&SendRequest::send(wr_id, local))
    }
    /// SEND with immediate data.
    pub fn post_send_with_imm(&self, local: &[LocalSlice<'_>], wr_id: u64, imm: u32) -> Result<()> {
        self.post(&SendRequest::send_with_imm(wr_id, local, imm))
    }
    /// SEND of `data` copied inline now.
    pub fn post_send_inline(&self, data: &[u8], wr_id: u64) -> Result<()> {
        self.post(&SendRequest::send_inline(wr_id, data))
    }
    /// UD SEND of `local` to `remote_qpn` on the device `ah` points at.
    pub fn post_send_ud(
        &self,
        local: &[LocalSlice<'_>],
        ah: &AddressHandle,
        remote_qpn: u32,
        remote_qkey: u32,
        wr_id: u64,
    ) -> Result<()> {
        self.post(&SendRequest::send(wr_id, local).to(ah, remote_qpn, remote_qkey))
    }
    /// RDMA WRITE of `local` to `remote`.
    pub fn post_write(
        &self,
        local: &[LocalSlice<'_>],
        remote: RemoteSlice,
        wr_id: u64,
    ) -> Result<()> {
        self.post(&SendRequest::write(wr_id, local, remote))
    }
    /// RDMA WRITE with immediate data.
    pub fn post_write_with_imm(
        &self,
        local: &[LocalSlice<'_>],
        remote: RemoteSlice,
        wr_id: u64,
        imm: u32,
    ) -> Result<()> {
        self.post(&SendRequest::write_with_imm(wr_id, local, remote, imm))
    }
    /// RDMA READ of `remote` into `local`.
    pub fn post_read(
        &self,
        local: &[LocalSlice<'_>],
        remote: RemoteSlice,
        wr_id: u64,
    ) -> Result<()> {
        self.post(&SendRequest::read(wr_id, local, remote))
    }
    /// Atomic compare-and-swap of the 8 bytes at `remote`; the old value lands in `local`.
    pub fn post_compare_swap(
        &self,
        local: &LocalSlice<'_>,
        remote: RemoteSlice,
        compare: u64,
        swap: u64,
        wr_id: u64,
    ) -> Result<()> {
        self.post(&SendRequest::compare_swap(
            wr_id,
            std::slice::from_ref(local),
            remote,
            compare,
            swap,
        ))
    }
    /// Atomic fetch-and-add on the 8 bytes at `remote`; the old value lands in `local`.
    pub fn post_fetch_add(
        &self,
        local: &LocalSlice<'_>,
        remote: RemoteSlice,
        add: u64,
        wr_id: u64,
    ) -> Result<()> {
        self.post(&SendRequest::fetch_add(
            wr_id,
            std::slice::from_ref(local),
            remote,
            add,
        ))
    }

    /// Posts a receive (`ibv_post_recv`) scattering into `local`.
    pub fn post_receive(&self, local: &[LocalSlice<'_>], wr_id: u64) -> Result<()> {
        let qpn = self.qpn();
        if self.inner.srq.is_some() {
            return Err(Error::PostRecv {
                qpn,
                reason: "this QP takes receives from its shared receive queue; post there".into(),
            });
        }
        let mut sges = [Sge::default(); MAX_SGE];
        let n = self.check_local(
            local,
            &mut sges,
            "post_recv with a memory region of another protection domain",
        )?;
        let wr = RecvWr {
            wr_id,
            sg_list: &sges[..n],
        };
        self.inner
            .pd
            .ctx
            .engine
            .post_recv(qpn, &wr)
            .map_err(|err| match err {
                roce_emu::Error::NoMem => Error::QueueFull {
                    qpn,
                    queue: "receive",
                },
                other => Error::PostRecv {
                    qpn,
                    reason: post_reason(other),
                },
            })
    }
}

impl std::fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "QueuePair({:?} {})", self.inner.qp_type, self.inner.qpn)
    }
}
