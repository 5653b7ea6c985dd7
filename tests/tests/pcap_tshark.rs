//! Our pcap writer and frame builders, judged by tshark: a capture holding every supported
//! opcode (RC, UC, UD, CNP; IPv4 and IPv6; with and without an 802.1Q tag; microsecond and
//! nanosecond files) is dissected as InfiniBand with the right opcode, QPN and PSN on every
//! frame, with no malformed-packet report and no expert warning or error (except Wireshark's
//! "Illegal checksum value (0)" on IPv6, as rxe sends UDP checksum 0 over IPv6 too), and reads
//! back through our own reader unchanged.
//! Missing tshark: SKIP, or FAIL under `CI=true`.
use roce_tests::prereq::{require, tshark};
use roce_wire::frame::{self, Ipv4FrameSpec, Ipv6FrameSpec, LinkType, Verdict, VlanTag};
use roce_wire::opcode::{OpFlags, Support, OPCODE_TABLE};
use roce_wire::pcap::{self, Precision, Writer};
use roce_wire::{bth, transport, Opcode, Psn};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn transport_packet(op: Opcode, qpn: u32, psn: u32) -> Vec<u8> {
    let info = op.info();
    let mut r = transport::Repr::new(bth::Repr::new(op, qpn, Psn::new(psn)));
    if info.flags.contains(OpFlags::CNP) {
        r.bth.becn = true;
        r.cnp_reserved = Some([0; 16]);
    }
    // every header the opcode calls for is written (zeros where the Repr has none)
    let payload = if info.flags.contains(OpFlags::PAYLOAD) {
        &b"payload bytes"[..]
    } else {
        &b""[..]
    };
    r.set_payload_len(payload.len());
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut transport::Packet::new_unchecked(&mut buf[..]));
    buf[r.header_len()..r.header_len() + payload.len()].copy_from_slice(payload);
    buf
}

/// `(opcode, qpn, psn)` of every frame written, in order.
fn write_capture(path: &PathBuf, precision: Precision) -> Vec<(u8, u32, u32)> {
    let mut w = Writer::create(path, precision).unwrap();
    let mut expect = Vec::new();
    let ops: Vec<Opcode> = (0..=255u8)
        .filter(|&o| OPCODE_TABLE[o as usize].support == Support::Supported)
        .map(Opcode)
        .collect();
    assert_eq!(ops.len(), 25 + 12 + 2 + 1);
    let tag = VlanTag {
        tpid: 0x8100,
        pcp: 3,
        dei: false,
        vid: 42,
    };
    let mut n = 0u32;
    for (variant, vlan) in [(4, None), (6, None), (4, Some(tag)), (6, Some(tag))] {
        for &op in &ops {
            n += 1;
            let (qpn, psn) = (0x10_0000 + n, 0xFF_FFF0 + n);
            let t = transport_packet(op, qpn, psn & 0xFF_FFFF);
            let f = if variant == 4 {
                let spec = Ipv4FrameSpec {
                    vlan,
                    ip_id: n as u16,
                    src_port: 0xC000 | (n as u16 & 0x3FFF),
                    ..Default::default()
                };
                frame::build_ipv4_frame(&spec, &t).unwrap()
            } else {
                let spec = Ipv6FrameSpec {
                    vlan,
                    src_port: 0xC000 | (n as u16 & 0x3FFF),
                    ..Default::default()
                };
                frame::build_ipv6_frame(&spec, &t).unwrap()
            };
            assert_eq!(frame::verdict(LinkType::Ethernet, &f), Verdict::IcrcValid);
            let ts = Duration::new(1_700_000_000 + n as u64, 123_456_789);
            w.write(ts, &f).unwrap();
            expect.push((op.0, qpn, psn & 0xFF_FFFF));
        }
    }
    w.into_inner().unwrap();
    expect
}

#[test]
fn tshark_dissects_our_pcaps_as_infiniband_without_malformed_packets() {
    let test = "tshark_dissects_our_pcaps_as_infiniband_without_malformed_packets";
    let ts = tshark();
    if !require(test, "tshark", ts.is_some()) {
        return;
    }
    let ts = ts.unwrap();
    let dir = std::env::temp_dir().join(format!("roce-pcap-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for precision in [Precision::Micro, Precision::Nano] {
        let path = dir.join(format!("{precision:?}.pcap"));
        let expect = write_capture(&path, precision);
        let out = Command::new(&ts)
            .arg("-r")
            .arg(&path)
            .args(["-T", "fields", "-E", "separator=|", "-E", "aggregator=;"])
            .args(["-e", "frame.protocols", "-e", "infiniband.bth.opcode"])
            .args(["-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn"])
            .args(["-e", "_ws.malformed", "-e", "_ws.expert.severity"])
            .args(["-e", "_ws.expert.message", "-e", "ipv6.version"])
            .output()
            .expect("run tshark");
        assert!(
            out.status.success(),
            "tshark: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('|').collect()).collect();
        assert_eq!(rows.len(), expect.len(), "{precision:?}: frames");
        for (i, (row, &(op, qpn, psn))) in rows.iter().zip(&expect).enumerate() {
            let what = format!("{precision:?} frame {}: {row:?}", i + 1);
            assert!(
                row[0].ends_with(":udp:infiniband") || row[0].contains(":udp:infiniband:"),
                "{what}"
            );
            let num = |s: &str| -> u64 {
                match s.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16).unwrap(),
                    None => s.parse().unwrap_or_else(|_| panic!("{what}")),
                }
            };
            assert_eq!(num(row[1]), op as u64, "{what}: opcode");
            assert_eq!(num(row[2]), qpn as u64, "{what}: QPN");
            assert_eq!(num(row[3]), psn as u64, "{what}: PSN");
            assert_eq!(row[4], "", "{what}: malformed");
            // No expert info of severity "warning" (6291456) or "error" (8388608), except the
            // one Wireshark raises for the zero UDP checksum over IPv6 that rxe sends.
            let ipv6 = !row[7].is_empty();
            let sevs = row[5].split(';').filter(|s| !s.is_empty());
            let msgs: Vec<&str> = row[6].split(';').collect();
            for (j, sev) in sevs.enumerate() {
                let msg = msgs.get(j).copied().unwrap_or("");
                let tolerated = ipv6 && msg == "Illegal checksum value (0)";
                assert!(
                    num(sev) < 6_291_456 || tolerated,
                    "{what}: expert {sev} {msg}"
                );
            }
        }
        // and our reader returns what we wrote
        let mut r = pcap::open(&path).unwrap();
        let mut k = 0;
        while let Some(rec) = r.next_record() {
            let rec = rec.unwrap();
            let f = frame::parse(rec.linktype, rec.data).unwrap().unwrap();
            assert_eq!(f.opcode().unwrap().0, expect[k].0);
            assert_eq!(
                rec.timestamp.subsec_nanos(),
                match precision {
                    Precision::Micro => 123_456_000,
                    Precision::Nano => 123_456_789,
                }
            );
            k += 1;
        }
        assert_eq!(k, expect.len());
    }
}
