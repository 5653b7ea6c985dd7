//! Management Datagram (MAD) common header (IBA vol 1 §13.4.3, 24 bytes) and the General
//! Services Interface facts a RoCE CM needs.
//!
//! A MAD is exactly [`MAD_LEN`] = 256 bytes: this 24-byte common header, then 232 bytes of class
//! data ([`DATA_LEN`]). On RoCEv2 it travels as the payload of a UD SEND_ONLY (BTH opcode 0x64)
//! to QP 1, the GSI QP, with the DETH Q_Key [`GSI_QKEY`] and source QP 1. The kernel MAD layer
//! takes 256 bytes of any base-version-1 MAD whatever arrived, so senders always send 256.
//!
//! ```text
//!  byte 0       | 1         | 2            | 3            | 4-5    | 6-7
//!  BaseVersion  | MgmtClass | ClassVersion | R | Method   | Status | ClassSpecific
//!  8-15          | 16-17       | 18-19    | 20-23
//!  TransactionID | AttributeID | Reserved | AttributeModifier
//! ```
//!
//! The header view judges nothing. [`Repr`] keeps every field except the 16 reserved bits
//! (emitted as 0, as IBA requires of senders). The CM messages that fill the 232 data bytes are
//! in [`crate::cm`].
use crate::field::*;
use crate::Result;
use core::fmt;

mod field {
    use crate::field::Field;
    pub const BASE_VERSION: usize = 0;
    pub const MGMT_CLASS: usize = 1;
    pub const CLASS_VERSION: usize = 2;
    pub const METHOD: usize = 3;
    pub const STATUS: Field = 4..6;
    pub const CLASS_SPECIFIC: Field = 6..8;
    pub const TID: Field = 8..16;
    pub const ATTR_ID: Field = 16..18;
    pub const RESERVED: Field = 18..20;
    pub const ATTR_MOD: Field = 20..24;
}

/// Length of the MAD common header.
pub const HEADER_LEN: usize = 24;
/// Length of a MAD (`IB_MGMT_MAD_SIZE`).
pub const MAD_LEN: usize = 256;
/// Length of the class data after the common header (`IB_MGMT_MAD_DATA`).
pub const DATA_LEN: usize = MAD_LEN - HEADER_LEN;

/// Base version of every IBA MAD (`IB_MGMT_BASE_VERSION`).
pub const BASE_VERSION: u8 = 1;

/// Management classes (`IB_MGMT_CLASS_*` of the kernel's `ib_mad.h`).
pub mod class {
    /// Subnet management, LID routed.
    pub const SUBN_LID_ROUTED: u8 = 0x01;
    /// Subnet administration.
    pub const SUBN_ADM: u8 = 0x03;
    /// Performance management.
    pub const PERF_MGMT: u8 = 0x04;
    /// Baseboard management.
    pub const BM: u8 = 0x05;
    /// Device management.
    pub const DEVICE_MGMT: u8 = 0x06;
    /// Communication management: the CM (IBA chapter 12).
    pub const CM: u8 = 0x07;
    /// SNMP tunnelling.
    pub const SNMP: u8 = 0x08;
    /// Device administration.
    pub const DEVICE_ADM: u8 = 0x10;
    /// Boot management.
    pub const BOOT_MGMT: u8 = 0x11;
    /// Bus information service.
    pub const BIS: u8 = 0x12;
    /// Congestion management.
    pub const CONG_MGMT: u8 = 0x21;
    /// Subnet management, directed route.
    pub const SUBN_DIRECTED_ROUTE: u8 = 0x81;

    /// Short name of a management class, `None` for vendor and reserved classes.
    pub const fn name(class: u8) -> Option<&'static str> {
        Some(match class {
            SUBN_LID_ROUTED => "SubnMgmt",
            SUBN_ADM => "SubnAdm",
            PERF_MGMT => "PerfMgmt",
            BM => "BM",
            DEVICE_MGMT => "DevMgmt",
            CM => "CM",
            SNMP => "SNMP",
            DEVICE_ADM => "DevAdm",
            BOOT_MGMT => "BootMgmt",
            BIS => "BIS",
            CONG_MGMT => "CongMgmt",
            SUBN_DIRECTED_ROUTE => "SubnMgmtDR",
            _ => return None,
        })
    }
}

/// Class version of the CM class: 2 (`IB_CM_CLASS_VERSION`, IBA 1.2 and later). The kernel
/// registers its CM agent for this version only; CM MADs of another version are dropped.
pub const CM_CLASS_VERSION: u8 = 2;

/// Methods (`IB_MGMT_METHOD_*`), the low seven bits of byte 3.
pub mod method {
    /// Get.
    pub const GET: u8 = 0x01;
    /// Set.
    pub const SET: u8 = 0x02;
    /// Send: every CM message, requests and replies alike, is a Send with R = 0.
    pub const SEND: u8 = 0x03;
    /// Trap.
    pub const TRAP: u8 = 0x05;
    /// Report.
    pub const REPORT: u8 = 0x06;
    /// TrapRepress.
    pub const TRAP_REPRESS: u8 = 0x07;
    /// The R (response) bit of byte 3; GetResp = `R | GET`, ReportResp = `R | REPORT`.
    pub const R_BIT: u8 = 0x80;
    /// GetResp (`R | GET`), as one byte.
    pub const GET_RESP: u8 = R_BIT | GET;
    /// ReportResp (`R | REPORT`), as one byte.
    pub const REPORT_RESP: u8 = R_BIT | REPORT;

    /// Name of the seven-bit method.
    pub const fn name(m: u8) -> Option<&'static str> {
        Some(match m & 0x7F {
            GET => "Get",
            SET => "Set",
            SEND => "Send",
            TRAP => "Trap",
            REPORT => "Report",
            TRAP_REPRESS => "TrapRepress",
            _ => return None,
        })
    }
}

/// Status field values (`IB_MGMT_MAD_STATUS_*`). Bit 0 busy, bit 1 redirect
/// required, bits 4:2 the invalid-field code, bits 14:8 class specific.
pub mod status {
    /// Success.
    pub const SUCCESS: u16 = 0x0000;
    /// Busy.
    pub const BUSY: u16 = 0x0001;
    /// Redirect required.
    pub const REDIRECT_REQUIRED: u16 = 0x0002;
    /// Bad base or class version.
    pub const BAD_VERSION: u16 = 0x0004;
    /// Method not supported.
    pub const UNSUPPORTED_METHOD: u16 = 0x0008;
    /// Method/attribute combination not supported (the kernel's answer to an unmatched Get).
    pub const UNSUPPORTED_METHOD_ATTRIB: u16 = 0x000C;
    /// Invalid value in the attribute or attribute modifier.
    pub const INVALID_ATTRIB_VALUE: u16 = 0x001C;
}

/// Attribute ID of ClassPortInfo, common to every class.
pub const ATTR_CLASS_PORT_INFO: u16 = 0x0001;

/// The GSI QP (QP 1), where every CM MAD is sent.
pub const GSI_QPN: u32 = 1;
/// Q_Key of the GSI QP (`IB_QP1_QKEY`); rxe forces it on every send from QP 1.
pub const GSI_QKEY: u32 = crate::deth::GSI_QKEY;
/// P_Key of GSI traffic on RoCE: the default, full member (rxe sends nothing else).
pub const GSI_PKEY: u16 = crate::DEFAULT_PKEY;
/// P_Key table index of [`GSI_PKEY`]: 0, the only entry of a RoCE port's P_Key table (rxe has
/// one), which rdma_cm looks up for the path's 0xFFFF.
pub const GSI_PKEY_INDEX: u16 = 0;
/// First BTH PSN of the GSI send queue (`IB_MAD_SEND_Q_PSN`); the kernel adds one per MAD.
pub const GSI_SEND_PSN: u32 = 0;

crate::field::fixed_view!(HEADER_LEN, "MAD common header");

impl<T: AsRef<[u8]>> Packet<T> {
    /// BaseVersion.
    pub fn base_version(&self) -> u8 {
        self.buffer.as_ref()[field::BASE_VERSION]
    }
    /// MgmtClass.
    pub fn mgmt_class(&self) -> u8 {
        self.buffer.as_ref()[field::MGMT_CLASS]
    }
    /// ClassVersion.
    pub fn class_version(&self) -> u8 {
        self.buffer.as_ref()[field::CLASS_VERSION]
    }
    /// The R (response) bit.
    pub fn response(&self) -> bool {
        self.buffer.as_ref()[field::METHOD] & method::R_BIT != 0
    }
    /// Method (seven bits, without R).
    pub fn method(&self) -> u8 {
        self.buffer.as_ref()[field::METHOD] & 0x7F
    }
    /// Status.
    pub fn status(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::STATUS)
    }
    /// ClassSpecific.
    pub fn class_specific(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::CLASS_SPECIFIC)
    }
    /// TransactionID.
    pub fn tid(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::TID)
    }
    /// AttributeID.
    pub fn attr_id(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::ATTR_ID)
    }
    /// The 16 reserved bits after the AttributeID.
    pub fn reserved(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::RESERVED)
    }
    /// AttributeModifier.
    pub fn attr_mod(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::ATTR_MOD)
    }
    /// The class data after the header: up to [`DATA_LEN`] bytes, fewer when the buffer is
    /// shorter than a MAD.
    pub fn data(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        &b[HEADER_LEN..b.len().min(MAD_LEN)]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets BaseVersion.
    pub fn set_base_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::BASE_VERSION] = v;
    }
    /// Sets MgmtClass.
    pub fn set_mgmt_class(&mut self, v: u8) {
        self.buffer.as_mut()[field::MGMT_CLASS] = v;
    }
    /// Sets ClassVersion.
    pub fn set_class_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::CLASS_VERSION] = v;
    }
    /// Sets the R bit and the seven-bit method.
    pub fn set_method(&mut self, response: bool, m: u8) {
        self.buffer.as_mut()[field::METHOD] = (response as u8) << 7 | (m & 0x7F);
    }
    /// Sets Status.
    pub fn set_status(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::STATUS, v)
    }
    /// Sets ClassSpecific.
    pub fn set_class_specific(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CLASS_SPECIFIC, v)
    }
    /// Sets TransactionID.
    pub fn set_tid(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::TID, v)
    }
    /// Sets AttributeID.
    pub fn set_attr_id(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::ATTR_ID, v)
    }
    /// Sets the reserved 16 bits.
    pub fn set_reserved(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::RESERVED, v)
    }
    /// Sets AttributeModifier.
    pub fn set_attr_mod(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::ATTR_MOD, v)
    }
    /// The class data after the header, writable (up to [`DATA_LEN`] bytes).
    pub fn data_mut(&mut self) -> &mut [u8] {
        let b = self.buffer.as_mut();
        let end = b.len().min(MAD_LEN);
        &mut b[HEADER_LEN..end]
    }
}

/// High-level MAD common header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// BaseVersion (1).
    pub base_version: u8,
    /// MgmtClass.
    pub mgmt_class: u8,
    /// ClassVersion.
    pub class_version: u8,
    /// The R bit: this MAD is a response (GetResp, ReportResp, …). Never set on CM MADs.
    pub response: bool,
    /// Method, seven bits.
    pub method: u8,
    /// Status.
    pub status: u16,
    /// ClassSpecific.
    pub class_specific: u16,
    /// TransactionID.
    pub tid: u64,
    /// AttributeID.
    pub attr_id: u16,
    /// AttributeModifier (the CM carries the ECE option bits here in REQ, REP and SIDR_REP; 0
    /// with rxe).
    pub attr_mod: u32,
}

impl Repr {
    /// The header of a CM message as the kernel CM sends it (`cm_format_mad_hdr`): base version
    /// 1, class CM, class version 2, method Send, status 0, attribute modifier 0.
    pub const fn cm(attr_id: u16, tid: u64) -> Repr {
        Repr {
            base_version: BASE_VERSION,
            mgmt_class: class::CM,
            class_version: CM_CLASS_VERSION,
            response: false,
            method: method::SEND,
            status: status::SUCCESS,
            class_specific: 0,
            tid,
            attr_id,
            attr_mod: 0,
        }
    }

    /// True for base version 1, class CM, class version 2: a MAD the kernel CM agent takes.
    pub const fn is_cm(&self) -> bool {
        self.base_version == BASE_VERSION
            && self.mgmt_class == class::CM
            && self.class_version == CM_CLASS_VERSION
    }

    /// Parses the common header. Judges nothing: the GSI layer decides what it accepts.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            base_version: p.base_version(),
            mgmt_class: p.mgmt_class(),
            class_version: p.class_version(),
            response: p.response(),
            method: p.method(),
            status: p.status(),
            class_specific: p.class_specific(),
            tid: p.tid(),
            attr_id: p.attr_id(),
            attr_mod: p.attr_mod(),
        })
    }

    /// Always [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header (reserved bits 0).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_base_version(self.base_version);
        p.set_mgmt_class(self.mgmt_class);
        p.set_class_version(self.class_version);
        p.set_method(self.response, self.method);
        p.set_status(self.status);
        p.set_class_specific(self.class_specific);
        p.set_tid(self.tid);
        p.set_attr_id(self.attr_id);
        p.set_reserved(0);
        p.set_attr_mod(self.attr_mod);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match class::name(self.mgmt_class) {
            Some(n) => write!(f, "MAD {n}")?,
            None => write!(f, "MAD class={:#04x}", self.mgmt_class)?,
        }
        write!(f, " v{}", self.class_version)?;
        match method::name(self.method) {
            Some(n) if self.response && n == "Get" => write!(f, " GetResp")?,
            Some(n) if self.response && n == "Report" => write!(f, " ReportResp")?,
            Some(n) => write!(f, " {n}{}", if self.response { "(R)" } else { "" })?,
            None => write!(
                f,
                " method={:#04x}",
                self.method | (self.response as u8) << 7
            )?,
        }
        write!(f, " attr={:#06x} tid={:#018x}", self.attr_id, self.tid)?;
        if self.status != 0 {
            write!(f, " status={:#06x}", self.status)?;
        }
        if self.attr_mod != 0 {
            write!(f, " attr_mod={:#x}", self.attr_mod)?;
        }
        if self.base_version != BASE_VERSION {
            write!(f, " base_version={}", self.base_version)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// The header of a CM REQ as notes §2 tabulates the kernel's: base 1, class 7, class
    /// version 2, method Send, status 0, class specific 0, TID (agent 0x0000002a in the high
    /// 32 bits, the byte-reversed local comm ID in the low 32), attribute 0x0010, modifier 0.
    static REQ_HDR: [u8; 24] = [
        // base version, class, class version, method, status, class specific
        0x01, 0x07, 0x02, 0x03, 0x00, 0x00, 0x00, 0x00, //
        0x00, 0x00, 0x00, 0x2a, 0x78, 0x56, 0x34, 0x12, // TID
        0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // attribute ID, reserved, modifier
    ];

    #[test]
    fn cm_header_golden() {
        let p = Packet::new_checked(&REQ_HDR[..]).unwrap();
        assert_eq!(p.base_version(), 1);
        assert_eq!(p.mgmt_class(), class::CM);
        assert_eq!(p.class_version(), CM_CLASS_VERSION);
        assert!(!p.response());
        assert_eq!(p.method(), method::SEND);
        assert_eq!(p.tid(), 0x0000_002a_7856_3412);
        assert_eq!(p.attr_id(), 0x0010);
        assert_eq!(p.data(), &[] as &[u8]);
        let r = Repr::parse(&p).unwrap();
        assert_eq!(r, Repr::cm(0x0010, 0x0000_002a_7856_3412));
        assert!(r.is_cm());
        let mut out = [0xAAu8; 24];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, REQ_HDR);
        assert_eq!(
            r.to_string(),
            "MAD CM v2 Send attr=0x0010 tid=0x0000002a78563412"
        );
    }

    #[test]
    fn response_bit_and_unmatched_get_resp() {
        // The kernel's answer to an unmatched Get: GetResp, status 0x000C.
        let mut b = [0u8; MAD_LEN];
        let r = Repr {
            response: true,
            method: method::GET,
            status: status::UNSUPPORTED_METHOD_ATTRIB,
            ..Repr::cm(ATTR_CLASS_PORT_INFO, 7)
        };
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b[3], method::GET_RESP);
        assert_eq!(&b[4..6], &[0x00, 0x0C]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.data().len(), DATA_LEN);
        assert_eq!(Repr::parse(&p).unwrap(), r);
        assert!(r.to_string().contains("GetResp"));
    }

    #[test]
    fn truncations() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                Packet::new_checked(&REQ_HDR[..n]).unwrap_err(),
                crate::Error::Truncated,
                "{n}"
            );
        }
        // Longer than a MAD: the data stops at byte 256.
        let big = [0u8; 300];
        assert_eq!(
            Packet::new_checked(&big[..]).unwrap().data().len(),
            DATA_LEN
        );
    }
}
