//! Runs the real `roce` binary: `roce decode` on synthetic captures built with our frame
//! builders and pcap writer (always), and on the shared real captures (SKIP when missing, FAIL
//! under `CI=true`).
use roce_tests::prereq::captures_dir;
use roce_wire::frame::{build_ipv4_frame, build_ipv6_frame, Ipv4FrameSpec, Ipv6FrameSpec};
use roce_wire::pcap::{Precision, Writer};
use roce_wire::{
    aeth, atomic_eth, bth, cm, cma, deth, ieth, immdt, mad, reth, transport, Opcode, Psn,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

fn roce(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roce"))
        .args(args)
        .output()
        .expect("run roce")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("roce-decode-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A transport packet of `op` with every header it needs and `payload`.
fn packet(op: Opcode, payload: &[u8]) -> Vec<u8> {
    let mut r = transport::Repr::new(bth::Repr::new(op, 0x12, Psn::new(100)));
    r.bth.ack_req = true;
    let o = op.info().offsets();
    r.reth = o.reth.map(|_| reth::Repr {
        va: 0x55f4_e59c_edb0,
        rkey: 0x1350d,
        dma_len: payload.len() as u32,
    });
    r.aeth = o.aeth.map(|_| aeth::Repr {
        syndrome: aeth::Syndrome::ACK,
        msn: 3,
    });
    r.deth = o.deth.map(|_| deth::Repr {
        qkey: 0x8001_0000,
        resv: 0,
        src_qp: roce_wire::Qpn::new(1),
    });
    r.immdt = o.immdt.map(|_| immdt::Repr { imm: 0xcafe });
    r.ieth = o.ieth.map(|_| ieth::Repr { rkey: 0x77 });
    r.atomic_eth = o.atmeth.map(|_| atomic_eth::Repr {
        va: 0x1000,
        rkey: 9,
        swap_add: 5,
        compare: 6,
    });
    r.set_payload_len(payload.len());
    let mut buf = vec![0u8; r.buffer_len()];
    let mut p = transport::Packet::new_unchecked(&mut buf[..]);
    r.emit(&mut p);
    buf[r.header_len()..r.header_len() + payload.len()].copy_from_slice(payload);
    buf
}

/// Writes a capture with 11 frames: 8 valid RoCE packets (one IPv6, one reserved opcode, one
/// RD), one with a bad ICRC, one truncated, and one DNS datagram.
fn synthetic(path: &Path) {
    let v4 = Ipv4FrameSpec::default();
    let mut w = Writer::create(path, Precision::Micro).unwrap();
    let mut t = 0u64;
    let mut put = |w: &mut Writer<_>, f: &[u8], orig: usize| {
        t += 1;
        w.write_captured(Duration::from_millis(1_000 + t), f, orig as u32)
            .unwrap();
    };
    for (op, pl) in [
        (Opcode::RC_SEND_ONLY, &b"hello"[..]),
        (Opcode::RC_ACKNOWLEDGE, b""),
        (Opcode::UD_SEND_ONLY_WITH_IMMEDIATE, b"mad"),
        (Opcode::RC_COMPARE_SWAP, b""),
        (Opcode::RC_SEND_ONLY_WITH_INVALIDATE, b"x"),
        (Opcode(0x15), b""),
        (Opcode(0x4a), b"abcd"),
    ] {
        let f = build_ipv4_frame(&v4, &packet(op, pl)).unwrap();
        put(&mut w, &f, f.len());
    }
    let f6 = build_ipv6_frame(
        &Ipv6FrameSpec::default(),
        &packet(Opcode::RC_RDMA_WRITE_ONLY, b"written"),
    )
    .unwrap();
    put(&mut w, &f6, f6.len());
    let mut bad = build_ipv4_frame(&v4, &packet(Opcode::RC_SEND_ONLY, b"bad")).unwrap();
    let n = bad.len();
    bad[n - 1] ^= 0x5a;
    put(&mut w, &bad, n);
    let long = build_ipv4_frame(&v4, &packet(Opcode::RC_SEND_ONLY, &[7; 1000])).unwrap();
    put(&mut w, &long[..128], long.len());
    let mut dns = build_ipv4_frame(&v4, &packet(Opcode::RC_SEND_ONLY, b"")).unwrap();
    dns[36..38].copy_from_slice(&53u16.to_be_bytes());
    put(&mut w, &dns, dns.len());
    w.into_inner().unwrap();
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn summary(lines: &[Value]) -> &Value {
    lines.iter().find(|v| v["kind"] == "summary").unwrap()
}

#[test]
fn synthetic_capture_text_lines_summary_and_exit_1() {
    let p = tmp("synthetic.pcap");
    synthetic(&p);
    let out = roce(&["decode", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "one bad ICRC → exit 1");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // 10 RoCE packet lines, then the summary
    assert!(lines[0].contains("10.0.0.1:49152 → 10.0.0.2:4791 RoCEv2 RC SEND_ONLY QP=0x000012 PSN=100 A pad=3 len=5 ICRC ok"), "{}", lines[0]);
    assert!(
        lines[1].contains("RC ACKNOWLEDGE")
            && lines[1].contains("AETH(ACK credits=31 msn=3) len=0 ICRC ok")
    );
    assert!(
        lines[2].contains("UD SEND_ONLY_WITH_IMMEDIATE")
            && lines[2].contains("DETH(qkey=0x80010000 srcqp=0x1) ImmDt(0x0000cafe) len=3")
    );
    assert!(lines[3].contains("AtomicETH(va=0x1000 rkey=0x9 swap_add=0x5 cmp=0x6)"));
    assert!(lines[4].contains("IETH(rkey=0x77) len=1 ICRC ok"));
    assert!(lines[5].contains("RC unknown(0x15)") && lines[5].contains("[unknown opcode 0x15]"));
    assert!(lines[6].contains("DC RDMA_WRITE_ONLY [unsupported]") && lines[6].contains("ICRC ok"));
    assert!(
        lines[7].contains("fe80::1:49152 → fe80::2:4791 RoCEv2 RC RDMA_WRITE_ONLY")
            && lines[7].contains("RETH(va=0x55f4e59cedb0 rkey=0x1350d len=7) len=7 ICRC ok")
    );
    assert!(lines[8].contains("ICRC BAD (computed"));
    assert!(lines[9].contains("len=1000 truncated"), "{}", lines[9]);
    assert!(lines[10].starts_with("== "));
    assert!(text.contains("RoCE packets: 10 (v1 0, v2 10); not RoCE: 1"));
    assert!(text.contains("ICRC valid: 8, invalid: 1, truncated: 1, malformed: 0"));
}

#[test]
fn synthetic_capture_json_and_write_pcap_round_trip() {
    let p = tmp("synthetic-json.pcap");
    synthetic(&p);
    let out_pcap = tmp("rewritten.pcap");
    let out = roce(&[
        "decode",
        "--json",
        "--write-pcap",
        out_pcap.to_str().unwrap(),
        p.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let a = json_lines(&out);
    let s = summary(&a);
    assert_eq!(s["roce"], 10);
    assert_eq!(s["icrc_valid"], 8);
    assert_eq!(s["icrc_invalid"], 1);
    assert_eq!(s["truncated"], 1);
    assert_eq!(s["not_roce"], 1);
    let send = &a[0];
    assert_eq!(send["bth"]["name"], "RC SEND_ONLY");
    assert_eq!(send["bth"]["qpn"], 0x12);
    assert_eq!(send["bth"]["psn"], 100);
    assert_eq!(send["bth"]["ack_req"], true);
    assert_eq!(send["payload_len"], 5);
    assert_eq!(send["icrc"], "valid");
    assert_eq!(a[7]["ext"]["reth"]["rkey"], 0x1350d);
    assert_eq!(a[6]["bth"]["support"], "unsupported");
    assert_eq!(a[5]["bth"]["support"], "unknown");
    // The written pcap holds exactly the 10 RoCE packets and decodes the same.
    let again = roce(&["decode", "--json", out_pcap.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    let b = json_lines(&again);
    let sb = summary(&b);
    assert_eq!(sb["frames"], 10);
    assert_eq!(sb["not_roce"], 0);
    for k in ["roce", "icrc_valid", "icrc_invalid", "truncated", "opcodes"] {
        assert_eq!(s[k], sb[k], "{k}");
    }
    for (x, y) in a.iter().zip(&b).filter(|(x, _)| x["kind"] == "packet") {
        for k in [
            "bth",
            "ext",
            "src",
            "dst",
            "payload_len",
            "icrc",
            "timestamp",
        ] {
            assert_eq!(x[k], y[k], "{k}");
        }
    }
}

#[test]
fn unreadable_files_exit_2_with_a_message() {
    let missing = tmp("does-not-exist.pcap");
    let out = roce(&["decode", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does-not-exist.pcap"), "{err}");
    let junk = tmp("junk.pcap");
    std::fs::write(&junk, b"this is not a capture file").unwrap();
    let good = tmp("good.pcap");
    let mut w = Writer::create(&good, Precision::Nano).unwrap();
    let f = build_ipv4_frame(
        &Ipv4FrameSpec::default(),
        &packet(Opcode::RC_SEND_ONLY, b""),
    )
    .unwrap();
    w.write(Duration::ZERO, &f).unwrap();
    w.into_inner().unwrap();
    let out = roce(&[
        "decode",
        "--json",
        junk.to_str().unwrap(),
        good.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "unreadable wins over a good file"
    );
    let lines = json_lines(&out);
    assert_eq!(lines[0]["kind"], "error");
    assert_eq!(summary(&lines)["icrc_valid"], 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("junk.pcap"));
    // A good file alone exits 0.
    assert_eq!(
        roce(&["decode", good.to_str().unwrap()]).status.code(),
        Some(0)
    );
}

/// `(file, RoCE packets, valid, invalid, truncated)` from SOURCES.md.
const REAL: &[(&str, u64, u64, u64, u64)] = &[
    (
        "mlx5_rocev1__magnate3__mellanox-doc-rocev1.pcap",
        2468,
        2468,
        0,
        0,
    ),
    (
        "mlx5_rocev1v2mix__magnate3__mellanox-doc-rocev1_test.pcap",
        624,
        624,
        0,
        0,
    ),
    (
        "mlx5_rocev2__magnate3__mellanox-doc-rocev2_test.pcap",
        708,
        708,
        0,
        0,
    ),
    (
        "mlx5_rocev2__magnate3__mellanox-doc-rocev2-2_test.pcap",
        641,
        641,
        0,
        0,
    ),
    (
        "mlx5_rocev2__magnate3__mellanox-doc-ib_send_bw_over_roce.pcap",
        10,
        10,
        0,
        0,
    ),
    (
        "mlx5_rocev2__magnate3__02-2-write-ibdump-write.pcap",
        17,
        17,
        0,
        0,
    ),
    (
        "mlx5_rocev2__magnate3__rdma-write-read-ibdump-read2.pcap",
        13,
        13,
        0,
        0,
    ),
    (
        "mlx5_rocev2__magnate3__send_recv-ibdump-send.pcap",
        9,
        9,
        0,
        0,
    ),
    (
        "mlx5_rocev2_nvmeof__magnate3__nvme-discover.pcap",
        61,
        61,
        0,
        0,
    ),
    (
        "mlx5_rocev2_nvmeof__magnate3__nvme-discover2.pcap",
        31,
        31,
        0,
        0,
    ),
    (
        "mlx5_rocev2_nvmeof__magnate3__nvme-rdma-25echoTo27.pcap",
        45,
        45,
        0,
        0,
    ),
    (
        "mlx5_rocev2_nvmeof__magnate3__nvme-rdma-idle.pcap",
        4,
        4,
        0,
        0,
    ),
    (
        "mlx5_sportrewritten__magnate3__dc-rc-small.pcap",
        21,
        0,
        21,
        0,
    ),
    (
        "mlx5_sportrewritten__magnate3__dc-dc-small.pcap",
        19,
        0,
        19,
        0,
    ),
    (
        "mlx5_sportrewritten__magnate3__dc-dc-small2.pcap",
        29,
        0,
        29,
        0,
    ),
    ("mlx5_sportrewritten__magnate3__uc-sg.pcap", 17, 0, 17, 0),
    (
        "mlx5_sportrewritten_snaplen__magnate3__uccl-rdma-nccl2.pcap",
        509,
        0,
        20,
        489,
    ),
    ("huawei_rocev2__oferby-proxy__roce.pcap", 105, 105, 0, 0),
    (
        "rxe_rocev2__montybeatnik__roce_capture_read-write-ecn.pcap",
        12,
        12,
        0,
        0,
    ),
    ("rxe_rocev2__montybeatnik__test.pcap", 12, 12, 0, 0),
];

/// `roce decode --json` on all 20 real captures reports the SOURCES.md verdicts per file and
/// exits 1 (the sport-rewritten files have bad ICRCs); the valid-only files exit 0.
#[test]
fn real_captures_verdicts_and_exit_status() {
    let dir = captures_dir();
    let what = "../shared/captures/real";
    if !roce_tests::prereq::require(
        "real_captures_verdicts_and_exit_status",
        what,
        dir.is_some(),
    ) {
        return;
    }
    let dir = dir.unwrap();
    let paths: Vec<String> = REAL
        .iter()
        .map(|r| dir.join(r.0).to_string_lossy().into_owned())
        .collect();
    let mut args = vec!["decode", "--json"];
    args.extend(paths.iter().map(String::as_str));
    let out = roce(&args);
    assert_eq!(out.status.code(), Some(1));
    let lines = json_lines(&out);
    let sums: Vec<&Value> = lines.iter().filter(|v| v["kind"] == "summary").collect();
    assert_eq!(sums.len(), REAL.len());
    for (s, &(file, roce, valid, invalid, truncated)) in sums.iter().zip(REAL) {
        assert!(s["file"].as_str().unwrap().ends_with(file));
        let got = (
            &s["roce"],
            &s["icrc_valid"],
            &s["icrc_invalid"],
            &s["truncated"],
            &s["malformed"],
        );
        assert_eq!(
            got,
            (
                &roce.into(),
                &valid.into(),
                &invalid.into(),
                &truncated.into(),
                &0.into()
            ),
            "{file}"
        );
    }
    let packets = lines.iter().filter(|v| v["kind"] == "packet").count() as u64;
    assert_eq!(packets, REAL.iter().map(|r| r.1).sum::<u64>());
    let valid_only: Vec<&str> = paths
        .iter()
        .zip(REAL)
        .filter(|(_, r)| r.3 == 0 && r.4 == 0)
        .map(|(p, _)| p.as_str())
        .collect();
    let mut args = vec!["decode"];
    args.extend(valid_only);
    assert_eq!(roce(&args).status.code(), Some(0));
}

/// A UD SEND_ONLY to QP 1 (A=1, Q_Key 0x80010000, SrcQP 1) carrying the 256-byte `mad`.
fn gsi_packet(mad_bytes: &[u8; 256], psn: u32) -> Vec<u8> {
    let mut r = transport::Repr::new(bth::Repr::new(Opcode::UD_SEND_ONLY, 1, Psn::new(psn)));
    r.bth.ack_req = true;
    r.deth = Some(deth::Repr {
        qkey: mad::GSI_QKEY,
        resv: 0,
        src_qp: roce_wire::Qpn::new(1),
    });
    packet_with(r, mad_bytes)
}

fn packet_with(mut r: transport::Repr, payload: &[u8]) -> Vec<u8> {
    r.set_payload_len(payload.len());
    let mut buf = vec![0u8; r.buffer_len()];
    r.emit(&mut transport::Packet::new_unchecked(&mut buf[..]));
    buf[r.header_len()..r.header_len() + payload.len()].copy_from_slice(payload);
    buf
}

/// The CM exchange of an rping-like connection, a reject, a SIDR exchange, an MRA, then a
/// MAD of another class, a LAP (not decoded), and a REQ cut by the capture's snap length.
fn cm_capture(path: &Path) {
    let gid = |a: [u8; 4]| {
        let mut g = [0u8; 16];
        g[10..12].copy_from_slice(&[0xff, 0xff]);
        g[12..].copy_from_slice(&a);
        g
    };
    let mut req_pd = [0u8; cm::req::PRIVATE_DATA_LEN];
    cma::Repr::new([10, 0, 0, 1].into(), 40000, [10, 0, 0, 2].into())
        .emit(&mut cma::Packet::new_unchecked(&mut req_pd[..]));
    let req = cm::req::Repr {
        local_comm_id: 0x1234_5678,
        vendor_id: 0,
        service_id: cma::service_id(cma::PortSpace::Tcp, 7174),
        local_ca_guid: 0x0211_22ff_fe33_4455,
        local_qkey: 0,
        local_qpn: 0x11,
        responder_resources: 1,
        local_eecn: 0,
        initiator_depth: 1,
        remote_eecn: 0,
        remote_cm_response_timeout: 20,
        transport_service_type: cm::req::service_type::RC,
        end_to_end_flow_control: false,
        starting_psn: Psn::new(0xab_cdef),
        local_cm_response_timeout: 20,
        retry_count: 7,
        partition_key: 0xffff,
        path_mtu: 3,
        rdc_exists: false,
        rnr_retry_count: 7,
        max_cm_retries: 15,
        srq: false,
        extended_transport_type: 0,
        primary_path: cm::path::Repr {
            local_port_lid: 0xffff,
            remote_port_lid: 0xffff,
            local_port_gid: gid([10, 0, 0, 1]),
            remote_port_gid: gid([10, 0, 0, 2]),
            flow_label: cma::roce_udp_flow_label(40000, 7174),
            packet_rate: 0,
            traffic_class: 0,
            hop_limit: 64,
            sl: 0,
            subnet_local: false,
            local_ack_timeout: 19,
        },
        alternate_path: cm::path::Repr::default(),
        sap_supported: false,
        private_data: req_pd,
    };
    let rep = cm::rep::Repr {
        local_comm_id: 0x9abc_def0,
        remote_comm_id: 0x1234_5678,
        local_qkey: 0,
        local_qpn: 0x12,
        vendor_id: 0,
        local_eecn: 0,
        starting_psn: Psn::new(0x12_3456),
        responder_resources: 1,
        initiator_depth: 1,
        target_ack_delay: 15,
        failover_accepted: 0,
        end_to_end_flow_control: false,
        rnr_retry_count: 7,
        srq: false,
        local_ca_guid: 0x0266_77ff_fe88_99aa,
        private_data: [0; cm::rep::PRIVATE_DATA_LEN],
    };
    let rej = cm::rej::Repr::new(
        0x9abc_def1,
        0x1234_5679,
        cm::RejReason::ConsumerDefined,
        b"no thanks",
    )
    .unwrap();
    let mut sidr_pd = [0u8; cm::sidr_req::PRIVATE_DATA_LEN];
    cma::Repr::new(
        "fd00::1".parse().unwrap(),
        40001,
        "fd00::2".parse().unwrap(),
    )
    .emit(&mut cma::Packet::new_unchecked(&mut sidr_pd[..]));
    let sidr_req = cm::sidr_req::Repr {
        request_id: 0x42,
        partition_key: 0xffff,
        service_id: cma::service_id(cma::PortSpace::Udp, 7174),
        private_data: sidr_pd,
    };
    let sidr_rep = cm::sidr_rep::Repr {
        request_id: 0x42,
        status: cm::SidrStatus::Success,
        additional_info_length: 0,
        vendor_id: 0,
        qpn: 0x13,
        service_id: sidr_req.service_id,
        qkey: cma::RDMA_UDP_QKEY,
        additional_info: [0; cm::sidr_rep::ADDITIONAL_INFO_LEN],
        private_data: [0; cm::sidr_rep::PRIVATE_DATA_LEN],
    };
    let mra = cm::mra::Repr {
        local_comm_id: 0x9abc_def0,
        remote_comm_id: 0x1234_5678,
        message_mraed: cm::MsgResponse::Req,
        service_timeout: 24,
        private_data: [0; cm::mra::PRIVATE_DATA_LEN],
    };
    let tid = 0x0000_002a_7856_3412;
    let msgs = [
        cm::Message::Req(req),
        cm::Message::Rep(rep),
        cm::Message::Rtu(cm::rtu::Repr::new(0x1234_5678, 0x9abc_def0)),
        cm::Message::Dreq(cm::dreq::Repr::new(0x1234_5678, 0x9abc_def0, 0x12)),
        cm::Message::Drep(cm::drep::Repr::new(0x9abc_def0, 0x1234_5678)),
        cm::Message::Rej(rej),
        cm::Message::SidrReq(sidr_req),
        cm::Message::SidrRep(sidr_rep),
        cm::Message::Mra(mra),
    ];
    let spec = Ipv4FrameSpec {
        src_port: 0xd872,
        ..Default::default()
    };
    let mut w = Writer::create(path, Precision::Micro).unwrap();
    let mut t = 0;
    let mut put = |w: &mut Writer<_>, f: &[u8], orig: usize| {
        t += 1;
        w.write_captured(Duration::from_millis(t), f, orig as u32)
            .unwrap();
    };
    for (i, m) in msgs.iter().enumerate() {
        let mut b = [0u8; 256];
        cm::Mad::new(tid, *m).emit(&mut b).unwrap();
        let f = build_ipv4_frame(&spec, &gsi_packet(&b, i as u32)).unwrap();
        put(&mut w, &f, f.len());
    }
    // A SubnAdm Get (class 3): header only.
    let mut b = [0u8; 256];
    let sa = mad::Repr {
        mgmt_class: mad::class::SUBN_ADM,
        method: mad::method::GET,
        attr_id: 0x0035,
        ..mad::Repr::cm(0, 0x77)
    };
    sa.emit(&mut mad::Packet::new_unchecked(&mut b[..]));
    let f = build_ipv4_frame(&spec, &gsi_packet(&b, 9)).unwrap();
    put(&mut w, &f, f.len());
    // A CM LAP: a CM MAD of an attribute with no decoder.
    mad::Repr::cm(0x0019, 0x78).emit(&mut mad::Packet::new_unchecked(&mut b[..]));
    let f = build_ipv4_frame(&spec, &gsi_packet(&b, 10)).unwrap();
    put(&mut w, &f, f.len());
    // The REQ again, cut after 128 bytes of frame.
    let mut b = [0u8; 256];
    cm::Mad::new(tid, msgs[0]).emit(&mut b).unwrap();
    let f = build_ipv4_frame(&spec, &gsi_packet(&b, 11)).unwrap();
    put(&mut w, &f[..128], f.len());
    w.into_inner().unwrap();
}

#[test]
fn cm_mads_on_qp1_are_decoded_text_and_json() {
    let p = tmp("cm.pcap");
    cm_capture(&p);
    let out = roce(&["decode", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "all ICRCs valid");
    let text = String::from_utf8(out.stdout).unwrap();
    let l: Vec<&str> = text.lines().collect();
    let has = |i: usize, s: &str| assert!(l[i].contains(s), "line {i}: {}\nwants: {s}", l[i]);
    has(
        0,
        "10.0.0.1:55410 → 10.0.0.2:4791 RoCEv2 UD SEND_ONLY QP=0x000001 PSN=0 A",
    );
    has(
        0,
        "DETH(qkey=0x80010000 srcqp=0x1) CM REQ lcid=0x12345678 sid=0x0000000001061c06 \
         (TCP port 7174) qpn=0x11 psn=11259375 cma 10.0.0.1:40000 → 10.0.0.2 \
         tid=0x0000002a78563412 len=256 ICRC ok",
    );
    has(
        1,
        "CM REP lcid=0x9abcdef0 rcid=0x12345678 qpn=0x12 psn=1193046 tid=0x0000002a78563412",
    );
    has(2, "CM RTU lcid=0x12345678 rcid=0x9abcdef0 tid=");
    has(
        3,
        "CM DREQ lcid=0x12345678 rcid=0x9abcdef0 remote_qpn=0x12 tid=",
    );
    has(4, "CM DREP lcid=0x9abcdef0 rcid=0x12345678 tid=");
    has(
        5,
        "CM REJ lcid=0x9abcdef1 rcid=0x12345679 reason=28 (consumer defined) tid=",
    );
    has(
        6,
        "CM SIDR_REQ request_id=0x00000042 sid=0x0000000001111c06 (UDP port 7174) \
         cma [fd00::1]:40001 → fd00::2 tid=",
    );
    has(
        7,
        "CM SIDR_REP request_id=0x00000042 status=0 (success) sid=0x0000000001111c06 \
         (UDP port 7174) qpn=0x13 qkey=0x1234567 tid=",
    );
    has(
        8,
        "CM MRA lcid=0x9abcdef0 rcid=0x12345678 service_timeout=24 tid=",
    );
    has(
        9,
        "MAD SubnAdm v2 Get attr=0x0035 tid=0x0000000000000077 len=256",
    );
    has(
        10,
        "MAD CM v2 Send attr=0x0019 tid=0x0000000000000078 (LAP) \
         [unknown MAD attribute 0x0019] len=256",
    );
    has(
        11,
        "MAD CM v2 Send attr=0x0010 tid=0x0000002a78563412 (REQ) [MAD shorter",
    );
    has(11, "truncated");

    let out = roce(&["decode", "--json", p.to_str().unwrap()]);
    let a = json_lines(&out);
    let cm = |i: usize| &a[i]["mad"]["cm"];
    assert_eq!(a[0]["mad"]["mgmt_class"], 7);
    assert_eq!(a[0]["mad"]["class_version"], 2);
    assert_eq!(a[0]["mad"]["method"], 3);
    assert_eq!(a[0]["mad"]["attr_id"], 0x10);
    assert_eq!(a[0]["mad"]["tid"], 0x0000_002a_7856_3412u64);
    assert_eq!(cm(0)["message"], "REQ");
    assert_eq!(cm(0)["local_comm_id"], 0x1234_5678);
    assert_eq!(cm(0)["service_id"], 0x0000_0000_0106_1c06u64);
    assert_eq!(cm(0)["port_space"], "TCP");
    assert_eq!(cm(0)["port"], 7174);
    assert_eq!(cm(0)["qpn"], 0x11);
    assert_eq!(cm(0)["starting_psn"], 0xab_cdef);
    assert_eq!(
        cm(0)["cma"],
        serde_json::json!({"version": 0, "ip_version": 4, "src": "10.0.0.1",
                           "src_port": 40000, "dst": "10.0.0.2"})
    );
    assert!(cm(0)["detail"]
        .as_str()
        .unwrap()
        .contains("path[10.0.0.1 → 10.0.0.2"));
    assert!(cm(0).get("remote_comm_id").is_none());
    assert_eq!(cm(1)["message"], "REP");
    assert_eq!(cm(1)["remote_comm_id"], 0x1234_5678);
    assert_eq!(cm(1)["qpn"], 0x12);
    assert_eq!(cm(1)["starting_psn"], 0x12_3456);
    assert_eq!(cm(3)["remote_qpn"], 0x12);
    assert_eq!(cm(5)["reason"], 28);
    assert_eq!(cm(6)["cma"]["ip_version"], 6);
    assert_eq!(cm(6)["cma"]["src"], "fd00::1");
    assert_eq!(cm(7)["status"], 0);
    assert_eq!(cm(7)["qkey"], 0x0123_4567);
    assert_eq!(cm(8)["service_timeout"], 24);
    assert_eq!(a[9]["mad"]["mgmt_class"], 3);
    assert!(a[9]["mad"].get("cm").is_none());
    assert_eq!(a[10]["mad"]["error"], "unknown MAD attribute 0x0019");
    assert_eq!(a[11]["icrc"], "truncated");
    assert!(a[11]["mad"]["error"].as_str().unwrap().contains("256"));
    // Not a MAD: other QPs' packets have no "mad" key.
    let s = tmp("synthetic-nomad.pcap");
    synthetic(&s);
    let b = json_lines(&roce(&["decode", "--json", s.to_str().unwrap()]));
    assert!(b.iter().all(|v| v.get("mad").is_none()));
}
