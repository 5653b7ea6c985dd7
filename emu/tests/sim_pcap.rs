//! The simulated network writes a pcap of what crossed it; every frame of a clean run carries a
//! valid ICRC over the real IPv4/UDP headers (ID 0, DF), corrupted ones show as invalid.
mod common;
use common::*;
use roce_emu::sim::{LinkConfig, PacketSink, PcapSink};
use roce_emu::*;
use roce_wire::frame::Verdict as FrameVerdict;
use std::cell::RefCell;
use std::rc::Rc;

struct Shared(Rc<RefCell<PcapSink<Vec<u8>>>>);
impl PacketSink for Shared {
    fn packet(&mut self, t: Instant, s: std::net::IpAddr, d: std::net::IpAddr, p: u16, b: &[u8]) {
        self.0.borrow_mut().packet(t, s, d, p, b)
    }
}

fn run(corrupt: f64) -> (Vec<FrameVerdict>, roce_emu::sim::SimStats) {
    let mut p = Pair::new(
        77,
        LinkConfig {
            corrupt,
            ..Default::default()
        },
        Opts {
            timeout: 6,
            ..Default::default()
        },
    );
    let sink = Rc::new(RefCell::new(PcapSink::new(Vec::new()).unwrap()));
    p.net.set_sink(Box::new(Shared(sink.clone())));
    p.a.mem.store(0, &pattern(5000, 2));
    for i in 0..3 {
        p.recv_b(i, 0x2000 * i, 0x2000);
    }
    let rkey = p.b.mr.rkey;
    for i in 0..3u64 {
        p.post_a(SendWr {
            wr_id: i,
            sg_list: &[sge(&p.a, 0, 5000)],
            opcode: WrOpcode::Send,
            send_flags: SendFlags::SIGNALED,
            ..Default::default()
        });
    }
    p.post_a(SendWr {
        wr_id: 9,
        sg_list: &[sge(&p.a, 0x8000, 3000)],
        opcode: WrOpcode::RdmaRead,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA,
        rkey,
        ..Default::default()
    });
    p.run(1000);
    assert_eq!(p.scq_a().len(), 4);
    let stats = p.net.stats;
    drop(p);
    let sink = Rc::try_unwrap(sink).ok().unwrap().into_inner();
    assert_eq!(sink.errors, 0);
    let bytes = sink.finish().unwrap();
    let mut r = roce_wire::pcap::Reader::new(std::io::Cursor::new(bytes)).unwrap();
    let mut v = Vec::new();
    while let Some(rec) = r.next_record() {
        let rec = rec.unwrap();
        v.push(roce_wire::frame::verdict(rec.linktype, rec.data));
    }
    (v, stats)
}

#[test]
fn pcap_of_clean_run_has_valid_icrcs() {
    let (v, stats) = run(0.0);
    assert_eq!(v.len() as u64, stats.delivered);
    assert!(v.len() > 10);
    assert!(v.iter().all(|x| *x == FrameVerdict::IcrcValid), "{v:?}");
}

#[test]
fn pcap_shows_corrupted_frames_as_bad_icrc() {
    let (v, stats) = run(0.2);
    assert!(stats.corrupted > 0);
    let bad = v
        .iter()
        .filter(|x| matches!(x, FrameVerdict::IcrcInvalid { .. }))
        .count() as u64;
    let valid = v.iter().filter(|x| **x == FrameVerdict::IcrcValid).count() as u64;
    assert_eq!(bad + valid, stats.delivered);
    assert_eq!(bad, stats.corrupted);
}
