//! [`QueuePairBuilder`] (`ibv_create_qp` plus the attributes the handshake will use) and
//! [`PreparedQueuePair`], the QP in INIT that connects with `handshake`/`activate`.

use super::*;

/// The Q_Key UD queue pairs built here use unless told otherwise (`ibv_ud_pingpong`'s value).
pub const DEFAULT_QKEY: u32 = 0x1111_1111;

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
            // and RDMA FLUSH for global visibility (this device has no persistent memory)
            access: AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC
                | AccessFlags::FLUSH_GLOBAL,
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
    /// First send PSN (default: random, from the device's generator of memory keys: OS entropy
    /// on UDP, the seed on a simulated network).
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
        let psn = match self.psn {
            Some(p) => p,
            None => ctx.nic(|n| n.random_psn()),
        };
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

    /// RDMA READs and atomics this QP accepts and issues in flight (`max_dest_rd_atomic`,
    /// `max_rd_atomic`), for the CM's responder resources and initiator depth.
    pub(crate) fn rd_atomic(&self) -> (u8, u8) {
        (self.max_dest_rd_atomic, self.max_rd_atomic)
    }
}
