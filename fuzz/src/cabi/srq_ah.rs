//! Executors for shared receive queues and address handles.

use super::*;

impl H {
    pub(super) fn create_srq(&mut self, r: Ref, max_wr: u16, max_sge: u8, limit: u16, null: u8) {
        let Some(pk) = self.pick(&self.pds, r) else {
            return;
        };
        if live_count(&self.srqs) >= 4 {
            return;
        }
        let pdp = ptr_of(&self.pds, pk) as *mut ibv_pd;
        c::set_errno(0);
        if null % 16 == 15 {
            let p = c::create_srq(pdp, None);
            self.want_ptr("ibv_create_srq(NULL attr)", p, Some(false), &[libc::EINVAL]);
            return;
        }
        let mw = if max_wr >= 0xFFF0 {
            [0x4000, 0x4001, 0, u32::MAX, 1, 0x3FFF, 0x10000, 2][(max_wr & 7) as usize]
        } else {
            (max_wr % 128) as u32
        };
        let attr = ibv_srq_attr {
            max_wr: mw,
            max_sge: (max_sge % 32) as u32,
            srq_limit: (limit % 160) as u32,
        };
        let cookie = 0x5500_0000 + self.srqs.len();
        let mut ia = ibv_srq_init_attr {
            srq_context: cookie as *mut c_void,
            attr,
        };
        let p = c::create_srq(pdp, Some(&mut ia));
        let ok = matches!(pk, Pick::Live(_))
            && (1..=0x4000).contains(&attr.max_wr)
            && attr.max_sge <= 27
            && attr.srq_limit <= attr.max_wr;
        if !self.want_ptr("ibv_create_srq", p, Some(ok), &[libc::EINVAL]) {
            return;
        }
        let Pick::Live(i) = pk else { unreachable!() };
        if ia.attr.max_wr < attr.max_wr || ia.attr.max_sge < attr.max_sge {
            fail!(self, "ibv_create_srq reported {:?} for {attr:?}", ia.attr);
        }
        let (sctx, spd, sc) = c::peek(p, |s| (s.context, s.pd, s.srq_context as usize));
        if sctx != self.ctxs[self.pds[i].ctx].p || spd != self.pds[i].p || sc != cookie {
            fail!(self, "ibv_srq fields differ from the creation");
        }
        self.srqs.push(SrqH {
            p,
            alive: true,
            pd: i,
        });
    }

    pub(super) fn modify_srq(&mut self, r: Ref, mask: u8, max_wr: u16, limit: u16, null: u8) {
        let Some(pk) = self.pick(&self.srqs, r) else {
            return;
        };
        let mut a = ibv_srq_attr {
            max_wr: max_wr as u32,
            max_sge: 0,
            srq_limit: limit as u32,
        };
        let p = ptr_of(&self.srqs, pk) as *mut ibv_srq;
        if !matches!(pk, Pick::Live(_)) {
            let rc = c::modify_srq(p, Some(&mut a), mask as c_int);
            self.want("ibv_modify_srq(dead/NULL)", rc, &[libc::EINVAL]);
        } else if null % 16 == 15 {
            let rc = c::modify_srq(p, None, mask as c_int);
            self.want("ibv_modify_srq(NULL attr)", rc, &[libc::EINVAL]);
        } else {
            let rc = c::modify_srq(p, Some(&mut a), mask as c_int);
            self.want("ibv_modify_srq", rc, &[0, libc::EINVAL, libc::EOPNOTSUPP]);
        }
    }

    pub(super) fn query_srq(&mut self, r: Ref, null: u8) {
        let Some(pk) = self.pick(&self.srqs, r) else {
            return;
        };
        let mut a = ibv_srq_attr::default();
        let p = ptr_of(&self.srqs, pk) as *mut ibv_srq;
        if !matches!(pk, Pick::Live(_)) {
            let rc = c::query_srq(p, Some(&mut a));
            self.want("ibv_query_srq(dead/NULL)", rc, &[libc::EINVAL]);
        } else if null % 16 == 15 {
            let rc = c::query_srq(p, None);
            self.want("ibv_query_srq(NULL attr)", rc, &[libc::EINVAL]);
        } else {
            let rc = c::query_srq(p, Some(&mut a));
            self.want("ibv_query_srq", rc, &[0]);
            if a.max_wr == 0 || a.srq_limit > a.max_wr {
                fail!(self, "ibv_query_srq: {a:?}");
            }
        }
    }

    pub(super) fn destroy_srq(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.srqs, r) else {
            return;
        };
        let rc = c::destroy_srq(ptr_of(&self.srqs, pk) as *mut _);
        match pk {
            Pick::Live(i) if self.qps.iter().any(|q| q.alive && q.srq == Some(i)) => {
                self.want("ibv_destroy_srq(busy)", rc, &[libc::EBUSY])
            }
            Pick::Live(i) => {
                self.want("ibv_destroy_srq", rc, &[0]);
                self.srqs[i].alive = false;
                for w in self.wrs.values_mut() {
                    if w.kind == Kind::Srq(i) {
                        w.live = false;
                    }
                }
            }
            _ => self.want("ibv_destroy_srq(dead/NULL)", rc, &[libc::EINVAL]),
        }
    }

    pub(super) fn create_ah(&mut self, r: Ref, spec: &AhSpec, null: u8) {
        let Some(pk) = self.pick(&self.pds, r) else {
            return;
        };
        if live_count(&self.ahs) >= 16 {
            return;
        }
        let pdp = ptr_of(&self.pds, pk) as *mut ibv_pd;
        c::set_errno(0);
        if null % 16 == 15 {
            let p = c::create_ah(pdp, None);
            self.want_ptr("ibv_create_ah(NULL attr)", p, Some(false), &[libc::EINVAL]);
            return;
        }
        let (mut attr, valid) = self.ah_attr(spec);
        let p = c::create_ah(pdp, Some(&mut attr));
        let Pick::Live(i) = pk else {
            self.want_ptr(
                "ibv_create_ah(dead/NULL pd)",
                p,
                Some(false),
                &[libc::EINVAL],
            );
            return;
        };
        if !self.want_ptr(
            "ibv_create_ah",
            p,
            Some(valid),
            &[libc::EINVAL, libc::ENODATA],
        ) {
            return;
        }
        if c::peek(p, |a| (a.context, a.pd)) != (self.ctxs[self.pds[i].ctx].p, self.pds[i].p) {
            fail!(self, "ibv_ah fields differ from the creation");
        }
        self.ahs.push(AhH {
            p,
            alive: true,
            pd: i,
        });
    }

    pub(super) fn destroy_ah(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.ahs, r) else {
            return;
        };
        let rc = c::destroy_ah(ptr_of(&self.ahs, pk) as *mut _);
        if let Pick::Live(i) = pk {
            self.want("ibv_destroy_ah", rc, &[0]);
            self.ahs[i].alive = false;
        } else {
            self.want("ibv_destroy_ah(dead/NULL)", rc, &[libc::EINVAL]);
        }
    }
}
