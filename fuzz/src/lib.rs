//! Fuzz target bodies, as plain functions.
//!
//! `fuzz_targets/*.rs` hand them to libFuzzer (`cargo fuzz run <target> --features libfuzzer`,
//! see README.md), and `tests/replay.rs` runs every corpus file through them on stable Rust, so
//! CI exercises them without a fuzzer. Each body panics only when an invariant breaks: a parser
//! that panics, or a parse → emit → parse round trip that changes the packet.
// `unsafe` is allowed in `cabi` only (it calls the drop-in library's C ABI).
#![deny(unsafe_code)]

pub mod cabi;
mod cm;
pub mod completer;
pub mod harness;
pub mod model;
pub mod responder;

use roce_wire::frame::{self, LinkType, RoceFrame};
use roce_wire::icrc::{self, Network};
use roce_wire::{aeth, atomic_ack_eth, atomic_eth, bth, deth, ieth, immdt, rdeth, reth};
use roce_wire::{pcap, transport};
use std::fmt::Write as _;

/// Every link type the frame parser knows, and one it does not.
pub const LINK_TYPES: [LinkType; 7] = [
    LinkType::Ethernet,
    LinkType::RawIp,
    LinkType::LinuxSll,
    LinkType::Ipv4,
    LinkType::Ipv6,
    LinkType::LinuxSll2,
    LinkType::Other(147),
];

/// Names of the targets, which are also the corpus directory names.
pub const TARGETS: [&str; 6] = ["decode", "pcap", "responder", "completer", "model", "cabi"];

/// Runs the named target body (for the replay test). Unknown names do nothing.
pub fn run(target: &str, data: &[u8]) {
    match target {
        "decode" => decode(data),
        "pcap" => pcap(data),
        "responder" => responder::run(data),
        "completer" => completer::run(data),
        "model" => model::run(data),
        "cabi" => cabi::run(data),
        _ => {}
    }
}

/// Arbitrary bytes through every header view, `check_len`, the transport `Repr` parse → emit →
/// parse round trip (which must reproduce the bytes), `Display`, the MAD header, CM message and
/// `cma_hdr` parsers (also on the payload of a UD SEND to QP 1 inside a frame), the frame
/// parser with each link type, and ICRC computation and verification.
pub fn decode(data: &[u8]) {
    header_views(data);
    cm::run(data);
    transport_round_trip(data);
    for lt in LINK_TYPES {
        let v = frame::verdict(lt, data);
        let _ = v.to_string();
        if let Ok(Some(f)) = frame::parse(lt, data) {
            roce_frame(&f, data);
        }
    }
    // The ICRC over the input split as IPv4 / IPv6 / GRH headers and a transport packet.
    for (net, at) in [
        (
            data.get(..20)
                .zip(data.get(20..28))
                .map(|(ip, udp)| Network::Ipv4 { ip, udp }),
            28,
        ),
        (
            data.get(..40)
                .zip(data.get(40..48))
                .map(|(ip, udp)| Network::Ipv6 { ip, udp }),
            48,
        ),
        (data.get(..40).map(|grh| Network::Grh { grh }), 40),
    ] {
        if let (Some(net), Some(t)) = (net, data.get(at..)) {
            let _ = icrc::verify(net, t);
            let _ = icrc::compute(net, t);
            let mut copy = t.to_vec();
            if icrc::fill(net, &mut copy).is_ok() {
                assert_eq!(icrc::verify(net, &copy), Ok(()), "fill then verify");
            }
        }
    }
}

/// Arbitrary bytes as a pcap/pcapng file: every record through the frame parser.
pub fn pcap(data: &[u8]) {
    let Ok(mut r) = pcap::Reader::new(data) else {
        return;
    };
    let _ = r.format();
    // bounded: a record is at least 16 bytes of the input
    for _ in 0..=data.len() / 16 {
        match r.next_record() {
            Some(Ok(rec)) => {
                if let Ok(Some(f)) = frame::parse(rec.linktype, rec.data) {
                    let _ = f.verdict();
                }
            }
            Some(Err(e)) => {
                let _ = e.to_string();
                break;
            }
            None => break,
        }
    }
}

fn roce_frame(f: &RoceFrame<'_>, data: &[u8]) {
    assert!(
        f.transport.len() <= f.transport_len,
        "transport beyond its length"
    );
    assert_eq!(f.truncated, f.transport.len() < f.transport_len);
    assert!(f.transport_offset + f.transport.len() <= data.len());
    let _ = f.verdict();
    let _ = f.opcode().map(|o| o.to_string());
    let _ = format!("{f:?}");
    transport_round_trip(f.transport);
    // A UD SEND to QP 1 carries a MAD: through the MAD and CM parsers, as `roce decode` does.
    if let Ok(p) = transport::Packet::new_checked(f.transport) {
        if p.bth().dest_qp() == roce_wire::mad::GSI_QPN && p.deth().is_some() {
            cm::run(p.payload());
        }
    }
}

/// Every fixed-size view at offset 0, through `new_checked`, with every accessor.
fn header_views(d: &[u8]) {
    let mut s = String::new();
    if let Ok(p) = bth::Packet::new_checked(d) {
        let _ = (
            p.opcode(),
            p.se(),
            p.migreq(),
            p.pad_cnt(),
            p.tver(),
            p.pkey(),
        );
        let _ = (
            p.fecn(),
            p.becn(),
            p.resv6a(),
            p.dest_qp(),
            p.ack_req(),
            p.resv7(),
        );
        let _ = write!(s, "{}", p.psn());
        if let Ok(r) = bth::Repr::parse(&p) {
            let _ = write!(s, "{r}");
            let mut b = [0u8; bth::HEADER_LEN];
            r.emit(&mut bth::Packet::new_unchecked(&mut b[..]));
            assert_eq!(&b[..], &d[..bth::HEADER_LEN], "BTH parse → emit");
        }
    }
    if let Ok(p) = aeth::Packet::new_checked(d) {
        let _ = write!(s, "{} {}", p.syndrome(), p.msn());
        let _ = p.syndrome_byte();
        let _ = aeth::Repr::parse(&p);
    }
    if let Ok(p) = reth::Packet::new_checked(d) {
        let _ = (p.va(), p.rkey(), p.dma_len(), reth::Repr::parse(&p));
    }
    if let Ok(p) = deth::Packet::new_checked(d) {
        let _ = (p.qkey(), p.resv(), p.src_qp(), deth::Repr::parse(&p));
    }
    if let Ok(p) = rdeth::Packet::new_checked(d) {
        let _ = (p.resv(), p.ee_context(), rdeth::Repr::parse(&p));
    }
    if let Ok(p) = atomic_eth::Packet::new_checked(d) {
        let _ = (p.va(), p.rkey(), p.swap_add(), p.compare());
        let _ = atomic_eth::Repr::parse(&p);
    }
    if let Ok(p) = atomic_ack_eth::Packet::new_checked(d) {
        let _ = (p.orig(), atomic_ack_eth::Repr::parse(&p));
    }
    if let Ok(p) = immdt::Packet::new_checked(d) {
        let _ = (p.imm(), immdt::Repr::parse(&p));
    }
    if let Ok(p) = ieth::Packet::new_checked(d) {
        let _ = (p.rkey(), ieth::Repr::parse(&p));
    }
}

/// The transport view and `Repr`: parse → emit must give the same bytes (payload, pad and ICRC
/// copied in), and parsing the emitted bytes the same `Repr`.
fn transport_round_trip(t: &[u8]) {
    let Ok(p) = transport::Packet::new_checked(t) else {
        return;
    };
    let _ = (
        p.opcode(),
        p.info(),
        p.offsets(),
        p.payload_offset(),
        p.payload_len(),
    );
    let _ = (
        p.deth(),
        p.rdeth(),
        p.reth(),
        p.atomic_eth(),
        p.aeth(),
        p.atomic_ack_eth(),
    );
    let _ = (
        p.immdt(),
        p.ieth(),
        p.xrc_srqn(),
        p.feth().map(|f| f.raw()),
        p.atomic_write_data(),
        p.icrc(),
        p.without_icrc(),
    );
    let _ = p.payload();
    let Ok(r) = transport::Repr::parse(&p) else {
        return;
    };
    let _ = r.to_string();
    assert_eq!(r.buffer_len(), t.len(), "buffer_len of a parsed packet");
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut transport::Packet::new_unchecked(&mut out[..]));
    // The payload and the pad bytes are data the caller supplies: a `Repr` keeps their length,
    // not their content (emit writes zero pad, as the IBA asks; a sender may have put anything
    // there, and the ICRC covers it). Then the ICRC.
    let k = out.len() - roce_wire::ICRC_LEN;
    let s = r.header_len();
    out[s..k].copy_from_slice(&t[s..k]);
    out[k..].copy_from_slice(&t[k..]);
    assert_eq!(out, t, "transport parse → emit");
    let again = transport::Repr::parse(&transport::Packet::new_unchecked(&out[..]));
    assert_eq!(again, Ok(r), "transport emit → parse");
}
