//! `roce decode` on ConnectX Dynamically Connected (DC) packets, which use the Reliable Datagram
//! opcode space (0x40–0x5F) with a vendor layout: the BTH is followed by 8 vendor bytes
//! (Wireshark shows a 20-byte BTH) and then headers that are not the IBA RD layout. The decoder
//! names them DC, shows the BTH only and says how many bytes it did not decode, instead of
//! reading RD headers at the wrong offsets. The two transport packets are frames 2 and 3 of
//! `mlx5_sportrewritten__magnate3__dc-dc-small.pcap` (a ConnectX-6 Dx, see the shared captures'
//! SOURCES.md), sealed here with a correct ICRC so the test needs no shared files.
use roce_wire::frame::{build_ipv4_frame, Ipv4FrameSpec};
use roce_wire::pcap::{Precision, Writer};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// DC RDMA WRITE ONLY of 8 bytes: BTH, 8 vendor bytes, then what Wireshark shows as RDETH,
/// DETH and RETH (va 0x7fb235d09a40, rkey 0x53829, length 8), and the 8-byte payload.
const WRITE_ONLY: &str = "4a40ffff00807fff800440fd 1100903600715001 0061e24e 0000c0dc00000000 \
                          00007fb235d09a400005382900000008 e281a8faf7fc70fb";
/// DC ACKNOWLEDGE: BTH and 24 bytes (the IBA RD layout would be RDETH + AETH, 8 bytes).
const ACK: &str = "5140ffff00009035006a7d5f 10807ff400715001 0061e24f 0000c0db00000000 1f000000";

fn transport(hex: &str) -> Vec<u8> {
    let h: String = hex.split_whitespace().collect();
    let mut v: Vec<u8> = (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect();
    v.extend_from_slice(&[0; 4]); // ICRC, sealed by the frame builder
    v
}

fn capture() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("roce-decode-dc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dc.pcap");
    let mut w = Writer::create(&path, Precision::Micro).unwrap();
    for (i, t) in [WRITE_ONLY, ACK].iter().enumerate() {
        let f = build_ipv4_frame(&Ipv4FrameSpec::default(), &transport(t)).unwrap();
        w.write(Duration::from_millis(1_000 + i as u64), &f)
            .unwrap();
    }
    w.into_inner().unwrap();
    path
}

fn decode(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .arg("decode")
        .args(args)
        .output()
        .expect("run roce");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn dc_opcodes_show_the_bth_only_and_the_undecoded_length() {
    let p = capture();
    let text = decode(&[p.to_str().unwrap()]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains(
            "RoCEv2 DC RDMA_WRITE_ONLY [unsupported] QP=0x807fff PSN=278781 A M \
             DC vendor layout, BTH only: 44 bytes not decoded ICRC ok"
        ),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(
            "RoCEv2 DC ACKNOWLEDGE [unsupported] QP=0x009035 PSN=6978911 M \
             DC vendor layout, BTH only: 24 bytes not decoded ICRC ok"
        ),
        "{}",
        lines[1]
    );
    // No RD header read at RD offsets, no length complaint from the RD layout.
    for l in &lines[..2] {
        for wrong in ["RDETH(", "DETH(", "RETH(", "AETH(", "len=", "inconsistent"] {
            assert!(!l.contains(wrong), "{wrong} in {l}");
        }
    }
    assert!(text.contains("0x4a DC RDMA_WRITE_ONLY"), "{text}");
    assert!(text.contains("0x51 DC ACKNOWLEDGE"), "{text}");

    let json = decode(&["--json", p.to_str().unwrap()]);
    let v: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(v[0]["bth"]["name"], "DC RDMA_WRITE_ONLY");
    assert_eq!(v[0]["bth"]["support"], "unsupported");
    assert_eq!(v[0]["ext"], serde_json::json!({}));
    assert_eq!(v[0]["payload_len"], Value::Null);
    assert_eq!(v[0]["dc_undecoded_len"], 44);
    assert_eq!(v[1]["dc_undecoded_len"], 24);
    assert_eq!(v[1]["error"], Value::Null);
}
