//! The path information of a REQ (IBA Table 106): 44 bytes, twice — the primary path at REQ
//! byte 52, the alternate path at byte 96.
//!
//! ```text
//!  0-1            | 2-3             | 4-19           | 20-35
//!  Local Port LID | Remote Port LID | Local Port GID | Remote Port GID
//!  36-39                                         | 40            | 41        | 42
//!  Flow Label 31:12, reserved 11:6, Rate 5:0     | Traffic Class | Hop Limit | SL 7:4, Subnet Local 3
//!  43
//!  Local ACK Timeout 7:3 (bits 2:0 reserved; in the alternate path bit 2 is the REQ's SAP Supported)
//! ```
//!
//! On RoCE the kernel sends LIDs 0xFFFF ([`PERMISSIVE_LID`]) in the primary path, GIDs as the
//! RoCEv2 GIDs (IPv4-mapped for IPv4), rate 0, SL from the ToS, subnet local 0, and an all-zero
//! alternate path (an alternate Local Port LID ≠ 0 would make the kernel use it).
use crate::field::*;
use crate::Result;
use core::fmt;

mod field {
    use crate::field::Field;
    pub const LOCAL_PORT_LID: Field = 0..2;
    pub const REMOTE_PORT_LID: Field = 2..4;
    pub const LOCAL_PORT_GID: Field = 4..20;
    pub const REMOTE_PORT_GID: Field = 20..36;
    pub const FLOW_LABEL_RATE: Field = 36..40;
    pub const TRAFFIC_CLASS: usize = 40;
    pub const HOP_LIMIT: usize = 41;
    pub const SL_SUBNET_LOCAL: usize = 42;
    pub const LOCAL_ACK_TIMEOUT: usize = 43;
}

/// Length of one path.
pub const LEN: usize = 44;

/// The permissive LID, which the kernel CM puts in RoCE paths (hop limit > 1).
pub const PERMISSIVE_LID: u16 = 0xFFFF;

crate::field::fixed_view!(LEN, "REQ path");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Local Port LID.
    pub fn local_port_lid(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::LOCAL_PORT_LID)
    }
    /// Remote Port LID.
    pub fn remote_port_lid(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::REMOTE_PORT_LID)
    }
    /// Local Port GID.
    pub fn local_port_gid(&self) -> [u8; 16] {
        gid_at(self.buffer.as_ref(), field::LOCAL_PORT_GID)
    }
    /// Remote Port GID.
    pub fn remote_port_gid(&self) -> [u8; 16] {
        gid_at(self.buffer.as_ref(), field::REMOTE_PORT_GID)
    }
    /// Flow Label (20 bits).
    pub fn flow_label(&self) -> u32 {
        u32_at(self.buffer.as_ref(), field::FLOW_LABEL_RATE) >> 12
    }
    /// Packet Rate (6 bits; 0 = port current rate).
    pub fn packet_rate(&self) -> u8 {
        (u32_at(self.buffer.as_ref(), field::FLOW_LABEL_RATE) & 0x3F) as u8
    }
    /// Traffic Class.
    pub fn traffic_class(&self) -> u8 {
        self.buffer.as_ref()[field::TRAFFIC_CLASS]
    }
    /// Hop Limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    /// SL (4 bits).
    pub fn sl(&self) -> u8 {
        self.buffer.as_ref()[field::SL_SUBNET_LOCAL] >> 4
    }
    /// Subnet Local.
    pub fn subnet_local(&self) -> bool {
        self.buffer.as_ref()[field::SL_SUBNET_LOCAL] & 0x08 != 0
    }
    /// Local ACK Timeout (5 bits).
    pub fn local_ack_timeout(&self) -> u8 {
        self.buffer.as_ref()[field::LOCAL_ACK_TIMEOUT] >> 3
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets Local Port LID.
    pub fn set_local_port_lid(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LOCAL_PORT_LID, v)
    }
    /// Sets Remote Port LID.
    pub fn set_remote_port_lid(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::REMOTE_PORT_LID, v)
    }
    /// Sets Local Port GID.
    pub fn set_local_port_gid(&mut self, g: &[u8; 16]) {
        self.buffer.as_mut()[field::LOCAL_PORT_GID].copy_from_slice(g)
    }
    /// Sets Remote Port GID.
    pub fn set_remote_port_gid(&mut self, g: &[u8; 16]) {
        self.buffer.as_mut()[field::REMOTE_PORT_GID].copy_from_slice(g)
    }
    /// Sets Flow Label and Packet Rate (the six reserved bits between them 0).
    pub fn set_flow_label_rate(&mut self, flow_label: u32, rate: u8) {
        let w = (flow_label & 0xF_FFFF) << 12 | (rate & 0x3F) as u32;
        set_u32(self.buffer.as_mut(), field::FLOW_LABEL_RATE, w)
    }
    /// Sets Traffic Class.
    pub fn set_traffic_class(&mut self, v: u8) {
        self.buffer.as_mut()[field::TRAFFIC_CLASS] = v;
    }
    /// Sets Hop Limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }
    /// Sets SL and Subnet Local (the three reserved bits 0).
    pub fn set_sl_subnet_local(&mut self, sl: u8, subnet_local: bool) {
        self.buffer.as_mut()[field::SL_SUBNET_LOCAL] = (sl & 0xF) << 4 | (subnet_local as u8) << 3;
    }
    /// Sets Local ACK Timeout, keeping bits 2:0 of its byte (the REQ owns bit 2 of the
    /// alternate path's).
    pub fn set_local_ack_timeout(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::LOCAL_ACK_TIMEOUT];
        *b = (v & 0x1F) << 3 | (*b & 0x07);
    }
}

fn gid_at(b: &[u8], f: Field) -> [u8; 16] {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[f]);
    g
}

/// One path of a REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Local Port LID (RoCE: 0xFFFF in the primary path).
    pub local_port_lid: u16,
    /// Remote Port LID (RoCE: 0xFFFF in the primary path).
    pub remote_port_lid: u16,
    /// Local Port GID: the requester's (IPv4-mapped for IPv4).
    pub local_port_gid: [u8; 16],
    /// Remote Port GID: the responder's.
    pub remote_port_gid: [u8; 16],
    /// Flow Label (20 bits); rdma_cm: `(src_port * 31 + dst_port) & 0xFFFFF` of its ports.
    pub flow_label: u32,
    /// Packet Rate (6 bits).
    pub packet_rate: u8,
    /// Traffic Class.
    pub traffic_class: u8,
    /// Hop Limit.
    pub hop_limit: u8,
    /// SL (4 bits).
    pub sl: u8,
    /// Subnet Local.
    pub subnet_local: bool,
    /// Local ACK Timeout (5 bits; 19 from kernel rdma_cm on rxe).
    pub local_ack_timeout: u8,
}

impl Repr {
    /// Parses one path.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            local_port_lid: p.local_port_lid(),
            remote_port_lid: p.remote_port_lid(),
            local_port_gid: p.local_port_gid(),
            remote_port_gid: p.remote_port_gid(),
            flow_label: p.flow_label(),
            packet_rate: p.packet_rate(),
            traffic_class: p.traffic_class(),
            hop_limit: p.hop_limit(),
            sl: p.sl(),
            subnet_local: p.subnet_local(),
            local_ack_timeout: p.local_ack_timeout(),
        })
    }

    /// Always [`LEN`].
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the path (reserved bits 0; bits 2:0 of byte 43 kept).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_local_port_lid(self.local_port_lid);
        p.set_remote_port_lid(self.remote_port_lid);
        p.set_local_port_gid(&self.local_port_gid);
        p.set_remote_port_gid(&self.remote_port_gid);
        p.set_flow_label_rate(self.flow_label, self.packet_rate);
        p.set_traffic_class(self.traffic_class);
        p.set_hop_limit(self.hop_limit);
        p.set_sl_subnet_local(self.sl, self.subnet_local);
        p.set_local_ack_timeout(self.local_ack_timeout);
    }

    /// True when the kernel would take this as a path (Local Port LID ≠ 0); an all-zero
    /// alternate path means "none".
    pub const fn is_present(&self) -> bool {
        self.local_port_lid != 0
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} → {} lid {:#06x}→{:#06x} fl={:#07x} rate={} tc={} hl={} sl={}{} ack_timeout={}",
            super::gid_addr(&self.local_port_gid),
            super::gid_addr(&self.remote_port_gid),
            self.local_port_lid,
            self.remote_port_lid,
            self.flow_label,
            self.packet_rate,
            self.traffic_class,
            self.hop_limit,
            self.sl,
            if self.subnet_local {
                " subnet-local"
            } else {
                ""
            },
            self.local_ack_timeout
        )
    }
}
