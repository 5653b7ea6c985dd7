//! Resource limits: each limit of `DeviceAttr` / `QpCap` is enforced with the documented
//! error (`Error::NoMem` = a table or queue is full, `Error::Invalid` = an attribute above the
//! device's limit), and the object can be created again once one is freed.
mod common;
use common::*;
use roce_emu::sim::LinkConfig;
use roce_emu::*;
use std::sync::Arc;

fn nic_with(f: impl FnOnce(&mut DeviceAttr)) -> Nic {
    let mut cfg = NicConfig::new("10.0.0.5".parse().unwrap());
    f(&mut cfg.device_attr);
    Nic::new(cfg)
}

fn cap(send_wr: u32, recv_wr: u32, sge: u32, inline: u32) -> QpCap {
    QpCap {
        max_send_wr: send_wr,
        max_recv_wr: recv_wr,
        max_send_sge: sge,
        max_recv_sge: sge,
        max_inline_data: inline,
    }
}

fn init(cq: Cq, c: QpCap) -> QpInitAttr {
    QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        srq: None,
        cap: c,
        qp_type: QpType::Rc,
        sq_sig_all: false,
    }
}

#[test]
fn defaults_are_rxe_defaults() {
    let d = nic_with(|_| {}).query_device();
    assert_eq!(
        (
            d.max_qp,
            d.max_qp_wr,
            d.max_sge,
            d.max_cqe,
            d.max_mr,
            d.max_pd
        ),
        (0x10000, 0x4000, 32, 32767, 2048, 0x7ffc)
    );
    assert_eq!(
        (
            d.max_qp_rd_atom,
            d.max_qp_init_rd_atom,
            d.max_inline_data,
            d.max_srq_sge
        ),
        (128, 128, 400, 27)
    );
}

#[test]
fn max_qp_is_enforced_with_nomem() {
    let mut nic = nic_with(|d| d.max_qp = 3);
    let pd = nic.alloc_pd().unwrap();
    let cq = nic.create_cq(16).unwrap();
    let qps: Vec<u32> = (0..3)
        .map(|_| nic.create_qp(pd, &init(cq, cap(4, 4, 1, 0))).unwrap())
        .collect();
    assert_eq!(
        nic.create_qp(pd, &init(cq, cap(4, 4, 1, 0))),
        Err(Error::NoMem)
    );
    nic.destroy_qp(qps[1]).unwrap();
    assert!(nic.create_qp(pd, &init(cq, cap(4, 4, 1, 0))).is_ok());
    assert_eq!(
        nic.create_qp(pd, &init(cq, cap(4, 4, 1, 0))),
        Err(Error::NoMem)
    );
}

#[test]
fn max_mr_and_max_pd_are_enforced_with_nomem() {
    let mut nic = nic_with(|d| {
        d.max_mr = 2;
        d.max_pd = 2;
    });
    let pd = nic.alloc_pd().unwrap();
    nic.alloc_pd().unwrap();
    assert_eq!(nic.alloc_pd(), Err(Error::NoMem));
    let m = || Arc::new(VecMemory::new(64)) as Arc<dyn MemoryRegion>;
    let a = nic.reg_mr(pd, m(), 0, AccessFlags::LOCAL_WRITE).unwrap();
    nic.reg_mr(pd, m(), 0x100, AccessFlags::LOCAL_WRITE)
        .unwrap();
    assert_eq!(
        nic.reg_mr(pd, m(), 0x200, AccessFlags::LOCAL_WRITE).err(),
        Some(Error::NoMem)
    );
    nic.dereg_mr(a).unwrap();
    assert!(nic.reg_mr(pd, m(), 0x200, AccessFlags::LOCAL_WRITE).is_ok());
    // an MR whose end would wrap the address space
    assert_eq!(
        nic.reg_mr(pd, m(), u64::MAX - 10, AccessFlags::EMPTY).err(),
        Some(Error::Invalid)
    );
}

#[test]
fn cq_depth_and_count_limits() {
    let mut nic = nic_with(|d| d.max_cq = 2);
    let max = nic.query_device().max_cqe;
    assert_eq!(nic.create_cq(0), Err(Error::Invalid));
    assert_eq!(nic.create_cq(max + 1), Err(Error::Invalid));
    nic.create_cq(max).unwrap();
    nic.create_cq(1).unwrap();
    // a third CQ: rxe's pool-full answer is EINVAL too
    assert_eq!(nic.create_cq(1), Err(Error::Invalid));
}

#[test]
fn cq_overflow_loses_completions_and_reports_it() {
    let mut p = Pair::new(
        201,
        LinkConfig::ideal(),
        Opts {
            cqe: 2,
            ..Default::default()
        },
    );
    let rkey = p.b.mr.rkey;
    // a CQ asked for 2 holds 3 (rxe's rounding)
    for i in 0..5 {
        p.post_a(SendWr {
            wr_id: i,
            sg_list: &[sge(&p.a, 0, 8)],
            opcode: WrOpcode::RdmaWrite,
            send_flags: SendFlags::SIGNALED,
            remote_addr: IOVA,
            rkey,
            ..Default::default()
        });
    }
    p.run(10);
    assert_eq!(p.scq_a().len(), 3, "the CQ holds its depth, no more");
    assert_eq!(p.nic_a().counters().cq_overflow, 2);
    let scq = p.a.scq;
    assert_eq!(p.nic_a().poll_event(), Some(AsyncEvent::CqErr(scq)));
}

#[test]
fn sge_limits() {
    let mut nic = nic_with(|_| {});
    let pd = nic.alloc_pd().unwrap();
    let cq = nic.create_cq(16).unwrap();
    assert_eq!(
        nic.create_qp(
            pd,
            &init(
                cq,
                QpCap {
                    max_send_sge: 33,
                    ..cap(4, 4, 1, 0)
                }
            )
        ),
        Err(Error::Invalid)
    );
    assert_eq!(
        nic.create_qp(
            pd,
            &init(
                cq,
                QpCap {
                    max_recv_sge: 33,
                    ..cap(4, 4, 1, 0)
                }
            )
        ),
        Err(Error::Invalid)
    );
    assert_eq!(
        nic.create_srq(
            pd,
            SrqAttr {
                max_wr: 4,
                max_sge: 28,
                srq_limit: 0
            }
        ),
        Err(Error::Invalid)
    );
    let q = nic.create_qp(pd, &init(cq, cap(4, 4, 32, 0))).unwrap();
    assert!(q >= 17);
    // the pair's QPs (4 SGEs) refuse 5, on send and on receive
    let mut p = Pair::new(202, LinkConfig::ideal(), Opts::default());
    let sg = [sge(&p.a, 0, 8); 5];
    let (qa, qb) = (p.a.qpn, p.b.qpn);
    let wr = SendWr {
        wr_id: 1,
        sg_list: &sg,
        opcode: WrOpcode::Send,
        ..Default::default()
    };
    assert_eq!(
        p.nic_a().post_send(qa, &wr),
        Err(Error::Invalid),
        "5 SGEs, max_send_sge 4"
    );
    let wr = SendWr {
        sg_list: &sg[..4],
        ..wr
    };
    assert_eq!(p.nic_a().post_send(qa, &wr), Ok(()));
    let sgb = [sge(&p.b, 0, 8); 5];
    assert_eq!(
        p.nic_b().post_recv(
            qb,
            &RecvWr {
                wr_id: 1,
                sg_list: &sgb
            }
        ),
        Err(Error::Invalid)
    );
    assert_eq!(
        p.nic_b().post_recv(
            qb,
            &RecvWr {
                wr_id: 1,
                sg_list: &sgb[..4]
            }
        ),
        Ok(())
    );
}

#[test]
fn inline_size_limits() {
    let mut nic = nic_with(|_| {});
    let pd = nic.alloc_pd().unwrap();
    let cq = nic.create_cq(16).unwrap();
    assert_eq!(
        nic.create_qp(pd, &init(cq, cap(4, 4, 1, 401))),
        Err(Error::Invalid)
    );
    assert!(nic.create_qp(pd, &init(cq, cap(4, 4, 1, 400))).is_ok());
    // the pair's QPs have max_inline_data 64
    let mut p = Pair::new(203, LinkConfig::ideal(), Opts::default());
    let q = p.a.qpn;
    let data = [7u8; 65];
    let wr = SendWr {
        wr_id: 1,
        opcode: WrOpcode::RdmaWrite,
        send_flags: SendFlags::INLINE,
        remote_addr: IOVA,
        rkey: p.b.mr.rkey,
        ..Default::default()
    };
    assert_eq!(
        p.nic_a().post_send_inline(q, &wr, Some(&data)),
        Err(Error::Invalid)
    );
    assert_eq!(
        p.nic_a().post_send_inline(q, &wr, Some(&data[..64])),
        Ok(())
    );
    let sg = [sge(&p.a, 0, 65)];
    let wr = SendWr { sg_list: &sg, ..wr };
    assert_eq!(
        p.nic_a().post_send(q, &wr),
        Err(Error::Invalid),
        "65 bytes gathered inline"
    );
}

#[test]
fn queue_depth_limits() {
    let mut nic = nic_with(|_| {});
    let pd = nic.alloc_pd().unwrap();
    let cq = nic.create_cq(16).unwrap();
    assert_eq!(
        nic.create_qp(pd, &init(cq, cap(0x4001, 4, 1, 0))),
        Err(Error::Invalid)
    );
    assert_eq!(
        nic.create_qp(pd, &init(cq, cap(4, 0x4001, 1, 0))),
        Err(Error::Invalid)
    );
    assert_eq!(
        nic.create_srq(
            pd,
            SrqAttr {
                max_wr: 0x4001,
                max_sge: 1,
                srq_limit: 0
            }
        ),
        Err(Error::Invalid)
    );
    // full SQ / RQ: ENOMEM, as rxe
    let mut p = Pair::new(204, LinkConfig::ideal(), Opts::default());
    let (qa, qb) = (p.a.qpn, p.b.qpn);
    let wr = SendWr {
        wr_id: 1,
        sg_list: &[],
        opcode: WrOpcode::Send,
        ..Default::default()
    };
    for _ in 0..128 {
        p.nic_a().post_send(qa, &wr).unwrap();
    }
    assert_eq!(p.nic_a().post_send(qa, &wr), Err(Error::NoMem));
    for _ in 0..128 {
        p.nic_b()
            .post_recv(
                qb,
                &RecvWr {
                    wr_id: 1,
                    sg_list: &[],
                },
            )
            .unwrap();
    }
    assert_eq!(
        p.nic_b().post_recv(
            qb,
            &RecvWr {
                wr_id: 1,
                sg_list: &[]
            }
        ),
        Err(Error::NoMem)
    );
}

#[test]
fn outstanding_reads_are_limited_by_max_rd_atomic() {
    let mut p = Pair::new(
        205,
        LinkConfig::ideal(),
        Opts {
            max_rd_atomic: 2,
            ..Default::default()
        },
    );
    let q = p.a.qpn;
    use QpAttrMask as M;
    let too_many = QpAttr {
        max_rd_atomic: 129,
        max_dest_rd_atomic: 129,
        ..Default::default()
    };
    assert_eq!(
        p.nic_a().modify_qp(q, &too_many, M::MAX_QP_RD_ATOMIC),
        Err(Error::Invalid)
    );
    assert_eq!(p.qp_a().max_rd_atomic, 2);
    let rkey = p.b.mr.rkey;
    for i in 0..5u64 {
        p.post_a(SendWr {
            wr_id: i,
            sg_list: &[sge(&p.a, 64 * i, 8)],
            opcode: WrOpcode::RdmaRead,
            send_flags: SendFlags::SIGNALED,
            remote_addr: IOVA,
            rkey,
            ..Default::default()
        });
    }
    // nothing is delivered: only two READ requests leave A
    let mut buf = vec![0u8; 8192];
    let mut n = 0;
    let now = p.net.now;
    while p.nic_a().poll_transmit(now, &mut buf).is_some() {
        n += 1;
    }
    assert_eq!(n, 2);
}

#[test]
fn address_handle_limit() {
    let mut nic = nic_with(|d| d.max_ah = 2);
    let pd = nic.alloc_pd().unwrap();
    let ah = AhAttr::to_ip("10.0.0.9".parse().unwrap());
    nic.create_ah(pd, ah).unwrap();
    nic.create_ah(pd, ah).unwrap();
    assert_eq!(nic.create_ah(pd, ah), Err(Error::NoMem));
}
