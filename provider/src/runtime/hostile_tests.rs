//! Hostile datagrams at a live device over real UDP sockets (127.0.9.40 with its connected peer
//! on .41, attacked from a plain socket on .42, under the default ICRC policy; .43–.45 and
//! .46–.48 the same under the strict and the assume-zero policies):
//! an empty datagram, runts, random bytes, huge datagrams, and ICRC-valid packets that the
//! engine must refuse (reserved opcode, unknown QP, wrong source, wrong P_Key, TVer, truncated
//! extension header, bad pad, a UD opcode on an RC QP), some in a burst that GRO coalesces. Each
//! one is counted under exactly one drop reason, none is acted on, nothing panics, and the
//! connected pair keeps working afterwards.
//!
//! Under the default policy (`RecoverId`) and `Strict` the driver's ICRC check counts random
//! bytes (`icrc_bad`); under `AssumeZeroElseAccept` (an IPv4 ICRC that does not match for ID 0
//! is accepted as "not verifiable") they reach the engine and its header checks count them.

use crate::verbs::{
    AccessFlags, CompletionQueue, Context, DeviceConfig, Mtu, QpType, SendRequest, WcOpcode,
    WorkCompletion,
};
use roce_emu::net::{seal, Transmit};
use roce_udp::IcrcPolicy;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);

/// Every drop reason a datagram can be counted under: the driver's (runtime) and the engine's.
const DROPS: &[&str] = &[
    "rx_dropped",
    "icrc_bad",
    "icrc_errors",
    "malformed",
    "bad_opcode",
    "bad_dst",
    "no_qp",
    "bad_state",
    "bad_src",
    "bad_pkey",
    "qkey_violation",
    "resp_ignored",
    "req_dropped",
];

fn counters(d: &Context) -> HashMap<String, u64> {
    d.runtime().unwrap().stats().counters.into_iter().collect()
}

fn delta(after: &HashMap<String, u64>, before: &HashMap<String, u64>, name: &str) -> u64 {
    let a = *after
        .get(name)
        .unwrap_or_else(|| panic!("no counter {name}"));
    a - before.get(name).copied().unwrap_or(0)
}

/// Polls `cq` until `n` successful completions arrived; returns them.
fn reap(cq: &CompletionQueue, n: usize) -> Vec<WorkCompletion> {
    let mut wcs = [WorkCompletion::default(); 16];
    let (mut got, start) = (Vec::new(), Instant::now());
    while got.len() < n {
        assert!(start.elapsed() < T, "{} of {n} completions", got.len());
        for wc in cq.poll(&mut wcs).unwrap().iter() {
            assert!(wc.is_ok(), "{wc:?}");
            got.push(*wc);
        }
    }
    got
}

/// An RC request or ACK: BTH (opcode, TVer, P_Key, destination QP, PSN), `ext` extension
/// bytes, `payload`, zero pad to 4 bytes, then the ICRC sealed for a datagram from `from` to
/// the device with IPv4 identification 0 (what the kernel gives an unconnected DF socket).
struct Pkt {
    opcode: u8,
    tver: u8,
    pkey: u16,
    dqpn: u32,
    ext: usize,
    payload: usize,
    /// Pad count written into the BTH (normally what `payload` needs).
    pad: Option<u8>,
}

impl Pkt {
    fn send_only(dqpn: u32) -> Pkt {
        Pkt {
            opcode: 0x04,
            tver: 0,
            pkey: 0xFFFF,
            dqpn,
            ext: 0,
            payload: 16,
            pad: None,
        }
    }

    fn build(&self, from: SocketAddr, to: IpAddr) -> Vec<u8> {
        let pad = self.pad.unwrap_or(((4 - self.payload % 4) % 4) as u8);
        let len = 12 + self.ext + self.payload + pad as usize + 4;
        let mut b = vec![0u8; len];
        b[0] = self.opcode;
        b[1] = (pad & 3) << 4 | (self.tver & 0x0F);
        b[2..4].copy_from_slice(&self.pkey.to_be_bytes());
        b[5..8].copy_from_slice(&self.dqpn.to_be_bytes()[1..]);
        b[8] = 0x80; // AckReq
        b[11] = 1; // PSN 1
        for (i, x) in b[12..len - 4].iter_mut().enumerate() {
            *x = i as u8;
        }
        let t = Transmit {
            src_ip: from.ip(),
            dst_ip: to,
            src_port: from.port(),
            dst_port: 4791,
            tos: 0,
            ttl: 64,
            flow_label: 0,
            ipv4_id: 0,
            len,
        };
        assert!(seal(&t, &mut b));
        b
    }
}

/// splitmix64: the random datagrams are the same in every run.
fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn hostile_datagrams_are_each_counted_once_and_the_connected_pair_keeps_working() {
    attack("127.0.9.40", "127.0.9.41", "127.0.9.42", None);
}

#[test]
fn under_the_strict_icrc_policy_too() {
    attack(
        "127.0.9.43",
        "127.0.9.44",
        "127.0.9.45",
        Some(IcrcPolicy::Strict),
    );
}

#[test]
fn under_the_assume_zero_icrc_policy_random_bytes_are_header_drops() {
    attack(
        "127.0.9.46",
        "127.0.9.47",
        "127.0.9.48",
        Some(IcrcPolicy::AssumeZeroElseAccept),
    );
}

/// Sends the hostile set from `attacker` at `dev` (connected to `peer`) under `policy` (None: the
/// default). Random bytes are ICRC drops, except under `AssumeZeroElseAccept`, where they may
/// land under any drop reason.
fn attack(dev: &str, peer: &str, attacker: &str, policy: Option<IcrcPolicy>) {
    // `Device::open` with the runtime's ICRC policy set (the verbs config does not carry it)
    let open = |ip: &str| {
        let cfg = DeviceConfig {
            mtu: Mtu::Mtu1024,
            ..DeviceConfig::new(ip.parse().unwrap())
        };
        let mut rc = crate::runtime::Config::new(cfg.ip);
        rc.mtu = cfg.mtu.bytes();
        if let Some(p) = policy {
            rc.icrc_policy = p;
        }
        let dev = crate::runtime::Device::open(rc).unwrap();
        Context::from_engine(Arc::new(crate::verbs::engine::UdpEngine::new(dev)), cfg)
    };
    let (a, b) = (open(dev), open(peer));
    let junk = (policy != Some(IcrcPolicy::AssumeZeroElseAccept)).then_some("icrc_bad");
    let (pa, pb) = (a.alloc_pd().unwrap(), b.alloc_pd().unwrap());
    let (ca, cb) = (
        a.create_cq(256).build().unwrap(),
        b.create_cq(256).build().unwrap(),
    );
    let mk = |pd: &crate::verbs::ProtectionDomain, cq| {
        pd.create_qp(cq, cq, QpType::Rc)
            .set_path_mtu(Mtu::Mtu1024)
            .build()
            .unwrap()
    };
    let (qa, qb) = (mk(&pa, &ca), mk(&pb, &cb));
    let qpn = qa.qpn();
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    let (qa, qb) = (qa.handshake(eb).unwrap(), qb.handshake(ea).unwrap());
    let all = AccessFlags::ALL_REMOTE;
    let (ma, mb) = (
        pa.allocate(1 << 16, all).unwrap(),
        pb.allocate(1 << 16, all).unwrap(),
    );
    // The pair works, and a receive is posted on the attacked QP (a SEND that got through
    // would complete it).
    qa.post_receive(&[ma.slice(..4096)], 7).unwrap();
    qb.post_receive(&[mb.slice(..4096)], 1).unwrap();
    qa.post_send_inline(b"before", 1).unwrap();
    assert_eq!(reap(&cb, 1)[0].opcode(), WcOpcode::Recv);
    reap(&ca, 1);

    let sock = UdpSocket::bind((attacker.parse::<IpAddr>().unwrap(), 0)).unwrap();
    let me = sock.local_addr().unwrap();
    let to: SocketAddr = (dev.parse::<IpAddr>().unwrap(), 4791).into();
    let before = counters(&a);

    // (datagram, the one counter it must land in; None: any drop reason)
    let mut hostile: Vec<(Vec<u8>, Option<&str>)> = Vec::new();
    let mut seed = 0x5EED_u64;
    // An empty datagram, runts (shorter than BTH + ICRC), random bytes, and more than any
    // packet the device could send (9000 and 60000 bytes, and the largest UDP payload).
    let sizes = [0usize, 1, 3, 11, 12, 15, 9000, 60_000, 65_507]
        .into_iter()
        .chain((0..40).map(|_| 16 + (next(&mut seed) % 300) as usize))
        .collect::<Vec<_>>();
    for n in sizes {
        hostile.push(((0..n).map(|_| next(&mut seed) as u8).collect(), junk));
    }
    // ICRC-valid packets the engine refuses.
    let cases: Vec<(Pkt, &str)> = vec![
        // reserved RC opcode
        (
            Pkt {
                opcode: 0x1F,
                ..Pkt::send_only(qpn)
            },
            "bad_opcode",
        ),
        // a UD SEND ONLY to an RC QP
        (
            Pkt {
                opcode: 0x64,
                ext: 8,
                ..Pkt::send_only(qpn)
            },
            "bad_opcode",
        ),
        (Pkt::send_only(0xAB_CDEF), "no_qp"),
        // the attacked QP, but not from its connected peer
        (Pkt::send_only(qpn), "bad_src"),
        // an ACK for it, from the wrong source
        (
            Pkt {
                opcode: 0x11,
                ext: 4,
                payload: 0,
                ..Pkt::send_only(qpn)
            },
            "bad_src",
        ),
        (
            Pkt {
                pkey: 0x1234,
                ..Pkt::send_only(qpn)
            },
            "bad_pkey",
        ),
        (
            Pkt {
                tver: 1,
                ..Pkt::send_only(qpn)
            },
            "malformed",
        ),
        // RDMA WRITE ONLY without its RETH
        (
            Pkt {
                opcode: 0x0A,
                payload: 0,
                ..Pkt::send_only(qpn)
            },
            "malformed",
        ),
        // payload + pad not a multiple of four
        (
            Pkt {
                payload: 5,
                pad: Some(0),
                ..Pkt::send_only(qpn)
            },
            "malformed",
        ),
    ];
    for (p, why) in cases {
        hostile.push((p.build(me, to.ip()), Some(why)));
    }
    // A burst of equal-size packets from one socket, which GRO may coalesce into one buffer.
    for _ in 0..32 {
        hostile.push((Pkt::send_only(0x00_0123).build(me, to.ip()), Some("no_qp")));
    }
    let (mut expect, mut anywhere) = (HashMap::<&str, u64>::new(), 0);
    for (d, why) in &hostile {
        assert_eq!(sock.send_to(d, to).unwrap(), d.len());
        match why {
            Some(w) => *expect.entry(w).or_default() += 1,
            None => anywhere += 1,
        }
    }

    // The device receives them all (polling its CQ drives it too).
    let n = hostile.len() as u64;
    let start = Instant::now();
    let mut wcs = [WorkCompletion::default(); 4];
    let after = loop {
        assert_eq!(
            ca.poll(&mut wcs).unwrap().len(),
            0,
            "a hostile datagram completed work"
        );
        let c = counters(&a);
        let rx = delta(&c, &before, "rx_datagrams");
        let kernel = delta(&c, &before, "rx_kernel_drops");
        assert_eq!(
            kernel, 0,
            "the kernel dropped datagrams: the test proves nothing"
        );
        if rx >= n {
            break c;
        }
        assert!(start.elapsed() < T, "{rx} of {n} datagrams received");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(delta(&after, &before, "rx_datagrams"), n);
    let mut total = 0;
    let mut extra = 0;
    for name in DROPS {
        let got = delta(&after, &before, name);
        let want = expect.get(name).copied().unwrap_or(0);
        total += got;
        extra += got.saturating_sub(want);
        assert!(
            got >= want,
            "{name}: counted {got}, expected at least {want}"
        );
        if anywhere == 0 {
            assert_eq!(got, want, "{name}");
        }
    }
    assert_eq!(
        total, n,
        "every hostile datagram counted under exactly one reason"
    );
    assert_eq!(extra, anywhere, "the random ones under some reason");
    assert_eq!(
        delta(&after, &before, "rcvd_pkts"),
        0,
        "a hostile packet was accepted"
    );
    assert_eq!(
        delta(&after, &before, "sent_pkts"),
        0,
        "a hostile packet was answered"
    );

    // The pair still works: the posted receive takes the peer's SEND, then WRITE and READ.
    qb.post_send_inline(b"after", 2).unwrap();
    let got = reap(&ca, 1);
    assert_eq!((got[0].opcode(), got[0].wr_id()), (WcOpcode::Recv, 7));
    reap(&cb, 1);
    qa.post_batch(&[SendRequest::write(
        3,
        &[ma.slice(..4096)],
        mb.remote_slice(..4096),
    )])
    .unwrap();
    reap(&ca, 1);
    qa.post_batch(&[SendRequest::read(
        4,
        &[ma.slice(4096..8192)],
        mb.remote_slice(..4096),
    )])
    .unwrap();
    reap(&ca, 1);
}
