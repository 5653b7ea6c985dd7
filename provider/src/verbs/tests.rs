//! Verbs API tests on the simulated network (deterministic, fast). The same flows over real
//! UDP sockets are in `provider/cli/tests/verbs_udp.rs`.
use super::sim::{LinkConfig, SimFabric};
use super::*;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);
const ALL: AccessFlags = AccessFlags::ALL_REMOTE;

struct Side {
    ctx: Context,
    pd: ProtectionDomain,
    cq: CompletionQueue,
}

fn side(net: &SimFabric, ip: &str) -> Side {
    let ctx = net.open(DeviceConfig::new(ip.parse().unwrap())).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(256).build().unwrap();
    Side { ctx, pd, cq }
}

fn pair(link: LinkConfig) -> (SimFabric, Side, Side) {
    let net = SimFabric::new(0xC0FFEE, link);
    let a = side(&net, "10.0.0.1");
    let b = side(&net, "10.0.0.2");
    (net, a, b)
}

fn connect(a: &Side, b: &Side, t: QpType) -> (QueuePair, QueuePair) {
    let qa = a.pd.create_qp(&a.cq, &a.cq, t).build().unwrap();
    let qb = b.pd.create_qp(&b.cq, &b.cq, t).build().unwrap();
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    (qa.handshake(eb).unwrap(), qb.handshake(ea).unwrap())
}

fn ok(cq: &CompletionQueue) -> WorkCompletion {
    let wc = cq.wait_one(T).unwrap();
    assert!(wc.is_ok(), "{wc:?}");
    wc
}

#[test]
fn rc_send_recv_with_imm_and_inline() {
    let (_n, a, b) = pair(LinkConfig::default());
    let (qa, qb) = connect(&a, &b, QpType::Rc);
    let src =
        a.pd.register(b"ping".to_vec(), AccessFlags::LOCAL_WRITE)
            .unwrap();
    let dst = b.pd.allocate(64, AccessFlags::LOCAL_WRITE).unwrap();
    qb.post_receive(&[dst.slice(..)], 10).unwrap();
    qb.post_receive(&[dst.slice(32..)], 11).unwrap();
    qa.post_send_with_imm(&[src.slice(..)], 1, 0xABCD).unwrap();
    let s = ok(&a.cq);
    assert_eq!((s.wr_id(), s.opcode()), (1, WcOpcode::Send));
    let r = ok(&b.cq);
    assert_eq!(
        (r.wr_id(), r.opcode(), r.byte_len(), r.imm_data()),
        (10, WcOpcode::Recv, 4, Some(0xABCD))
    );
    assert_eq!(&dst.to_vec()[..4], b"ping");
    qa.post_send_inline(b"inline!", 2).unwrap();
    ok(&a.cq);
    let r = ok(&b.cq);
    assert_eq!((r.wr_id(), r.byte_len(), r.imm_data()), (11, 7, None));
    assert_eq!(&dst.to_vec()[32..39], b"inline!");
}

#[test]
fn rc_write_write_imm_and_read() {
    let (_n, a, b) = pair(LinkConfig::default());
    let (qa, qb) = connect(&a, &b, QpType::Rc);
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
    let src = a.pd.register(data.clone(), ALL).unwrap();
    let dst = b.pd.allocate(20_000, ALL).unwrap();
    qa.post_write(&[src.slice(..)], dst.remote(), 1).unwrap();
    ok(&a.cq);
    assert!(dst.to_vec() == data, "WRITE landed other bytes");
    // WRITE with immediate consumes a receive and reports the immediate.
    let rbuf = b.pd.allocate(8, ALL).unwrap();
    qb.post_receive(&[rbuf.slice(..)], 77).unwrap();
    qa.post_write_with_imm(&[src.slice(0..100)], dst.remote_slice(1000..1100), 2, 99)
        .unwrap();
    ok(&a.cq);
    let r = ok(&b.cq);
    assert_eq!(
        (r.wr_id(), r.opcode(), r.imm_data()),
        (77, WcOpcode::RecvRdmaWithImm, Some(99))
    );
    // READ it back into a fresh region on a.
    dst.write_at(0, b"remote bytes");
    let back = a.pd.allocate(20_000, ALL).unwrap();
    qa.post_read(&[back.slice(..)], dst.remote(), 3).unwrap();
    let wc = ok(&a.cq);
    assert_eq!(
        (wc.wr_id(), wc.opcode(), wc.byte_len()),
        (3, WcOpcode::RdmaRead, 20_000)
    );
    let mut want = data.clone();
    want[..12].copy_from_slice(b"remote bytes");
    want.copy_within(0..100, 1000);
    want[1000..1100].copy_from_slice(&data[..100]);
    assert!(back.to_vec() == want, "READ returned other bytes");
}

#[test]
fn rc_atomics() {
    let (_n, a, b) = pair(LinkConfig::default());
    let (qa, _qb) = connect(&a, &b, QpType::Rc);
    let target = b.pd.allocate(64, ALL).unwrap();
    target.store_u64(8, 100);
    let old = a.pd.allocate(8, ALL).unwrap();
    qa.post_fetch_add(&old.slice(..), target.remote_slice(8..16), 5, 1)
        .unwrap();
    assert_eq!(ok(&a.cq).opcode(), WcOpcode::FetchAdd);
    assert_eq!((old.load_u64(0), target.load_u64(8)), (100, 105));
    qa.post_compare_swap(&old.slice(..), target.remote_slice(8..16), 105, 7, 2)
        .unwrap();
    assert_eq!(ok(&a.cq).opcode(), WcOpcode::CompSwap);
    assert_eq!((old.load_u64(0), target.load_u64(8)), (105, 7));
    // a failed compare leaves the value and still returns the old one
    qa.post_compare_swap(&old.slice(..), target.remote_slice(8..16), 1, 2, 3)
        .unwrap();
    ok(&a.cq);
    assert_eq!((old.load_u64(0), target.load_u64(8)), (7, 7));
    assert!(matches!(
        qa.post_fetch_add(&old.slice(..), target.remote_slice(4..12), 1, 4),
        Err(Error::MisalignedAtomic)
    ));
}

#[test]
fn ud_send_to_address_handle() {
    let (_n, a, b) = pair(LinkConfig::default());
    let qa =
        a.pd.create_qp(&a.cq, &a.cq, QpType::Ud)
            .build()
            .unwrap()
            .activate()
            .unwrap();
    let qb =
        b.pd.create_qp(&b.cq, &b.cq, QpType::Ud)
            .build()
            .unwrap()
            .handshake(qa.endpoint())
            .unwrap();
    let rbuf = b.pd.allocate(40 + 256, AccessFlags::LOCAL_WRITE).unwrap();
    qb.post_receive(&[rbuf.slice(..)], 5).unwrap();
    let ah = a.pd.create_ah_to(&qb.endpoint()).unwrap();
    let msg =
        a.pd.register(b"datagram".to_vec(), AccessFlags::LOCAL_WRITE)
            .unwrap();
    qa.post_send_ud(&[msg.slice(..)], &ah, qb.qpn(), DEFAULT_QKEY, 1)
        .unwrap();
    ok(&a.cq);
    let r = ok(&b.cq);
    assert_eq!((r.wr_id(), r.byte_len(), r.src_qp()), (5, 40 + 8, qa.qpn()));
    assert!(r.wc_flags().contains(WcFlags::GRH));
    assert_eq!(&rbuf.to_vec()[40..48], b"datagram");
    assert_eq!(grh_source_gid(&rbuf.to_vec()[..40]), Some(a.ctx.gid(1)));
    // UD has no RDMA
    assert!(matches!(
        qa.post_write(&[msg.slice(..)], rbuf.remote(), 2),
        Err(Error::WrongTransport { .. })
    ));
    // and needs a destination
    assert!(matches!(
        qa.post_send(&[msg.slice(..)], 3),
        Err(Error::PostSend { .. })
    ));
}

#[test]
fn uc_write_and_no_read() {
    let (_n, a, b) = pair(LinkConfig::default());
    let (qa, _qb) = connect(&a, &b, QpType::Uc);
    let src = a.pd.register(vec![9u8; 5000], ALL).unwrap();
    let dst = b.pd.allocate(5000, ALL).unwrap();
    qa.post_write(&[src.slice(..)], dst.remote(), 1).unwrap();
    ok(&a.cq);
    // a UC send completes locally at once; let the network deliver before looking
    for _ in 0..100 {
        b.ctx.progress();
    }
    assert!(dst.to_vec() == vec![9u8; 5000]);
    assert!(matches!(
        qa.post_read(&[src.slice(..)], dst.remote(), 2),
        Err(Error::WrongTransport { .. })
    ));
}

#[test]
fn srq_feeds_two_queue_pairs() {
    let (_n, a, b) = pair(LinkConfig::default());
    let srq = b.pd.create_srq(16).build().unwrap();
    let bufs = b.pd.allocate(4 * 64, AccessFlags::LOCAL_WRITE).unwrap();
    for i in 0..4 {
        srq.post_receive(&[bufs.slice(i * 64..(i + 1) * 64)], 100 + i as u64)
            .unwrap();
    }
    let mut qas = Vec::new();
    let mut qbs = Vec::new();
    for _ in 0..2 {
        let qa = a.pd.create_qp(&a.cq, &a.cq, QpType::Rc).build().unwrap();
        let qb =
            b.pd.create_qp(&b.cq, &b.cq, QpType::Rc)
                .set_srq(&srq)
                .build()
                .unwrap();
        assert!(matches!(
            qb.post_receive(&[bufs.slice(0..8)], 1),
            Err(Error::PostRecv { .. })
        ));
        let (ea, eb) = (qa.endpoint(), qb.endpoint());
        qas.push(qa.handshake(eb).unwrap());
        qbs.push(qb.handshake(ea).unwrap());
    }
    let msg =
        a.pd.register(b"via srq".to_vec(), AccessFlags::LOCAL_WRITE)
            .unwrap();
    qas[0].post_send(&[msg.slice(..)], 1).unwrap();
    qas[1].post_send(&[msg.slice(..)], 2).unwrap();
    ok(&a.cq);
    ok(&a.cq);
    let (r1, r2) = (ok(&b.cq), ok(&b.cq));
    let mut qpns = [r1.qp_num(), r2.qp_num()];
    qpns.sort();
    let mut want = [qbs[0].qpn(), qbs[1].qpn()];
    want.sort();
    assert_eq!(qpns, want);
    assert_eq!((r1.wr_id(), r2.wr_id()), (100, 101));
}

#[test]
fn wrong_rkey_is_remote_access_error() {
    let (_n, a, b) = pair(LinkConfig::default());
    let (qa, _qb) = connect(&a, &b, QpType::Rc);
    let src = a.pd.register(vec![1u8; 64], ALL).unwrap();
    let dst = b.pd.allocate(64, ALL).unwrap();
    let mut bad = dst.remote();
    bad.rkey ^= 0x0100_0000;
    qa.post_write(&[src.slice(..)], bad, 1).unwrap();
    let wc = a.cq.wait_one(T).unwrap();
    assert_eq!(wc.status(), WcStatus::RemAccessErr);
    assert!(matches!(
        wc.result(),
        Err(Error::Completion {
            wr_id: 1,
            status: WcStatus::RemAccessErr
        })
    ));
    assert_eq!(qa.state(), QpState::Err);

    // region without remote write: same error
    let (qa, _qb) = connect(&a, &b, QpType::Rc);
    let ro =
        b.pd.allocate(64, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ)
            .unwrap();
    qa.post_write(&[src.slice(..)], ro.remote(), 2).unwrap();
    assert_eq!(a.cq.wait_one(T).unwrap().status(), WcStatus::RemAccessErr);
}

#[test]
fn api_misuse_is_a_typed_error() {
    let (n, a, b) = pair(LinkConfig::default());
    let mr = a.pd.allocate(64, AccessFlags::LOCAL_WRITE).unwrap();
    assert!(matches!(
        mr.try_slice(32..65),
        Err(Error::OutOfBounds {
            offset: 32,
            end: 65,
            len: 64
        })
    ));
    // remote access without local write is refused by IBA rules
    assert!(matches!(
        a.pd.allocate(8, AccessFlags::REMOTE_WRITE),
        Err(Error::RegisterMr { .. })
    ));
    let qa =
        a.pd.create_qp(&a.cq, &a.cq, QpType::Rc)
            .set_max_send_wr(2)
            .set_max_inline_data(16)
            .build()
            .unwrap();
    let qb = b.pd.create_qp(&b.cq, &b.cq, QpType::Rc).build().unwrap();
    let eb = qb.endpoint();
    let qa = qa.handshake(eb).unwrap();
    assert!(matches!(
        qa.post_send_inline(&[0u8; 17], 1),
        Err(Error::InlineTooLarge { len: 17, max: 16 })
    ));
    // a region of another PD
    let pd2 = a.ctx.alloc_pd().unwrap();
    let other = pd2.allocate(8, AccessFlags::LOCAL_WRITE).unwrap();
    assert!(matches!(
        qa.post_send(&[other.slice(..)], 1),
        Err(Error::WrongPd(_))
    ));
    // a CQ of another device
    assert!(matches!(
        a.pd.create_qp(&b.cq, &a.cq, QpType::Rc).build(),
        Err(Error::WrongPd(_))
    ));
    // send queue full (the peer is not connected, so nothing completes)
    qa.post_send(&[mr.slice(0..8)], 1).unwrap();
    qa.post_send(&[mr.slice(0..8)], 2).unwrap();
    assert!(matches!(
        qa.post_send(&[mr.slice(0..8)], 3),
        Err(Error::QueueFull { queue: "send", .. })
    ));
    // no completion channel
    assert!(matches!(a.cq.req_notify(false), Err(Error::NoCompChannel)));
    // the same IP twice on one network
    assert!(matches!(
        n.open(DeviceConfig::new("10.0.0.1".parse().unwrap())),
        Err(Error::InvalidConfig(_))
    ));
    // messages say what happened
    let e = qa.post_send_inline(&[0u8; 17], 1).unwrap_err();
    assert_eq!(
        e.to_string(),
        "inline data of 17 bytes exceeds the queue pair's max_inline_data 16"
    );
}

#[test]
fn dropping_a_region_under_a_posted_receive_is_safe() {
    let (_n, a, b) = pair(LinkConfig::default());
    let (qa, qb) = connect(&a, &b, QpType::Rc);
    let dst = b.pd.allocate(64, AccessFlags::LOCAL_WRITE).unwrap();
    qb.post_receive(&[dst.slice(..)], 1).unwrap();
    drop(dst); // deregistered: the key is dead, the bytes are freed once the NIC lets go
    let src =
        a.pd.register(vec![5u8; 64], AccessFlags::LOCAL_WRITE)
            .unwrap();
    qa.post_send(&[src.slice(..)], 2).unwrap();
    let r = b.cq.wait_one(T).unwrap();
    assert_eq!(r.wr_id(), 1);
    assert!(!r.is_ok(), "{r:?}");
}

#[test]
fn completion_channel_wakes_a_waiter() {
    let (_n, a, b) = pair(LinkConfig::default());
    let ch = b.ctx.create_comp_channel();
    let cq = b.ctx.create_cq(16).set_comp_channel(&ch).build().unwrap();
    assert!(ch.owns(&cq));
    let qa = a.pd.create_qp(&a.cq, &a.cq, QpType::Rc).build().unwrap();
    let qb = b.pd.create_qp(&cq, &cq, QpType::Rc).build().unwrap();
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    let (qa, qb) = (qa.handshake(eb).unwrap(), qb.handshake(ea).unwrap());
    let buf = b.pd.allocate(16, AccessFlags::LOCAL_WRITE).unwrap();
    qb.post_receive(&[buf.slice(..)], 1).unwrap();
    cq.req_notify(false).unwrap();
    assert!(matches!(
        ch.get_cq_event(Duration::from_millis(20)),
        Err(Error::Timeout(_))
    ));
    let sender = std::thread::spawn(move || {
        qa.post_send_inline(b"wake", 9).unwrap();
        a.cq.wait_one(T).unwrap()
    });
    let got = ch.get_cq_event(T).unwrap();
    assert_eq!(got, cq.inner.cq.0);
    let mut wc = [WorkCompletion::default(); 4];
    let n = cq.poll(&mut wc).unwrap().len();
    assert_eq!(n, 1);
    assert_eq!(wc[0].byte_len(), 4);
    assert!(sender.join().unwrap().is_ok());
}

#[test]
fn lossy_network_completes_everything_and_writes_a_pcap() {
    let link = LinkConfig {
        loss: 0.05,
        reorder: 0.02,
        reorder_delay_ns: 20_000,
        ..LinkConfig::default()
    };
    let (net, a, b) = pair(link);
    let pcap = std::env::temp_dir().join(format!("roce-verbs-lossy-{}.pcap", std::process::id()));
    net.capture_pcap(&pcap).unwrap();
    let (qa, _qb) = connect(&a, &b, QpType::Rc);
    let src =
        a.pd.register((0..65536u32).map(|i| i as u8).collect::<Vec<_>>(), ALL)
            .unwrap();
    let dst = b.pd.allocate(65536 * 4, ALL).unwrap();
    for i in 0..4usize {
        qa.post_write(
            &[src.slice(..)],
            dst.remote_slice(i * 65536..(i + 1) * 65536),
            i as u64,
        )
        .unwrap();
    }
    for _ in 0..4 {
        ok(&a.cq);
    }
    let d = dst.to_vec();
    for i in 0..4 {
        assert!(
            d[i * 65536..(i + 1) * 65536] == src.to_vec()[..],
            "write {i} corrupted"
        );
    }
    net.finish_pcap();
    let st = net.stats();
    assert!(st.lost > 0, "{st:?}");
    assert!(std::fs::metadata(&pcap).unwrap().len() > 4 * 65536);
    let _ = std::fs::remove_file(&pcap);
}

#[test]
fn endpoint_round_trips() {
    let e = QueuePairEndpoint {
        qpn: 0x12_3456,
        psn: 0xAB_CDEF,
        gid: roce_emu::gid_from_ip("127.0.0.2".parse().unwrap()),
        lid: 0,
    };
    assert_eq!(QueuePairEndpoint::from_bytes(&e.to_bytes()).unwrap(), e);
    assert_eq!(QueuePairEndpoint::from_json(&e.to_json()).unwrap(), e);
    assert_eq!(e.ip(), "127.0.0.2".parse::<std::net::IpAddr>().unwrap());
    assert!(matches!(
        QueuePairEndpoint::from_bytes(&[0; 3]),
        Err(Error::Decode(_))
    ));
    assert!(QueuePairEndpoint::from_json("{").is_err());
}

#[test]
fn cq_overflow_raises_an_async_event() {
    let (_n, a, b) = pair(LinkConfig::default());
    let small = a.ctx.create_cq(2).build().unwrap();
    let qa = a.pd.create_qp(&small, &small, QpType::Rc).build().unwrap();
    let qb = b.pd.create_qp(&b.cq, &b.cq, QpType::Rc).build().unwrap();
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    let (qa, _qb) = (qa.handshake(eb).unwrap(), qb.handshake(ea).unwrap());
    let dst = b.pd.allocate(64, ALL).unwrap();
    let src = a.pd.allocate(64, ALL).unwrap();
    for i in 0..6 {
        qa.post_write(&[src.slice(..)], dst.remote(), i).unwrap();
    }
    let mut ev = None;
    for _ in 0..1000 {
        a.ctx.progress();
        if let Some(e) = a.ctx.poll_async_event() {
            ev = Some(e);
            break;
        }
    }
    assert!(matches!(ev, Some(AsyncEvent::CqErr(_))), "{ev:?}");
}

#[test]
fn resize_cq_keeps_queued_completions_and_rounds_as_rxe() {
    let (_n, a, b) = pair(LinkConfig::default());
    let ch = b.ctx.create_comp_channel();
    let rcq = b.ctx.create_cq(4).set_comp_channel(&ch).build().unwrap();
    let qa = a.pd.create_qp(&a.cq, &a.cq, QpType::Rc).build().unwrap();
    let qb = b.pd.create_qp(&b.cq, &rcq, QpType::Rc).build().unwrap();
    let (ea, eb) = (qa.endpoint(), qb.endpoint());
    let (qa, qb) = (qa.handshake(eb).unwrap(), qb.handshake(ea).unwrap());
    let buf = b.pd.allocate(64 * 16, AccessFlags::LOCAL_WRITE).unwrap();
    // B's receive completion is queued before its ACK completes A's SEND
    let deliver = |ids: std::ops::Range<u64>| {
        for i in ids.clone() {
            let off = 64 * i as usize;
            qb.post_receive(&[buf.slice(off..off + 64)], i).unwrap();
            qa.post_send_inline(b"resize", i).unwrap();
        }
        for _ in ids {
            ok(&a.cq);
        }
    };
    rcq.req_notify(false).unwrap();
    assert_eq!(rcq.capacity(), 7, "4 rounded as rxe");
    deliver(0..1);
    assert!(ch.get_cq_event(T).is_ok(), "armed CQ notifies");
    rcq.req_notify(false).unwrap();
    // the notification fired once and was re-armed; the next completion fires it again
    deliver(1..4);
    assert!(ch.get_cq_event(T).is_ok());
    assert!(ch.get_cq_event(Duration::from_millis(10)).is_err());

    // 4 queued: below the queued count, 0 and above max_cqe fail, nothing changes
    for bad in [3, 0, b.ctx.query_device().max_cqe + 1] {
        match rcq.resize(bad) {
            Err(Error::ResizeCq { cqe, source }) => {
                assert_eq!((cqe, source), (bad, roce_emu::Error::Invalid));
            }
            r => panic!("resize({bad}): {r:?}"),
        }
    }
    assert_eq!(rcq.capacity(), 7);
    // grow with 4 queued: 100 gives 127
    assert_eq!(rcq.resize(100).unwrap(), 127);
    assert_eq!(rcq.capacity(), 127);
    rcq.req_notify(true).unwrap();
    deliver(4..12);
    // shrink with 12 queued: 11 fails, 12 gives 15
    assert!(rcq.resize(11).is_err());
    assert_eq!(rcq.resize(12).unwrap(), 15);
    assert_eq!(
        format!("{rcq:?}"),
        format!("CompletionQueue({}, 15 entries)", rcq.inner.cq.0)
    );
    deliver(12..15);
    // armed for solicited completions only before the resizes: none came
    assert!(ch.get_cq_event(Duration::from_millis(10)).is_err());
    assert!(b.ctx.poll_async_event().is_none(), "no CQ error");

    let mut wc = [WorkCompletion::default(); 32];
    let got: Vec<u64> = rcq
        .poll(&mut wc)
        .unwrap()
        .iter()
        .map(|w| w.wr_id())
        .collect();
    assert_eq!(got, (0..15).collect::<Vec<_>>());
    assert!(wc[..15].iter().all(|w| w.is_ok() && w.byte_len() == 6));
    assert!(rcq.poll(&mut wc).unwrap().is_empty());
}

#[test]
fn memory_window_bind_remote_write_and_invalidate_by_send() {
    let (_n, a, b) = pair(LinkConfig::default());
    let (qa, qb) = connect(&a, &b, QpType::Rc);
    let region =
        b.pd.allocate(4096, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND)
            .unwrap();
    let mw = b.pd.alloc_mw(MwType::Type2).unwrap();
    let before = mw.rkey();
    let win = qb
        .bind_mw(&mw, region.slice(1024..1280), AccessFlags::REMOTE_WRITE, 1)
        .unwrap();
    assert_eq!(ok(&b.cq).opcode(), WcOpcode::BindMw);
    assert_eq!(
        (win.rkey, mw.rkey()),
        ((before & !0xFF) | (before.wrapping_add(1) & 0xFF), win.rkey)
    );
    let src =
        a.pd.register(b"window".to_vec(), AccessFlags::LOCAL_WRITE)
            .unwrap();
    qa.post(&SendRequest::write(2, &[src.slice(..)], win))
        .unwrap();
    ok(&a.cq);
    assert_eq!(&region.to_vec()[1024..1030], b"window");
    // the peer takes the window back with its SEND
    let rbuf = b.pd.allocate(64, AccessFlags::LOCAL_WRITE).unwrap();
    qb.post_receive(&[rbuf.slice(..)], 3).unwrap();
    qa.post_send_with_invalidate(&[src.slice(..)], win.rkey, 4)
        .unwrap();
    let wc = ok(&b.cq);
    assert_eq!(wc.invalidated_rkey(), Some(win.rkey));
    ok(&a.cq);
    // a WRITE through it now fails; the region (no window bound) can go
    qa.post(&SendRequest::write(5, &[src.slice(..)], win))
        .unwrap();
    assert_eq!(a.cq.wait_one(T).unwrap().status(), WcStatus::RemAccessErr);
    drop(mw);
    drop(region);
    // LOCAL_INV through the Rust API on a fresh pair
    let (qa, qb) = connect(&a, &b, QpType::Rc);
    let region =
        b.pd.allocate(4096, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND)
            .unwrap();
    let mw = b.pd.alloc_mw(MwType::Type2).unwrap();
    let win = qb
        .bind_mw(&mw, region.slice(..), AccessFlags::REMOTE_READ, 6)
        .unwrap();
    ok(&b.cq);
    qb.post_local_invalidate(win.rkey, 7).unwrap();
    assert_eq!(ok(&b.cq).opcode(), WcOpcode::LocalInv);
    let dst = a.pd.allocate(16, AccessFlags::LOCAL_WRITE).unwrap();
    qa.post(&SendRequest::read(8, &[dst.slice(..)], win.slice(..16)))
        .unwrap();
    assert_eq!(a.cq.wait_one(T).unwrap().status(), WcStatus::RemAccessErr);
}

#[test]
fn rc_atomic_write_and_flush() {
    let (_n, a, b) = pair(LinkConfig::default());
    let (qa, _qb) = connect(&a, &b, QpType::Rc);
    let flushable = ALL | AccessFlags::FLUSH_GLOBAL;
    let target = b.pd.allocate(64, flushable).unwrap();
    let v = 0x1122_3344_5566_7788;
    qa.post_atomic_write(target.remote_slice(8..16), v, 1)
        .unwrap();
    let wc = ok(&a.cq);
    assert_eq!(
        (wc.wr_id(), wc.opcode(), wc.byte_len()),
        (1, WcOpcode::AtomicWrite, 8)
    );
    assert_eq!(target.load_u64(8), v);
    qa.post_flush(target.remote_slice(0..16), false, 2).unwrap();
    let wc = ok(&a.cq);
    assert_eq!(
        (wc.wr_id(), wc.opcode(), wc.byte_len()),
        (2, WcOpcode::Flush, 16)
    );
    qa.post(&SendRequest::flush(
        3,
        target.remote(),
        FLUSH_GLOBAL,
        FLUSH_MR,
    ))
    .unwrap();
    assert_eq!(ok(&a.cq).opcode(), WcOpcode::Flush);
    // checked before posting: alignment, no local buffers, RC only
    let misaligned = target.remote_slice(4..12);
    assert!(matches!(
        qa.post_atomic_write(misaligned, 1, 4),
        Err(Error::MisalignedAtomic)
    ));
    let src = a.pd.allocate(8, ALL).unwrap();
    let local = [src.slice(..)];
    let with_local = SendRequest {
        local: &local,
        ..SendRequest::atomic_write(5, target.remote_slice(8..16), 1)
    };
    assert!(matches!(qa.post(&with_local), Err(Error::PostSend { .. })));
    let (ua, _ub) = connect(&a, &b, QpType::Uc);
    assert!(matches!(
        ua.post_flush(target.remote(), false, 6),
        Err(Error::WrongTransport { .. })
    ));
    // persistence needs persistent memory, which no region here has (rxe: EINVAL)
    assert!(b
        .pd
        .allocate(64, flushable | AccessFlags::FLUSH_PERSISTENT)
        .is_err());
    // a region without FLUSH access: remote access error, the QP in error
    let plain = b.pd.allocate(64, ALL).unwrap();
    let (qa, _qb) = connect(&a, &b, QpType::Rc);
    qa.post_flush(plain.remote(), false, 7).unwrap();
    let wc = a.cq.wait_one(T).unwrap();
    assert_eq!((wc.wr_id(), wc.status()), (7, WcStatus::RemAccessErr));
    assert_eq!(qa.state(), QpState::Err);
}
