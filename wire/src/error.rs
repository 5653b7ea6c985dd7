use core::fmt;

/// Why a packet could not be parsed or emitted. Every variant is a *clear* reason; none of the
/// parsers in this crate panics on any input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the headers it claims to carry.
    Truncated,
    /// The BTH pad count is inconsistent with the payload (larger than the payload, or not
    /// what 4-byte alignment requires where that is mandated).
    BadPad,
    /// The opcode is reserved / has no meaning in any transport we know.
    UnknownOpcode(u8),
    /// The opcode is known (RD, XRC, DC, …) but not something this implementation speaks.
    UnsupportedOpcode(u8),
    /// The invariant CRC does not match.
    BadIcrc {
        /// ICRC computed over the packet.
        expected: u32,
        /// ICRC found in the packet's trailer.
        found: u32,
    },
    /// The BTH transport header version is not 0.
    BadTver(u8),
    /// A length field is inconsistent (IP/UDP length vs buffer, oversize payload, …).
    BadLength,
    /// A field holds a value the specification forbids.
    Malformed,
    /// Not a RoCE packet at all (other EtherType, other UDP port, …).
    NotRoce,
    /// A MAD that is not a CM MAD the kernel CM takes (base version 1, class 0x07, class
    /// version 2).
    NotCm,
    /// A MAD attribute this crate has no message for (CM: anything but the nine messages).
    UnknownAttribute(u16),
}

/// Result with the crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => write!(f, "truncated packet"),
            Error::BadPad => write!(f, "bad pad count"),
            Error::UnknownOpcode(op) => write!(f, "unknown opcode {op:#04x}"),
            Error::UnsupportedOpcode(op) => write!(f, "unsupported opcode {op:#04x}"),
            Error::BadIcrc { expected, found } => {
                write!(
                    f,
                    "bad ICRC: computed {expected:#010x}, packet has {found:#010x}"
                )
            }
            Error::BadTver(v) => write!(f, "bad BTH transport version {v}"),
            Error::BadLength => write!(f, "inconsistent length"),
            Error::Malformed => write!(f, "malformed field"),
            Error::NotRoce => write!(f, "not a RoCE packet"),
            Error::NotCm => write!(f, "not a CM MAD (base version 1, class 0x07, version 2)"),
            Error::UnknownAttribute(a) => write!(f, "unknown MAD attribute {a:#06x}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}
