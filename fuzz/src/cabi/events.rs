//! Async events: reading and acknowledging them, and their checks.

use super::*;

impl H {
    pub(super) fn drain_async(&mut self, i: usize) {
        for _ in 0..256 {
            let mut ev = ibv_async_event {
                element: ibv_async_event_element { port_num: 0 },
                event_type: 0,
            };
            c::set_errno(0);
            let rc = c::get_async_event(self.ctxs[i].p, Some(&mut ev));
            if rc != 0 {
                self.want("ibv_get_async_event", rc, &[-1]);
                self.want("ibv_get_async_event errno", c::errno(), &[libc::EAGAIN]);
                return;
            }
            self.stats.async_events += 1;
            let el = c::event_element(&ev);
            let t = ev.event_type;
            let owner = match t {
                IBV_EVENT_CQ_ERR => self
                    .cqs
                    .iter()
                    .find(|q| q.alive && q.p as usize == el)
                    .map(|q| q.ctx),
                1..=7 | 16 => (0..self.qps.len())
                    .find(|&k| self.qps[k].alive && self.qps[k].p as usize == el)
                    .map(|k| self.qp_ctx(k)),
                14 | 15 => self
                    .srqs
                    .iter()
                    .find(|s| s.alive && s.p as usize == el)
                    .map(|s| self.pds[s.pd].ctx),
                8..=13 | 17..=20 => Some(i),
                _ => fail!(self, "async event of unknown type {t}"),
            };
            if t == IBV_EVENT_QP_LAST_WQE_REACHED {
                if let Some(k) =
                    (0..self.qps.len()).find(|&k| self.qps[k].alive && self.qps[k].p as usize == el)
                {
                    self.qps[k].last_wqe += 1;
                }
            }
            if owner != Some(i) {
                fail!(
                    self,
                    "async event {t} names {el:#x}, not a live object of context {i}"
                );
            }
            c::ack_async_event(&mut ev);
        }
    }

    pub(super) fn async_op(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.ctxs, r) else {
            return;
        };
        match pk {
            Pick::Live(i) => self.drain_async(i),
            _ => {
                c::set_errno(0);
                let mut ev = ibv_async_event {
                    element: ibv_async_event_element { port_num: 0 },
                    event_type: 0,
                };
                let rc = c::get_async_event(ptr_of(&self.ctxs, pk) as *mut _, Some(&mut ev));
                self.want("ibv_get_async_event(dead/NULL)", rc, &[-1]);
                self.want(
                    "ibv_get_async_event(dead/NULL) errno",
                    c::errno(),
                    &[libc::EINVAL],
                );
            }
        }
    }
}
