//! Reading pcap and pcapng captures, and writing pcap files Wireshark dissects as RoCE.
//!
//! Built on the `pcap-file` crate. [`Reader`] tells the two formats apart by their magic
//! number and yields one [`Record`] per captured packet: timestamp, link type, the captured
//! bytes and the original length. It is lenient where real captures need it: a packet whose
//! original length exceeds the file's snap length (a short-snaplen capture) is accepted, and
//! pcapng timestamps honour each interface's `if_tsresol` and `if_tsoffset`.
//!
//! [`Writer`] writes `LINKTYPE_ETHERNET` pcap files with microsecond or nanosecond timestamps.
//! Frames built by [`crate::frame`] (UDP destination port 4791, source port ≥ 0xC000) are
//! dissected by tshark as InfiniBand without any option: Wireshark tries the lower UDP port
//! first, and 4791 is lower than any rxe source port.
use crate::frame::LinkType;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Chain, Cursor, Read, Write};
use std::path::Path;
use std::time::Duration;

/// Snap length written into the pcap files we produce.
pub const WRITER_SNAPLEN: u32 = 262_144;

/// A capture-file error.
#[derive(Debug)]
pub enum Error {
    /// Reading or writing failed.
    Io(io::Error),
    /// The file is not a well-formed pcap or pcapng file.
    Format(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Format(s) => write!(f, "not a valid pcap/pcapng file: {s}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<PcapError> for Error {
    fn from(e: PcapError) -> Self {
        match e {
            PcapError::IoError(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                Error::Format("file ends in the middle of a record".into())
            }
            PcapError::IoError(e) => Error::Io(e),
            e => Error::Format(e.to_string()),
        }
    }
}

/// Capture file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Classic libpcap.
    Pcap,
    /// pcapng.
    PcapNg,
}

/// One captured packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Time since the Unix epoch.
    pub timestamp: Duration,
    /// Link type of the interface that captured it.
    pub linktype: LinkType,
    /// The captured bytes (possibly fewer than `orig_len`).
    pub data: &'a [u8],
    /// Length of the packet on the wire.
    pub orig_len: u32,
}

type Peeked<R> = Chain<Cursor<[u8; 4]>, R>;

#[derive(Debug, Clone, Copy)]
struct Interface {
    linktype: LinkType,
    /// Timestamp unit: `(base, exponent)` with a unit of `base^-exponent` seconds.
    tsresol: (u32, u32),
    tsoffset: u64,
}

enum Inner<R: Read> {
    Pcap {
        r: PcapReader<Peeked<R>>,
        linktype: LinkType,
        nanos: bool,
    },
    Ng {
        r: Box<PcapNgReader<Peeked<R>>>,
        ifaces: Vec<Interface>,
    },
}

/// Reads a pcap or pcapng stream.
pub struct Reader<R: Read> {
    inner: Inner<R>,
    buf: Vec<u8>,
}

impl<R: Read> fmt::Debug for Reader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader")
            .field("format", &self.format())
            .finish()
    }
}

/// Opens a capture file.
pub fn open(path: impl AsRef<Path>) -> Result<Reader<BufReader<File>>, Error> {
    Reader::new(BufReader::new(File::open(path)?))
}

const PCAPNG_MAGIC: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];

impl<R: Read> Reader<R> {
    /// Reads the file header. Fails with [`Error::Format`] when the stream is neither pcap
    /// nor pcapng.
    pub fn new(mut r: R) -> Result<Self, Error> {
        let mut magic = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match r.read(&mut magic[got..])? {
                0 => return Err(Error::Format("shorter than a file header".into())),
                n => got += n,
            }
        }
        let stream = Cursor::new(magic).chain(r);
        let inner = if magic == PCAPNG_MAGIC {
            Inner::Ng {
                r: Box::new(PcapNgReader::new(stream)?),
                ifaces: Vec::new(),
            }
        } else {
            let r = PcapReader::new(stream)?;
            let h = r.header();
            Inner::Pcap {
                linktype: LinkType::from_dlt(u32::from(h.datalink)),
                nanos: h.ts_resolution == TsResolution::NanoSecond,
                r,
            }
        };
        Ok(Reader {
            inner,
            buf: Vec::new(),
        })
    }

    /// The file format.
    pub fn format(&self) -> Format {
        match self.inner {
            Inner::Pcap { .. } => Format::Pcap,
            Inner::Ng { .. } => Format::PcapNg,
        }
    }

    /// The next packet, `None` at the end of the file. After an error, stop reading.
    #[allow(clippy::should_implement_trait)]
    pub fn next_record(&mut self) -> Option<Result<Record<'_>, Error>> {
        let (timestamp, linktype, orig_len) = match &mut self.inner {
            Inner::Pcap { r, linktype, nanos } => match r.next_raw_packet()? {
                Err(e) => return Some(Err(e.into())),
                Ok(p) => {
                    let frac = if *nanos {
                        p.ts_frac as u64
                    } else {
                        p.ts_frac as u64 * 1000
                    };
                    let ts = Duration::from_secs(p.ts_sec as u64) + Duration::from_nanos(frac);
                    self.buf.clear();
                    self.buf.extend_from_slice(&p.data);
                    (ts, *linktype, p.orig_len)
                }
            },
            Inner::Ng { r, ifaces } => loop {
                let block = match r.next_block()? {
                    Err(e) => return Some(Err(e.into())),
                    Ok(b) => b,
                };
                let (iface, raw_ts, data, orig_len) = match block {
                    Block::SectionHeader(_) => {
                        ifaces.clear();
                        continue;
                    }
                    Block::InterfaceDescription(idb) => {
                        ifaces.push(interface(&idb.linktype, &idb.options));
                        continue;
                    }
                    Block::EnhancedPacket(p) => (
                        p.interface_id as usize,
                        p.timestamp.as_nanos() as u64,
                        p.data,
                        p.original_len,
                    ),
                    Block::Packet(p) => {
                        (p.interface_id as usize, p.timestamp, p.data, p.original_len)
                    }
                    Block::SimplePacket(p) => (0, 0, p.data, p.original_len),
                    _ => continue,
                };
                let Some(i) = ifaces.get(iface).copied() else {
                    return Some(Err(Error::Format(format!(
                        "packet refers to undeclared interface {iface}"
                    ))));
                };
                self.buf.clear();
                self.buf.extend_from_slice(&data);
                break (ng_timestamp(raw_ts, i), i.linktype, orig_len);
            },
        };
        Some(Ok(Record {
            timestamp,
            linktype,
            data: &self.buf,
            orig_len,
        }))
    }
}

fn interface(linktype: &DataLink, options: &[InterfaceDescriptionOption<'_>]) -> Interface {
    let mut i = Interface {
        linktype: LinkType::from_dlt(u32::from(*linktype)),
        tsresol: (10, 6),
        tsoffset: 0,
    };
    for o in options {
        match o {
            InterfaceDescriptionOption::IfTsResol(v) => {
                i.tsresol = if v & 0x80 != 0 {
                    (2, (v & 0x7F) as u32)
                } else {
                    (10, *v as u32)
                };
            }
            InterfaceDescriptionOption::IfTsOffset(s) => i.tsoffset = *s,
            _ => {}
        }
    }
    i
}

fn ng_timestamp(raw: u64, i: Interface) -> Duration {
    let (base, exp) = i.tsresol;
    // units per second, saturating for absurd resolutions
    let per_sec = (base as u128).checked_pow(exp).unwrap_or(u128::MAX).max(1);
    let secs = raw as u128 / per_sec;
    let rem = raw as u128 % per_sec;
    let nanos = (rem * 1_000_000_000 / per_sec) as u32;
    let secs = (secs.min(u64::MAX as u128) as u64).saturating_add(i.tsoffset);
    Duration::new(secs, nanos)
}

/// Timestamp precision of a written pcap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// Microseconds (magic `a1b2c3d4`).
    Micro,
    /// Nanoseconds (magic `a1b23c4d`).
    Nano,
}

/// Writes a `LINKTYPE_ETHERNET` pcap file.
pub struct Writer<W: Write> {
    w: PcapWriter<W>,
}

impl<W: Write> fmt::Debug for Writer<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

impl Writer<io::BufWriter<File>> {
    /// Creates (truncates) a file and writes the pcap header.
    pub fn create(path: impl AsRef<Path>, precision: Precision) -> Result<Self, Error> {
        Writer::new(io::BufWriter::new(File::create(path)?), precision)
    }
}

impl<W: Write> Writer<W> {
    /// Writes the pcap header (version 2.4, little-endian, snap length [`WRITER_SNAPLEN`]).
    pub fn new(w: W, precision: Precision) -> Result<Self, Error> {
        let header = PcapHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: WRITER_SNAPLEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: match precision {
                Precision::Micro => TsResolution::MicroSecond,
                Precision::Nano => TsResolution::NanoSecond,
            },
            endianness: Endianness::Little,
        };
        Ok(Writer {
            w: PcapWriter::with_header(w, header)?,
        })
    }

    /// Writes one complete Ethernet frame.
    pub fn write(&mut self, timestamp: Duration, frame: &[u8]) -> Result<(), Error> {
        self.write_captured(timestamp, frame, frame.len() as u32)
    }

    /// Writes a frame of which only `data` was captured, out of `orig_len` bytes on the wire
    /// (`orig_len` is raised to `data.len()` when smaller).
    pub fn write_captured(
        &mut self,
        timestamp: Duration,
        data: &[u8],
        orig_len: u32,
    ) -> Result<(), Error> {
        if data.len() > WRITER_SNAPLEN as usize {
            return Err(Error::Format("frame longer than the snap length".into()));
        }
        let orig_len = orig_len.max(data.len() as u32);
        self.w
            .write_packet(&PcapPacket::new(timestamp, orig_len, data))?;
        Ok(())
    }

    /// Flushes and returns the inner writer.
    pub fn into_inner(self) -> Result<W, Error> {
        let mut w = self.w.into_writer();
        w.flush()?;
        Ok(w)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn write_then_read_pcap_micro_and_nano() {
        for (prec, ts) in [
            (Precision::Micro, Duration::new(1_700_000_000, 123_456_000)),
            (Precision::Nano, Duration::new(1_700_000_000, 123_456_789)),
        ] {
            let mut w = Writer::new(Vec::new(), prec).unwrap();
            w.write(ts, &[1, 2, 3]).unwrap();
            w.write_captured(ts, &[4; 10], 1500).unwrap();
            let bytes = w.into_inner().unwrap();
            let mut r = Reader::new(&bytes[..]).unwrap();
            assert_eq!(r.format(), Format::Pcap);
            let a = r.next_record().unwrap().unwrap();
            assert_eq!(
                (a.timestamp, a.linktype, a.data, a.orig_len),
                (ts, LinkType::Ethernet, &[1u8, 2, 3][..], 3)
            );
            let b = r.next_record().unwrap().unwrap();
            assert_eq!((b.data.len(), b.orig_len), (10, 1500));
            assert!(r.next_record().is_none());
        }
    }

    #[test]
    fn rejects_garbage_and_short_files() {
        assert!(matches!(Reader::new(&[1u8, 2][..]), Err(Error::Format(_))));
        assert!(matches!(Reader::new(&[0u8; 64][..]), Err(Error::Format(_))));
    }

    #[test]
    fn truncated_last_record_is_an_error() {
        let mut w = Writer::new(Vec::new(), Precision::Micro).unwrap();
        w.write(Duration::ZERO, &[7; 40]).unwrap();
        let mut bytes = w.into_inner().unwrap();
        bytes.truncate(bytes.len() - 5);
        let mut r = Reader::new(&bytes[..]).unwrap();
        assert!(matches!(r.next_record(), Some(Err(Error::Format(_)))));
    }

    #[test]
    fn pcapng_with_tsresol() {
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        use pcap_file::pcapng::PcapNgWriter;
        use std::borrow::Cow;
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: DataLink::LINUX_SLL2,
            snaplen: 0,
            options: vec![InterfaceDescriptionOption::IfTsResol(9)],
        })
        .unwrap();
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            // raw units of 1 ns with if_tsresol 9
            timestamp: Duration::from_nanos(5_000_000_001),
            original_len: 3,
            data: Cow::Borrowed(&[9, 9, 9]),
            options: vec![],
        })
        .unwrap();
        let bytes = w.into_inner();
        let mut r = Reader::new(&bytes[..]).unwrap();
        assert_eq!(r.format(), Format::PcapNg);
        let p = r.next_record().unwrap().unwrap();
        assert_eq!(p.linktype, LinkType::LinuxSll2);
        assert_eq!(p.timestamp, Duration::new(5, 1));
        assert_eq!(p.data, &[9, 9, 9]);
        assert!(r.next_record().is_none());
        // default resolution is microseconds
        let i = interface(&DataLink::ETHERNET, &[]);
        assert_eq!(ng_timestamp(1_500_000, i), Duration::new(1, 500_000_000));
    }
}
