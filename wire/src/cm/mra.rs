//! MRA, Message Receipt Acknowledgement (IBA Table 107; attribute 0x0011).
//!
//! ```text
//!  0 Local Communication ID (32)   4 Remote Communication ID (32)
//!  8 Message MRAed 7:6 (reserved 5:0)   9 Service Timeout 7:3 (reserved 2:0)
//! 10 Private Data (222)
//! ```
//!
//! The kernel sends an MRA with Service Timeout 24 only for a duplicate REQ (or REP) while the
//! application has not answered yet; receiving one extends the sender's REQ/REP timer by
//! `IBA_time(service timeout)`.
use super::MsgResponse;
use crate::field::*;
use crate::Result;
use core::fmt;

mod field {
    use crate::field::Field;
    pub const LOCAL_COMM_ID: Field = 0..4;
    pub const REMOTE_COMM_ID: Field = 4..8;
    /// Message MRAed 7:6.
    pub const MESSAGE_MRAED: usize = 8;
    /// Service Timeout 7:3.
    pub const SERVICE_TIMEOUT: usize = 9;
    pub const PRIVATE_DATA: Field = 10..232;
}

/// Length of the MRA private data.
pub const PRIVATE_DATA_LEN: usize = 222;

crate::field::fixed_view!(super::PAYLOAD_LEN, "CM MRA payload");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Local Communication ID.
    pub fn local_comm_id(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::LOCAL_COMM_ID)
    }
    /// Remote Communication ID.
    pub fn remote_comm_id(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::REMOTE_COMM_ID)
    }
    /// Message MRAed (0 REQ, 1 REP, 2 LAP).
    pub fn message_mraed(&self) -> MsgResponse {
        MsgResponse::from_bits(self.buffer.as_ref()[field::MESSAGE_MRAED] >> 6)
    }
    /// Service Timeout (5 bits).
    pub fn service_timeout(&self) -> u8 {
        self.buffer.as_ref()[field::SERVICE_TIMEOUT] >> 3
    }
    /// Private Data (222 bytes).
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
    /// Sets Message MRAed (the six reserved bits 0).
    pub fn set_message_mraed(&mut self, v: MsgResponse) {
        self.buffer.as_mut()[field::MESSAGE_MRAED] = v.bits() << 6;
    }
    /// Sets Service Timeout (the three reserved bits 0).
    pub fn set_service_timeout(&mut self, v: u8) {
        self.buffer.as_mut()[field::SERVICE_TIMEOUT] = (v & 0x1F) << 3;
    }
    /// Private Data, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// High-level MRA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Local Communication ID (the sender's).
    pub local_comm_id: u32,
    /// Remote Communication ID (the receiver's).
    pub remote_comm_id: u32,
    /// Which message is acknowledged.
    pub message_mraed: MsgResponse,
    /// Service Timeout (5 bits; the kernel: 24).
    pub service_timeout: u8,
    /// Private Data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Parses an MRA payload.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        let mut private_data = [0u8; PRIVATE_DATA_LEN];
        private_data.copy_from_slice(p.private_data());
        Ok(Repr {
            local_comm_id: p.local_comm_id(),
            remote_comm_id: p.remote_comm_id(),
            message_mraed: p.message_mraed(),
            service_timeout: p.service_timeout(),
            private_data,
        })
    }

    /// Always [`super::PAYLOAD_LEN`].
    pub const fn buffer_len(&self) -> usize {
        super::PAYLOAD_LEN
    }

    /// Writes the whole payload, reserved bits 0.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_local_comm_id(self.local_comm_id);
        p.set_remote_comm_id(self.remote_comm_id);
        p.set_message_mraed(self.message_mraed);
        p.set_service_timeout(self.service_timeout);
        p.private_data_mut().copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MRA lcid={:#010x} rcid={:#010x} mraed={} service_timeout={}",
            self.local_comm_id,
            self.remote_comm_id,
            self.message_mraed.name_mra(),
            self.service_timeout
        )
    }
}
