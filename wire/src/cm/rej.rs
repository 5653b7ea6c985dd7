//! REJ, Reject (IBA Table 108; attribute 0x0012), and its reason codes.
//!
//! ```text
//!  0 Local Communication ID (32)   4 Remote Communication ID (32)
//!  8 Message REJected 7:6 (reserved 5:0)   9 Reject Info Length 7:1 (reserved 0)
//! 10 Reason (16)   12 Additional Reject Information, ARI (72)   84 Private Data (148)
//! ```
//!
//! The kernel rejects a REQ it cannot route with reason 8 and Local Communication ID 0;
//! `rdma_reject` sends reason 28 (consumer defined) with up to 148 bytes of private data.
use super::MsgResponse;
use crate::field::*;
use crate::{Error, Result};
use core::fmt;

mod field {
    use crate::field::Field;
    pub const LOCAL_COMM_ID: Field = 0..4;
    pub const REMOTE_COMM_ID: Field = 4..8;
    /// Message REJected 7:6.
    pub const MESSAGE_REJECTED: usize = 8;
    /// Reject Info Length 7:1.
    pub const REJECT_INFO_LENGTH: usize = 9;
    pub const REASON: Field = 10..12;
    pub const ARI: Field = 12..84;
    pub const PRIVATE_DATA: Field = 84..232;
}

/// Length of the REJ private data.
pub const PRIVATE_DATA_LEN: usize = 148;
/// Length of the ARI field.
pub const ARI_LEN: usize = 72;

macro_rules! reasons {
    ($($code:literal $var:ident $text:literal,)*) => {
        /// REJ reason codes (`enum ib_cm_rej_reason`), with the kernel's wording.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum RejReason {
            $(#[doc = concat!(stringify!($code), ": ", $text, ".")] $var,)*
            /// A code without a name (0, 34, 36 and up).
            Other(u16),
        }

        impl RejReason {
            /// From the 16-bit Reason field.
            pub const fn from_code(v: u16) -> RejReason {
                match v {
                    $($code => RejReason::$var,)*
                    v => RejReason::Other(v),
                }
            }
            /// The 16-bit Reason field.
            pub const fn code(self) -> u16 {
                match self {
                    $(RejReason::$var => $code,)*
                    RejReason::Other(v) => v,
                }
            }
            /// The kernel's wording (`ibcm_reject_msg`), `None` for codes without a name.
            pub const fn text(self) -> Option<&'static str> {
                match self {
                    $(RejReason::$var => Some($text),)*
                    RejReason::Other(_) => None,
                }
            }
        }
    };
}

reasons! {
    1 NoQp "no QP",
    2 NoEec "no EEC",
    3 NoResources "no resources",
    4 Timeout "timeout",
    5 Unsupported "unsupported",
    6 InvalidCommId "invalid comm ID",
    7 InvalidCommInstance "invalid comm instance",
    8 InvalidServiceId "invalid service ID",
    9 InvalidTransportType "invalid transport type",
    10 StaleConn "stale conn",
    11 RdcNotExist "RDC not exist",
    12 InvalidGid "invalid GID",
    13 InvalidLid "invalid LID",
    14 InvalidSl "invalid SL",
    15 InvalidTrafficClass "invalid traffic class",
    16 InvalidHopLimit "invalid hop limit",
    17 InvalidPacketRate "invalid packet rate",
    18 InvalidAltGid "invalid alt GID",
    19 InvalidAltLid "invalid alt LID",
    20 InvalidAltSl "invalid alt SL",
    21 InvalidAltTrafficClass "invalid alt traffic class",
    22 InvalidAltHopLimit "invalid alt hop limit",
    23 InvalidAltPacketRate "invalid alt packet rate",
    24 PortCmRedirect "port CM redirect",
    25 PortRedirect "port redirect",
    26 InvalidMtu "invalid MTU",
    27 InsufficientRespResources "insufficient resp resources",
    28 ConsumerDefined "consumer defined",
    29 InvalidRnrRetry "invalid RNR retry",
    30 DuplicateLocalCommId "duplicate local comm ID",
    31 InvalidClassVersion "invalid class version",
    32 InvalidFlowLabel "invalid flow label",
    33 InvalidAltFlowLabel "invalid alt flow label",
    35 VendorOptionNotSupported "vendor option is not supported",
}

impl fmt::Display for RejReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.text() {
            Some(t) => write!(f, "{} ({t})", self.code()),
            None => write!(f, "{}", self.code()),
        }
    }
}

crate::field::fixed_view!(super::PAYLOAD_LEN, "CM REJ payload");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Local Communication ID (0 when the kernel rejects a REQ it has no state for).
    pub fn local_comm_id(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::LOCAL_COMM_ID)
    }
    /// Remote Communication ID.
    pub fn remote_comm_id(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::REMOTE_COMM_ID)
    }
    /// Message REJected (0 REQ, 1 REP, 2 no message / other).
    pub fn message_rejected(&self) -> MsgResponse {
        MsgResponse::from_bits(self.buffer.as_ref()[field::MESSAGE_REJECTED] >> 6)
    }
    /// Reject Info Length (7 bits): how many ARI bytes are meaningful.
    pub fn reject_info_length(&self) -> u8 {
        self.buffer.as_ref()[field::REJECT_INFO_LENGTH] >> 1
    }
    /// Reason.
    pub fn reason(&self) -> RejReason {
        RejReason::from_code(u16_at(self.buffer.as_ref(), field::REASON))
    }
    /// The whole 72-byte ARI field.
    pub fn ari(&self) -> &[u8] {
        &self.buffer.as_ref()[field::ARI]
    }
    /// Private Data (148 bytes).
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets Local Communication ID.
    pub fn set_local_comm_id(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::LOCAL_COMM_ID, v)
    }
    /// Sets Remote Communication ID.
    pub fn set_remote_comm_id(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::REMOTE_COMM_ID, v)
    }
    /// Sets Message REJected (the six reserved bits 0).
    pub fn set_message_rejected(&mut self, v: MsgResponse) {
        self.buffer.as_mut()[field::MESSAGE_REJECTED] = v.bits() << 6;
    }
    /// Sets Reject Info Length (the reserved bit 0).
    pub fn set_reject_info_length(&mut self, v: u8) {
        self.buffer.as_mut()[field::REJECT_INFO_LENGTH] = (v & 0x7F) << 1;
    }
    /// Sets Reason.
    pub fn set_reason(&mut self, v: RejReason) {
        set_u16(self.buffer.as_mut(), field::REASON, v.code())
    }
    /// The ARI field, writable.
    pub fn ari_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::ARI]
    }
    /// Private Data, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// High-level REJ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Local Communication ID (the rejecter's, or 0).
    pub local_comm_id: u32,
    /// Remote Communication ID (the rejected side's).
    pub remote_comm_id: u32,
    /// Which message is rejected.
    pub message_rejected: MsgResponse,
    /// Reason.
    pub reason: RejReason,
    /// Reject Info Length (≤ 72).
    pub reject_info_length: u8,
    /// The ARI field, all 72 bytes (the first `reject_info_length` are meaningful).
    pub ari: [u8; ARI_LEN],
    /// Private Data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// A REJ of a REQ with `reason`, no ARI and `private_data` (at most 148 bytes; the rest
    /// zero). `None` if the private data is too long.
    pub fn new(
        local_comm_id: u32,
        remote_comm_id: u32,
        reason: RejReason,
        private_data: &[u8],
    ) -> Option<Repr> {
        let mut pd = [0u8; PRIVATE_DATA_LEN];
        pd.get_mut(..private_data.len())?
            .copy_from_slice(private_data);
        Some(Repr {
            local_comm_id,
            remote_comm_id,
            message_rejected: MsgResponse::Req,
            reason,
            reject_info_length: 0,
            ari: [0; ARI_LEN],
            private_data: pd,
        })
    }

    /// Parses a REJ payload. [`Error::Malformed`] when Reject Info Length exceeds 72.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        let reject_info_length = p.reject_info_length();
        if reject_info_length as usize > ARI_LEN {
            return Err(Error::Malformed);
        }
        let mut ari = [0u8; ARI_LEN];
        ari.copy_from_slice(p.ari());
        let mut private_data = [0u8; PRIVATE_DATA_LEN];
        private_data.copy_from_slice(p.private_data());
        Ok(Repr {
            local_comm_id: p.local_comm_id(),
            remote_comm_id: p.remote_comm_id(),
            message_rejected: p.message_rejected(),
            reason: p.reason(),
            reject_info_length,
            ari,
            private_data,
        })
    }

    /// The meaningful ARI bytes.
    pub fn ari(&self) -> &[u8] {
        &self.ari[..(self.reject_info_length as usize).min(ARI_LEN)]
    }

    /// Always [`super::PAYLOAD_LEN`].
    pub const fn buffer_len(&self) -> usize {
        super::PAYLOAD_LEN
    }

    /// Writes the whole payload, reserved bits 0.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_local_comm_id(self.local_comm_id);
        p.set_remote_comm_id(self.remote_comm_id);
        p.set_message_rejected(self.message_rejected);
        p.set_reject_info_length(self.reject_info_length);
        p.set_reason(self.reason);
        p.ari_mut().copy_from_slice(&self.ari);
        p.private_data_mut().copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "REJ lcid={:#010x} rcid={:#010x} rejected={} reason={}",
            self.local_comm_id,
            self.remote_comm_id,
            self.message_rejected.name_rej(),
            self.reason
        )?;
        if self.reject_info_length != 0 {
            write!(f, " ari=")?;
            for b in self.ari() {
                write!(f, "{b:02x}")?;
            }
        }
        Ok(())
    }
}
