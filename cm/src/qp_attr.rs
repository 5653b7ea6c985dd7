//! `rdma_init_qp_attr` as kernel rdma_cm answers librdmacm's INIT_QP_ATTR (rdma-cm-notes §6):
//! `cma_ib_init_qp_attr` for ids without an RC connection (and every UD id), else
//! `ib_cm_init_qp_attr` (cm.c `cm_init_qp_{init,rtr,rts}_attr`), and the RTR's `rq_psn` always
//! the id's own `seq_num`.
use crate::ib::CmState;
use crate::{errno, Endpoint, Id, QpKind};
use roce_emu::{AccessFlags, AhAttr, Mtu, QpAttr, QpAttrMask, QpState};
use roce_wire::cma;

/// P_Key index of 0xFFFF (the only P_Key on a RoCE port).
const PKEY_INDEX: u16 = 0;
/// rdma_cm ids use port 1.
const PORT: u8 = 1;

impl Endpoint {
    /// The attributes and mask kernel rdma_cm gives librdmacm to move the id's QP to `state`
    /// (INIT, RTR or RTS; EINVAL otherwise, or in a connection state that has none).
    ///
    /// The AH (`ah_attr`, RTR) has `dgid` = the peer's address, `flow_label`, `hop_limit`,
    /// `traffic_class` of the connection's path, `port_num` 1, and **`sgid_index` 0: the caller
    /// maps [`Endpoint::local_addr`] to its GID index**.
    pub fn init_qp_attr(&self, id: Id, state: QpState) -> Result<(QpAttr, QpAttrMask), i32> {
        let rid = self.ids.get(&id).ok_or(errno::EINVAL)?;
        let mut a = QpAttr {
            qp_state: state,
            ..Default::default()
        };
        if !matches!(state, QpState::Init | QpState::Rtr | QpState::Rts) {
            return Err(errno::EINVAL);
        }
        let conn = rid.conn.as_ref().filter(|_| rid.kind == QpKind::Rc);
        let Some(c) = conn else {
            // `cma_ib_init_qp_attr`: the same mask whatever the state.
            a.pkey_index = PKEY_INDEX;
            a.port_num = PORT;
            let mut mask = QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT;
            match rid.kind {
                QpKind::Ud => {
                    a.qkey = cma::RDMA_UDP_QKEY;
                    mask |= QpAttrMask::QKEY;
                }
                QpKind::Rc => {
                    a.qp_access_flags = AccessFlags::EMPTY;
                    mask |= QpAttrMask::ACCESS_FLAGS;
                }
            }
            if state == QpState::Rtr {
                a.rq_psn = rid.seq_num;
            }
            return Ok((a, mask));
        };
        use CmState::*;
        let rtr_states = matches!(
            c.state,
            ReqRcvd | MraReqSent | RepRcvd | MraRepSent | RepSent | MraRepRcvd | Established
        );
        let mask = match state {
            QpState::Init if rtr_states || matches!(c.state, ReqSent | MraReqRcvd) => {
                a.qp_access_flags = AccessFlags::REMOTE_WRITE;
                if c.responder_resources != 0 {
                    a.qp_access_flags |= AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
                }
                a.pkey_index = PKEY_INDEX;
                a.port_num = PORT;
                QpAttrMask::STATE
                    | QpAttrMask::ACCESS_FLAGS
                    | QpAttrMask::PKEY_INDEX
                    | QpAttrMask::PORT
            }
            QpState::Rtr if rtr_states => {
                a.ah_attr = AhAttr {
                    dgid: c.av.dgid(),
                    flow_label: c.av.flow_label,
                    sgid_index: 0,
                    hop_limit: c.av.hop_limit,
                    traffic_class: c.av.traffic_class,
                    is_global: true,
                    sl: 0,
                    port_num: PORT,
                };
                a.path_mtu = Mtu::from_raw(c.path_mtu as u32).unwrap_or_else(|| {
                    Mtu::from_raw(crate::ib::mtu_enum(self.cfg.path_mtu) as u32)
                        .unwrap_or(Mtu::Mtu1024)
                });
                a.dest_qp_num = c.remote_qpn;
                a.rq_psn = rid.seq_num;
                a.max_dest_rd_atomic = c.responder_resources;
                a.min_rnr_timer = 0;
                QpAttrMask::STATE
                    | QpAttrMask::AV
                    | QpAttrMask::PATH_MTU
                    | QpAttrMask::DEST_QPN
                    | QpAttrMask::RQ_PSN
                    | QpAttrMask::MAX_DEST_RD_ATOMIC
                    | QpAttrMask::MIN_RNR_TIMER
            }
            QpState::Rts if rtr_states => {
                a.sq_psn = c.sq_psn;
                a.retry_cnt = c.retry_count;
                a.rnr_retry = c.rnr_retry_count;
                a.max_rd_atomic = c.initiator_depth;
                // `rdma_init_qp_attr`: the id's ACK timeout when one was set
                a.timeout = rid.ack_timeout.unwrap_or(c.av.timeout);
                QpAttrMask::STATE
                    | QpAttrMask::SQ_PSN
                    | QpAttrMask::RETRY_CNT
                    | QpAttrMask::RNR_RETRY
                    | QpAttrMask::MAX_QP_RD_ATOMIC
                    | QpAttrMask::TIMEOUT
            }
            _ => return Err(errno::EINVAL),
        };
        Ok((a, mask))
    }
}
