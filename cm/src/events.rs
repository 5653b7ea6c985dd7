//! rdma_cm events as `cma_ib_handler` / `cma_ib_req_handler` / `cma_sidr_rep_handler` make
//! them, with the private-data lengths rdma_cm reports (the whole field minus any header).
use crate::{ConnParam, Ece, Event, EventKind, Id, UdParam};
use roce_wire::cm::{rep, req};

impl Event {
    /// An event without private data or parameters.
    pub(crate) fn simple(id: Id, kind: EventKind, status: i32) -> Event {
        Event {
            id,
            listen_id: None,
            kind,
            status,
            private_data: Vec::new(),
            param: ConnParam::default(),
            ud: None,
            ece: Ece::default(),
        }
    }

    /// CONNECT_REQUEST for a REQ (`cma_set_req_event_data`): the REQ's responder resources and
    /// initiator depth swapped (the passive side's view), the remote QPN, and the 56 user bytes
    /// after the `cma_hdr`, and the REQ's ECE (Vendor ID, and the header's `attr_mod`).
    pub(crate) fn connect_request(child: Id, listener: Id, r: &req::Repr, attr_mod: u32) -> Event {
        Event {
            id: child,
            listen_id: Some(listener),
            kind: EventKind::ConnectRequest,
            status: 0,
            private_data: r.private_data[roce_wire::cma::HEADER_LEN..].to_vec(),
            param: ConnParam {
                private_data: Vec::new(),
                responder_resources: r.initiator_depth,
                initiator_depth: r.responder_resources,
                flow_control: r.end_to_end_flow_control,
                retry_count: r.retry_count,
                rnr_retry_count: r.rnr_retry_count,
                srq: r.srq,
                qp_num: r.local_qpn,
                qkey: 0,
            },
            ud: None,
            ece: Ece {
                vendor_id: r.vendor_id,
                attr_mod,
            },
        }
    }

    /// CONNECT_RESPONSE for a REP (`cma_set_rep_event_data`): the REP's values swapped, the
    /// remote QPN, all 196 private-data bytes, the REP's ECE.
    pub(crate) fn connect_response(id: Id, r: &rep::Repr, attr_mod: u32) -> Event {
        Event {
            id,
            listen_id: None,
            kind: EventKind::ConnectResponse,
            status: 0,
            private_data: r.private_data.to_vec(),
            param: ConnParam {
                private_data: Vec::new(),
                responder_resources: r.initiator_depth,
                initiator_depth: r.responder_resources,
                flow_control: r.end_to_end_flow_control,
                retry_count: 0,
                rnr_retry_count: r.rnr_retry_count,
                srq: r.srq,
                qp_num: r.local_qpn,
                qkey: 0,
            },
            ud: None,
            ece: Ece {
                vendor_id: r.vendor_id,
                attr_mod,
            },
        }
    }

    /// A UD event (SIDR CONNECT_REQUEST, ESTABLISHED, UNREACHABLE after a SIDR_REP).
    pub(crate) fn ud(
        id: Id,
        kind: EventKind,
        status: i32,
        private_data: &[u8],
        ud: Option<UdParam>,
    ) -> Event {
        Event {
            private_data: private_data.to_vec(),
            ud,
            ..Event::simple(id, kind, status)
        }
    }
}
