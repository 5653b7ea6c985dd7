//! SIDR_REP, Service ID Resolution Response (IBA Table 120; attribute 0x0018), and its status
//! codes.
//!
//! ```text
//!  0 Request ID (32)   4 Status (8)   5 Additional Information Length (8)
//!  6 Vendor ID 23:8 (16)   8 QPN (24), Vendor ID 7:0 (8)   12 Service ID (64)
//! 20 Q_Key (32)   24 Additional Information (72)   96 Private Data (136)
//! ```
use crate::field::*;
use crate::{Error, Result};
use core::fmt;

mod field {
    use crate::field::Field;
    pub const REQUEST_ID: Field = 0..4;
    pub const STATUS: usize = 4;
    pub const ADDITIONAL_INFO_LENGTH: usize = 5;
    pub const VENDOR_ID_H: Field = 6..8;
    pub const QPN: Field = 8..11;
    pub const VENDOR_ID_L: usize = 11;
    pub const SERVICE_ID: Field = 12..20;
    pub const QKEY: Field = 20..24;
    pub const ADDITIONAL_INFO: Field = 24..96;
    pub const PRIVATE_DATA: Field = 96..232;
}

/// Length of the SIDR_REP private data.
pub const PRIVATE_DATA_LEN: usize = 136;
/// Length of the Additional Information field.
pub const ADDITIONAL_INFO_LEN: usize = 72;

/// SIDR_REP Status (`enum ib_cm_sidr_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SidrStatus {
    /// 0: the QPN and Q_Key are valid.
    Success,
    /// 1: service ID not supported (the kernel's answer when nothing listens).
    Unsupported,
    /// 2: rejected by the service provider (`rdma_reject`).
    Reject,
    /// 3: no QP available.
    NoQp,
    /// 4: redirect; Additional Information holds ClassPortInfo.
    Redirect,
    /// 5: unsupported class version.
    UnsupportedVersion,
    /// Another value.
    Other(u8),
}

impl SidrStatus {
    /// From the Status byte.
    pub const fn from_code(v: u8) -> SidrStatus {
        match v {
            0 => SidrStatus::Success,
            1 => SidrStatus::Unsupported,
            2 => SidrStatus::Reject,
            3 => SidrStatus::NoQp,
            4 => SidrStatus::Redirect,
            5 => SidrStatus::UnsupportedVersion,
            v => SidrStatus::Other(v),
        }
    }
    /// The Status byte.
    pub const fn code(self) -> u8 {
        match self {
            SidrStatus::Success => 0,
            SidrStatus::Unsupported => 1,
            SidrStatus::Reject => 2,
            SidrStatus::NoQp => 3,
            SidrStatus::Redirect => 4,
            SidrStatus::UnsupportedVersion => 5,
            SidrStatus::Other(v) => v,
        }
    }
    /// Short text, `None` for codes without a name.
    pub const fn text(self) -> Option<&'static str> {
        Some(match self {
            SidrStatus::Success => "success",
            SidrStatus::Unsupported => "unsupported service ID",
            SidrStatus::Reject => "reject",
            SidrStatus::NoQp => "no QP",
            SidrStatus::Redirect => "redirect",
            SidrStatus::UnsupportedVersion => "unsupported version",
            SidrStatus::Other(_) => return None,
        })
    }
}

impl fmt::Display for SidrStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.text() {
            Some(t) => write!(f, "{} ({t})", self.code()),
            None => write!(f, "{}", self.code()),
        }
    }
}

crate::field::fixed_view!(super::PAYLOAD_LEN, "CM SIDR_REP payload");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Request ID (echo of the SIDR_REQ's).
    pub fn request_id(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::REQUEST_ID)
    }
    /// Status.
    pub fn status(&self) -> SidrStatus {
        SidrStatus::from_code(self.buffer.as_ref()[field::STATUS])
    }
    /// Additional Information Length.
    pub fn additional_info_length(&self) -> u8 {
        self.buffer.as_ref()[field::ADDITIONAL_INFO_LENGTH]
    }
    /// Vendor ID (24 bits from bytes 6–7 and 11; ECE).
    pub fn vendor_id(&self) -> u32 {
        let b = self.buffer.as_ref();
        (u16_at(b, field::VENDOR_ID_H) as u32) << 8 | b[field::VENDOR_ID_L] as u32
    }
    /// QPN.
    pub fn qpn(&self) -> u32 {
        u24_at(self.buffer.as_ref(), field::QPN)
    }
    /// Service ID.
    pub fn service_id(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::SERVICE_ID)
    }
    /// Q_Key.
    pub fn qkey(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::QKEY)
    }
    /// The whole 72-byte Additional Information field.
    pub fn additional_info(&self) -> &[u8] {
        &self.buffer.as_ref()[field::ADDITIONAL_INFO]
    }
    /// Private Data (136 bytes).
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets Request ID.
    pub fn set_request_id(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::REQUEST_ID, v)
    }
    /// Sets Status.
    pub fn set_status(&mut self, v: SidrStatus) {
        self.buffer.as_mut()[field::STATUS] = v.code();
    }
    /// Sets Additional Information Length.
    pub fn set_additional_info_length(&mut self, v: u8) {
        self.buffer.as_mut()[field::ADDITIONAL_INFO_LENGTH] = v;
    }
    /// Sets the 24-bit Vendor ID (bytes 6–7 and 11).
    pub fn set_vendor_id(&mut self, v: u32) {
        let b = self.buffer.as_mut();
        set_u16(b, field::VENDOR_ID_H, (v >> 8) as u16);
        b[field::VENDOR_ID_L] = v as u8;
    }
    /// Sets QPN.
    pub fn set_qpn(&mut self, v: u32) {
        set_u24(self.buffer.as_mut(), field::QPN, v & 0xFF_FFFF)
    }
    /// Sets Service ID.
    pub fn set_service_id(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::SERVICE_ID, v)
    }
    /// Sets Q_Key.
    pub fn set_qkey(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::QKEY, v)
    }
    /// The Additional Information field, writable.
    pub fn additional_info_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::ADDITIONAL_INFO]
    }
    /// Private Data, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// High-level SIDR_REP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Request ID.
    pub request_id: u32,
    /// Status.
    pub status: SidrStatus,
    /// Additional Information Length (≤ 72).
    pub additional_info_length: u8,
    /// Vendor ID (24 bits; ECE, 0 with rxe).
    pub vendor_id: u32,
    /// QPN of the service's UD QP.
    pub qpn: u32,
    /// Service ID (echo).
    pub service_id: u64,
    /// Q_Key of the service's UD QP (rdma_cm: 0x01234567).
    pub qkey: u32,
    /// The Additional Information field, all 72 bytes.
    pub additional_info: [u8; ADDITIONAL_INFO_LEN],
    /// Private Data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Parses a SIDR_REP payload. [`Error::Malformed`] when Additional Information Length
    /// exceeds 72.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        let additional_info_length = p.additional_info_length();
        if additional_info_length as usize > ADDITIONAL_INFO_LEN {
            return Err(Error::Malformed);
        }
        let mut additional_info = [0u8; ADDITIONAL_INFO_LEN];
        additional_info.copy_from_slice(p.additional_info());
        let mut private_data = [0u8; PRIVATE_DATA_LEN];
        private_data.copy_from_slice(p.private_data());
        Ok(Repr {
            request_id: p.request_id(),
            status: p.status(),
            additional_info_length,
            vendor_id: p.vendor_id(),
            qpn: p.qpn(),
            service_id: p.service_id(),
            qkey: p.qkey(),
            additional_info,
            private_data,
        })
    }

    /// Always [`super::PAYLOAD_LEN`].
    pub const fn buffer_len(&self) -> usize {
        super::PAYLOAD_LEN
    }

    /// Writes the whole payload.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_request_id(self.request_id);
        p.set_status(self.status);
        p.set_additional_info_length(self.additional_info_length);
        p.set_qpn(self.qpn);
        p.set_vendor_id(self.vendor_id);
        p.set_service_id(self.service_id);
        p.set_qkey(self.qkey);
        p.additional_info_mut()
            .copy_from_slice(&self.additional_info);
        p.private_data_mut().copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SIDR_REP request_id={:#010x} status={} sid={:#018x} qpn={:#x} qkey={:#x}",
            self.request_id, self.status, self.service_id, self.qpn, self.qkey
        )?;
        if self.vendor_id != 0 {
            write!(f, " vendor={:#08x}", self.vendor_id)?;
        }
        Ok(())
    }
}
