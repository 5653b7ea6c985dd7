//! Handle tables: the objects the library gave out, the work requests it accepted, and how a
//! [`Ref`] picks one.

use super::*;

macro_rules! handle {
    ($name:ident($t:ty) { $($(#[$fm:meta])* $f:ident : $ft:ty),* $(,)? }) => {
        pub(super) struct $name {
            pub(super) p: *mut $t,
            pub(super) alive: bool,
            $($(#[$fm])* pub(super) $f: $ft),*
        }
        impl Handle for $name {
            fn addr(&self) -> usize {
                self.p as usize
            }
            fn alive(&self) -> bool {
                self.alive
            }
        }
    };
}

pub(super) trait Handle {
    fn addr(&self) -> usize;
    fn alive(&self) -> bool;
}

handle!(CtxH(ibv_context) {});
handle!(PdH(ibv_pd) { ctx: usize });
handle!(MrH(ibv_mr) {
    pd: usize,
    buf: usize,
    /// Offset of the first byte in the buffer's interior.
    off: usize,
    len: usize,
    iova: u64,
    lkey: u32,
    rkey: u32,
});
handle!(ChH(ibv_comp_channel) { ctx: usize });
handle!(CqH(ibv_cq) {
    ctx: usize,
    ch: Option<usize>,
    cap: usize,
    unacked: u32,
    arms: u64,
    events: u64,
    tainted: bool,
});
handle!(QpH(ibv_qp) {
    pd: usize,
    scq: usize,
    rcq: usize,
    srq: Option<usize>,
    qpt: u32,
    qpn: u32,
    state: u32,
    sig_all: bool,
    cap: ibv_qp_cap,
    qkey: u32,
    /// Created with send ops: has the `ibv_wr_*` API.
    ex: bool,
    /// `IBV_EVENT_QP_LAST_WQE_REACHED` events read for it.
    last_wqe: u32,
    /// Reached a working state (INIT … SQE) since it was created or last reset: only such a
    /// QP on an SRQ raises LAST_WQE_REACHED when it goes to ERR (RESET → ERR raises none).
    worked: bool,
});
handle!(SrqH(ibv_srq) { pd: usize });
handle!(AhH(ibv_ah) { pd: usize });

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Pick {
    Live(usize),
    /// The address of a destroyed object, or of a live object of another type.
    Bad(usize),
    Null,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Kind {
    Send,
    Recv,
    Srq(usize),
}

/// A work request the library accepted (or may have: `bad_wr` NULL on a failed list).
#[derive(Debug)]
pub(super) struct Wr {
    pub(super) qp: usize,
    pub(super) kind: Kind,
    /// Must complete exactly once (signaled and surely posted).
    pub(super) must: bool,
    pub(super) signaled: bool,
    pub(super) opcode: u32,
    /// Receive: total SGE length.
    pub(super) len: u64,
    pub(super) seen: u8,
    /// Can still produce a completion (its QP / SRQ was not destroyed or reset).
    pub(super) live: bool,
    /// CQs seen empty after it stopped being live: it cannot be in them.
    pub(super) cleared: Vec<usize>,
}

pub(super) const WC_STATUS_MAX: u32 = 21;
/// `IBV_EVENT_QP_LAST_WQE_REACHED`.
pub(super) const IBV_EVENT_QP_LAST_WQE_REACHED: u32 = 16;

pub(super) fn is_v4_mapped(g: &[u8; 16]) -> bool {
    g[..10].iter().all(|&b| b == 0) && g[10] == 0xff && g[11] == 0xff
}

pub(super) fn mapped(ip: Ipv4Addr) -> [u8; 16] {
    ip.to_ipv6_mapped().octets()
}

pub(super) fn pick_in<T: Handle>(
    v: &[T],
    r: Ref,
    dead_ok: impl Fn(usize) -> bool,
    others: impl FnOnce() -> Vec<usize>,
) -> Option<Pick> {
    match r.0 {
        0xFF => Some(Pick::Null),
        0xF0..=0xF7 => {
            let dead: Vec<usize> = (0..v.len())
                .filter(|&i| !v[i].alive() && dead_ok(v[i].addr()))
                .collect();
            if dead.is_empty() {
                return None;
            }
            Some(Pick::Bad(
                v[dead[(r.0 - 0xF0) as usize % dead.len()]].addr(),
            ))
        }
        0xF8..=0xFE => {
            let mine: Vec<usize> = v.iter().map(|h| h.addr()).collect();
            let o: Vec<usize> = others().into_iter().filter(|a| !mine.contains(a)).collect();
            if o.is_empty() {
                return None;
            }
            Some(Pick::Bad(o[(r.0 - 0xF8) as usize % o.len()]))
        }
        b => {
            let live: Vec<usize> = (0..v.len()).filter(|&i| v[i].alive()).collect();
            if live.is_empty() {
                return None;
            }
            Some(Pick::Live(live[b as usize % live.len()]))
        }
    }
}

pub(super) fn live_count<T: Handle>(v: &[T]) -> usize {
    v.iter().filter(|h| h.alive()).count()
}

pub(super) fn ptr_of<T: Handle>(v: &[T], p: Pick) -> usize {
    match p {
        Pick::Live(i) => v[i].addr(),
        Pick::Bad(a) => a,
        Pick::Null => 0,
    }
}
