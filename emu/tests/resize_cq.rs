//! `ibv_resize_cq` (`Nic::resize_cq`) as rxe's `rxe_resize_cq`: the depth rounded up to one less
//! than a power of two, a size below the queued count or above `max_cqe` refused with EINVAL,
//! queued completions kept in order, the notification state untouched.
mod common;
use common::*;
use roce_emu::sim::LinkConfig;
use roce_emu::*;

/// B receives `ids` (one 4-byte SEND each), unsignaled on A.
fn deliver(p: &mut Pair, ids: std::ops::Range<u64>, flags: SendFlags) {
    for i in ids {
        p.recv_b(i, 0x40 * i, 64);
        p.post_a(SendWr {
            wr_id: i,
            sg_list: &[sge(&p.a, 0, 4)],
            opcode: WrOpcode::Send,
            send_flags: flags,
            ..Default::default()
        });
    }
    p.run(10);
}

#[test]
fn resize_cq_grows_and_shrinks_keeping_queued_completions_in_order() {
    let mut p = Pair::new(
        7,
        LinkConfig::default(),
        Opts {
            cqe: 4,
            ..Default::default()
        },
    );
    let rcq = p.b.rcq;
    deliver(&mut p, 0..4, SendFlags::EMPTY);
    // armed for solicited completions only, before any resize
    p.nic_b().req_notify_cq(rcq, true).unwrap();

    // full at 4: grow (100 -> 127, rxe's rounding) with the 4 still queued
    assert_eq!(p.nic_b().resize_cq(rcq, 100), Ok(127));
    deliver(&mut p, 4..12, SendFlags::EMPTY);
    assert_eq!(p.nic_b().counters().cq_overflow, 0, "grown CQ took 8 more");
    // still armed for solicited ones only: none so far
    assert_eq!(p.nic_b().poll_comp_event(), None);

    // 12 queued: shrinking below that fails and changes nothing
    let max = p.nic_b().query_device().max_cqe;
    assert_eq!(p.nic_b().resize_cq(rcq, 11), Err(Error::Invalid));
    assert_eq!(p.nic_b().resize_cq(rcq, 0), Err(Error::Invalid));
    assert_eq!(p.nic_b().resize_cq(rcq, max + 1), Err(Error::Invalid));
    // to exactly the queued count: allowed, rounded to 15
    assert_eq!(p.nic_b().resize_cq(rcq, 12), Ok(15));

    // three more fill it; the solicited one fires the notification armed before both resizes
    deliver(&mut p, 12..14, SendFlags::EMPTY);
    assert_eq!(p.nic_b().poll_comp_event(), None);
    deliver(&mut p, 14..15, SendFlags::SOLICITED);
    assert_eq!(p.nic_b().poll_comp_event(), Some(rcq));
    assert_eq!(p.nic_b().poll_comp_event(), None);
    assert_eq!(p.nic_b().counters().cq_overflow, 0);
    assert_eq!(p.nic_b().poll_event(), None, "no CQ error");

    // every completion once, in the order they were queued
    let wcs = p.rcq_b();
    let ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, (0..15).collect::<Vec<_>>());
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
    assert!(p.rcq_b().is_empty());
}

#[test]
fn resize_cq_shrunk_queue_holds_only_its_new_depth() {
    let mut p = Pair::new(8, LinkConfig::default(), Opts::default());
    let rcq = p.b.rcq;
    // 256 -> 2 entries asked, 3 given (rxe: 4 slots, one kept free)
    assert_eq!(p.nic_b().resize_cq(rcq, 2), Ok(3));
    deliver(&mut p, 0..4, SendFlags::EMPTY);
    assert_eq!(p.nic_b().counters().cq_overflow, 1);
    assert_eq!(p.nic_b().poll_event(), Some(AsyncEvent::CqErr(rcq)));
    let ids: Vec<u64> = p.rcq_b().iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, vec![0, 1, 2]);
}

#[test]
fn resize_cq_rounds_as_rxe_and_checks_its_limits() {
    let mut nic = Nic::new(NicConfig::new("10.0.0.9".parse().unwrap()));
    let max = nic.query_device().max_cqe;
    let cq = nic.create_cq(8).unwrap();
    for (asked, got) in [
        (1, 1),
        (2, 3),
        (3, 3),
        (4, 7),
        (10, 15),
        (16, 31),
        (255, 255),
    ] {
        assert_eq!(nic.resize_cq(cq, asked), Ok(got), "resize to {asked}");
    }
    assert_eq!(nic.resize_cq(cq, max), Ok(32767));
    assert_eq!(nic.resize_cq(cq, max + 1), Err(Error::Invalid));
    assert_eq!(nic.resize_cq(cq, 0), Err(Error::Invalid));
    assert_eq!(nic.resize_cq(Cq(cq.0 + 1), 8), Err(Error::NotFound));
    nic.destroy_cq(cq).unwrap();
    assert_eq!(nic.resize_cq(cq, 8), Err(Error::NotFound));
}
