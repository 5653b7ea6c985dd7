//! The hex ICRC vectors of the shared `captures/real/VECTORS.md`, read at run time (some come
//! from GPL-licensed scapy tests, so they are not copied into this repository).
//!
//! For every vector: the frame parses as RoCE, the stored ICRC is the `icrc_wire` bytes, our
//! ICRC equals a plain bitwise CRC-32 of the vector's `masked_input`, the verdict is valid
//! (V11, the sport-rewritten negative vector, invalid; its restored frame valid), and the
//! transport packet survives parse → emit byte for byte.
use roce_tests::prereq::{captures_dir, hex, require};
use roce_wire::frame::{self, LinkType, RoceVersion, Verdict};
use roce_wire::{icrc, transport};

/// CRC-32 (IEEE, reflected 0xEDB88320, init and final XOR 0xFFFFFFFF), bit by bit: a reference
/// independent of the table-driven `crc32fast` the library uses.
fn crc32_bitwise(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[derive(Debug, Default)]
struct Vector {
    name: String,
    frame: Vec<u8>,
    icrc_wire: Option<Vec<u8>>,
    masked_input: Option<Vec<u8>>,
    restored: Option<Vec<u8>>,
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.strip_prefix(key)
        .map(|r| r.split_whitespace().next().unwrap_or(""))
}

fn load(text: &str) -> Vec<Vector> {
    let mut out: Vec<Vector> = Vec::new();
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("### ") {
            if h.starts_with('V') {
                out.push(Vector {
                    name: h.split_whitespace().next().unwrap_or("").to_string(),
                    ..Default::default()
                });
            }
            continue;
        }
        let Some(v) = out.last_mut() else { continue };
        if let Some(x) = field(line, "frame: ") {
            v.frame = hex(x);
        } else if let Some(x) = field(line, "icrc_wire: ") {
            v.icrc_wire = Some(hex(x));
        } else if let Some(x) = field(line, "masked_input: ") {
            v.masked_input = Some(hex(x));
        } else if let Some(x) = field(line, "frame_with_sport_restored: ") {
            v.restored = Some(hex(x));
        }
    }
    out.retain(|v| !v.frame.is_empty());
    out
}

#[test]
fn vectors_md_icrc_vectors() {
    let dir = captures_dir();
    let path = dir.map(|d| d.join("VECTORS.md"));
    let ok = path.as_ref().is_some_and(|p| p.is_file());
    if !require(
        "vectors_md_icrc_vectors",
        "shared captures/real/VECTORS.md",
        ok,
    ) {
        return;
    }
    let vectors = load(&std::fs::read_to_string(path.unwrap()).unwrap());
    assert_eq!(vectors.len(), 13, "V1..V13");
    let mut masked_checked = 0;
    for v in &vectors {
        let n = &v.name;
        let f = frame::parse(LinkType::Ethernet, &v.frame)
            .unwrap_or_else(|e| panic!("{n}: {e}"))
            .unwrap_or_else(|| panic!("{n}: not RoCE"));
        assert!(!f.truncated, "{n}");
        assert_eq!(
            f.version == RoceVersion::V1,
            n == "V8",
            "{n}: only V8 is RoCEv1"
        );
        let t = f.transport;
        if let Some(w) = &v.icrc_wire {
            assert_eq!(&t[t.len() - 4..], &w[..], "{n}: stored ICRC bytes");
        }
        let body = &t[..t.len() - 4];
        let ours = icrc::compute(f.network, body).unwrap();
        if let Some(m) = &v.masked_input {
            assert_eq!(
                ours,
                crc32_bitwise(m),
                "{n}: ICRC vs CRC-32 of masked_input"
            );
            masked_checked += 1;
        }
        let want_valid = n != "V11";
        match f.verdict() {
            Verdict::IcrcValid => assert!(want_valid, "{n} must be invalid"),
            Verdict::IcrcInvalid { .. } => assert!(!want_valid, "{n} must be valid"),
            other => panic!("{n}: {other:?}"),
        }
        let p = transport::Packet::new_checked(t).unwrap();
        let r = transport::Repr::parse(&p).unwrap_or_else(|e| panic!("{n}: {e}"));
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut transport::Packet::new_unchecked(&mut out[..]));
        let (s, e) = (r.header_len(), r.header_len() + r.payload_len);
        out[s..e].copy_from_slice(&t[s..e]);
        let k = out.len() - 4;
        out[k..].copy_from_slice(&t[k..]);
        assert_eq!(out, t, "{n}: parse → emit");
        if let Some(restored) = &v.restored {
            assert_eq!(
                frame::verdict(LinkType::Ethernet, restored),
                Verdict::IcrcValid,
                "{n}: restored source port"
            );
        }
    }
    assert_eq!(masked_checked, 11, "V1..V11 carry masked_input");
}
