//! MADs on QP 1 in `roce decode`: a UD SEND (with or without immediate) to QP 1 carries a
//! 256-byte management datagram; when it is a CM MAD (class 0x07, version 2), the CM message
//! is decoded through `roce_wire::cm`, and for rdma_cm service IDs the port space, the port
//! and the `cma_hdr` addresses too.
use roce_wire::cm::{self, Message};
use roce_wire::{cma, mad, Error};
use serde::Serialize;
use std::fmt::Write as _;

/// The `cma_hdr` of a REQ or SIDR_REQ.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CmaHdr {
    /// cma_version.
    pub version: u8,
    /// 4 or 6.
    pub ip_version: u8,
    /// The active side's address.
    pub src: String,
    /// The active side's rdma_cm port.
    pub src_port: u16,
    /// The listener's address.
    pub dst: String,
}

/// A CM message.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Cm {
    /// `REQ`, `MRA`, `REJ`, `REP`, `RTU`, `DREQ`, `DREP`, `SIDR_REQ`, `SIDR_REP`.
    pub message: &'static str,
    /// Local Communication ID (SIDR: the Request ID).
    pub local_comm_id: u32,
    /// Remote Communication ID (not in REQ and SIDR messages).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_comm_id: Option<u32>,
    /// Service ID (REQ, SIDR_REQ, SIDR_REP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_id: Option<u64>,
    /// rdma_cm port space of the service ID (`TCP`, `UDP`, `IB`, `IPOIB`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_space: Option<&'static str>,
    /// rdma_cm port of the service ID (the listener's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The sender's QPN (REQ, REP Local QPN; SIDR_REP QPN).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qpn: Option<u32>,
    /// The receiver's QPN (DREQ Remote QPN/EECN).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_qpn: Option<u32>,
    /// Starting PSN (REQ, REP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starting_psn: Option<u32>,
    /// REJ reason code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<u16>,
    /// SIDR_REP status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u8>,
    /// Q_Key (SIDR_REP; REQ/REP when non-zero).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qkey: Option<u32>,
    /// MRA Service Timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_timeout: Option<u8>,
    /// ECE Vendor ID (REQ, REP, SIDR_REP) when non-zero; the options travel in the MAD
    /// header's AttributeModifier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vendor_id: Option<u32>,
    /// The `cma_hdr` at the start of REQ / SIDR_REQ private data, for rdma_cm service IDs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cma: Option<CmaHdr>,
    /// The whole message as `roce_wire` prints it.
    pub detail: String,
}

/// A MAD on QP 1.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Mad {
    /// BaseVersion.
    pub base_version: u8,
    /// MgmtClass.
    pub mgmt_class: u8,
    /// ClassVersion.
    pub class_version: u8,
    /// Method byte, R bit included.
    pub method: u8,
    /// Status.
    pub status: u16,
    /// TransactionID.
    pub tid: u64,
    /// AttributeID.
    pub attr_id: u16,
    /// AttributeModifier.
    pub attr_mod: u32,
    /// The CM message, for CM MADs that parse.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cm: Option<Cm>,
    /// Why a CM MAD does not parse (truncated, unknown attribute, bad length field).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Mad {
    /// Decodes the payload of a UD SEND to QP 1 (`None` below the 24-byte MAD header).
    pub fn decode(payload: &[u8]) -> Option<Mad> {
        let p = mad::Packet::new_checked(payload).ok()?;
        let h = mad::Repr::parse(&p).ok()?;
        let mut m = Mad {
            base_version: h.base_version,
            mgmt_class: h.mgmt_class,
            class_version: h.class_version,
            method: h.method | (h.response as u8) << 7,
            status: h.status,
            tid: h.tid,
            attr_id: h.attr_id,
            attr_mod: h.attr_mod,
            cm: None,
            error: None,
        };
        if h.is_cm() {
            match cm::Mad::parse(payload) {
                Ok(c) => m.cm = Some(Cm::new(&c.message)),
                Err(Error::Truncated) => m.error = Some("MAD shorter than 256 bytes".into()),
                Err(e) => m.error = Some(e.to_string()),
            }
        }
        Some(m)
    }

    /// The text listing's part: ` CM REQ lcid=… … tid=…` or ` MAD SubnAdm v2 Get attr=… tid=…`.
    pub fn text(&self, s: &mut String) {
        match &self.cm {
            Some(c) => {
                s.push(' ');
                c.text(s);
                if self.attr_mod != 0 {
                    let _ = write!(s, " attr_mod={:#x}", self.attr_mod);
                }
                let _ = write!(s, " tid={:#018x}", self.tid);
            }
            None => {
                let h = mad::Repr {
                    base_version: self.base_version,
                    mgmt_class: self.mgmt_class,
                    class_version: self.class_version,
                    response: self.method & mad::method::R_BIT != 0,
                    method: self.method & 0x7F,
                    status: self.status,
                    class_specific: 0,
                    tid: self.tid,
                    attr_id: self.attr_id,
                    attr_mod: self.attr_mod,
                };
                let _ = write!(s, " {h}");
                if h.is_cm() {
                    let _ = write!(s, " ({})", cm::AttrId::from_u16(self.attr_id));
                }
                if let Some(e) = &self.error {
                    let _ = write!(s, " [{e}]");
                }
            }
        }
    }
}

impl Cm {
    fn new(m: &Message) -> Cm {
        let sid = m.service_id();
        let rdma = sid.and_then(cma::ServiceId::from_u64);
        let mut c = Cm {
            message: m.name(),
            local_comm_id: m.local_comm_id(),
            remote_comm_id: m.remote_comm_id(),
            service_id: sid,
            port_space: rdma.map(|r| r.port_space.name()),
            port: rdma.map(|r| r.port),
            qpn: None,
            remote_qpn: None,
            starting_psn: None,
            reason: None,
            status: None,
            qkey: None,
            service_timeout: None,
            vendor_id: None,
            cma: None,
            detail: m.to_string(),
        };
        let nonzero = |q: u32| (q != 0).then_some(q);
        match m {
            Message::Req(r) => {
                c.qpn = Some(r.local_qpn);
                c.starting_psn = Some(r.starting_psn.value());
                c.qkey = nonzero(r.local_qkey);
                c.vendor_id = nonzero(r.vendor_id);
            }
            Message::Rep(r) => {
                c.qpn = Some(r.local_qpn);
                c.starting_psn = Some(r.starting_psn.value());
                c.qkey = nonzero(r.local_qkey);
                c.vendor_id = nonzero(r.vendor_id);
            }
            Message::Dreq(r) => c.remote_qpn = Some(r.remote_qpn_eecn),
            Message::Rej(r) => c.reason = Some(r.reason.code()),
            Message::Mra(r) => c.service_timeout = Some(r.service_timeout),
            Message::SidrRep(r) => {
                c.status = Some(r.status.code());
                c.qpn = Some(r.qpn);
                c.qkey = Some(r.qkey);
                c.vendor_id = nonzero(r.vendor_id);
            }
            Message::Rtu(_) | Message::Drep(_) | Message::SidrReq(_) => {}
        }
        // The cma_hdr opens the private data of REQ and SIDR_REQ from rdma_cm IP ids.
        if matches!(m, Message::Req(_) | Message::SidrReq(_)) && rdma.is_some() {
            c.cma = cma::Repr::parse_private_data(m.private_data())
                .ok()
                .filter(|h| h.cma_version == cma::CMA_VERSION)
                .map(|h| CmaHdr {
                    version: h.cma_version,
                    ip_version: h.ip_version(),
                    src: h.src_addr.to_string(),
                    src_port: h.port,
                    dst: h.dst_addr.to_string(),
                });
        }
        c
    }

    fn text(&self, s: &mut String) {
        let _ = write!(s, "CM {}", self.message);
        let id = if self.message.starts_with("SIDR") {
            "request_id"
        } else {
            "lcid"
        };
        let _ = write!(s, " {id}={:#010x}", self.local_comm_id);
        if let Some(v) = self.remote_comm_id {
            let _ = write!(s, " rcid={v:#010x}");
        }
        if let Some(v) = self.status {
            let t = cm::SidrStatus::from_code(v);
            let _ = write!(s, " status={t}");
        }
        if let Some(v) = self.reason {
            let _ = write!(s, " reason={}", cm::RejReason::from_code(v));
        }
        if let Some(v) = self.service_id {
            let _ = write!(s, " sid={v:#018x}");
            if let (Some(ps), Some(port)) = (self.port_space, self.port) {
                let _ = write!(s, " ({ps} port {port})");
            }
        }
        if let Some(v) = self.qpn {
            let _ = write!(s, " qpn={v:#x}");
        }
        if let Some(v) = self.remote_qpn {
            let _ = write!(s, " remote_qpn={v:#x}");
        }
        if let Some(v) = self.starting_psn {
            let _ = write!(s, " psn={v}");
        }
        if let Some(v) = self.qkey {
            let _ = write!(s, " qkey={v:#x}");
        }
        if let Some(v) = self.service_timeout {
            let _ = write!(s, " service_timeout={v}");
        }
        if let Some(v) = self.vendor_id {
            let _ = write!(s, " vendor={v:#08x}");
        }
        if let Some(h) = &self.cma {
            if h.ip_version == 6 {
                let _ = write!(s, " cma [{}]:{} → {}", h.src, h.src_port, h.dst);
            } else {
                let _ = write!(s, " cma {}:{} → {}", h.src, h.src_port, h.dst);
            }
        }
    }
}
