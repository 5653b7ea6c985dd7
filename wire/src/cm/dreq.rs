//! DREQ, Request for Communication Release (IBA Table 112; attribute 0x0015).
//!
//! ```text
//!  0 Local Communication ID (32)   4 Remote Communication ID (32)
//!  8 Remote QPN/EECN (24), reserved (8)   12 Private Data (220)
//! ```
use crate::field::*;
use crate::Result;
use core::fmt;

mod field {
    use crate::field::Field;
    pub const LOCAL_COMM_ID: Field = 0..4;
    pub const REMOTE_COMM_ID: Field = 4..8;
    pub const REMOTE_QPN_EECN: Field = 8..11;
    pub const RESERVED: usize = 11;
    pub const PRIVATE_DATA: Field = 12..232;
}

/// Length of the DREQ private data.
pub const PRIVATE_DATA_LEN: usize = 220;

crate::field::fixed_view!(super::PAYLOAD_LEN, "CM DREQ payload");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Local Communication ID.
    pub fn local_comm_id(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::LOCAL_COMM_ID)
    }
    /// Remote Communication ID.
    pub fn remote_comm_id(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::REMOTE_COMM_ID)
    }
    /// Remote QPN/EECN: the receiver's QPN.
    pub fn remote_qpn_eecn(&self) -> u32 {
        u24_at(self.buffer.as_ref(), field::REMOTE_QPN_EECN)
    }
    /// Private Data (220 bytes).
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
    /// Sets Remote QPN/EECN (and the reserved byte after it to 0).
    pub fn set_remote_qpn_eecn(&mut self, v: u32) {
        set_u24(self.buffer.as_mut(), field::REMOTE_QPN_EECN, v & 0xFF_FFFF);
        self.buffer.as_mut()[field::RESERVED] = 0;
    }
    /// Private Data, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// High-level DREQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Local Communication ID (the sender's).
    pub local_comm_id: u32,
    /// Remote Communication ID (the receiver's).
    pub remote_comm_id: u32,
    /// Remote QPN/EECN: the receiver's QPN; the kernel ignores a DREQ whose value is not the
    /// receiving connection's local QPN.
    pub remote_qpn_eecn: u32,
    /// Private Data (rdma_cm sends none).
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// A DREQ without private data.
    pub const fn new(local_comm_id: u32, remote_comm_id: u32, remote_qpn: u32) -> Repr {
        Repr {
            local_comm_id,
            remote_comm_id,
            remote_qpn_eecn: remote_qpn & 0xFF_FFFF,
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }

    /// Parses a DREQ payload.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        let mut private_data = [0u8; PRIVATE_DATA_LEN];
        private_data.copy_from_slice(p.private_data());
        Ok(Repr {
            local_comm_id: p.local_comm_id(),
            remote_comm_id: p.remote_comm_id(),
            remote_qpn_eecn: p.remote_qpn_eecn(),
            private_data,
        })
    }

    /// Always [`super::PAYLOAD_LEN`].
    pub const fn buffer_len(&self) -> usize {
        super::PAYLOAD_LEN
    }

    /// Writes the whole payload, reserved byte 0.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_local_comm_id(self.local_comm_id);
        p.set_remote_comm_id(self.remote_comm_id);
        p.set_remote_qpn_eecn(self.remote_qpn_eecn);
        p.private_data_mut().copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DREQ lcid={:#010x} rcid={:#010x} remote_qpn={:#x}",
            self.local_comm_id, self.remote_comm_id, self.remote_qpn_eecn
        )
    }
}
