//! SIDR_REQ, Service ID Resolution Request (IBA Table 119; attribute 0x0017).
//!
//! ```text
//!  0 Request ID (32)   4 Partition Key (16), reserved (16)   8 Service ID (64)
//! 16 Private Data (216): for rdma_cm over IP, a `cma_hdr` (36) and up to 180 user bytes
//! ```
use crate::field::*;
use crate::Result;
use core::fmt;

mod field {
    use crate::field::Field;
    pub const REQUEST_ID: Field = 0..4;
    pub const PARTITION_KEY: Field = 4..6;
    pub const RESERVED: Field = 6..8;
    pub const SERVICE_ID: Field = 8..16;
    pub const PRIVATE_DATA: Field = 16..232;
}

/// Length of the SIDR_REQ private data.
pub const PRIVATE_DATA_LEN: usize = 216;

crate::field::fixed_view!(super::PAYLOAD_LEN, "CM SIDR_REQ payload");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Request ID (the sender's local comm ID).
    pub fn request_id(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::REQUEST_ID)
    }
    /// Partition Key.
    pub fn partition_key(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::PARTITION_KEY)
    }
    /// Service ID.
    pub fn service_id(&self) -> u64 {
        u64_at(self.buffer.as_ref(), field::SERVICE_ID)
    }
    /// Private Data (216 bytes).
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets Request ID.
    pub fn set_request_id(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::REQUEST_ID, v)
    }
    /// Sets Partition Key (and the 16 reserved bits after it to 0).
    pub fn set_partition_key(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::PARTITION_KEY, v);
        set_u16(self.buffer.as_mut(), field::RESERVED, 0);
    }
    /// Sets Service ID.
    pub fn set_service_id(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::SERVICE_ID, v)
    }
    /// Private Data, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// High-level SIDR_REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Request ID.
    pub request_id: u32,
    /// Partition Key (0xFFFF on RoCE).
    pub partition_key: u16,
    /// Service ID.
    pub service_id: u64,
    /// Private Data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Parses a SIDR_REQ payload.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        let mut private_data = [0u8; PRIVATE_DATA_LEN];
        private_data.copy_from_slice(p.private_data());
        Ok(Repr {
            request_id: p.request_id(),
            partition_key: p.partition_key(),
            service_id: p.service_id(),
            private_data,
        })
    }

    /// Always [`super::PAYLOAD_LEN`].
    pub const fn buffer_len(&self) -> usize {
        super::PAYLOAD_LEN
    }

    /// Writes the whole payload, reserved bits 0.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_request_id(self.request_id);
        p.set_partition_key(self.partition_key);
        p.set_service_id(self.service_id);
        p.private_data_mut().copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SIDR_REQ request_id={:#010x} sid={:#018x} pkey={:#06x}",
            self.request_id, self.service_id, self.partition_key
        )
    }
}
