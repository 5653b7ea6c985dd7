//! The Backend seam end to end through the C entry points and the `ops` table (the path the
//! inline `ibv_post_send`/`ibv_poll_cq`/`ibv_req_notify_cq` take), with a toy in-memory
//! loopback backend standing in for the engine.

use super::context::TEST_BACKEND;
use super::exports::*;
use crate::abi::*;
use crate::backend::*;
use crate::config::DeviceConfig;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct CqState {
    wcs: VecDeque<ibv_wc>,
    armed: bool,
    notifier: Option<CqNotifier>,
}

struct QpState {
    send_cq: u64,
    recv_cq: u64,
    qp_num: u32,
    state: u32,
    cap: ibv_qp_cap,
    recvs: VecDeque<u64>,
}

#[derive(Default)]
struct Inner {
    next: u64,
    cqs: HashMap<u64, CqState>,
    qps: HashMap<u64, QpState>,
}

/// Sends loop back to the same QP's receive queue.
#[derive(Default)]
struct Loopback(Mutex<Inner>);

impl Loopback {
    fn complete(inner: &mut Inner, cq: u64, wc: ibv_wc) {
        let c = inner.cqs.get_mut(&cq).unwrap();
        c.wcs.push_back(wc);
        if std::mem::take(&mut c.armed) {
            if let Some(n) = &c.notifier {
                n.notify();
            }
        }
    }
}

impl DeviceContext for Loopback {
    fn alloc_pd(&self) -> VerbResult<PdId> {
        let mut g = self.0.lock().unwrap();
        g.next += 1;
        Ok(PdId(g.next))
    }
    fn dealloc_pd(&self, _pd: PdId) -> VerbResult<()> {
        Ok(())
    }
    fn reg_mr(&self, _pd: PdId, mem: MrMemory, _iova: u64, _access: i32) -> VerbResult<MrInfo> {
        mem.write(0, b"hi")?;
        Ok(MrInfo {
            id: MrId(7),
            lkey: 0x1234,
            rkey: 0x5678,
        })
    }
    fn dereg_mr(&self, _mr: MrId) -> VerbResult<()> {
        Ok(())
    }
    fn create_cq(&self, init: CqInit) -> VerbResult<CqInfo> {
        let mut g = self.0.lock().unwrap();
        g.next += 1;
        let id = g.next;
        g.cqs.insert(
            id,
            CqState {
                notifier: init.notifier,
                ..Default::default()
            },
        );
        Ok(CqInfo {
            id: CqId(id),
            cqe: init.cqe.next_power_of_two(),
        })
    }
    fn destroy_cq(&self, cq: CqId) -> VerbResult<()> {
        self.0
            .lock()
            .unwrap()
            .cqs
            .remove(&cq.0)
            .map(|_| ())
            .ok_or(Errno::EINVAL)
    }
    fn poll_cq(&self, cq: CqId, wc: &mut [ibv_wc]) -> VerbResult<usize> {
        let mut g = self.0.lock().unwrap();
        let c = g.cqs.get_mut(&cq.0).ok_or(Errno::EINVAL)?;
        let n = wc.len().min(c.wcs.len());
        for w in wc.iter_mut().take(n) {
            *w = c.wcs.pop_front().unwrap();
        }
        Ok(n)
    }
    fn req_notify_cq(&self, cq: CqId, _solicited_only: bool) -> VerbResult<()> {
        self.0
            .lock()
            .unwrap()
            .cqs
            .get_mut(&cq.0)
            .ok_or(Errno::EINVAL)?
            .armed = true;
        Ok(())
    }
    fn create_qp(&self, init: QpInit) -> VerbResult<QpInfo> {
        let mut g = self.0.lock().unwrap();
        g.next += 1;
        let id = g.next;
        let qp_num = 16 + id as u32;
        g.qps.insert(
            id,
            QpState {
                send_cq: init.send_cq.0,
                recv_cq: init.recv_cq.0,
                qp_num,
                state: IBV_QPS_RESET,
                cap: init.cap,
                recvs: VecDeque::new(),
            },
        );
        Ok(QpInfo {
            id: QpId(id),
            qp_num,
            cap: init.cap,
        })
    }
    fn modify_qp(&self, qp: QpId, attr: &ibv_qp_attr, mask: i32) -> VerbResult<()> {
        let mut g = self.0.lock().unwrap();
        let q = g.qps.get_mut(&qp.0).ok_or(Errno::EINVAL)?;
        if mask & IBV_QP_STATE != 0 {
            q.state = attr.qp_state;
        }
        Ok(())
    }
    fn destroy_qp(&self, qp: QpId) -> VerbResult<()> {
        self.0
            .lock()
            .unwrap()
            .qps
            .remove(&qp.0)
            .map(|_| ())
            .ok_or(Errno::EINVAL)
    }
    fn post_recv(&self, qp: QpId, wr: &RecvWr<'_>) -> VerbResult<()> {
        self.0
            .lock()
            .unwrap()
            .qps
            .get_mut(&qp.0)
            .ok_or(Errno::EINVAL)?
            .recvs
            .push_back(wr.wr_id);
        Ok(())
    }
    fn post_send(&self, qp: QpId, wr: &SendWr<'_>) -> VerbResult<()> {
        let mut g = self.0.lock().unwrap();
        let q = g.qps.get_mut(&qp.0).ok_or(Errno::EINVAL)?;
        if q.state != IBV_QPS_RTS || wr.sg_list.len() > q.cap.max_send_sge as usize {
            return Err(Errno::EINVAL);
        }
        let len: u32 = match wr.inline_data {
            Some(d) => d.len() as u32,
            None => wr.sg_list.iter().map(|s| s.length).sum(),
        };
        let (scq, rcq, qpn) = (q.send_cq, q.recv_cq, q.qp_num);
        let rwr = q.recvs.pop_front().ok_or(Errno::ENOMEM)?;
        let send = ibv_wc {
            wr_id: wr.wr_id,
            opcode: IBV_WC_SEND,
            qp_num: qpn,
            ..Default::default()
        };
        let recv = ibv_wc {
            wr_id: rwr,
            opcode: IBV_WC_RECV,
            byte_len: len,
            qp_num: qpn,
            src_qp: qpn,
            ..Default::default()
        };
        Loopback::complete(&mut g, scq, send);
        Loopback::complete(&mut g, rcq, recv);
        Ok(())
    }
}

struct LoopbackBackend;
impl Backend for LoopbackBackend {
    fn open_device(
        &self,
        _cfg: &DeviceConfig,
        ev: AsyncEventSink,
    ) -> VerbResult<Box<dyn DeviceContext>> {
        ev.post(AsyncElement::Port(1), IBV_EVENT_PORT_ACTIVE);
        Ok(Box::<Loopback>::default())
    }
}

fn sge(buf: &mut [u8], lkey: u32) -> ibv_sge {
    ibv_sge {
        addr: buf.as_mut_ptr() as u64,
        length: buf.len() as u32,
        lkey,
    }
}

#[test]
fn verbs_reach_the_backend_through_the_c_abi() {
    TEST_BACKEND.with(|t| *t.borrow_mut() = Some(Arc::new(LoopbackBackend)));
    // SAFETY: the test is a C program written in Rust: valid pointers, objects destroyed once.
    unsafe {
        let list = ibv_get_device_list(core::ptr::null_mut());
        let ctx = ibv_open_device(*list);
        assert!(!ctx.is_null());

        // The engine's async event arrives on context->async_fd.
        let mut pfd = libc::pollfd {
            fd: (*ctx).async_fd,
            events: libc::POLLIN,
            revents: 0,
        };
        assert_eq!(libc::poll(&mut pfd, 1, 1000), 1);
        let mut ev: ibv_async_event = core::mem::zeroed();
        assert_eq!(ibv_get_async_event(ctx, &mut ev), 0);
        assert_eq!(
            (ev.event_type, ev.element.port_num),
            (IBV_EVENT_PORT_ACTIVE, 1)
        );
        ibv_ack_async_event(&mut ev);
        libc::fcntl((*ctx).async_fd, libc::F_SETFL, libc::O_NONBLOCK);
        assert_eq!(ibv_get_async_event(ctx, &mut ev), -1);
        assert_eq!(*libc::__errno_location(), libc::EAGAIN);

        let pd = ibv_alloc_pd(ctx);
        assert!(!pd.is_null());
        assert_eq!((*pd).context, ctx);

        let mut buf = vec![0u8; 64];
        let mr = ibv_reg_mr(
            pd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            IBV_ACCESS_LOCAL_WRITE,
        );
        assert!(!mr.is_null());
        assert_eq!(
            ((*mr).lkey, (*mr).rkey, (*mr).length, (*mr).pd),
            (0x1234, 0x5678, 64, pd)
        );
        assert_eq!(
            &buf[..2],
            b"hi",
            "MrMemory::write reached the program's buffer"
        );

        let ch = ibv_create_comp_channel(ctx);
        let cq = ibv_create_cq(ctx, 10, 0xC0FFEE as *mut _, ch, 0);
        assert!(!cq.is_null());
        assert_eq!((*cq).cqe, 16);
        assert_eq!((*ch).refcnt, 1);
        assert_eq!(ibv_destroy_comp_channel(ch), libc::EBUSY);

        let mut ia = ibv_qp_init_attr {
            qp_context: core::ptr::null_mut(),
            send_cq: cq,
            recv_cq: cq,
            srq: core::ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: 4,
                max_recv_wr: 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 1,
        };
        let qp = ibv_create_qp(pd, &mut ia);
        assert!(!qp.is_null());
        assert_eq!(
            ((*qp).qp_num, (*qp).state, (*qp).qp_type),
            (19, IBV_QPS_RESET, IBV_QPT_RC)
        );
        let mut attr = ibv_qp_attr {
            qp_state: IBV_QPS_RTS,
            ..Default::default()
        };
        assert_eq!(ibv_modify_qp(qp, &mut attr, IBV_QP_STATE), 0);
        assert_eq!((*qp).state, IBV_QPS_RTS);

        // The inline verbs: through ctx->ops, exactly as verbs.h's static inlines do.
        let ops = &(*(*qp).context).ops;
        assert_eq!((ops.req_notify_cq.unwrap())(cq, 0), 0);
        let mut rs = [sge(&mut buf[..32], 0x1234)];
        let mut rwr = ibv_recv_wr {
            wr_id: 100,
            next: core::ptr::null_mut(),
            sg_list: rs.as_mut_ptr(),
            num_sge: 1,
        };
        let mut bad_r = core::ptr::null_mut();
        assert_eq!((ops.post_recv.unwrap())(qp, &mut rwr, &mut bad_r), 0);

        let mut s1 = [sge(&mut buf[32..40], 0x1234)];
        let mut s2 = [sge(&mut buf[40..48], 0x1234), sge(&mut buf[48..56], 0x1234)];
        let mut w2: ibv_send_wr = core::mem::zeroed();
        w2.wr_id = 2;
        w2.sg_list = s2.as_mut_ptr();
        w2.num_sge = 2; // more than max_send_sge: the backend refuses it
        w2.opcode = IBV_WR_SEND;
        let mut w1: ibv_send_wr = core::mem::zeroed();
        w1.wr_id = 1;
        w1.next = &mut w2;
        w1.sg_list = s1.as_mut_ptr();
        w1.num_sge = 1;
        w1.opcode = IBV_WR_SEND;
        let mut bad = core::ptr::null_mut();
        assert_eq!(
            (ops.post_send.unwrap())(qp, &mut w1, &mut bad),
            libc::EINVAL
        );
        assert_eq!(bad, &mut w2 as *mut _, "bad_wr names the refused WR");

        // The completion event: the channel fd is readable, then ibv_get_cq_event returns it.
        let mut pfd = libc::pollfd {
            fd: (*ch).fd,
            events: libc::POLLIN,
            revents: 0,
        };
        assert_eq!(libc::poll(&mut pfd, 1, 1000), 1);
        let (mut ev_cq, mut ev_ctx) = (core::ptr::null_mut(), core::ptr::null_mut());
        assert_eq!(ibv_get_cq_event(ch, &mut ev_cq, &mut ev_ctx), 0);
        assert_eq!((ev_cq, ev_ctx as usize), (cq, 0xC0FFEE));
        ibv_ack_cq_events(cq, 1);
        assert_eq!((*cq).comp_events_completed, 1);
        pfd.revents = 0;
        assert_eq!(libc::poll(&mut pfd, 1, 0), 0, "one event per arming");

        let mut wc = [ibv_wc::default(); 4];
        let n = (ops.poll_cq.unwrap())(cq, 4, wc.as_mut_ptr());
        assert_eq!(n, 2);
        assert_eq!((wc[0].wr_id, wc[0].opcode), (1, IBV_WC_SEND));
        assert_eq!(
            (wc[1].wr_id, wc[1].opcode, wc[1].byte_len),
            (100, IBV_WC_RECV, 8)
        );
        assert_eq!((ops.poll_cq.unwrap())(cq, 4, wc.as_mut_ptr()), 0);

        let mut qa = ibv_qp_attr::default();
        let mut qi: ibv_qp_init_attr = core::mem::zeroed();
        // query_qp is not implemented by this toy backend: EOPNOTSUPP comes back as the return.
        assert_eq!(
            ibv_query_qp(qp, &mut qa, IBV_QP_STATE, &mut qi),
            libc::EOPNOTSUPP
        );

        // Wrong-typed objects are refused, not used.
        assert_eq!(ibv_destroy_qp(cq.cast()), libc::EINVAL);
        assert_eq!(ibv_dealloc_pd(qp.cast()), libc::EINVAL);

        assert_eq!(ibv_destroy_qp(qp), 0);
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!(ibv_destroy_comp_channel(ch), 0);
        assert_eq!(ibv_dereg_mr(mr), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);

        // Destroyed objects are refused, not used (best effort: freed memory not yet reused).
        assert_eq!(ibv_dealloc_pd(pd), libc::EINVAL);
        assert_eq!(ibv_destroy_comp_channel(ch), libc::EINVAL);
        assert_eq!(ibv_close_device(ctx), 0);
        ibv_free_device_list(list);
    }
    TEST_BACKEND.with(|t| *t.borrow_mut() = None);
}

#[test]
fn unsupported_backend_answers_eopnotsupp_with_the_c_conventions() {
    // The real default backend (the roce runtime) would bind UDP 4791; this checks the C
    // conventions for a backend that implements nothing.
    TEST_BACKEND.with(|t| *t.borrow_mut() = Some(Arc::new(crate::backend::Unsupported)));
    // SAFETY: C-style calls with valid pointers.
    unsafe {
        let list = ibv_get_device_list(core::ptr::null_mut());
        let ctx = ibv_open_device(*list);
        assert!(ibv_alloc_pd(ctx).is_null());
        assert_eq!(*libc::__errno_location(), libc::EOPNOTSUPP);
        assert!(ibv_create_cq(ctx, 0, core::ptr::null_mut(), core::ptr::null_mut(), 0).is_null());
        assert_eq!(
            *libc::__errno_location(),
            libc::EINVAL,
            "cqe 0 is refused before the backend"
        );
        assert_eq!(ibv_dealloc_pd(core::ptr::null_mut()), libc::EINVAL);
        assert_eq!(ibv_close_device(ctx), 0);
        ibv_free_device_list(list);
    }
    TEST_BACKEND.with(|t| *t.borrow_mut() = None);
}

#[test]
fn wr_api_posts_through_the_same_seam() {
    TEST_BACKEND.with(|t| *t.borrow_mut() = Some(Arc::new(LoopbackBackend)));
    // SAFETY: a C program written in Rust.
    unsafe {
        let list = ibv_get_device_list(core::ptr::null_mut());
        let ctx = ibv_open_device(*list);
        let pd = ibv_alloc_pd(ctx);
        let mut buf = [7u8; 64];

        // ibv_create_cq_ex() / ibv_create_qp_ex() as verbs.h inlines them: through verbs_context.
        let vctx = ctx
            .cast::<u8>()
            .sub(core::mem::offset_of!(verbs_context, context))
            .cast::<verbs_context>();
        let mut ca: ibv_cq_init_attr_ex = core::mem::zeroed();
        ca.cqe = 8;
        ca.wc_flags = IBV_WC_STANDARD_FLAGS;
        let cqx = ((*vctx).create_cq_ex.unwrap())(ctx, &mut ca);
        assert!(!cqx.is_null());
        let cq = cqx.cast::<ibv_cq>(); // ibv_cq_ex_to_cq()
        ca.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
        assert!(
            ((*vctx).create_cq_ex.unwrap())(ctx, &mut ca).is_null(),
            "timestamps are refused"
        );
        let mut ia: ibv_qp_init_attr_ex = core::mem::zeroed();
        ia.send_cq = cq;
        ia.recv_cq = cq;
        ia.cap = ibv_qp_cap {
            max_send_wr: 4,
            max_recv_wr: 4,
            max_send_sge: 2,
            max_recv_sge: 1,
            max_inline_data: 64,
        };
        ia.qp_type = IBV_QPT_RC;
        ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        ia.pd = pd;
        ia.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
        let qp = ((*vctx).create_qp_ex.unwrap())(ctx, &mut ia);
        assert!(!qp.is_null());
        let qpx = ibv_qp_to_qp_ex(qp);
        assert_eq!(qpx.cast::<ibv_qp>(), qp);
        let mut attr = ibv_qp_attr {
            qp_state: IBV_QPS_RTS,
            ..Default::default()
        };
        assert_eq!(ibv_modify_qp(qp, &mut attr, IBV_QP_STATE), 0);
        for id in [200, 201] {
            let mut rs = [sge(&mut buf[..16], 1)];
            let mut rwr = ibv_recv_wr {
                wr_id: id,
                next: core::ptr::null_mut(),
                sg_list: rs.as_mut_ptr(),
                num_sge: 1,
            };
            let mut bad = core::ptr::null_mut();
            assert_eq!(((*ctx).ops.post_recv.unwrap())(qp, &mut rwr, &mut bad), 0);
        }

        // ibv_wr_start / ibv_wr_send / ibv_wr_set_sge / ibv_wr_set_inline_data / ibv_wr_complete
        let q = &mut *qpx;
        (q.wr_start.unwrap())(qpx);
        q.wr_id = 5;
        q.wr_flags = IBV_SEND_SIGNALED;
        (q.wr_send.unwrap())(qpx);
        (q.wr_set_sge.unwrap())(qpx, 1, buf.as_ptr() as u64, 12);
        q.wr_id = 6;
        (q.wr_send.unwrap())(qpx);
        let mut data = *b"inline!";
        (q.wr_set_inline_data.unwrap())(qpx, data.as_mut_ptr().cast(), data.len());
        data.fill(0); // copied at set time
        assert_eq!((q.wr_complete.unwrap())(qpx), 0);

        // ibv_start_poll / ibv_next_poll / ibv_wc_read_* / ibv_end_poll
        let c = &mut *cqx;
        let mut got = Vec::new();
        let mut attr_p = ibv_poll_cq_attr { comp_mask: 0 };
        let mut rc = (c.start_poll.unwrap())(cqx, &mut attr_p);
        while rc == 0 {
            assert_eq!(c.status, IBV_WC_SUCCESS);
            got.push((
                c.wr_id,
                (c.read_byte_len.unwrap())(cqx),
                (c.read_opcode.unwrap())(cqx),
            ));
            rc = (c.next_poll.unwrap())(cqx);
        }
        assert_eq!(rc, libc::ENOENT);
        (c.end_poll.unwrap())(cqx);
        assert_eq!(
            got,
            [
                (5, 0, IBV_WC_SEND),
                (200, 12, IBV_WC_RECV),
                (6, 0, IBV_WC_SEND),
                (201, 7, IBV_WC_RECV)
            ]
        );
        assert_eq!((c.start_poll.unwrap())(cqx, &mut attr_p), libc::ENOENT);
        let mut wc = [ibv_wc::default(); 8];

        // A setter without a builder makes wr_complete fail; wr_abort drops everything.
        (q.wr_start.unwrap())(qpx);
        (q.wr_set_sge.unwrap())(qpx, 1, buf.as_ptr() as u64, 4);
        assert_eq!((q.wr_complete.unwrap())(qpx), libc::EINVAL);
        (q.wr_start.unwrap())(qpx);
        (q.wr_send.unwrap())(qpx);
        (q.wr_abort.unwrap())(qpx);
        assert_eq!(((*ctx).ops.poll_cq.unwrap())(cq, 8, wc.as_mut_ptr()), 0);

        // Unsupported send ops are refused at creation, not at a NULL function pointer later.
        ia.send_ops_flags = IBV_QP_EX_WITH_TSO;
        assert!(((*vctx).create_qp_ex.unwrap())(ctx, &mut ia).is_null());
        assert_eq!(*libc::__errno_location(), libc::EOPNOTSUPP);

        assert_eq!(ibv_destroy_qp(qp), 0);
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
        assert_eq!(ibv_close_device(ctx), 0);
        ibv_free_device_list(list);
    }
    TEST_BACKEND.with(|t| *t.borrow_mut() = None);
}
