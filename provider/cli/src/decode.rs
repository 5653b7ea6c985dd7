//! `roce decode`: print every RoCE packet of pcap/pcapng captures, check ICRCs, summarise.
//!
//! Text output: one line per RoCE packet, then a summary per file. `--json` prints
//! [JSON Lines](https://jsonlines.org/) instead: one object per RoCE packet
//! (`"kind": "packet"`), one per file (`"kind": "summary"`), and one per unreadable file
//! (`"kind": "error"`). Exit status: 0 when every complete RoCE packet has a valid ICRC, 1 when
//! any has a bad one, 2 when a file cannot be read (this wins over 1). Frames that are not RoCE
//! are counted, never errors; truncated packets (capture snap length) are counted apart.
//!
//! A UD SEND to QP 1 carries a management datagram: its header is shown, and a CM MAD is
//! decoded (message, communication IDs, service ID with the rdma_cm port space and port, QPNs,
//! starting PSN, REJ reason, SIDR status, the `cma_hdr` addresses and port), in the text line
//! and as the packet's `"mad"` object (`"mad": {…, "cm": {…}}`) in JSON.
mod cm;
mod record;
pub use cm::{Cm, CmaHdr, Mad};
pub use record::PacketRecord;
use roce_wire::frame::{self, LinkType, RoceFrame, RoceVersion, Verdict};
use roce_wire::pcap::{self, Precision, Record};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `roce decode`.
#[derive(Debug, Clone, clap::Args)]
pub struct DecodeArgs {
    /// pcap or pcapng capture files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Print JSON Lines: one object per RoCE packet ("kind": "packet"), one per file
    /// ("kind": "summary") and one per unreadable file ("kind": "error").
    #[arg(long)]
    pub json: bool,
    /// Also write every RoCE packet read to this pcap file (Ethernet, nanosecond timestamps).
    #[arg(long, value_name = "OUT")]
    pub write_pcap: Option<PathBuf>,
}

/// Exit status: every complete packet had a valid ICRC.
pub const EXIT_OK: u8 = 0;
/// Exit status: at least one complete packet had a bad ICRC.
pub const EXIT_BAD_ICRC: u8 = 1;
/// Exit status: a file could not be read.
pub const EXIT_UNREADABLE: u8 = 2;

/// Per-opcode count in a [`Summary`].
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct OpcodeCount {
    /// BTH opcode.
    pub opcode: u8,
    /// Name, e.g. `RC SEND_ONLY`.
    pub name: String,
    /// Packets.
    pub count: u64,
}

/// Per-file counts.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Summary {
    /// Always `"summary"`.
    pub kind: &'static str,
    /// File name as given.
    pub file: String,
    /// Frames read.
    pub frames: u64,
    /// RoCE packets (v1 + v2, complete or truncated).
    pub roce: u64,
    /// RoCEv1 packets.
    pub v1: u64,
    /// RoCEv2 packets.
    pub v2: u64,
    /// Complete packets with a valid ICRC.
    pub icrc_valid: u64,
    /// Complete packets with a bad ICRC.
    pub icrc_invalid: u64,
    /// Packets cut short by the capture.
    pub truncated: u64,
    /// RoCE (or UDP/4791) frames whose headers are inconsistent.
    pub malformed: u64,
    /// Frames that are not RoCE.
    pub not_roce: u64,
    /// BTH opcode histogram (packets whose BTH was captured), by opcode.
    pub opcodes: Vec<OpcodeCount>,
    /// Read error that stopped the file early, if any.
    pub error: Option<String>,
}

#[derive(Serialize)]
struct ErrorLine<'a> {
    kind: &'static str,
    file: &'a str,
    error: String,
}

/// Runs `roce decode` writing to `out`; diagnostics go to `err`. Returns the exit status.
pub fn run(args: &DecodeArgs, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let mut status = EXIT_OK;
    let mut writer = match &args.write_pcap {
        None => None,
        Some(p) => match pcap::Writer::create(p, Precision::Nano) {
            Ok(w) => Some(w),
            Err(e) => {
                let _ = writeln!(err, "roce decode: cannot write {}: {e}", p.display());
                return EXIT_UNREADABLE;
            }
        },
    };
    for path in &args.files {
        let name = path.display().to_string();
        let mut reader = match pcap::open(path) {
            Ok(r) => r,
            Err(e) => {
                let _ = writeln!(err, "roce decode: {name}: {e}");
                if args.json {
                    let line = ErrorLine {
                        kind: "error",
                        file: &name,
                        error: e.to_string(),
                    };
                    let _ = emit_json(out, &line);
                }
                status = EXIT_UNREADABLE;
                continue;
            }
        };
        let s = match decode_file(&name, &mut reader, args.json, out, writer.as_mut()) {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                // stdout closed (piped into `head`): stop quietly
                return status;
            }
            Err(e) => {
                let _ = writeln!(err, "roce decode: {e}");
                return status.max(EXIT_UNREADABLE);
            }
        };
        if let Some(e) = &s.error {
            let _ = writeln!(err, "roce decode: {name}: {e}");
            status = EXIT_UNREADABLE;
        }
        if s.icrc_invalid > 0 && status == EXIT_OK {
            status = EXIT_BAD_ICRC;
        }
        let printed = if args.json {
            emit_json(out, &s)
        } else {
            print_summary(out, &s)
        };
        if printed.is_err() {
            return status;
        }
    }
    if let Some(w) = writer {
        if let Err(e) = w.into_inner() {
            let _ = writeln!(err, "roce decode: writing pcap: {e}");
            status = EXIT_UNREADABLE;
        }
    }
    status
}

fn emit_json<T: Serialize>(out: &mut dyn Write, v: &T) -> io::Result<()> {
    serde_json::to_writer(&mut *out, v)?;
    out.write_all(b"\n")
}

/// Decodes one open capture, printing packet lines; returns its summary. Errors are output
/// errors only; read errors end up in [`Summary::error`].
pub fn decode_file<R: io::Read>(
    name: &str,
    reader: &mut pcap::Reader<R>,
    json: bool,
    out: &mut dyn Write,
    mut writer: Option<&mut pcap::Writer<io::BufWriter<std::fs::File>>>,
) -> io::Result<Summary> {
    let mut s = Summary {
        kind: "summary",
        file: name.to_string(),
        ..Default::default()
    };
    let mut hist: BTreeMap<u8, u64> = BTreeMap::new();
    let mut first_ts: Option<Duration> = None;
    while let Some(rec) = reader.next_record() {
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                s.error = Some(format!("after frame {}: {e}", s.frames));
                break;
            }
        };
        s.frames += 1;
        let t0 = *first_ts.get_or_insert(rec.timestamp);
        let rel = rec.timestamp.saturating_sub(t0);
        let line = match frame::parse(rec.linktype, rec.data) {
            Ok(None) => {
                s.not_roce += 1;
                continue;
            }
            Err(e) => {
                s.malformed += 1;
                PacketRecord::malformed(name, s.frames, rel, rec.timestamp, e)
            }
            Ok(Some(f)) => {
                s.roce += 1;
                match f.version {
                    RoceVersion::V1 => s.v1 += 1,
                    RoceVersion::V2 => s.v2 += 1,
                }
                if let Some(op) = f.opcode() {
                    *hist.entry(op.0).or_default() += 1;
                }
                let v = f.verdict();
                match v {
                    Verdict::IcrcValid => s.icrc_valid += 1,
                    Verdict::IcrcInvalid { .. } => s.icrc_invalid += 1,
                    Verdict::Truncated => s.truncated += 1,
                    Verdict::NotRoce => s.not_roce += 1,
                    Verdict::Malformed(_) => s.malformed += 1,
                }
                if let Some(w) = writer.as_deref_mut() {
                    if let Err(e) = write_frame(w, &rec, &f) {
                        return Err(io::Error::other(format!("writing pcap: {e}")));
                    }
                }
                PacketRecord::new(name, s.frames, rel, rec.timestamp, &f, v)
            }
        };
        if json {
            emit_json(out, &line)?;
        } else {
            writeln!(out, "{}", line.text())?;
        }
    }
    s.opcodes = hist
        .into_iter()
        .map(|(op, count)| OpcodeCount {
            opcode: op,
            name: record::opcode_name(op),
            count,
        })
        .collect();
    Ok(s)
}

/// Writes the frame of a RoCE packet to the output pcap. Ethernet frames are written as
/// captured; frames of other link types get a synthesized Ethernet header.
fn write_frame<W: Write>(
    w: &mut pcap::Writer<W>,
    rec: &Record<'_>,
    f: &RoceFrame<'_>,
) -> Result<(), pcap::Error> {
    if rec.linktype == LinkType::Ethernet {
        return w.write_captured(rec.timestamp, rec.data, rec.orig_len);
    }
    let ethertype: u16 = match (f.version, f.network) {
        (RoceVersion::V1, _) => roce_wire::ROCE_V1_ETHERTYPE,
        (_, roce_wire::icrc::Network::Ipv6 { .. }) => 0x86DD,
        _ => 0x0800,
    };
    let l3 = rec.data.get(f.l3_offset..).unwrap_or(&[]);
    let mut buf = Vec::with_capacity(14 + l3.len());
    buf.extend_from_slice(&f.l2.dst_mac.unwrap_or([0; 6]));
    buf.extend_from_slice(&f.l2.src_mac.unwrap_or([0; 6]));
    buf.extend_from_slice(&ethertype.to_be_bytes());
    buf.extend_from_slice(l3);
    let orig = (rec.orig_len as usize).saturating_sub(f.l3_offset) + 14;
    w.write_captured(rec.timestamp, &buf, orig as u32)
}

fn print_summary(out: &mut dyn Write, s: &Summary) -> io::Result<()> {
    writeln!(out, "== {}: {} frames", s.file, s.frames)?;
    writeln!(
        out,
        "   RoCE packets: {} (v1 {}, v2 {}); not RoCE: {}",
        s.roce, s.v1, s.v2, s.not_roce
    )?;
    writeln!(
        out,
        "   ICRC valid: {}, invalid: {}, truncated: {}, malformed: {}",
        s.icrc_valid, s.icrc_invalid, s.truncated, s.malformed
    )?;
    for o in &s.opcodes {
        writeln!(out, "   {:#04x} {:<40} {:>8}", o.opcode, o.name, o.count)?;
    }
    if let Some(e) = &s.error {
        writeln!(out, "   read error: {e}")?;
    }
    Ok(())
}
