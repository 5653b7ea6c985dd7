//! The 256-entry opcode table that drives header layout and transport checks.
//!
//! Modelled on the kernel's `rxe_opcode.c`: each entry says which extension headers follow the
//! BTH (so offsets are computed from the table, never by hand) and what the opcode means
//! (request or response, send/write/read/atomic, first/middle/last/only, whether it consumes a
//! receive WQE or produces a responder completion). Opcodes of transports this implementation
//! does not speak (RD, XRC, and ConnectX DC, which reuses the RD opcode space) are *known but
//! unsupported*: they decode with a name and a header layout rather than as garbage.
use core::fmt;

/// A BTH opcode.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Opcode(pub u8);

/// Transport service, from bits 7:5 of the opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable Connected (0x00–0x1F).
    Rc,
    /// Unreliable Connected (0x20–0x3F).
    Uc,
    /// Reliable Datagram (0x40–0x5F); ConnectX DC reuses this space on RoCE (see
    /// [`Opcode::is_roce_dc`]).
    Rd,
    /// Unreliable Datagram (0x60–0x7F).
    Ud,
    /// Congestion Notification (0x80–0x9F); only 0x81 is defined.
    Cnp,
    /// Extended Reliable Connected (0xA0–0xBF).
    Xrc,
    /// Reserved (0xC0–0xDF).
    Reserved,
    /// Manufacturer-specific (0xE0–0xFF).
    Manufacturer,
}

impl Transport {
    /// The transport of an opcode.
    pub const fn of(op: u8) -> Transport {
        match op >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            4 => Transport::Cnp,
            5 => Transport::Xrc,
            6 => Transport::Reserved,
            _ => Transport::Manufacturer,
        }
    }

    /// Short name as Wireshark prints it.
    pub const fn name(self) -> &'static str {
        match self {
            Transport::Rc => "RC",
            Transport::Uc => "UC",
            Transport::Rd => "RD",
            Transport::Ud => "UD",
            Transport::Cnp => "CNP",
            Transport::Xrc => "XRC",
            Transport::Reserved => "RSVD",
            Transport::Manufacturer => "MFR",
        }
    }
}

/// Whether this implementation speaks an opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Support {
    /// RC, UC, UD and CNP opcodes: parsed, emitted, executed.
    Supported,
    /// RD / DC / XRC opcodes: decoded (name and headers) but never executed.
    KnownUnsupported,
    /// Reserved or undefined.
    Unknown,
}

/// Header-presence and semantic flags of an opcode (like rxe's `RXE_*_MASK`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OpFlags(pub u32);

impl OpFlags {
    /// RDETH follows the BTH (RD/DC).
    pub const RDETH: OpFlags = OpFlags(1 << 0);
    /// DETH follows (UD, RD requests).
    pub const DETH: OpFlags = OpFlags(1 << 1);
    /// XRCETH follows (XRC requests).
    pub const XRCETH: OpFlags = OpFlags(1 << 2);
    /// RETH follows.
    pub const RETH: OpFlags = OpFlags(1 << 3);
    /// AtomicETH follows.
    pub const ATMETH: OpFlags = OpFlags(1 << 4);
    /// FETH (FLUSH extended header) follows.
    pub const FETH: OpFlags = OpFlags(1 << 5);
    /// AETH follows.
    pub const AETH: OpFlags = OpFlags(1 << 6);
    /// AtomicAckETH follows.
    pub const ATMACK: OpFlags = OpFlags(1 << 7);
    /// ImmDt follows.
    pub const IMMDT: OpFlags = OpFlags(1 << 8);
    /// IETH follows.
    pub const IETH: OpFlags = OpFlags(1 << 9);
    /// The packet carries payload.
    pub const PAYLOAD: OpFlags = OpFlags(1 << 10);
    /// Request (goes to the responder).
    pub const REQ: OpFlags = OpFlags(1 << 11);
    /// Response (goes to the completer).
    pub const ACK: OpFlags = OpFlags(1 << 12);
    /// A SEND.
    pub const SEND: OpFlags = OpFlags(1 << 13);
    /// An RDMA WRITE.
    pub const WRITE: OpFlags = OpFlags(1 << 14);
    /// An RDMA READ (request or response).
    pub const READ: OpFlags = OpFlags(1 << 15);
    /// An atomic (CMP_SWAP / FETCH_ADD).
    pub const ATOMIC: OpFlags = OpFlags(1 << 16);
    /// Consumes a receive WQE.
    pub const RWR: OpFlags = OpFlags(1 << 17);
    /// Generates a responder completion.
    pub const COMP: OpFlags = OpFlags(1 << 18);
    /// First packet of a message.
    pub const START: OpFlags = OpFlags(1 << 19);
    /// Middle packet of a message.
    pub const MIDDLE: OpFlags = OpFlags(1 << 20);
    /// Last packet of a message.
    pub const END: OpFlags = OpFlags(1 << 21);
    /// FLUSH request.
    pub const FLUSH: OpFlags = OpFlags(1 << 22);
    /// ATOMIC WRITE request.
    pub const ATOMIC_WRITE: OpFlags = OpFlags(1 << 23);
    /// CNP (16 reserved bytes after the BTH).
    pub const CNP: OpFlags = OpFlags(1 << 24);
    /// An ordinary (non-atomic) ACKNOWLEDGE.
    pub const ACKNOWLEDGE: OpFlags = OpFlags(1 << 25);

    const fn or(self, o: OpFlags) -> OpFlags {
        OpFlags(self.0 | o.0)
    }

    /// True when every bit of `o` is set.
    #[inline]
    pub const fn contains(self, o: OpFlags) -> bool {
        self.0 & o.0 == o.0
    }

    /// True when any bit of `o` is set.
    #[inline]
    pub const fn intersects(self, o: OpFlags) -> bool {
        self.0 & o.0 != 0
    }
}

impl core::ops::BitOr for OpFlags {
    type Output = OpFlags;
    fn bitor(self, o: OpFlags) -> OpFlags {
        self.or(o)
    }
}

impl fmt::Debug for OpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpFlags({:#x})", self.0)
    }
}

/// Sizes of the headers, in bytes.
pub mod hdr_len {
    /// Base Transport Header.
    pub const BTH: usize = 12;
    /// Reliable Datagram ETH.
    pub const RDETH: usize = 4;
    /// Datagram ETH.
    pub const DETH: usize = 8;
    /// XRC ETH.
    pub const XRCETH: usize = 4;
    /// RDMA ETH.
    pub const RETH: usize = 16;
    /// Atomic ETH (packed: 28, not 32).
    pub const ATMETH: usize = 28;
    /// FLUSH ETH.
    pub const FETH: usize = 4;
    /// ACK ETH.
    pub const AETH: usize = 4;
    /// Atomic ACK ETH.
    pub const ATMACK: usize = 8;
    /// Immediate data.
    pub const IMMDT: usize = 4;
    /// Invalidate ETH.
    pub const IETH: usize = 4;
    /// CNP reserved area.
    pub const CNP_PAD: usize = 16;
}

/// Everything the table knows about one opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpInfo {
    /// Operation name without transport, e.g. `SEND_FIRST` (empty for undefined opcodes).
    pub name: &'static str,
    /// Transport service.
    pub transport: Transport,
    /// Header-presence and semantic flags.
    pub flags: OpFlags,
    /// Length of BTH plus all extension headers (the payload offset).
    pub hdr_len: u8,
    /// Whether we speak it.
    pub support: Support,
}

/// Byte offsets of each extension header within the transport packet (from the start of BTH).
/// `None` when the header is absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[allow(missing_docs)]
pub struct Offsets {
    pub rdeth: Option<usize>,
    pub deth: Option<usize>,
    pub xrceth: Option<usize>,
    pub feth: Option<usize>,
    pub reth: Option<usize>,
    pub atmeth: Option<usize>,
    pub aeth: Option<usize>,
    pub atmack: Option<usize>,
    pub immdt: Option<usize>,
    pub ieth: Option<usize>,
    pub payload: usize,
}

impl OpInfo {
    /// True when the table defines this opcode (supported or not).
    pub const fn is_known(&self) -> bool {
        !matches!(self.support, Support::Unknown)
    }

    /// Header offsets, in the order the IBA fixes them: RDETH, DETH, XRCETH, FETH, RETH or
    /// AtomicETH, AETH, AtomicAckETH, ImmDt, IETH, then payload.
    pub const fn offsets(&self) -> Offsets {
        let f = self.flags;
        let mut o = Offsets {
            rdeth: None,
            deth: None,
            xrceth: None,
            feth: None,
            reth: None,
            atmeth: None,
            aeth: None,
            atmack: None,
            immdt: None,
            ieth: None,
            payload: 0,
        };
        let mut at = hdr_len::BTH;
        if f.contains(OpFlags::RDETH) {
            o.rdeth = Some(at);
            at += hdr_len::RDETH;
        }
        if f.contains(OpFlags::DETH) {
            o.deth = Some(at);
            at += hdr_len::DETH;
        }
        if f.contains(OpFlags::XRCETH) {
            o.xrceth = Some(at);
            at += hdr_len::XRCETH;
        }
        if f.contains(OpFlags::FETH) {
            o.feth = Some(at);
            at += hdr_len::FETH;
        }
        if f.contains(OpFlags::RETH) {
            o.reth = Some(at);
            at += hdr_len::RETH;
        }
        if f.contains(OpFlags::ATMETH) {
            o.atmeth = Some(at);
            at += hdr_len::ATMETH;
        }
        if f.contains(OpFlags::AETH) {
            o.aeth = Some(at);
            at += hdr_len::AETH;
        }
        if f.contains(OpFlags::ATMACK) {
            o.atmack = Some(at);
            at += hdr_len::ATMACK;
        }
        if f.contains(OpFlags::IMMDT) {
            o.immdt = Some(at);
            at += hdr_len::IMMDT;
        }
        if f.contains(OpFlags::IETH) {
            o.ieth = Some(at);
            at += hdr_len::IETH;
        }
        if f.contains(OpFlags::CNP) {
            at += hdr_len::CNP_PAD;
        }
        o.payload = at;
        o
    }
}

const fn hdr_total(flags: OpFlags) -> u8 {
    let info = OpInfo {
        name: "",
        transport: Transport::Rc,
        flags,
        hdr_len: 0,
        support: Support::Unknown,
    };
    info.offsets().payload as u8
}

const UNDEFINED: OpInfo = OpInfo {
    name: "",
    transport: Transport::Reserved,
    flags: OpFlags(0),
    hdr_len: hdr_len::BTH as u8,
    support: Support::Unknown,
};

/// Length of the vendor extension ConnectX DC puts after the BTH (Wireshark folds it into a
/// 20-byte BTH); see [`Opcode::is_roce_dc`].
pub const DC_BTH_EXT_LEN: usize = 8;

/// The RC operation set (low five bits), shared by UC, RD and XRC.
const fn rc_op(low: u8) -> Option<(&'static str, OpFlags)> {
    use OpFlags as F;
    const S: OpFlags = OpFlags(F::REQ.0 | F::SEND.0 | F::PAYLOAD.0);
    const W: OpFlags = OpFlags(F::REQ.0 | F::WRITE.0 | F::PAYLOAD.0);
    const RR: OpFlags = OpFlags(F::ACK.0 | F::READ.0 | F::PAYLOAD.0);
    const SE: OpFlags = OpFlags(F::START.0 | F::END.0);
    Some(match low {
        0x00 => ("SEND_FIRST", S.or(F::RWR).or(F::START)),
        0x01 => ("SEND_MIDDLE", S.or(F::MIDDLE)),
        0x02 => ("SEND_LAST", S.or(F::COMP).or(F::END)),
        0x03 => (
            "SEND_LAST_WITH_IMMEDIATE",
            S.or(F::IMMDT).or(F::COMP).or(F::END),
        ),
        0x04 => ("SEND_ONLY", S.or(F::COMP).or(F::RWR).or(SE)),
        0x05 => (
            "SEND_ONLY_WITH_IMMEDIATE",
            S.or(F::IMMDT).or(F::COMP).or(F::RWR).or(SE),
        ),
        0x06 => ("RDMA_WRITE_FIRST", W.or(F::RETH).or(F::START)),
        0x07 => ("RDMA_WRITE_MIDDLE", W.or(F::MIDDLE)),
        0x08 => ("RDMA_WRITE_LAST", W.or(F::END)),
        0x09 => (
            "RDMA_WRITE_LAST_WITH_IMMEDIATE",
            W.or(F::IMMDT).or(F::COMP).or(F::RWR).or(F::END),
        ),
        0x0A => ("RDMA_WRITE_ONLY", W.or(F::RETH).or(SE)),
        0x0B => (
            "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
            W.or(F::RETH).or(F::IMMDT).or(F::COMP).or(F::RWR).or(SE),
        ),
        0x0C => ("RDMA_READ_REQUEST", F::REQ.or(F::READ).or(F::RETH).or(SE)),
        0x0D => ("RDMA_READ_RESPONSE_FIRST", RR.or(F::AETH).or(F::START)),
        0x0E => ("RDMA_READ_RESPONSE_MIDDLE", RR.or(F::MIDDLE)),
        0x0F => ("RDMA_READ_RESPONSE_LAST", RR.or(F::AETH).or(F::END)),
        0x10 => ("RDMA_READ_RESPONSE_ONLY", RR.or(F::AETH).or(SE)),
        0x11 => ("ACKNOWLEDGE", F::ACK.or(F::AETH).or(F::ACKNOWLEDGE).or(SE)),
        0x12 => (
            "ATOMIC_ACKNOWLEDGE",
            F::ACK.or(F::AETH).or(F::ATMACK).or(F::ATOMIC).or(SE),
        ),
        0x13 => ("COMPARE_SWAP", F::REQ.or(F::ATOMIC).or(F::ATMETH).or(SE)),
        0x14 => ("FETCH_ADD", F::REQ.or(F::ATOMIC).or(F::ATMETH).or(SE)),
        0x16 => (
            "SEND_LAST_WITH_INVALIDATE",
            S.or(F::IETH).or(F::COMP).or(F::END),
        ),
        0x17 => (
            "SEND_ONLY_WITH_INVALIDATE",
            S.or(F::IETH).or(F::COMP).or(F::RWR).or(SE),
        ),
        0x1C => ("FLUSH", F::REQ.or(F::FLUSH).or(F::FETH).or(F::RETH).or(SE)),
        0x1D => (
            "ATOMIC_WRITE",
            F::REQ.or(F::ATOMIC_WRITE).or(F::RETH).or(F::PAYLOAD).or(SE),
        ),
        _ => return None,
    })
}

const fn build_entry(op: u8) -> OpInfo {
    let transport = Transport::of(op);
    let low = op & 0x1F;
    let (name, flags, support) = match transport {
        Transport::Rc => match rc_op(low) {
            Some((n, f)) => (n, f, Support::Supported),
            None => return UNDEFINED,
        },
        Transport::Uc => match low {
            0x00..=0x0B => match rc_op(low) {
                Some((n, f)) => (n, f, Support::Supported),
                None => return UNDEFINED,
            },
            _ => return UNDEFINED,
        },
        Transport::Ud => match low {
            0x04 => match rc_op(low) {
                Some((n, f)) => (n, f.or(OpFlags::DETH), Support::Supported),
                None => return UNDEFINED,
            },
            0x05 => match rc_op(low) {
                Some((n, f)) => (n, f.or(OpFlags::DETH), Support::Supported),
                None => return UNDEFINED,
            },
            _ => return UNDEFINED,
        },
        Transport::Cnp => match low {
            0x01 => ("CNP", OpFlags::CNP, Support::Supported),
            _ => return UNDEFINED,
        },
        Transport::Rd => match low {
            // RD: RDETH on every packet, DETH on requests; no invalidate, flush or atomic write.
            0x00..=0x14 => match rc_op(low) {
                Some((n, f)) => {
                    let f = if f.contains(OpFlags::REQ) {
                        f.or(OpFlags::RDETH).or(OpFlags::DETH)
                    } else {
                        f.or(OpFlags::RDETH)
                    };
                    (n, f, Support::KnownUnsupported)
                }
                None => return UNDEFINED,
            },
            0x15 => (
                "RESYNC",
                OpFlags::REQ
                    .or(OpFlags::RDETH)
                    .or(OpFlags::DETH)
                    .or(OpFlags::START)
                    .or(OpFlags::END),
                Support::KnownUnsupported,
            ),
            _ => return UNDEFINED,
        },
        Transport::Xrc => match low {
            // XRC: XRCETH on requests; responses look like RC's.
            0x00..=0x17 => match rc_op(low) {
                Some((n, f)) => {
                    let f = if f.contains(OpFlags::REQ) {
                        f.or(OpFlags::XRCETH)
                    } else {
                        f
                    };
                    (n, f, Support::KnownUnsupported)
                }
                None => return UNDEFINED,
            },
            _ => return UNDEFINED,
        },
        Transport::Reserved | Transport::Manufacturer => {
            return OpInfo {
                transport,
                ..UNDEFINED
            };
        }
    };
    OpInfo {
        name,
        transport,
        flags,
        hdr_len: hdr_total(flags),
        support,
    }
}

const fn build_table() -> [OpInfo; 256] {
    let mut t = [UNDEFINED; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = build_entry(i as u8);
        if matches!(t[i].support, Support::Unknown) {
            t[i].transport = Transport::of(i as u8);
        }
        i += 1;
    }
    t
}

/// The opcode table, indexed by the BTH opcode byte.
pub static OPCODE_TABLE: [OpInfo; 256] = build_table();

const fn build_offsets() -> [Offsets; 256] {
    let mut t = [Offsets {
        rdeth: None,
        deth: None,
        xrceth: None,
        feth: None,
        reth: None,
        atmeth: None,
        aeth: None,
        atmack: None,
        immdt: None,
        ieth: None,
        payload: hdr_len::BTH,
    }; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = OPCODE_TABLE[i].offsets();
        i += 1;
    }
    t
}

/// Header offsets of every opcode, precomputed from [`OPCODE_TABLE`].
pub static OFFSETS_TABLE: [Offsets; 256] = build_offsets();

/// Header offsets of `op` (a table lookup).
#[inline]
pub fn offsets_of(op: Opcode) -> &'static Offsets {
    &OFFSETS_TABLE[op.0 as usize]
}

#[allow(missing_docs)]
impl Opcode {
    pub const RC_SEND_FIRST: Opcode = Opcode(0x00);
    pub const RC_SEND_MIDDLE: Opcode = Opcode(0x01);
    pub const RC_SEND_LAST: Opcode = Opcode(0x02);
    pub const RC_SEND_LAST_WITH_IMMEDIATE: Opcode = Opcode(0x03);
    pub const RC_SEND_ONLY: Opcode = Opcode(0x04);
    pub const RC_SEND_ONLY_WITH_IMMEDIATE: Opcode = Opcode(0x05);
    pub const RC_RDMA_WRITE_FIRST: Opcode = Opcode(0x06);
    pub const RC_RDMA_WRITE_MIDDLE: Opcode = Opcode(0x07);
    pub const RC_RDMA_WRITE_LAST: Opcode = Opcode(0x08);
    pub const RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: Opcode = Opcode(0x09);
    pub const RC_RDMA_WRITE_ONLY: Opcode = Opcode(0x0A);
    pub const RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: Opcode = Opcode(0x0B);
    pub const RC_RDMA_READ_REQUEST: Opcode = Opcode(0x0C);
    pub const RC_RDMA_READ_RESPONSE_FIRST: Opcode = Opcode(0x0D);
    pub const RC_RDMA_READ_RESPONSE_MIDDLE: Opcode = Opcode(0x0E);
    pub const RC_RDMA_READ_RESPONSE_LAST: Opcode = Opcode(0x0F);
    pub const RC_RDMA_READ_RESPONSE_ONLY: Opcode = Opcode(0x10);
    pub const RC_ACKNOWLEDGE: Opcode = Opcode(0x11);
    pub const RC_ATOMIC_ACKNOWLEDGE: Opcode = Opcode(0x12);
    pub const RC_COMPARE_SWAP: Opcode = Opcode(0x13);
    pub const RC_FETCH_ADD: Opcode = Opcode(0x14);
    pub const RC_SEND_LAST_WITH_INVALIDATE: Opcode = Opcode(0x16);
    pub const RC_SEND_ONLY_WITH_INVALIDATE: Opcode = Opcode(0x17);
    pub const RC_FLUSH: Opcode = Opcode(0x1C);
    pub const RC_ATOMIC_WRITE: Opcode = Opcode(0x1D);
    pub const UC_SEND_FIRST: Opcode = Opcode(0x20);
    pub const UC_SEND_MIDDLE: Opcode = Opcode(0x21);
    pub const UC_SEND_LAST: Opcode = Opcode(0x22);
    pub const UC_SEND_LAST_WITH_IMMEDIATE: Opcode = Opcode(0x23);
    pub const UC_SEND_ONLY: Opcode = Opcode(0x24);
    pub const UC_SEND_ONLY_WITH_IMMEDIATE: Opcode = Opcode(0x25);
    pub const UC_RDMA_WRITE_FIRST: Opcode = Opcode(0x26);
    pub const UC_RDMA_WRITE_MIDDLE: Opcode = Opcode(0x27);
    pub const UC_RDMA_WRITE_LAST: Opcode = Opcode(0x28);
    pub const UC_RDMA_WRITE_LAST_WITH_IMMEDIATE: Opcode = Opcode(0x29);
    pub const UC_RDMA_WRITE_ONLY: Opcode = Opcode(0x2A);
    pub const UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: Opcode = Opcode(0x2B);
    pub const UD_SEND_ONLY: Opcode = Opcode(0x64);
    pub const UD_SEND_ONLY_WITH_IMMEDIATE: Opcode = Opcode(0x65);
    pub const CNP: Opcode = Opcode(0x81);
}

impl Opcode {
    /// The table entry.
    #[inline]
    pub fn info(self) -> &'static OpInfo {
        &OPCODE_TABLE[self.0 as usize]
    }

    /// Transport service of this opcode.
    #[inline]
    pub fn transport(self) -> Transport {
        Transport::of(self.0)
    }

    /// Flags of this opcode.
    #[inline]
    pub fn flags(self) -> OpFlags {
        self.info().flags
    }

    /// Shorthand: `self.flags().contains(f)`.
    #[inline]
    pub fn has(self, f: OpFlags) -> bool {
        self.info().flags.contains(f)
    }

    /// Whether, on RoCE, this opcode is ConnectX Dynamically Connected (DC) traffic rather than
    /// Reliable Datagram.
    ///
    /// No RoCE device speaks RD (kernel rxe does not), while ConnectX sends DC in the RD opcode
    /// space with a vendor layout: the 12-byte BTH is followed by [`DC_BTH_EXT_LEN`] vendor
    /// bytes (Wireshark shows a 20-byte BTH for every 0x40–0x5F opcode), and what follows is
    /// not the IBA RD layout this table gives (real ConnectX captures put a DC ACK's AETH 16
    /// bytes after that extension, not 4). Decoders show only the BTH of these opcodes; the
    /// table keeps the IBA RD layout for RD proper.
    #[inline]
    pub fn is_roce_dc(self) -> bool {
        self.transport() == Transport::Rd
    }

    /// Builds the opcode for operation `low` (the RC value, 0x00–0x1F) of `transport`.
    pub const fn with_transport(transport: Transport, low: u8) -> Opcode {
        let base = match transport {
            Transport::Rc => 0x00,
            Transport::Uc => 0x20,
            Transport::Rd => 0x40,
            Transport::Ud => 0x60,
            Transport::Cnp => 0x80,
            Transport::Xrc => 0xA0,
            Transport::Reserved => 0xC0,
            Transport::Manufacturer => 0xE0,
        };
        Opcode(base | (low & 0x1F))
    }
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Opcode({:#04x} {})", self.0, self)
    }
}

impl fmt::Display for Opcode {
    /// `RC SEND_ONLY`, `UD SEND_ONLY_WITH_IMMEDIATE`, `CNP`, or `RC unknown(0x15)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = self.info();
        if info.transport == Transport::Cnp && info.is_known() {
            return write!(f, "CNP");
        }
        if info.is_known() {
            write!(f, "{} {}", info.transport.name(), info.name)
        } else {
            write!(f, "{} unknown({:#04x})", info.transport.name(), self.0)
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn rc_lengths_match_rxe() {
        // hdr len column of rxe_opcode.c
        let expect: &[(u8, u8)] = &[
            (0x00, 12),
            (0x01, 12),
            (0x02, 12),
            (0x03, 16),
            (0x04, 12),
            (0x05, 16),
            (0x06, 28),
            (0x07, 12),
            (0x08, 12),
            (0x09, 16),
            (0x0A, 28),
            (0x0B, 32),
            (0x0C, 28),
            (0x0D, 16),
            (0x0E, 12),
            (0x0F, 16),
            (0x10, 16),
            (0x11, 16),
            (0x12, 24),
            (0x13, 40),
            (0x14, 40),
            (0x16, 16),
            (0x17, 16),
            (0x1C, 32),
            (0x1D, 28),
        ];
        for &(op, len) in expect {
            let i = Opcode(op).info();
            assert_eq!(i.hdr_len, len, "{}", Opcode(op));
            assert_eq!(i.support, Support::Supported);
            // UC mirrors RC for 0x00..=0x0B
            if op <= 0x0B {
                let u = Opcode(op + 0x20).info();
                assert_eq!((u.hdr_len, u.flags, u.name), (len, i.flags, i.name));
            }
        }
        assert_eq!(Opcode::UD_SEND_ONLY.info().hdr_len, 20);
        assert_eq!(Opcode::UD_SEND_ONLY_WITH_IMMEDIATE.info().hdr_len, 24);
        assert_eq!(Opcode::CNP.info().hdr_len, 28);
    }

    #[test]
    fn every_entry_is_consistent() {
        let mut known = 0;
        for op in 0..=255u8 {
            let i = Opcode(op).info();
            assert_eq!(i.transport, Transport::of(op));
            assert_eq!(i.offsets().payload, i.hdr_len as usize);
            if i.is_known() {
                known += 1;
                assert!(!i.name.is_empty());
                let f = i.flags;
                // exactly one of REQ/ACK, except CNP which is neither
                if i.transport != Transport::Cnp {
                    assert!(
                        f.contains(OpFlags::REQ) ^ f.contains(OpFlags::ACK),
                        "{}",
                        Opcode(op)
                    );
                    assert!(f.intersects(OpFlags::START | OpFlags::MIDDLE | OpFlags::END));
                }
                if f.contains(OpFlags::RWR) {
                    assert!(f.contains(OpFlags::REQ));
                }
            } else {
                assert!(i.name.is_empty());
            }
        }
        // RC 25 + UC 12 + UD 2 + CNP 1 + RD 22 + XRC 23
        assert_eq!(known, 25 + 12 + 2 + 1 + 22 + 23);
    }

    #[test]
    fn unsupported_transports_are_known() {
        assert_eq!(Opcode(0x4A).info().support, Support::KnownUnsupported);
        assert_eq!(Opcode(0x4A).info().name, "RDMA_WRITE_ONLY");
        assert_eq!(Opcode(0x51).to_string(), "RD ACKNOWLEDGE");
        assert!(Opcode(0x40).is_roce_dc() && Opcode(0x5F).is_roce_dc());
        assert!(!Opcode(0x3F).is_roce_dc() && !Opcode(0x60).is_roce_dc());
        assert_eq!(Opcode(0xA4).info().hdr_len, 16); // XRC SEND_ONLY: BTH + XRCETH
        assert_eq!(Opcode(0x15).info().support, Support::Unknown);
        assert_eq!(Opcode(0x15).to_string(), "RC unknown(0x15)");
        assert_eq!(Opcode(0xFF).info().support, Support::Unknown);
    }
}
