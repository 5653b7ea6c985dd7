//! RDMA CM: the `rdma_*` functions of `librdmacm.so.1` (rdma-core v44), on the process's
//! emulated NIC and the connection manager of its runtime device ([`roce_cm`]).
//!
//! `librdmacm.so.1` is this same library: `roce run` (and `build-so.sh`) put a symlink of that
//! name next to `libibverbs.so.1`, the dynamic loader sees one file under two names and maps
//! it once, and the `rdma_*` symbols carry librdmacm's version nodes (`RDMACM_1.0` …
//! `RDMACM_1.3`). So a program's RDMA CM ids, its verbs objects and the NIC share one runtime,
//! one socket and one CM, by construction.
//!
//! What the kernel (`rdma_cm`, `ib_cm`) does is [`roce_cm::Endpoint`]'s, behind
//! [`roce_provider::runtime::Device::cm`]; what rdma-core's librdmacm does in user space is
//! here: ids and event channels, the QP transitions it makes for the program from
//! `rdma_init_qp_attr` (INIT at `rdma_create_qp`, RTR and RTS before `rdma_accept` and on the
//! connect response), synchronous ids (no channel: every call waits for its event), the
//! per-device PD, and the CQs `rdma_create_qp` makes when the program gives none.
//!
//! Events: the runtime's CM handler (progress thread or the calling thread, engine lock held)
//! queues each [`roce_cm::Event`] on the [`EventQueue`] of its id's channel, creating the new
//! id of a connect request there; `rdma_get_cm_event` takes it off and turns it into a
//! `struct rdma_cm_event` (doing librdmacm's work for a connect response first). Lock order:
//! engine, then [`IDS`]; nothing here calls into the device with [`IDS`] held.
//!
//! # Safety
//! As in the rest of `ffi` (see `ffi/mod.rs`): program pointers are NULL-checked and our own
//! objects (ids, channels, events, address infos) are looked up in the registry of live objects
//! before they are dereferenced; each is a `Box` whose first field is the C struct. An id's
//! C struct is written only by the thread making a call on that id or by `rdma_get_cm_event`
//! for an event of it, as with librdmacm (programs do not use one id from two threads at once).

mod addr;
mod ece;
mod misc;
mod ops;
mod qp;

pub use ece::{rdma_get_remote_ece, rdma_reject_ece, rdma_set_local_ece};
pub use misc::*;
pub use ops::*;
pub use qp::*;

use super::events::EventQueue;
use super::live;
use super::set_errno;
use crate::abi::*;
use core::cell::UnsafeCell;
use core::ffi::c_int;
use roce_provider::runtime::Device;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, OnceLock};

pub(crate) const ID_TAG: u32 = u32::from_be_bytes(*b"rCID");
pub(crate) const CHAN_TAG: u32 = u32::from_be_bytes(*b"rCCH");
pub(crate) const EVENT_TAG: u32 = u32::from_be_bytes(*b"rCEV");
pub(crate) const AI_TAG: u32 = u32::from_be_bytes(*b"rCAI");
pub(crate) const DEVLIST_TAG: u32 = u32::from_be_bytes(*b"rCDL");

/// `errno = e; return -1`, librdmacm's `ERR()`.
pub(crate) fn fail(e: i32) -> c_int {
    set_errno(e);
    -1
}

/// One CM event waiting on a channel: the id it is for (and the listener, for a connect
/// request), as addresses of live [`CmId`]s.
pub struct Pending {
    pub id: usize,
    pub listen: usize,
    pub ev: roce_cm::Event,
}

/// Our `struct rdma_event_channel`.
#[repr(C)]
pub struct Channel {
    pub c: rdma_event_channel,
    pub q: Arc<EventQueue<Pending>>,
}

/// What librdmacm keeps beside an id (`struct cma_id_private`).
#[derive(Default)]
pub struct IdState {
    /// Events handed to the program and not yet acknowledged (`rdma_destroy_id` waits).
    pub unacked: u32,
    /// Responder resources and initiator depth of the connection (for RTR and RTS).
    pub resp_res: u8,
    pub init_depth: u8,
    /// The QP attributes a passive `rdma_create_ep` asked for: `rdma_get_request` creates the
    /// new id's QP with them.
    pub qp_init_attr: Option<ibv_qp_init_attr>,
    /// CQs and channels `rdma_create_qp` made (destroyed with the QP).
    pub own_cqs: bool,
    /// ECE this id offers (`rdma_set_local_ece`, or its QP's) and the peer's REQ/REP offered
    /// (librdmacm's `local_ece` / `remote_ece`; `attr_mod` is `ibv_ece.options`).
    pub local_ece: roce_cm::Ece,
    pub remote_ece: roce_cm::Ece,
}

/// Our `struct rdma_cm_id`.
#[repr(C)]
pub struct CmId {
    pub id: UnsafeCell<rdma_cm_id>,
    pub cm: roce_cm::Id,
    pub dev: Arc<Device>,
    /// The queue of the id's channel (the program's, or `own_channel`'s).
    pub q: Mutex<Arc<EventQueue<Pending>>>,
    /// A synchronous id's private channel (NULL otherwise).
    pub own_channel: Mutex<*mut Channel>,
    pub st: Mutex<IdState>,
    pub acked: Condvar,
    pub path: UnsafeCell<ibv_sa_path_rec>,
}

// SAFETY: the raw pointers are addresses of our own objects or the program's, used under the
// rules of the module documentation.
unsafe impl Send for CmId {}
unsafe impl Sync for CmId {}

impl CmId {
    pub fn raw(&self) -> *mut rdma_cm_id {
        self.id.get()
    }
    /// The C struct, which librdmacm's API lets the program and the library both write (the
    /// program sets `context`, the library `qp`, `verbs`, the route …).
    // An id is worked on by one thread at a time (module documentation), as with librdmacm,
    // whose struct is just as mutable through the pointer the program holds.
    #[allow(clippy::mut_from_ref)]
    pub fn c(&self) -> &mut rdma_cm_id {
        // SAFETY: module rules: one thread at a time works on an id's C struct.
        unsafe { &mut *self.id.get() }
    }
    pub fn queue(&self) -> Arc<EventQueue<Pending>> {
        self.q.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    pub fn state(&self) -> std::sync::MutexGuard<'_, IdState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
    pub fn sync(&self) -> bool {
        !self
            .own_channel
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_null()
    }
}

/// Live ids by CM id (one runtime device per process: its CM numbers them).
pub(crate) static IDS: Mutex<Option<HashMap<u32, usize>>> = Mutex::new(None);

pub(crate) fn ids() -> std::sync::MutexGuard<'static, Option<HashMap<u32, usize>>> {
    IDS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The id at `p`, if it is a live id of ours.
pub(crate) fn id_from<'a>(p: *mut rdma_cm_id) -> Option<&'a CmId> {
    if p.is_null() || !live::is_live(p as usize, ID_TAG) {
        return None;
    }
    // SAFETY: a live id (registered at creation, unregistered before it is freed); the C
    // struct is the first field of `CmId`.
    Some(unsafe { &*(p as *const CmId) })
}

/// The channel at `p`, if it is a live channel of ours.
pub(crate) fn channel_from<'a>(p: *mut rdma_event_channel) -> Option<&'a Channel> {
    if p.is_null() || !live::is_live(p as usize, CHAN_TAG) {
        return None;
    }
    // SAFETY: a live channel; the C struct is the first field of `Channel`.
    Some(unsafe { &*(p as *const Channel) })
}

pub(crate) fn new_channel() -> Result<*mut Channel, i32> {
    let q = Arc::new(EventQueue::new().map_err(|e| e.raw_os_error().unwrap_or(libc::ENOMEM))?);
    let ch = Box::new(Channel {
        c: rdma_event_channel { fd: q.raw_fd() },
        q,
    });
    let p = Box::into_raw(ch);
    live::register(p as usize, CHAN_TAG);
    Ok(p)
}

/// Frees a channel of ours.
///
/// # Safety
/// `p` is a live channel no id uses any more.
pub(crate) unsafe fn free_channel(p: *mut Channel) {
    if live::unregister(p as usize, CHAN_TAG) {
        // SAFETY: per the contract; allocated by `new_channel`.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// The verbs context and PD every id of the process's device shares (librdmacm's
/// `cma_device`: one context and one PD per device).
pub(crate) struct CmDevice {
    pub ctx: usize,
    pub pd: usize,
    pub dev: Arc<Device>,
}

static CMDEV: OnceLock<Result<CmDevice, i32>> = OnceLock::new();

pub(crate) fn cm_device() -> Result<&'static CmDevice, i32> {
    CMDEV
        .get_or_init(|| {
            let cfg = super::context::config();
            let dev = crate::engine::runtime_device(cfg).map_err(|e| e.0)?;
            // SAFETY: our own verbs on our own device.
            let ctx = unsafe { super::exports::ibv_open_device(super::context::device()) };
            if ctx.is_null() {
                return Err(libc::ENODEV);
            }
            // SAFETY: a context we just opened.
            let pd = unsafe { super::exports::ibv_alloc_pd(ctx) };
            if pd.is_null() {
                return Err(libc::ENOMEM);
            }
            let d2 = dev.clone();
            dev.set_cm_handler(Some(Arc::new(move |ev| route_event(&d2, ev))));
            // SAFETY: registers a plain `extern "C" fn()` of this library, which programs never
            // unload. Registered after the runtime's own exit handler, so it runs before it.
            unsafe { libc::atexit(close_ids_at_exit) };
            Ok(CmDevice {
                ctx: ctx as usize,
                pd: pd as usize,
                dev,
            })
        })
        .as_ref()
        .map_err(|e| *e)
}

/// At process exit, what the kernel does when the program's `rdma_cm` file closes: every id
/// still open is destroyed in the CM, so a connection's peer gets its DREQ (or the DREP its
/// DREQ waits for, or a REJ) instead of retrying for a minute and a half. The ids' memory is
/// left to the exit.
extern "C" fn close_ids_at_exit() {
    let ids: Vec<usize> = match IDS.try_lock() {
        Ok(g) => g
            .as_ref()
            .map(|m| m.values().copied().collect())
            .unwrap_or_default(),
        Err(_) => return,
    };
    for p in ids {
        if !live::is_live(p, ID_TAG) {
            continue;
        }
        // SAFETY: a live id.
        let i = unsafe { &*(p as *const CmId) };
        i.dev.cm(|c, now| c.destroy_id(now, i.cm));
    }
}

/// The CM handler: queues `ev` on its id's channel; a connect request first gets its new id.
fn route_event(dev: &Arc<Device>, ev: roce_cm::Event) {
    let mut g = ids();
    let map = g.get_or_insert_with(HashMap::new);
    if ev.kind == roce_cm::EventKind::ConnectRequest {
        let Some(&l) = ev.listen_id.and_then(|l| map.get(&l.0)) else {
            return;
        };
        // SAFETY: ids in the map are live (removed before they are freed).
        let lis = unsafe { &*(l as *const CmId) };
        // the new id shares the listener's channel, or has its own if the listener is
        // synchronous (librdmacm's `ucma_process_conn_req`)
        let chan = if lis.sync() {
            core::ptr::null_mut()
        } else {
            lis.c().channel
        };
        let (ps, qp_type, context) = (lis.c().ps, lis.c().qp_type, lis.c().context);
        let Ok(child) = ops::alloc_id(dev, ev.id, ps, qp_type, chan, context) else {
            return;
        };
        map.insert(ev.id.0, child as usize);
        let q = lis.queue();
        q.push(Pending {
            id: child as usize,
            listen: l,
            ev,
        });
        return;
    }
    let Some(&p) = map.get(&ev.id.0) else {
        return;
    };
    // SAFETY: as above.
    let id = unsafe { &*(p as *const CmId) };
    id.queue().push(Pending {
        id: p,
        listen: 0,
        ev,
    });
}
