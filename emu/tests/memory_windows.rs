//! Memory windows (IBA 10.6.7, rxe `rxe_mw.c`): type 1 and type 2 binds and their errors,
//! remote access through a window's rkey (access and bounds of the window, type 2 tied to its
//! QP), LOCAL_INV and SEND with invalidate, use after invalidation, the busy rules.
mod common;
use common::*;
use roce_emu::sim::LinkConfig;
use roce_emu::*;
use std::sync::Arc;

/// Where B's bindable region sits (a region with no remote access of its own).
const WIN_IOVA: u64 = 0x40_0000;
const WIN_MEM: usize = 0x4000;
/// The window: 256 bytes at 0x1000 into the region.
const WIN_ADDR: u64 = WIN_IOVA + 0x1000;
const WIN_LEN: u64 = 0x100;

struct Win {
    p: Pair,
    /// B's region the windows are bound to (LOCAL_WRITE | MW_BIND only).
    mr: Mr,
    mem: VecMemory,
}

fn setup(seed: u64) -> Win {
    let mut p = Pair::new(seed, LinkConfig::default(), Opts::default());
    let mem = VecMemory::new(WIN_MEM);
    let pd = p.b.pd;
    let mr = p
        .nic_b()
        .reg_mr(
            pd,
            Arc::new(mem.clone()),
            WIN_IOVA,
            AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND,
        )
        .unwrap();
    Win { p, mr, mem }
}

fn remote() -> AccessFlags {
    AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC
}

impl Win {
    /// B posts a signaled BIND_MW of window `mw_rkey` with key byte `key`; returns B's send
    /// completion.
    fn bind(
        &mut self,
        mw_rkey: u32,
        key: u8,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> WorkCompletion {
        let b = MwBind {
            mw_rkey,
            rkey: (mw_rkey & !0xFF) | key as u32,
            mr_lkey: self.mr.lkey,
            addr,
            length: len,
            access,
        };
        self.post_b(SendWr {
            wr_id: 0xB1,
            opcode: WrOpcode::BindMw,
            send_flags: SendFlags::SIGNALED,
            bind: b,
            ..Default::default()
        })
    }

    fn post_b(&mut self, wr: SendWr<'_>) -> WorkCompletion {
        let q = self.p.b.qpn;
        self.p.nic_b().post_send(q, &wr).unwrap();
        self.p.run(5);
        let cq = self.p.b.scq;
        let wc = Pair::poll(self.p.nic_b(), cq);
        assert_eq!(wc.len(), 1, "{wc:?}");
        wc[0]
    }

    /// A posts a signaled WRITE of `len` bytes of its memory at 0 to `addr` behind `rkey`;
    /// returns A's completion status.
    fn write(&mut self, rkey: u32, addr: u64, len: u32) -> WcStatus {
        let sg = [sge(&self.p.a, 0, len)];
        self.a_op(SendWr {
            wr_id: 0xA1,
            sg_list: &sg,
            opcode: WrOpcode::RdmaWrite,
            send_flags: SendFlags::SIGNALED,
            remote_addr: addr,
            rkey,
            ..Default::default()
        })
    }

    fn a_op(&mut self, wr: SendWr<'_>) -> WcStatus {
        self.p.post_a(wr);
        self.p.run(5);
        let wc = self.p.scq_a();
        assert_eq!(wc.len(), 1, "{wc:?}");
        wc[0].status
    }

    fn alloc(&mut self, ty: MwType) -> u32 {
        let pd = self.p.b.pd;
        self.p.nic_b().alloc_mw(pd, ty).unwrap()
    }
}

#[test]
fn type2_bind_sets_the_consumer_key_and_remote_write_read_atomic_go_through_the_window() {
    let mut w = setup(1);
    let mw = w.alloc(MwType::Type2);
    assert_eq!(mw & 0xF00, 0xF00, "window keys are marked");
    let wc = w.bind(mw, 0xC3, WIN_ADDR, WIN_LEN, remote());
    assert_eq!(
        (wc.status, wc.opcode, wc.wr_id),
        (WcStatus::Success, WcOpcode::BindMw, 0xB1)
    );
    let rkey = (mw & !0xFF) | 0xC3;
    assert_eq!(
        w.p.nic_b().mw_rkey(mw),
        Some(rkey),
        "the consumer's key byte"
    );

    // WRITE 64 bytes at the window's start, READ them back, fetch-and-add at its last word
    let data = pattern(64, 9);
    w.p.a.mem.store(0, &data);
    assert_eq!(w.write(rkey, WIN_ADDR, 64), WcStatus::Success);
    assert_eq!(w.mem.load(0x1000, 64), data);
    let sg = [sge(&w.p.a, 0x800, 64)];
    let st = w.a_op(SendWr {
        sg_list: &sg,
        opcode: WrOpcode::RdmaRead,
        send_flags: SendFlags::SIGNALED,
        remote_addr: WIN_ADDR,
        rkey,
        ..Default::default()
    });
    assert_eq!(st, WcStatus::Success);
    assert_eq!(w.p.a.mem.load(0x800, 64), data);
    w.mem.store(0x10F8, &40u64.to_ne_bytes());
    let sg = [sge(&w.p.a, 0x900, 8)];
    let st = w.a_op(SendWr {
        sg_list: &sg,
        opcode: WrOpcode::AtomicFetchAndAdd,
        send_flags: SendFlags::SIGNALED,
        remote_addr: WIN_ADDR + WIN_LEN - 8,
        rkey,
        compare_add: 2,
        ..Default::default()
    });
    assert_eq!(st, WcStatus::Success);
    assert_eq!(w.mem.load(0x10F8, 8), 42u64.to_ne_bytes());
    assert_eq!(w.p.a.mem.load(0x900, 8), 40u64.to_ne_bytes());
}

#[test]
fn access_outside_the_window_is_nacked_even_inside_the_region() {
    let mut w = setup(2);
    let mw = w.alloc(MwType::Type2);
    w.bind(mw, 1, WIN_ADDR, WIN_LEN, remote());
    let rkey = (mw & !0xFF) | 1;
    // 8 bytes of which 4 lie past the window's end (the region goes on): NAK remote access
    assert_eq!(
        w.write(rkey, WIN_ADDR + WIN_LEN - 4, 8),
        WcStatus::RemAccessErr
    );
    assert_eq!(w.p.nic_b().counters().diag_remote_out_of_bounds, 1);
    assert_eq!(w.mem.load(0x10FC, 8), vec![0; 8], "nothing written");
}

#[test]
fn the_window_grants_only_its_own_access() {
    let mut w = setup(3);
    let mw = w.alloc(MwType::Type2);
    w.bind(mw, 2, WIN_ADDR, WIN_LEN, AccessFlags::REMOTE_READ);
    let rkey = (mw & !0xFF) | 2;
    assert_eq!(w.write(rkey, WIN_ADDR, 8), WcStatus::RemAccessErr);
    assert_eq!(w.p.nic_b().counters().diag_remote_no_permission, 1);
}

#[test]
fn the_alloc_time_rkey_and_the_regions_own_keys_do_not_reach_a_bound_window() {
    let mut w = setup(4);
    let mw = w.alloc(MwType::Type2);
    w.bind(mw, (mw as u8).wrapping_add(1), WIN_ADDR, WIN_LEN, remote());
    assert_eq!(
        w.write(mw, WIN_ADDR, 8),
        WcStatus::RemAccessErr,
        "old key byte"
    );
    let mut w = setup(4);
    let lkey = w.mr.lkey;
    assert_eq!(
        w.write(lkey, WIN_ADDR, 8),
        WcStatus::RemAccessErr,
        "the MR has no remote access"
    );
}

#[test]
fn local_inv_invalidates_and_later_access_fails() {
    let mut w = setup(5);
    let mw = w.alloc(MwType::Type2);
    w.bind(mw, 7, WIN_ADDR, WIN_LEN, remote());
    let rkey = (mw & !0xFF) | 7;
    assert_eq!(w.write(rkey, WIN_ADDR, 8), WcStatus::Success);
    let wc = w.post_b(SendWr {
        wr_id: 0xB2,
        opcode: WrOpcode::LocalInv,
        invalidate_rkey: rkey,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    assert_eq!(
        (wc.status, wc.opcode),
        (WcStatus::Success, WcOpcode::LocalInv)
    );
    // a free type 2 window binds again, with its current rkey (rxe compares all 32 bits)
    let wc = w.bind(rkey, 8, WIN_ADDR, WIN_LEN, remote());
    assert_eq!(wc.status, WcStatus::Success);
    assert_eq!(w.p.nic_b().mw_rkey(mw), Some((mw & !0xFF) | 8));
    // the invalidated rkey never works again
    assert_eq!(w.write(rkey, WIN_ADDR, 8), WcStatus::RemAccessErr);
    assert_eq!(w.p.nic_b().counters().diag_stale_rkey, 1);
    // and with nothing rebound, the window's own rkey fails after LOCAL_INV too
    let mut w = setup(5);
    let mw = w.alloc(MwType::Type2);
    w.bind(mw, 7, WIN_ADDR, WIN_LEN, remote());
    let wc = w.post_b(SendWr {
        opcode: WrOpcode::LocalInv,
        invalidate_rkey: rkey,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    assert_eq!(wc.status, WcStatus::Success);
    assert_eq!(w.write(rkey, WIN_ADDR, 8), WcStatus::RemAccessErr);
}

#[test]
fn send_with_invalidate_frees_the_window_and_reports_the_rkey() {
    let mut w = setup(6);
    let mw = w.alloc(MwType::Type2);
    w.bind(mw, 9, WIN_ADDR, WIN_LEN, remote());
    let rkey = (mw & !0xFF) | 9;
    w.p.recv_b(0x77, 0, 64);
    let sg = [sge(&w.p.a, 0, 16)];
    let st = w.a_op(SendWr {
        sg_list: &sg,
        opcode: WrOpcode::SendWithInv,
        invalidate_rkey: rkey,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    assert_eq!(st, WcStatus::Success);
    let rc = w.p.rcq_b();
    assert_eq!(
        (rc[0].wr_id, rc[0].status, rc[0].opcode),
        (0x77, WcStatus::Success, WcOpcode::Recv)
    );
    assert!(rc[0].wc_flags.contains(WcFlags::WITH_INV));
    assert_eq!(rc[0].imm_data, rkey, "invalidated_rkey");
    assert_eq!(
        w.write(rkey, WIN_ADDR, 8),
        WcStatus::RemAccessErr,
        "used after invalidation"
    );
    // said as a window's stale rkey, not as a deregistered region's; counted with those
    let bq = w.p.b.qpn;
    let d: Vec<_> = std::iter::from_fn(|| w.p.nic_b().poll_diagnostic()).collect();
    assert_eq!(
        d,
        vec![(bq, Diagnostic::RemoteAccess(KeyFault::StaleWindow))]
    );
    assert!(d[0]
        .1
        .message(bq)
        .contains("with the rkey of a memory window that is not bound with that key"));
    assert_eq!(w.p.nic_b().counters().diag_stale_rkey, 1);
}

#[test]
fn invalidation_errors() {
    // a type 1 window cannot be invalidated (o10-37.2.26): LOC_QP_OP_ERR, QP to ERR
    let mut w = setup(7);
    let mw = w.alloc(MwType::Type1);
    let wc = w.post_b(SendWr {
        opcode: WrOpcode::LocalInv,
        invalidate_rkey: mw,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    assert_eq!(wc.status, WcStatus::LocQpOpErr);
    assert_eq!(w.p.qp_b().qp_state, QpState::Err);

    // a free (never bound) type 2 window neither
    let mut w = setup(7);
    let mw = w.alloc(MwType::Type2);
    let wc = w.post_b(SendWr {
        opcode: WrOpcode::LocalInv,
        invalidate_rkey: mw,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    assert_eq!(wc.status, WcStatus::LocQpOpErr);

    // SEND with invalidate of a stale key byte: class J (sender ACKed, receiver
    // REM_INV_REQ_ERR, QP to ERR), and the window stays bound
    let mut w = setup(7);
    let mw = w.alloc(MwType::Type2);
    w.bind(mw, 3, WIN_ADDR, WIN_LEN, remote());
    w.p.recv_b(1, 0, 64);
    let sg = [sge(&w.p.a, 0, 4)];
    let st = w.a_op(SendWr {
        sg_list: &sg,
        opcode: WrOpcode::SendWithInv,
        invalidate_rkey: (mw & !0xFF) | 4,
        send_flags: SendFlags::SIGNALED,
        ..Default::default()
    });
    assert_eq!(st, WcStatus::Success);
    assert_eq!(w.p.rcq_b()[0].status, WcStatus::RemInvReqErr);
    assert_eq!(w.p.qp_b().qp_state, QpState::Err);
    assert_eq!(w.p.nic_b().mw_rkey(mw), Some((mw & !0xFF) | 3));
}

#[test]
fn bind_errors_complete_with_mw_bind_err_and_move_the_qp_to_err() {
    type Case = (&'static str, fn(&mut Win, u32) -> WorkCompletion);
    let cases: [Case; 6] = [
        ("type 2 bound twice", |w, mw| {
            w.bind(mw, 1, WIN_ADDR, WIN_LEN, remote());
            w.bind((mw & !0xFF) | 1, 2, WIN_ADDR, WIN_LEN, remote())
        }),
        ("type 2 with length 0", |w, mw| {
            w.bind(mw, 1, WIN_ADDR, 0, remote())
        }),
        ("past the region's end", |w, mw| {
            w.bind(mw, 1, WIN_IOVA + WIN_MEM as u64 - 8, 16, remote())
        }),
        ("an old rkey of the window", |w, mw| {
            w.bind(mw ^ 0x55, 1, WIN_ADDR, WIN_LEN, remote())
        }),
        ("a region without MW_BIND", |w, mw| {
            w.mr = w.p.b.mr;
            w.bind(mw, 1, IOVA, WIN_LEN, remote())
        }),
        ("zero-based", |w, mw| {
            w.bind(mw, 1, WIN_ADDR, WIN_LEN, remote() | AccessFlags::ZERO_BASED)
        }),
    ];
    for (what, case) in cases {
        let mut w = setup(8);
        let mw = w.alloc(MwType::Type2);
        let wc = case(&mut w, mw);
        assert_eq!(wc.status, WcStatus::MwBindErr, "{what}");
        assert_eq!(w.p.qp_b().qp_state, QpState::Err, "{what}");
    }
    // a writable window needs LOCAL_WRITE on the region (C10-74)
    let mut w = setup(8);
    let pd = w.p.b.pd;
    let m = VecMemory::new(WIN_MEM);
    w.mr =
        w.p.nic_b()
            .reg_mr(pd, Arc::new(m), WIN_IOVA, AccessFlags::MW_BIND)
            .unwrap();
    let mw = w.alloc(MwType::Type2);
    assert_eq!(
        w.bind(mw, 1, WIN_ADDR, WIN_LEN, AccessFlags::REMOTE_WRITE)
            .status,
        WcStatus::MwBindErr
    );
}

#[test]
fn type1_binds_rebinds_and_unbinds_without_a_qp_tie() {
    let mut w = setup(9);
    let mw = w.alloc(MwType::Type1);
    // what ibv_bind_mw posts: the key byte incremented (ibv_inc_rkey)
    let k1 = (mw & !0xFF) | (mw.wrapping_add(1) & 0xFF);
    assert_eq!(
        w.bind(mw, k1 as u8, WIN_ADDR, WIN_LEN, remote()).status,
        WcStatus::Success
    );
    assert_eq!(w.write(k1, WIN_ADDR, 8), WcStatus::Success);
    // rebinding a bound type 1 window moves it; the previous rkey stops working
    let k2 = (k1 & !0xFF) | (k1.wrapping_add(1) & 0xFF);
    assert_eq!(
        w.bind(k1, k2 as u8, WIN_ADDR + 0x80, 0x80, remote()).status,
        WcStatus::Success
    );
    assert_eq!(w.write(k2, WIN_ADDR + 0x80, 8), WcStatus::Success);
    assert_eq!(w.write(k1, WIN_ADDR + 0x80, 8), WcStatus::RemAccessErr);
}

#[test]
fn type1_window_with_length_0_is_unbound() {
    let mut w = setup(9);
    let mw = w.alloc(MwType::Type1);
    let k1 = (mw & !0xFF) | (mw.wrapping_add(1) & 0xFF);
    w.bind(mw, k1 as u8, WIN_ADDR, WIN_LEN, remote());
    let k2 = (k1 & !0xFF) | (k1.wrapping_add(1) & 0xFF);
    assert_eq!(
        w.bind(k1, k2 as u8, 0, 0, AccessFlags::EMPTY).status,
        WcStatus::Success
    );
    assert_eq!(w.write(k2, WIN_ADDR, 8), WcStatus::RemAccessErr);
    let mr = w.mr;
    assert_eq!(w.p.nic_b().dereg_mr(mr), Ok(()), "no window bound any more");
}

#[test]
fn a_type2_window_serves_only_the_qp_it_was_bound_on() {
    let mut w = setup(10);
    // a second connected QP pair between the same NICs, in the same PDs
    let o = w.p.opts;
    let mut a2 = w.p.a.clone_shallow();
    let mut b2 = w.p.b.clone_shallow();
    let init = |s: &Side| QpInitAttr {
        send_cq: s.scq,
        recv_cq: s.rcq,
        srq: None,
        cap: QpCap {
            max_send_wr: 8,
            max_recv_wr: 8,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: QpType::Rc,
        sq_sig_all: false,
    };
    a2.qpn = w.p.nic_a().create_qp(a2.pd, &init(&a2)).unwrap();
    b2.qpn = w.p.nic_b().create_qp(b2.pd, &init(&b2)).unwrap();
    connect(w.p.nic_a(), &a2, &b2, &o, 0x300, 0x400);
    connect(w.p.nic_b(), &b2, &a2, &o, 0x400, 0x300);
    let mw = w.alloc(MwType::Type2);
    w.bind(mw, 5, WIN_ADDR, WIN_LEN, remote());
    let rkey = (mw & !0xFF) | 5;
    // through the other QP pair: NAK remote access
    let sg = [sge(&a2, 0, 8)];
    let wr = SendWr {
        opcode: WrOpcode::RdmaWrite,
        sg_list: &sg,
        send_flags: SendFlags::SIGNALED,
        remote_addr: WIN_ADDR,
        rkey,
        ..Default::default()
    };
    w.p.nic_a().post_send(a2.qpn, &wr).unwrap();
    w.p.run(5);
    assert_eq!(w.p.scq_a()[0].status, WcStatus::RemAccessErr);
    assert_eq!(w.p.nic_b().counters().diag_rkey_other_qp, 1);
    // its QP destroyed, a type 2 window stays bound (no access matches it any more; it can
    // still be deallocated), and its region stays busy
    let mut w = setup(10);
    let mw = w.alloc(MwType::Type2);
    w.bind(mw, 5, WIN_ADDR, WIN_LEN, remote());
    let q = w.p.b.qpn;
    w.p.nic_b().destroy_qp(q).unwrap();
    let rkey = (mw & !0xFF) | 5;
    assert_eq!(
        w.p.nic_b().mw_rkey(mw),
        Some(rkey),
        "still bound after its QP went"
    );
    let mr = w.mr;
    assert_eq!(w.p.nic_b().dereg_mr(mr), Err(Error::Invalid));
}

#[test]
fn dealloc_and_busy_rules() {
    let mut w = setup(11);
    let mw = w.alloc(MwType::Type2);
    w.bind(mw, 6, WIN_ADDR, WIN_LEN, remote());
    let rkey = (mw & !0xFF) | 6;
    // the region cannot go while a window is bound to it (rxe: EINVAL)
    let mr = w.mr;
    assert_eq!(w.p.nic_b().dereg_mr(mr), Err(Error::Invalid));
    assert_eq!(
        w.write(rkey, WIN_ADDR, 8),
        WcStatus::Success,
        "still usable"
    );
    // nor the PD while a window exists
    let pd = w.p.b.pd;
    assert_eq!(w.p.nic_b().dealloc_pd(pd), Err(Error::Busy));
    // a bound window can be deallocated (rxe): its rkey dies, the region is free again
    assert_eq!(w.p.nic_b().dealloc_mw(mw), Ok(()));
    assert_eq!(w.p.nic_b().dealloc_mw(mw), Err(Error::NotFound));
    assert_eq!(w.p.nic_b().mw_rkey(mw), None);
    assert_eq!(w.p.nic_b().dereg_mr(mr), Ok(()));
    assert_eq!(w.write(rkey, WIN_ADDR, 8), WcStatus::RemAccessErr);
}

#[test]
fn max_mw_windows_then_no_mem_and_windows_on_uc_but_not_ud() {
    let mut w = setup(12);
    let pd = w.p.b.pd;
    let max = w.p.nic_b().query_device().max_mw;
    let keys: Vec<u32> = (0..max)
        .map(|_| w.p.nic_b().alloc_mw(pd, MwType::Type2).unwrap())
        .collect();
    assert_eq!(w.p.nic_b().alloc_mw(pd, MwType::Type1), Err(Error::NoMem));
    let mut seen = std::collections::HashSet::new();
    assert!(keys.iter().all(|k| seen.insert(k >> 8)), "distinct windows");
    let mut p = ud_pair(12);
    let q = p.a.qpn;
    let wr = SendWr {
        opcode: WrOpcode::BindMw,
        ..Default::default()
    };
    assert_eq!(
        p.nic_a().post_send(q, &wr),
        Err(Error::Invalid),
        "no BIND_MW on UD"
    );
}

#[test]
fn a_bind_completes_in_order_behind_the_work_posted_before_it() {
    let mut w = setup(13);
    let mw = w.alloc(MwType::Type2);
    let (q, arkey) = (w.p.b.qpn, w.p.a.mr.rkey);
    let sg = [sge(&w.p.b, 0, 3000)];
    let write = SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::SIGNALED,
        remote_addr: IOVA,
        rkey: arkey,
        ..Default::default()
    };
    w.p.nic_b().post_send(q, &write).unwrap();
    let bind = SendWr {
        wr_id: 2,
        opcode: WrOpcode::BindMw,
        send_flags: SendFlags::SIGNALED,
        bind: MwBind {
            mw_rkey: mw,
            rkey: mw,
            mr_lkey: w.mr.lkey,
            addr: WIN_ADDR,
            length: WIN_LEN,
            access: remote(),
        },
        ..Default::default()
    };
    w.p.nic_b().post_send(q, &bind).unwrap();
    w.p.run(5);
    let cq = w.p.b.scq;
    let wc = Pair::poll(w.p.nic_b(), cq);
    let got: Vec<_> = wc.iter().map(|c| (c.wr_id, c.opcode, c.status)).collect();
    assert_eq!(
        got,
        [
            (1, WcOpcode::RdmaWrite, WcStatus::Success),
            (2, WcOpcode::BindMw, WcStatus::Success)
        ]
    );
}
