//! Executors for contexts, protection domains, memory regions and completion channels.

use super::*;

impl H {
    pub(super) fn open_ctx(&mut self, mode: u8) {
        if live_count(&self.ctxs) >= 3 {
            return;
        }
        c::set_errno(0);
        match mode % 8 {
            4 | 5 => {
                let l = c::device_list_nullable(None);
                if l.is_null() || c::peek(l, |d| *d) != self.dev {
                    fail!(self, "ibv_get_device_list(NULL) gave {l:?}");
                }
                c::free_device_list(l);
                if mode % 8 == 5 {
                    c::free_device_list_again(l);
                }
            }
            2 => {
                let p = c::open(null_mut());
                self.want_ptr("ibv_open_device(NULL)", p, Some(false), &[libc::ENODEV]);
            }
            3 => {
                let mut junk = 0u64;
                let p = c::open((&mut junk as *mut u64).cast());
                self.want_ptr("ibv_open_device(junk)", p, Some(false), &[libc::ENODEV]);
            }
            _ => {
                let p = c::open(self.dev);
                self.want_ptr("ibv_open_device", p, Some(true), &[]);
                let (dev, async_fd) = c::peek(p, |x| (x.device, x.async_fd));
                if dev != self.dev {
                    fail!(self, "context->device is not the device");
                }
                c::nonblocking(async_fd);
                if self.gid == [0; 16] {
                    let mut g = ibv_gid::default();
                    let rc = c::query_gid(p, 1, &mut g);
                    self.want("ibv_query_gid", rc, &[0]);
                    assert!(
                        is_v4_mapped(&g.raw) && g.raw[12] == 127,
                        "the cabi target sends only to 127/8, but GID 1 is {:?}",
                        g.raw
                    );
                    self.gid = g.raw;
                }
                self.ctxs.push(CtxH { p, alive: true });
            }
        }
    }

    pub(super) fn close_ctx(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.ctxs, r) else {
            return;
        };
        match pk {
            Pick::Live(i) => {
                self.teardown(Some(i));
                self.drain_async(i);
                let rc = c::close(self.ctxs[i].p);
                self.want("ibv_close_device", rc, &[0]);
                self.ctxs[i].alive = false;
            }
            _ => {
                let rc = c::close(ptr_of(&self.ctxs, pk) as *mut _);
                self.want("ibv_close_device(dead/NULL)", rc, &[libc::EINVAL]);
            }
        }
    }

    // ------------------------------------------------------------------ PD / MR / channel

    pub(super) fn alloc_pd(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.ctxs, r) else {
            return;
        };
        c::set_errno(0);
        match pk {
            Pick::Live(i) => {
                if live_count(&self.pds) >= 16 {
                    return;
                }
                let p = c::alloc_pd(self.ctxs[i].p);
                self.want_ptr("ibv_alloc_pd", p, Some(true), &[]);
                if c::peek(p, |x| x.context) != self.ctxs[i].p {
                    fail!(self, "pd->context is not its context");
                }
                self.pds.push(PdH {
                    p,
                    alive: true,
                    ctx: i,
                });
            }
            _ => {
                let p = c::alloc_pd(ptr_of(&self.ctxs, pk) as *mut _);
                self.want_ptr("ibv_alloc_pd(dead/NULL)", p, Some(false), &[libc::EINVAL]);
            }
        }
    }

    pub(super) fn pd_busy(&self, i: usize) -> bool {
        self.mrs.iter().any(|m| m.alive && m.pd == i)
            || self.qps.iter().any(|q| q.alive && q.pd == i)
            || self.srqs.iter().any(|s| s.alive && s.pd == i)
            || self.ahs.iter().any(|a| a.alive && a.pd == i)
    }

    pub(super) fn dealloc_pd(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.pds, r) else {
            return;
        };
        let rc = c::dealloc_pd(ptr_of(&self.pds, pk) as *mut _);
        match pk {
            Pick::Live(i) if self.pd_busy(i) => {
                self.want("ibv_dealloc_pd(busy)", rc, &[libc::EBUSY])
            }
            Pick::Live(i) => {
                self.want("ibv_dealloc_pd", rc, &[0]);
                self.pds[i].alive = false;
            }
            _ => self.want("ibv_dealloc_pd(dead/NULL)", rc, &[libc::EINVAL]),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn reg_mr(
        &mut self,
        r: Ref,
        buf: u8,
        off: u16,
        len: u16,
        access: u16,
        variant: u8,
        iova: u64,
    ) {
        let Some(pk) = self.pick(&self.pds, r) else {
            return;
        };
        if live_count(&self.mrs) >= 48 {
            return;
        }
        let b = buf as usize % NBUF;
        let off = off as usize % BUF;
        let (addr, len) = match len {
            0xFFFE => (0, 0),
            0xFFFF => (self.bufs[b].interior() + off, BUF - off),
            l => (self.bufs[b].interior() + off, l as usize % (BUF - off + 1)),
        };
        let acc = (access & 0x3FF) as c_int | if access & 0x8000 != 0 { 1 << 20 } else { 0 };
        let variant = variant % 3;
        let iova = match variant {
            0 => addr as u64,
            _ if iova >> 63 == 1 => iova,
            _ => iova & 0xFFFF_F000,
        };
        c::set_errno(0);
        let p = c::reg_mr(
            variant,
            ptr_of(&self.pds, pk) as *mut _,
            addr,
            len,
            iova,
            acc,
        );
        let Pick::Live(i) = pk else {
            self.want_ptr("ibv_reg_mr(dead/NULL pd)", p, Some(false), &[libc::EINVAL]);
            return;
        };
        let remote_w = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
        // rxe: EINVAL for remote write/atomic without local write, for FLUSH_PERSISTENT on
        // memory that is not persistent (every region here), for an iova range that wraps
        let bad = (acc & remote_w != 0 && acc & IBV_ACCESS_LOCAL_WRITE == 0)
            || acc & IBV_ACCESS_FLUSH_PERSISTENT != 0
            || iova.checked_add(len as u64).is_none();
        if !self.want_ptr("ibv_reg_mr", p, Some(!bad), &[libc::EINVAL]) {
            return;
        }
        let (ctx, pd, a, l, lkey, rkey) = c::peek(p, |m| {
            (m.context, m.pd, m.addr as usize, m.length, m.lkey, m.rkey)
        });
        if ctx != self.ctxs[self.pds[i].ctx].p || pd != self.pds[i].p || a != addr || l != len {
            fail!(self, "ibv_mr fields differ from the registration");
        }
        if acc & (IBV_ACCESS_LOCAL_WRITE | remote_w) != 0 && len > 0 {
            let o = addr - self.bufs[b].interior();
            self.bufs[b].writable[o..o + len].fill(true);
        }
        self.mrs.push(MrH {
            p,
            alive: true,
            pd: i,
            buf: b,
            off: addr.saturating_sub(self.bufs[b].interior()),
            len,
            iova,
            lkey,
            rkey,
        });
    }

    pub(super) fn dereg_mr(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.mrs, r) else {
            return;
        };
        let rc = c::dereg_mr(ptr_of(&self.mrs, pk) as *mut _);
        if let Pick::Live(i) = pk {
            self.want("ibv_dereg_mr", rc, &[0]);
            self.mrs[i].alive = false;
        } else {
            self.want("ibv_dereg_mr(dead/NULL)", rc, &[libc::EINVAL]);
        }
    }

    pub(super) fn create_channel(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.ctxs, r) else {
            return;
        };
        if matches!(pk, Pick::Live(_)) && live_count(&self.chs) >= 4 {
            return;
        }
        c::set_errno(0);
        let p = c::create_channel(ptr_of(&self.ctxs, pk) as *mut _);
        let Pick::Live(i) = pk else {
            self.want_ptr(
                "ibv_create_comp_channel(dead/NULL)",
                p,
                Some(false),
                &[libc::EINVAL],
            );
            return;
        };
        self.want_ptr("ibv_create_comp_channel", p, Some(true), &[]);
        let (ctx, fd, refcnt) = c::peek(p, |x| (x.context, x.fd, x.refcnt));
        if ctx != self.ctxs[i].p || refcnt != 0 {
            fail!(self, "ibv_comp_channel fields");
        }
        c::nonblocking(fd);
        self.chs.push(ChH {
            p,
            alive: true,
            ctx: i,
        });
    }

    pub(super) fn destroy_channel(&mut self, r: Ref) {
        let Some(pk) = self.pick(&self.chs, r) else {
            return;
        };
        let rc = c::destroy_channel(ptr_of(&self.chs, pk) as *mut _);
        match pk {
            Pick::Live(i) if self.cqs.iter().any(|q| q.alive && q.ch == Some(i)) => {
                self.want("ibv_destroy_comp_channel(busy)", rc, &[libc::EBUSY])
            }
            Pick::Live(i) => {
                self.want("ibv_destroy_comp_channel", rc, &[0]);
                self.chs[i].alive = false;
            }
            _ => self.want("ibv_destroy_comp_channel(dead/NULL)", rc, &[libc::EINVAL]),
        }
    }
}
