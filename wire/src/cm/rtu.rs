//! RTU, Ready To Use (IBA Table 111; attribute 0x0014).
//!
//! ```text
//!  0 Local Communication ID (32)   4 Remote Communication ID (32)   8 Private Data (224)
//! ```
use crate::field::*;
use crate::Result;
use core::fmt;

mod field {
    use crate::field::Field;
    pub const LOCAL_COMM_ID: Field = 0..4;
    pub const REMOTE_COMM_ID: Field = 4..8;
    pub const PRIVATE_DATA: Field = 8..232;
}

/// Length of the RTU private data.
pub const PRIVATE_DATA_LEN: usize = 224;

crate::field::fixed_view!(super::PAYLOAD_LEN, "CM RTU payload");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Local Communication ID.
    pub fn local_comm_id(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::LOCAL_COMM_ID)
    }
    /// Remote Communication ID.
    pub fn remote_comm_id(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::REMOTE_COMM_ID)
    }
    /// Private Data (224 bytes).
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
    /// Private Data, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// High-level RTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Local Communication ID (the sender's).
    pub local_comm_id: u32,
    /// Remote Communication ID (the receiver's).
    pub remote_comm_id: u32,
    /// Private Data (rdma_cm sends none: all zero).
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// A RTU without private data.
    pub const fn new(local_comm_id: u32, remote_comm_id: u32) -> Repr {
        Repr {
            local_comm_id,
            remote_comm_id,
            private_data: [0; PRIVATE_DATA_LEN],
        }
    }

    /// Parses a RTU payload.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        let mut private_data = [0u8; PRIVATE_DATA_LEN];
        private_data.copy_from_slice(p.private_data());
        Ok(Repr {
            local_comm_id: p.local_comm_id(),
            remote_comm_id: p.remote_comm_id(),
            private_data,
        })
    }

    /// Always [`super::PAYLOAD_LEN`].
    pub const fn buffer_len(&self) -> usize {
        super::PAYLOAD_LEN
    }

    /// Writes the whole payload.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_local_comm_id(self.local_comm_id);
        p.set_remote_comm_id(self.remote_comm_id);
        p.private_data_mut().copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RTU lcid={:#010x} rcid={:#010x}",
            self.local_comm_id, self.remote_comm_id
        )
    }
}
