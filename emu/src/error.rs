//! Errors of the verbs-side API, errno-shaped so the C ABI can return them unchanged.
use core::fmt;

/// Why a verb failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// Invalid argument, attribute or state (EINVAL).
    Invalid,
    /// A limit was reached or a queue is full (ENOMEM, as rxe returns for a full SQ/RQ).
    NoMem,
    /// No such object (ENOENT).
    NotFound,
    /// The object is still in use (EBUSY).
    Busy,
    /// Not supported by this device (EOPNOTSUPP).
    NotSupported,
    /// No such entry, e.g. an empty GID table entry (ENODATA, as the kernel's GID cache).
    NoData,
}

impl Error {
    /// The positive errno a libibverbs provider returns.
    pub const fn errno(self) -> i32 {
        match self {
            Error::Invalid => 22,
            Error::NoMem => 12,
            Error::NotFound => 2,
            Error::Busy => 16,
            Error::NotSupported => 95,
            Error::NoData => 61,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Invalid => "invalid argument",
            Error::NoMem => "out of resources",
            Error::NotFound => "no such object",
            Error::Busy => "object in use",
            Error::NotSupported => "operation not supported",
            Error::NoData => "no data available",
        })
    }
}

impl std::error::Error for Error {}

/// Result of a verb.
pub type Result<T> = core::result::Result<T, Error>;
