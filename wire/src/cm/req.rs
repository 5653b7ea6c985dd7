//! REQ, Request for Communication (IBA Table 106; attribute 0x0010).
//!
//! Offsets are relative to the CM payload (MAD byte 24):
//!
//! ```text
//!   0 Local Communication ID (32)       4 reserved (8), Vendor ID (24)
//!   8 Service ID (64)                  16 Local CA GUID (64)
//!  24 reserved (32)                    28 Local Q_Key (32)
//!  32 Local QPN (24), Responder Resources (8)
//!  36 Local EECN (24), Initiator Depth (8)
//!  40 Remote EECN (24), byte 43: Remote CM Response Timeout 7:3, Transport Service Type 2:1,
//!     End-to-End Flow Control 0
//!  44 Starting PSN (24), byte 47: Local CM Response Timeout 7:3, Retry Count 2:0
//!  48 Partition Key (16), byte 50: Path Packet Payload MTU 7:4, RDC Exists 3, RNR Retry Count
//!     2:0; byte 51: Max CM Retries 7:4, SRQ 3, Extended Transport Type 2:0
//!  52 Primary path (44, see [`super::path`])
//!  96 Alternate path (44); byte 139 bit 2: SAP Supported
//! 140 Private Data (92): for rdma_cm over IP, a `cma_hdr` (36) and up to 56 user bytes
//! ```
use super::path;
use crate::field::*;
use crate::{Psn, Result};
use core::fmt;

mod field {
    use crate::field::Field;
    pub const LOCAL_COMM_ID: Field = 0..4;
    pub const RESERVED_4: usize = 4;
    pub const VENDOR_ID: Field = 5..8;
    pub const SERVICE_ID: Field = 8..16;
    pub const LOCAL_CA_GUID: Field = 16..24;
    pub const RESERVED_24: Field = 24..28;
    pub const LOCAL_QKEY: Field = 28..32;
    pub const LOCAL_QPN: Field = 32..35;
    pub const RESPONDER_RESOURCES: usize = 35;
    pub const LOCAL_EECN: Field = 36..39;
    pub const INITIATOR_DEPTH: usize = 39;
    pub const REMOTE_EECN: Field = 40..43;
    /// Remote CM Response Timeout 7:3, Transport Service Type 2:1, End-to-End Flow Control 0.
    pub const BYTE43: usize = 43;
    pub const STARTING_PSN: Field = 44..47;
    /// Local CM Response Timeout 7:3, Retry Count 2:0.
    pub const BYTE47: usize = 47;
    pub const PARTITION_KEY: Field = 48..50;
    /// Path Packet Payload MTU 7:4, RDC Exists 3, RNR Retry Count 2:0.
    pub const BYTE50: usize = 50;
    /// Max CM Retries 7:4, SRQ 3, Extended Transport Type 2:0.
    pub const BYTE51: usize = 51;
    pub const PRIMARY_PATH: Field = 52..96;
    pub const ALTERNATE_PATH: Field = 96..140;
    /// SAP Supported: bit 2 of the alternate path's last byte.
    pub const SAP_SUPPORTED: usize = 139;
    pub const PRIVATE_DATA: Field = 140..232;
}

/// Length of the REQ private data.
pub const PRIVATE_DATA_LEN: usize = 92;

/// Transport Service Type values (2 bits).
pub mod service_type {
    /// Reliable Connected.
    pub const RC: u8 = 0;
    /// Unreliable Connected.
    pub const UC: u8 = 1;
    /// Reliable Datagram.
    pub const RD: u8 = 2;
    /// "See Extended Transport Type" (XRC: this with Extended Transport Type 1).
    pub const EXTENDED: u8 = 3;
}

/// Extended Transport Type of XRC.
pub const EXTENDED_TRANSPORT_XRC: u8 = 1;

crate::field::fixed_view!(super::PAYLOAD_LEN, "CM REQ payload");

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Local Communication ID.
    pub fn local_comm_id(&self) -> u32 {
        u32_at(self.b(), field::LOCAL_COMM_ID)
    }
    /// Vendor ID (24 bits, ECE).
    pub fn vendor_id(&self) -> u32 {
        u24_at(self.b(), field::VENDOR_ID)
    }
    /// Service ID.
    pub fn service_id(&self) -> u64 {
        u64_at(self.b(), field::SERVICE_ID)
    }
    /// Local CA GUID.
    pub fn local_ca_guid(&self) -> u64 {
        u64_at(self.b(), field::LOCAL_CA_GUID)
    }
    /// Local Q_Key.
    pub fn local_qkey(&self) -> u32 {
        u32_at(self.b(), field::LOCAL_QKEY)
    }
    /// Local QPN.
    pub fn local_qpn(&self) -> u32 {
        u24_at(self.b(), field::LOCAL_QPN)
    }
    /// Responder Resources.
    pub fn responder_resources(&self) -> u8 {
        self.b()[field::RESPONDER_RESOURCES]
    }
    /// Local EECN.
    pub fn local_eecn(&self) -> u32 {
        u24_at(self.b(), field::LOCAL_EECN)
    }
    /// Initiator Depth.
    pub fn initiator_depth(&self) -> u8 {
        self.b()[field::INITIATOR_DEPTH]
    }
    /// Remote EECN.
    pub fn remote_eecn(&self) -> u32 {
        u24_at(self.b(), field::REMOTE_EECN)
    }
    /// Remote CM Response Timeout (5 bits).
    pub fn remote_cm_response_timeout(&self) -> u8 {
        self.b()[field::BYTE43] >> 3
    }
    /// Transport Service Type (2 bits, [`service_type`]).
    pub fn transport_service_type(&self) -> u8 {
        (self.b()[field::BYTE43] >> 1) & 0x3
    }
    /// End-to-End Flow Control.
    pub fn end_to_end_flow_control(&self) -> bool {
        self.b()[field::BYTE43] & 0x1 != 0
    }
    /// Starting PSN.
    pub fn starting_psn(&self) -> Psn {
        Psn::new(u24_at(self.b(), field::STARTING_PSN))
    }
    /// Local CM Response Timeout (5 bits).
    pub fn local_cm_response_timeout(&self) -> u8 {
        self.b()[field::BYTE47] >> 3
    }
    /// Retry Count (3 bits).
    pub fn retry_count(&self) -> u8 {
        self.b()[field::BYTE47] & 0x7
    }
    /// Partition Key.
    pub fn partition_key(&self) -> u16 {
        u16_at(self.b(), field::PARTITION_KEY)
    }
    /// Path Packet Payload MTU (4 bits, IB MTU enum: 1 = 256 … 5 = 4096).
    pub fn path_mtu(&self) -> u8 {
        self.b()[field::BYTE50] >> 4
    }
    /// RDC Exists.
    pub fn rdc_exists(&self) -> bool {
        self.b()[field::BYTE50] & 0x08 != 0
    }
    /// RNR Retry Count (3 bits).
    pub fn rnr_retry_count(&self) -> u8 {
        self.b()[field::BYTE50] & 0x7
    }
    /// Max CM Retries (4 bits).
    pub fn max_cm_retries(&self) -> u8 {
        self.b()[field::BYTE51] >> 4
    }
    /// SRQ.
    pub fn srq(&self) -> bool {
        self.b()[field::BYTE51] & 0x08 != 0
    }
    /// Extended Transport Type (3 bits).
    pub fn extended_transport_type(&self) -> u8 {
        self.b()[field::BYTE51] & 0x7
    }
    /// The primary path.
    pub fn primary_path(&self) -> path::Packet<&[u8]> {
        path::Packet::new_unchecked(&self.b()[field::PRIMARY_PATH])
    }
    /// The alternate path.
    pub fn alternate_path(&self) -> path::Packet<&[u8]> {
        path::Packet::new_unchecked(&self.b()[field::ALTERNATE_PATH])
    }
    /// SAP Supported.
    pub fn sap_supported(&self) -> bool {
        self.b()[field::SAP_SUPPORTED] & 0x04 != 0
    }
    /// Private Data (92 bytes).
    pub fn private_data(&self) -> &[u8] {
        &self.b()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn m(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }
    /// Sets Local Communication ID.
    pub fn set_local_comm_id(&mut self, v: u32) {
        set_u32(self.m(), field::LOCAL_COMM_ID, v)
    }
    /// Sets Vendor ID.
    pub fn set_vendor_id(&mut self, v: u32) {
        set_u24(self.m(), field::VENDOR_ID, v & 0xFF_FFFF)
    }
    /// Sets Service ID.
    pub fn set_service_id(&mut self, v: u64) {
        set_u64(self.m(), field::SERVICE_ID, v)
    }
    /// Sets Local CA GUID.
    pub fn set_local_ca_guid(&mut self, v: u64) {
        set_u64(self.m(), field::LOCAL_CA_GUID, v)
    }
    /// Sets Local Q_Key.
    pub fn set_local_qkey(&mut self, v: u32) {
        set_u32(self.m(), field::LOCAL_QKEY, v)
    }
    /// Sets Local QPN.
    pub fn set_local_qpn(&mut self, v: u32) {
        set_u24(self.m(), field::LOCAL_QPN, v & 0xFF_FFFF)
    }
    /// Sets Responder Resources.
    pub fn set_responder_resources(&mut self, v: u8) {
        self.m()[field::RESPONDER_RESOURCES] = v;
    }
    /// Sets Local EECN.
    pub fn set_local_eecn(&mut self, v: u32) {
        set_u24(self.m(), field::LOCAL_EECN, v & 0xFF_FFFF)
    }
    /// Sets Initiator Depth.
    pub fn set_initiator_depth(&mut self, v: u8) {
        self.m()[field::INITIATOR_DEPTH] = v;
    }
    /// Sets Remote EECN.
    pub fn set_remote_eecn(&mut self, v: u32) {
        set_u24(self.m(), field::REMOTE_EECN, v & 0xFF_FFFF)
    }
    /// Sets Remote CM Response Timeout, Transport Service Type and End-to-End Flow Control.
    pub fn set_byte43(&mut self, remote_cm_response_timeout: u8, tst: u8, e2e: bool) {
        self.m()[field::BYTE43] =
            (remote_cm_response_timeout & 0x1F) << 3 | (tst & 0x3) << 1 | e2e as u8;
    }
    /// Sets Starting PSN.
    pub fn set_starting_psn(&mut self, v: Psn) {
        set_u24(self.m(), field::STARTING_PSN, v.value())
    }
    /// Sets Local CM Response Timeout and Retry Count.
    pub fn set_byte47(&mut self, local_cm_response_timeout: u8, retry_count: u8) {
        self.m()[field::BYTE47] = (local_cm_response_timeout & 0x1F) << 3 | (retry_count & 0x7);
    }
    /// Sets Partition Key.
    pub fn set_partition_key(&mut self, v: u16) {
        set_u16(self.m(), field::PARTITION_KEY, v)
    }
    /// Sets Path Packet Payload MTU, RDC Exists and RNR Retry Count.
    pub fn set_byte50(&mut self, path_mtu: u8, rdc_exists: bool, rnr_retry_count: u8) {
        self.m()[field::BYTE50] =
            (path_mtu & 0xF) << 4 | (rdc_exists as u8) << 3 | (rnr_retry_count & 0x7);
    }
    /// Sets Max CM Retries, SRQ and Extended Transport Type.
    pub fn set_byte51(&mut self, max_cm_retries: u8, srq: bool, ext: u8) {
        self.m()[field::BYTE51] = (max_cm_retries & 0xF) << 4 | (srq as u8) << 3 | (ext & 0x7);
    }
    /// The primary path, writable.
    pub fn primary_path_mut(&mut self) -> path::Packet<&mut [u8]> {
        path::Packet::new_unchecked(&mut self.m()[field::PRIMARY_PATH])
    }
    /// The alternate path, writable.
    pub fn alternate_path_mut(&mut self) -> path::Packet<&mut [u8]> {
        path::Packet::new_unchecked(&mut self.m()[field::ALTERNATE_PATH])
    }
    /// Sets SAP Supported (the other two low bits of byte 139, reserved, to 0).
    pub fn set_sap_supported(&mut self, v: bool) {
        let b = &mut self.m()[field::SAP_SUPPORTED];
        *b = (*b & 0xF8) | (v as u8) << 2;
    }
    /// Private Data, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.m()[field::PRIVATE_DATA]
    }
    /// Zeroes the reserved bits outside the paths: byte 4, bytes 24–27 and bits 2:0 of the
    /// primary path's last byte.
    pub fn clear_reserved(&mut self) {
        let b = self.m();
        b[field::RESERVED_4] = 0;
        b[field::RESERVED_24].fill(0);
        b[field::PRIMARY_PATH.end - 1] &= 0xF8;
    }
}

/// High-level REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Local Communication ID.
    pub local_comm_id: u32,
    /// Vendor ID (24 bits; ECE, 0 with rxe).
    pub vendor_id: u32,
    /// Service ID (rdma_cm: [`crate::cma::service_id`]).
    pub service_id: u64,
    /// Local CA GUID.
    pub local_ca_guid: u64,
    /// Local Q_Key (0 for RC/UC).
    pub local_qkey: u32,
    /// Local QPN.
    pub local_qpn: u32,
    /// Responder Resources.
    pub responder_resources: u8,
    /// Local EECN.
    pub local_eecn: u32,
    /// Initiator Depth.
    pub initiator_depth: u8,
    /// Remote EECN.
    pub remote_eecn: u32,
    /// Remote CM Response Timeout (5 bits; rdma_cm: 20).
    pub remote_cm_response_timeout: u8,
    /// Transport Service Type ([`service_type`]).
    pub transport_service_type: u8,
    /// End-to-End Flow Control.
    pub end_to_end_flow_control: bool,
    /// Starting PSN: the requester's receive PSN, the responder's first send PSN.
    pub starting_psn: Psn,
    /// Local CM Response Timeout (5 bits; rdma_cm: 20).
    pub local_cm_response_timeout: u8,
    /// Retry Count (3 bits).
    pub retry_count: u8,
    /// Partition Key.
    pub partition_key: u16,
    /// Path Packet Payload MTU (IB MTU enum).
    pub path_mtu: u8,
    /// RDC Exists.
    pub rdc_exists: bool,
    /// RNR Retry Count (3 bits).
    pub rnr_retry_count: u8,
    /// Max CM Retries (4 bits; rdma_cm: 15).
    pub max_cm_retries: u8,
    /// SRQ.
    pub srq: bool,
    /// Extended Transport Type (3 bits).
    pub extended_transport_type: u8,
    /// Primary path.
    pub primary_path: path::Repr,
    /// Alternate path (all zero: none).
    pub alternate_path: path::Repr,
    /// SAP Supported.
    pub sap_supported: bool,
    /// Private Data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Parses a REQ payload.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        let mut private_data = [0u8; PRIVATE_DATA_LEN];
        private_data.copy_from_slice(p.private_data());
        Ok(Repr {
            local_comm_id: p.local_comm_id(),
            vendor_id: p.vendor_id(),
            service_id: p.service_id(),
            local_ca_guid: p.local_ca_guid(),
            local_qkey: p.local_qkey(),
            local_qpn: p.local_qpn(),
            responder_resources: p.responder_resources(),
            local_eecn: p.local_eecn(),
            initiator_depth: p.initiator_depth(),
            remote_eecn: p.remote_eecn(),
            remote_cm_response_timeout: p.remote_cm_response_timeout(),
            transport_service_type: p.transport_service_type(),
            end_to_end_flow_control: p.end_to_end_flow_control(),
            starting_psn: p.starting_psn(),
            local_cm_response_timeout: p.local_cm_response_timeout(),
            retry_count: p.retry_count(),
            partition_key: p.partition_key(),
            path_mtu: p.path_mtu(),
            rdc_exists: p.rdc_exists(),
            rnr_retry_count: p.rnr_retry_count(),
            max_cm_retries: p.max_cm_retries(),
            srq: p.srq(),
            extended_transport_type: p.extended_transport_type(),
            primary_path: path::Repr::parse(&p.primary_path())?,
            alternate_path: path::Repr::parse(&p.alternate_path())?,
            sap_supported: p.sap_supported(),
            private_data,
        })
    }

    /// Always [`super::PAYLOAD_LEN`].
    pub const fn buffer_len(&self) -> usize {
        super::PAYLOAD_LEN
    }

    /// Writes the whole 232-byte payload, reserved bits 0.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_local_comm_id(self.local_comm_id);
        p.set_vendor_id(self.vendor_id);
        p.set_service_id(self.service_id);
        p.set_local_ca_guid(self.local_ca_guid);
        p.set_local_qkey(self.local_qkey);
        p.set_local_qpn(self.local_qpn);
        p.set_responder_resources(self.responder_resources);
        p.set_local_eecn(self.local_eecn);
        p.set_initiator_depth(self.initiator_depth);
        p.set_remote_eecn(self.remote_eecn);
        p.set_byte43(
            self.remote_cm_response_timeout,
            self.transport_service_type,
            self.end_to_end_flow_control,
        );
        p.set_starting_psn(self.starting_psn);
        p.set_byte47(self.local_cm_response_timeout, self.retry_count);
        p.set_partition_key(self.partition_key);
        p.set_byte50(self.path_mtu, self.rdc_exists, self.rnr_retry_count);
        p.set_byte51(self.max_cm_retries, self.srq, self.extended_transport_type);
        self.primary_path.emit(&mut p.primary_path_mut());
        self.alternate_path.emit(&mut p.alternate_path_mut());
        p.set_sap_supported(self.sap_supported);
        p.private_data_mut().copy_from_slice(&self.private_data);
        p.clear_reserved();
    }

    /// The queue pair type the transport fields name: `RC`, `UC`, `RD`, `XRC` or `reserved`.
    pub const fn qp_type_name(&self) -> &'static str {
        match (self.transport_service_type, self.extended_transport_type) {
            (service_type::RC, _) => "RC",
            (service_type::UC, _) => "UC",
            (service_type::RD, _) => "RD",
            (_, EXTENDED_TRANSPORT_XRC) => "XRC",
            _ => "reserved",
        }
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "REQ lcid={:#010x} sid={:#018x} guid={:#018x} {} qpn={:#x} psn={} resp_res={} \
             init_depth={} mtu={} retry={} rnr_retry={} timeouts={}/{} max_cm_retries={} \
             pkey={:#06x}",
            self.local_comm_id,
            self.service_id,
            self.local_ca_guid,
            self.qp_type_name(),
            self.local_qpn,
            self.starting_psn,
            self.responder_resources,
            self.initiator_depth,
            super::mtu_bytes(self.path_mtu),
            self.retry_count,
            self.rnr_retry_count,
            self.remote_cm_response_timeout,
            self.local_cm_response_timeout,
            self.max_cm_retries,
            self.partition_key,
        )?;
        if self.srq {
            write!(f, " SRQ")?;
        }
        if self.end_to_end_flow_control {
            write!(f, " E2E")?;
        }
        if self.local_qkey != 0 {
            write!(f, " qkey={:#x}", self.local_qkey)?;
        }
        if self.vendor_id != 0 {
            write!(f, " vendor={:#08x}", self.vendor_id)?;
        }
        write!(f, " path[{}]", self.primary_path)?;
        if self.alternate_path.is_present() {
            write!(f, " alt[{}]", self.alternate_path)?;
        }
        Ok(())
    }
}
