//! REP, Reply to Request for Communication (IBA Table 110; attribute 0x0013).
//!
//! ```text
//!   0 Local Communication ID (32)      4 Remote Communication ID (32)
//!   8 Local Q_Key (32)
//!  12 Local QPN (24), Vendor ID 23:16 (8)
//!  16 Local EE Context Number (24), Vendor ID 15:8 (8)
//!  20 Starting PSN (24), Vendor ID 7:0 (8)
//!  24 Responder Resources (8)         25 Initiator Depth (8)
//!  26 Target ACK Delay 7:3, Failover Accepted 2:1, End-to-End Flow Control 0
//!  27 RNR Retry Count 7:5, SRQ 4, reserved 3:0
//!  28 Local CA GUID (64)
//!  36 Private Data (196)
//! ```
use crate::field::*;
use crate::{Psn, Result};
use core::fmt;

mod field {
    use crate::field::Field;
    pub const LOCAL_COMM_ID: Field = 0..4;
    pub const REMOTE_COMM_ID: Field = 4..8;
    pub const LOCAL_QKEY: Field = 8..12;
    pub const LOCAL_QPN: Field = 12..15;
    pub const VENDOR_ID_H: usize = 15;
    pub const LOCAL_EECN: Field = 16..19;
    pub const VENDOR_ID_M: usize = 19;
    pub const STARTING_PSN: Field = 20..23;
    pub const VENDOR_ID_L: usize = 23;
    pub const RESPONDER_RESOURCES: usize = 24;
    pub const INITIATOR_DEPTH: usize = 25;
    /// Target ACK Delay 7:3, Failover Accepted 2:1, End-to-End Flow Control 0.
    pub const BYTE26: usize = 26;
    /// RNR Retry Count 7:5, SRQ 4, reserved 3:0.
    pub const BYTE27: usize = 27;
    pub const LOCAL_CA_GUID: Field = 28..36;
    pub const PRIVATE_DATA: Field = 36..232;
}

/// Length of the REP private data.
pub const PRIVATE_DATA_LEN: usize = 196;

crate::field::fixed_view!(super::PAYLOAD_LEN, "CM REP payload");

impl<T: AsRef<[u8]>> Packet<T> {
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    /// Local Communication ID.
    pub fn local_comm_id(&self) -> u32 {
        u32_at(self.b(), field::LOCAL_COMM_ID)
    }
    /// Remote Communication ID.
    pub fn remote_comm_id(&self) -> u32 {
        u32_at(self.b(), field::REMOTE_COMM_ID)
    }
    /// Local Q_Key.
    pub fn local_qkey(&self) -> u32 {
        u32_at(self.b(), field::LOCAL_QKEY)
    }
    /// Local QPN.
    pub fn local_qpn(&self) -> u32 {
        u24_at(self.b(), field::LOCAL_QPN)
    }
    /// Vendor ID (24 bits from bytes 15, 19 and 23; ECE).
    pub fn vendor_id(&self) -> u32 {
        let b = self.b();
        u32::from_be_bytes([
            0,
            b[field::VENDOR_ID_H],
            b[field::VENDOR_ID_M],
            b[field::VENDOR_ID_L],
        ])
    }
    /// Local EE Context Number.
    pub fn local_eecn(&self) -> u32 {
        u24_at(self.b(), field::LOCAL_EECN)
    }
    /// Starting PSN.
    pub fn starting_psn(&self) -> Psn {
        Psn::new(u24_at(self.b(), field::STARTING_PSN))
    }
    /// Responder Resources.
    pub fn responder_resources(&self) -> u8 {
        self.b()[field::RESPONDER_RESOURCES]
    }
    /// Initiator Depth.
    pub fn initiator_depth(&self) -> u8 {
        self.b()[field::INITIATOR_DEPTH]
    }
    /// Target ACK Delay (5 bits).
    pub fn target_ack_delay(&self) -> u8 {
        self.b()[field::BYTE26] >> 3
    }
    /// Failover Accepted (2 bits).
    pub fn failover_accepted(&self) -> u8 {
        (self.b()[field::BYTE26] >> 1) & 0x3
    }
    /// End-to-End Flow Control.
    pub fn end_to_end_flow_control(&self) -> bool {
        self.b()[field::BYTE26] & 0x1 != 0
    }
    /// RNR Retry Count (3 bits).
    pub fn rnr_retry_count(&self) -> u8 {
        self.b()[field::BYTE27] >> 5
    }
    /// SRQ.
    pub fn srq(&self) -> bool {
        self.b()[field::BYTE27] & 0x10 != 0
    }
    /// Local CA GUID.
    pub fn local_ca_guid(&self) -> u64 {
        u64_at(self.b(), field::LOCAL_CA_GUID)
    }
    /// Private Data (196 bytes).
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
    /// Sets Remote Communication ID.
    pub fn set_remote_comm_id(&mut self, v: u32) {
        set_u32(self.m(), field::REMOTE_COMM_ID, v)
    }
    /// Sets Local Q_Key.
    pub fn set_local_qkey(&mut self, v: u32) {
        set_u32(self.m(), field::LOCAL_QKEY, v)
    }
    /// Sets Local QPN.
    pub fn set_local_qpn(&mut self, v: u32) {
        set_u24(self.m(), field::LOCAL_QPN, v & 0xFF_FFFF)
    }
    /// Sets the 24-bit Vendor ID (bytes 15, 19, 23).
    pub fn set_vendor_id(&mut self, v: u32) {
        let [_, h, m, l] = v.to_be_bytes();
        let b = self.m();
        b[field::VENDOR_ID_H] = h;
        b[field::VENDOR_ID_M] = m;
        b[field::VENDOR_ID_L] = l;
    }
    /// Sets Local EE Context Number.
    pub fn set_local_eecn(&mut self, v: u32) {
        set_u24(self.m(), field::LOCAL_EECN, v & 0xFF_FFFF)
    }
    /// Sets Starting PSN.
    pub fn set_starting_psn(&mut self, v: Psn) {
        set_u24(self.m(), field::STARTING_PSN, v.value())
    }
    /// Sets Responder Resources.
    pub fn set_responder_resources(&mut self, v: u8) {
        self.m()[field::RESPONDER_RESOURCES] = v;
    }
    /// Sets Initiator Depth.
    pub fn set_initiator_depth(&mut self, v: u8) {
        self.m()[field::INITIATOR_DEPTH] = v;
    }
    /// Sets Target ACK Delay, Failover Accepted and End-to-End Flow Control.
    pub fn set_byte26(&mut self, target_ack_delay: u8, failover_accepted: u8, e2e: bool) {
        self.m()[field::BYTE26] =
            (target_ack_delay & 0x1F) << 3 | (failover_accepted & 0x3) << 1 | e2e as u8;
    }
    /// Sets RNR Retry Count and SRQ (the four reserved bits 0).
    pub fn set_byte27(&mut self, rnr_retry_count: u8, srq: bool) {
        self.m()[field::BYTE27] = (rnr_retry_count & 0x7) << 5 | (srq as u8) << 4;
    }
    /// Sets Local CA GUID.
    pub fn set_local_ca_guid(&mut self, v: u64) {
        set_u64(self.m(), field::LOCAL_CA_GUID, v)
    }
    /// Private Data, writable.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.m()[field::PRIVATE_DATA]
    }
}

/// High-level REP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Local Communication ID (the responder's).
    pub local_comm_id: u32,
    /// Remote Communication ID (the REQ's Local Communication ID).
    pub remote_comm_id: u32,
    /// Local Q_Key (0 for RC/UC).
    pub local_qkey: u32,
    /// Local QPN (the responder's).
    pub local_qpn: u32,
    /// Vendor ID (24 bits; ECE, 0 with rxe).
    pub vendor_id: u32,
    /// Local EE Context Number (XRC target: the QPN).
    pub local_eecn: u32,
    /// Starting PSN: the responder's receive PSN, the requester's first send PSN.
    pub starting_psn: Psn,
    /// Responder Resources.
    pub responder_resources: u8,
    /// Initiator Depth.
    pub initiator_depth: u8,
    /// Target ACK Delay (5 bits; rxe: 15).
    pub target_ack_delay: u8,
    /// Failover Accepted (2 bits).
    pub failover_accepted: u8,
    /// End-to-End Flow Control.
    pub end_to_end_flow_control: bool,
    /// RNR Retry Count (3 bits).
    pub rnr_retry_count: u8,
    /// SRQ.
    pub srq: bool,
    /// Local CA GUID.
    pub local_ca_guid: u64,
    /// Private Data.
    pub private_data: [u8; PRIVATE_DATA_LEN],
}

impl Repr {
    /// Parses a REP payload.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        let mut private_data = [0u8; PRIVATE_DATA_LEN];
        private_data.copy_from_slice(p.private_data());
        Ok(Repr {
            local_comm_id: p.local_comm_id(),
            remote_comm_id: p.remote_comm_id(),
            local_qkey: p.local_qkey(),
            local_qpn: p.local_qpn(),
            vendor_id: p.vendor_id(),
            local_eecn: p.local_eecn(),
            starting_psn: p.starting_psn(),
            responder_resources: p.responder_resources(),
            initiator_depth: p.initiator_depth(),
            target_ack_delay: p.target_ack_delay(),
            failover_accepted: p.failover_accepted(),
            end_to_end_flow_control: p.end_to_end_flow_control(),
            rnr_retry_count: p.rnr_retry_count(),
            srq: p.srq(),
            local_ca_guid: p.local_ca_guid(),
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
        p.set_local_qkey(self.local_qkey);
        p.set_local_qpn(self.local_qpn);
        p.set_local_eecn(self.local_eecn);
        p.set_starting_psn(self.starting_psn);
        p.set_vendor_id(self.vendor_id);
        p.set_responder_resources(self.responder_resources);
        p.set_initiator_depth(self.initiator_depth);
        p.set_byte26(
            self.target_ack_delay,
            self.failover_accepted,
            self.end_to_end_flow_control,
        );
        p.set_byte27(self.rnr_retry_count, self.srq);
        p.set_local_ca_guid(self.local_ca_guid);
        p.private_data_mut().copy_from_slice(&self.private_data);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "REP lcid={:#010x} rcid={:#010x} guid={:#018x} qpn={:#x} psn={} resp_res={} \
             init_depth={} ack_delay={} rnr_retry={}",
            self.local_comm_id,
            self.remote_comm_id,
            self.local_ca_guid,
            self.local_qpn,
            self.starting_psn,
            self.responder_resources,
            self.initiator_depth,
            self.target_ack_delay,
            self.rnr_retry_count,
        )?;
        if self.srq {
            write!(f, " SRQ")?;
        }
        if self.end_to_end_flow_control {
            write!(f, " E2E")?;
        }
        if self.failover_accepted != 0 {
            write!(f, " failover={}", self.failover_accepted)?;
        }
        if self.local_qkey != 0 {
            write!(f, " qkey={:#x}", self.local_qkey)?;
        }
        if self.local_eecn != 0 {
            write!(f, " eecn={:#x}", self.local_eecn)?;
        }
        if self.vendor_id != 0 {
            write!(f, " vendor={:#08x}", self.vendor_id)?;
        }
        Ok(())
    }
}
