//! IB Communication Manager messages (IBA vol 1 chapter 12) as kernel `ib_cm`/`rdma_cm` send
//! them over RoCEv2: REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ and SIDR_REP.
//!
//! A CM message is the 232-byte data part ([`PAYLOAD_LEN`]) of a 256-byte MAD of class 0x07,
//! class version 2, method Send ([`crate::mad`]); the MAD's AttributeID names the message
//! ([`AttrId`]). Each message has its own module with a zero-copy `Packet` view of the payload
//! (offsets relative to MAD byte 24, as in IBA Tables 106–120 and `ibta_vol1_c12.h`) and a
//! `Repr`. Every field of every message is fixed-size, private data included, so `check_len`
//! asks for the whole 232 bytes.
//!
//! [`Message`] is any of the nine; [`Mad`] is a whole CM MAD (header + message), which is what
//! the GSI QP sends and receives.
//!
//! Reserved bits are not kept: `emit` writes them 0, as IBA requires of senders and as the
//! kernel does, so parse → emit is byte-exact for every MAD whose reserved bits are 0. LAP and
//! APR (attributes 0x0019, 0x001A) are not parsed: the kernel drops LAP on RoCE ports and has
//! no way to send either.
//!
//! RDMA CM's use of these messages (service IDs, the `cma_hdr` at the start of REQ and
//! SIDR_REQ private data) is in [`crate::cma`].
use crate::mad;
use crate::{Error, Result};
use core::fmt;

pub mod drep;
pub mod dreq;
pub mod mra;
pub mod path;
pub mod rej;
pub mod rep;
pub mod req;
pub mod rtu;
pub mod sidr_rep;
pub mod sidr_req;

#[cfg(test)]
mod tests;

pub use rej::RejReason;
pub use sidr_rep::SidrStatus;

/// Length of every CM message: the data part of a MAD.
pub const PAYLOAD_LEN: usize = mad::DATA_LEN;

/// CM attribute IDs (`CM_*_ATTR_ID` of the kernel's `ib_cm.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttrId {
    /// 0x0001 ClassPortInfo.
    ClassPortInfo,
    /// 0x0010 REQ.
    Req,
    /// 0x0011 MRA.
    Mra,
    /// 0x0012 REJ.
    Rej,
    /// 0x0013 REP.
    Rep,
    /// 0x0014 RTU.
    Rtu,
    /// 0x0015 DREQ.
    Dreq,
    /// 0x0016 DREP.
    Drep,
    /// 0x0017 SIDR_REQ.
    SidrReq,
    /// 0x0018 SIDR_REP.
    SidrRep,
    /// 0x0019 LAP (not parsed; dropped on RoCE).
    Lap,
    /// 0x001A APR (not parsed).
    Apr,
    /// Any other value.
    Other(u16),
}

impl AttrId {
    /// From the MAD AttributeID.
    pub const fn from_u16(v: u16) -> AttrId {
        match v {
            0x0001 => AttrId::ClassPortInfo,
            0x0010 => AttrId::Req,
            0x0011 => AttrId::Mra,
            0x0012 => AttrId::Rej,
            0x0013 => AttrId::Rep,
            0x0014 => AttrId::Rtu,
            0x0015 => AttrId::Dreq,
            0x0016 => AttrId::Drep,
            0x0017 => AttrId::SidrReq,
            0x0018 => AttrId::SidrRep,
            0x0019 => AttrId::Lap,
            0x001A => AttrId::Apr,
            v => AttrId::Other(v),
        }
    }
    /// The MAD AttributeID.
    pub const fn to_u16(self) -> u16 {
        match self {
            AttrId::ClassPortInfo => 0x0001,
            AttrId::Req => 0x0010,
            AttrId::Mra => 0x0011,
            AttrId::Rej => 0x0012,
            AttrId::Rep => 0x0013,
            AttrId::Rtu => 0x0014,
            AttrId::Dreq => 0x0015,
            AttrId::Drep => 0x0016,
            AttrId::SidrReq => 0x0017,
            AttrId::SidrRep => 0x0018,
            AttrId::Lap => 0x0019,
            AttrId::Apr => 0x001A,
            AttrId::Other(v) => v,
        }
    }
    /// The spec's name, `None` for other values.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self {
            AttrId::ClassPortInfo => "ClassPortInfo",
            AttrId::Req => "REQ",
            AttrId::Mra => "MRA",
            AttrId::Rej => "REJ",
            AttrId::Rep => "REP",
            AttrId::Rtu => "RTU",
            AttrId::Dreq => "DREQ",
            AttrId::Drep => "DREP",
            AttrId::SidrReq => "SIDR_REQ",
            AttrId::SidrRep => "SIDR_REP",
            AttrId::Lap => "LAP",
            AttrId::Apr => "APR",
            AttrId::Other(_) => return None,
        })
    }
}

impl fmt::Display for AttrId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "attr({:#06x})", self.to_u16()),
        }
    }
}

/// The two-bit "Message MRAed" (MRA) / "Message REJected" (REJ) field (`enum
/// cm_msg_response`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MsgResponse {
    /// 0: REQ.
    Req,
    /// 1: REP.
    Rep,
    /// 2: LAP (MRA), no message / other (REJ).
    Other,
    /// 3: reserved.
    Reserved,
}

impl MsgResponse {
    /// From the two bits.
    pub const fn from_bits(v: u8) -> MsgResponse {
        match v & 3 {
            0 => MsgResponse::Req,
            1 => MsgResponse::Rep,
            2 => MsgResponse::Other,
            _ => MsgResponse::Reserved,
        }
    }
    /// The two bits.
    pub const fn bits(self) -> u8 {
        match self {
            MsgResponse::Req => 0,
            MsgResponse::Rep => 1,
            MsgResponse::Other => 2,
            MsgResponse::Reserved => 3,
        }
    }
    /// As IBA names it in an MRA.
    pub const fn name_mra(self) -> &'static str {
        match self {
            MsgResponse::Req => "REQ",
            MsgResponse::Rep => "REP",
            MsgResponse::Other => "LAP",
            MsgResponse::Reserved => "reserved",
        }
    }
    /// As IBA names it in a REJ.
    pub const fn name_rej(self) -> &'static str {
        match self {
            MsgResponse::Req => "REQ",
            MsgResponse::Rep => "REP",
            MsgResponse::Other => "other",
            MsgResponse::Reserved => "reserved",
        }
    }
}

/// Bytes of an IB MTU enum value (1 = 256 … 5 = 4096), 0 for reserved values.
pub const fn mtu_bytes(mtu: u8) -> u32 {
    match mtu {
        1..=5 => 128 << mtu,
        _ => 0,
    }
}

/// The IB MTU enum value of `bytes` (256 … 4096), `None` for other sizes.
pub const fn mtu_enum(bytes: u32) -> Option<u8> {
    Some(match bytes {
        256 => 1,
        512 => 2,
        1024 => 3,
        2048 => 4,
        4096 => 5,
        _ => return None,
    })
}

/// A GID as an address: IPv4 for IPv4-mapped GIDs (`::ffff:a.b.c.d`, RoCEv2 over IPv4), IPv6
/// otherwise.
pub fn gid_addr(gid: &[u8; 16]) -> core::net::IpAddr {
    let a = core::net::Ipv6Addr::from(*gid);
    match a.to_ipv4_mapped() {
        Some(v4) => core::net::IpAddr::V4(v4),
        None => core::net::IpAddr::V6(a),
    }
}

/// One of the nine CM messages.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message {
    /// REQ.
    Req(req::Repr),
    /// MRA.
    Mra(mra::Repr),
    /// REJ.
    Rej(rej::Repr),
    /// REP.
    Rep(rep::Repr),
    /// RTU.
    Rtu(rtu::Repr),
    /// DREQ.
    Dreq(dreq::Repr),
    /// DREP.
    Drep(drep::Repr),
    /// SIDR_REQ.
    SidrReq(sidr_req::Repr),
    /// SIDR_REP.
    SidrRep(sidr_rep::Repr),
}

impl Message {
    /// Parses the 232-byte payload of a MAD whose AttributeID is `attr_id`.
    /// [`Error::UnknownAttribute`] for attributes other than the nine, [`Error::Truncated`]
    /// when `payload` is shorter than [`PAYLOAD_LEN`].
    pub fn parse(attr_id: u16, payload: &[u8]) -> Result<Message> {
        Ok(match AttrId::from_u16(attr_id) {
            AttrId::Req => Message::Req(req::Repr::parse(&req::Packet::new_checked(payload)?)?),
            AttrId::Mra => Message::Mra(mra::Repr::parse(&mra::Packet::new_checked(payload)?)?),
            AttrId::Rej => Message::Rej(rej::Repr::parse(&rej::Packet::new_checked(payload)?)?),
            AttrId::Rep => Message::Rep(rep::Repr::parse(&rep::Packet::new_checked(payload)?)?),
            AttrId::Rtu => Message::Rtu(rtu::Repr::parse(&rtu::Packet::new_checked(payload)?)?),
            AttrId::Dreq => Message::Dreq(dreq::Repr::parse(&dreq::Packet::new_checked(payload)?)?),
            AttrId::Drep => Message::Drep(drep::Repr::parse(&drep::Packet::new_checked(payload)?)?),
            AttrId::SidrReq => Message::SidrReq(sidr_req::Repr::parse(
                &sidr_req::Packet::new_checked(payload)?,
            )?),
            AttrId::SidrRep => Message::SidrRep(sidr_rep::Repr::parse(
                &sidr_rep::Packet::new_checked(payload)?,
            )?),
            _ => return Err(Error::UnknownAttribute(attr_id)),
        })
    }

    /// The message's attribute.
    pub const fn attr_id(&self) -> AttrId {
        match self {
            Message::Req(_) => AttrId::Req,
            Message::Mra(_) => AttrId::Mra,
            Message::Rej(_) => AttrId::Rej,
            Message::Rep(_) => AttrId::Rep,
            Message::Rtu(_) => AttrId::Rtu,
            Message::Dreq(_) => AttrId::Dreq,
            Message::Drep(_) => AttrId::Drep,
            Message::SidrReq(_) => AttrId::SidrReq,
            Message::SidrRep(_) => AttrId::SidrRep,
        }
    }

    /// `REQ`, `REP`, …, `SIDR_REP`.
    pub const fn name(&self) -> &'static str {
        match self.attr_id().name() {
            Some(n) => n,
            None => "?",
        }
    }

    /// Always [`PAYLOAD_LEN`].
    pub const fn buffer_len(&self) -> usize {
        PAYLOAD_LEN
    }

    /// The Local Communication ID (the Request ID for SIDR messages).
    pub const fn local_comm_id(&self) -> u32 {
        match self {
            Message::Req(r) => r.local_comm_id,
            Message::Mra(r) => r.local_comm_id,
            Message::Rej(r) => r.local_comm_id,
            Message::Rep(r) => r.local_comm_id,
            Message::Rtu(r) => r.local_comm_id,
            Message::Dreq(r) => r.local_comm_id,
            Message::Drep(r) => r.local_comm_id,
            Message::SidrReq(r) => r.request_id,
            Message::SidrRep(r) => r.request_id,
        }
    }

    /// The Remote Communication ID, for the messages that have one (not REQ, SIDR_*).
    pub const fn remote_comm_id(&self) -> Option<u32> {
        match self {
            Message::Mra(r) => Some(r.remote_comm_id),
            Message::Rej(r) => Some(r.remote_comm_id),
            Message::Rep(r) => Some(r.remote_comm_id),
            Message::Rtu(r) => Some(r.remote_comm_id),
            Message::Dreq(r) => Some(r.remote_comm_id),
            Message::Drep(r) => Some(r.remote_comm_id),
            Message::Req(_) | Message::SidrReq(_) | Message::SidrRep(_) => None,
        }
    }

    /// The Service ID of REQ, SIDR_REQ and SIDR_REP.
    pub const fn service_id(&self) -> Option<u64> {
        match self {
            Message::Req(r) => Some(r.service_id),
            Message::SidrReq(r) => Some(r.service_id),
            Message::SidrRep(r) => Some(r.service_id),
            _ => None,
        }
    }

    /// The private data field, whole.
    pub fn private_data(&self) -> &[u8] {
        match self {
            Message::Req(r) => &r.private_data,
            Message::Mra(r) => &r.private_data,
            Message::Rej(r) => &r.private_data,
            Message::Rep(r) => &r.private_data,
            Message::Rtu(r) => &r.private_data,
            Message::Dreq(r) => &r.private_data,
            Message::Drep(r) => &r.private_data,
            Message::SidrReq(r) => &r.private_data,
            Message::SidrRep(r) => &r.private_data,
        }
    }

    /// Writes the 232-byte payload. `payload` must be at least [`PAYLOAD_LEN`] long
    /// ([`Error::Truncated`] otherwise).
    pub fn emit(&self, payload: &mut [u8]) -> Result<()> {
        if payload.len() < PAYLOAD_LEN {
            return Err(Error::Truncated);
        }
        match self {
            Message::Req(r) => r.emit(&mut req::Packet::new_unchecked(payload)),
            Message::Mra(r) => r.emit(&mut mra::Packet::new_unchecked(payload)),
            Message::Rej(r) => r.emit(&mut rej::Packet::new_unchecked(payload)),
            Message::Rep(r) => r.emit(&mut rep::Packet::new_unchecked(payload)),
            Message::Rtu(r) => r.emit(&mut rtu::Packet::new_unchecked(payload)),
            Message::Dreq(r) => r.emit(&mut dreq::Packet::new_unchecked(payload)),
            Message::Drep(r) => r.emit(&mut drep::Packet::new_unchecked(payload)),
            Message::SidrReq(r) => r.emit(&mut sidr_req::Packet::new_unchecked(payload)),
            Message::SidrRep(r) => r.emit(&mut sidr_rep::Packet::new_unchecked(payload)),
        }
        Ok(())
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Message::Req(r) => r.fmt(f),
            Message::Mra(r) => r.fmt(f),
            Message::Rej(r) => r.fmt(f),
            Message::Rep(r) => r.fmt(f),
            Message::Rtu(r) => r.fmt(f),
            Message::Dreq(r) => r.fmt(f),
            Message::Drep(r) => r.fmt(f),
            Message::SidrReq(r) => r.fmt(f),
            Message::SidrRep(r) => r.fmt(f),
        }
    }
}

/// A whole CM MAD: the common header and the message its AttributeID names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mad {
    /// The MAD common header. Its `attr_id` is the message's on parse; [`Mad::emit`] writes
    /// the message's attribute whatever this field holds.
    pub header: mad::Repr,
    /// The message.
    pub message: Message,
}

impl Mad {
    /// A MAD as the kernel CM sends `message` with transaction ID `tid` (base version 1,
    /// class CM, class version 2, method Send, status 0, attribute modifier 0).
    pub const fn new(tid: u64, message: Message) -> Mad {
        Mad {
            header: mad::Repr::cm(message.attr_id().to_u16(), tid),
            message,
        }
    }

    /// Parses a CM MAD. [`Error::Truncated`] below 256 bytes (the kernel CM always sends 256);
    /// [`Error::NotCm`] unless base version 1, class 0x07 and class version 2;
    /// [`Error::UnknownAttribute`] for attributes other than the nine; [`Error::Malformed`]
    /// for an ARI or additional-information length over 72. Bytes past 256 are ignored.
    pub fn parse(bytes: &[u8]) -> Result<Mad> {
        if bytes.len() < mad::MAD_LEN {
            return Err(Error::Truncated);
        }
        let p = mad::Packet::new_checked(bytes)?;
        let header = mad::Repr::parse(&p)?;
        if !header.is_cm() {
            return Err(Error::NotCm);
        }
        let message = Message::parse(header.attr_id, p.data())?;
        Ok(Mad { header, message })
    }

    /// Always [`mad::MAD_LEN`].
    pub const fn buffer_len(&self) -> usize {
        mad::MAD_LEN
    }

    /// Writes the 256-byte MAD. [`Error::Truncated`] if `bytes` is shorter.
    pub fn emit(&self, bytes: &mut [u8]) -> Result<()> {
        if bytes.len() < mad::MAD_LEN {
            return Err(Error::Truncated);
        }
        let mut p = mad::Packet::new_unchecked(&mut bytes[..mad::MAD_LEN]);
        let mut h = self.header;
        h.attr_id = self.message.attr_id().to_u16();
        h.emit(&mut p);
        self.message.emit(p.data_mut())
    }
}

impl fmt::Display for Mad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CM {} tid={:#018x}", self.message, self.header.tid)?;
        if self.header.attr_mod != 0 {
            // ECE options (REQ, REP, SIDR_REP)
            write!(f, " attr_mod={:#x}", self.header.attr_mod)?;
        }
        Ok(())
    }
}
