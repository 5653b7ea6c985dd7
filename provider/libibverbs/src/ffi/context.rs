//! The device list and `ibv_context` (with the `verbs_context` in front of it).
//!
//! # Safety
//! * The one `ibv_device` is leaked on first use and never freed, so a device pointer stays valid
//!   for the life of the process (libibverbs refcounts; forever is a valid refcount).
//! * A context is a `Box<Context>`; the C pointer is the address of `vctx.context` inside it, so
//!   [`from_ptr`] recovers the box by subtracting a constant offset. It checks `abi_compat` and a
//!   magic number first, which catches NULL, foreign and already-closed contexts in the common
//!   cases (a context whose memory was reused can still fool it: the same contract as
//!   libibverbs, which does not check at all).
//! * The C struct is inside an `UnsafeCell`: programs may write to it (`ops` is theirs to look
//!   at, and some override `ops` entries), so Rust never holds a `&` to it across a call.
//! * Out-pointers from the program (`num_devices`) are written after a NULL check.

use super::events::{AsyncEventSink, EventQueue};
use super::{copy_cstr, guard, set_errno};
use crate::abi::*;
use crate::backend::{default_backend, Backend, DeviceContext};
use crate::config::DeviceConfig;
use core::cell::UnsafeCell;
use core::ffi::{c_char, c_int};
use core::mem::offset_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

const MAGIC: u64 = 0x726f_6365_5f63_7478; // "roce_ctx"

static CONFIGS: OnceLock<Vec<DeviceConfig>> = OnceLock::new();
static DEVICES: OnceLock<Vec<usize>> = OnceLock::new();
static BACKEND: OnceLock<Arc<dyn Backend>> = OnceLock::new();

/// The process's devices (read from the environment once; `ROCE_IP` may list several).
pub fn configs() -> &'static [DeviceConfig] {
    CONFIGS.get_or_init(DeviceConfig::all_from_env)
}

/// The first device's configuration (the only one unless `ROCE_IP` lists several).
pub fn config() -> &'static DeviceConfig {
    &configs()[0]
}

fn backend() -> Arc<dyn Backend> {
    #[cfg(test)]
    if let Some(b) = TEST_BACKEND.with(|t| t.borrow().clone()) {
        return b;
    }
    BACKEND.get_or_init(default_backend).clone()
}

#[cfg(test)]
thread_local! {
    /// Unit tests open contexts on a backend of their own (per thread, so tests stay parallel).
    pub static TEST_BACKEND: std::cell::RefCell<Option<Arc<dyn Backend>>> =
        const { std::cell::RefCell::new(None) };
}

/// Our devices, one per configuration, made once and never freed.
pub fn devices() -> &'static [usize] {
    DEVICES.get_or_init(|| {
        configs()
            .iter()
            .enumerate()
            .map(|(i, cfg)| make_device(i, cfg))
            .collect()
    })
}

/// The first device.
pub fn device() -> *mut ibv_device {
    devices()[0] as *mut ibv_device
}

/// The index of `device` among ours.
pub fn index_of(device: *mut ibv_device) -> Option<usize> {
    devices().iter().position(|d| *d == device as usize)
}

fn make_device(i: usize, cfg: &DeviceConfig) -> usize {
    {
        let mut dev = Box::new(ibv_device {
            _ops: _ibv_device_ops {
                _dummy1: None,
                _dummy2: None,
            },
            node_type: IBV_NODE_CA,
            transport_type: IBV_TRANSPORT_IB,
            name: [0; IBV_SYSFS_NAME_MAX],
            dev_name: [0; IBV_SYSFS_NAME_MAX],
            dev_path: [0; IBV_SYSFS_PATH_MAX],
            ibdev_path: [0; IBV_SYSFS_PATH_MAX],
        });
        copy_cstr(&mut dev.name, &cfg.name);
        // `roce run` shows the device as /dev/infiniband/<ROCE_UVERBS> (provider/cli/src/ns.rs)
        let first: usize = std::env::var("ROCE_UVERBS")
            .ok()
            .and_then(|u| u.strip_prefix("uverbs")?.parse().ok())
            .unwrap_or(0);
        let uverbs = format!("uverbs{}", first + i);
        copy_cstr(&mut dev.dev_name, &uverbs);
        copy_cstr(
            &mut dev.dev_path,
            &format!("/sys/class/infiniband_verbs/{uverbs}"),
        );
        copy_cstr(&mut dev.ibdev_path, &ibdev_path(cfg));
        Box::into_raw(dev) as usize
    }
}

/// `/sys/class/infiniband/<name>`: not a real directory; `ibv_read_sysfs_file` answers a few
/// files under it from memory (see `misc.rs`).
pub fn ibdev_path(cfg: &DeviceConfig) -> String {
    format!("/sys/class/infiniband/{}", cfg.name)
}

/// Our allocation behind an `ibv_context`.
#[repr(C)]
pub struct Context {
    /// Room for the extended ops newer headers put above `query_port` (all NULL).
    head_ext: [usize; VERBS_CONTEXT_HEAD_EXTRA_OPS],
    pub vctx: UnsafeCell<verbs_context>,
    pub inner: ContextInner,
}

pub struct ContextInner {
    magic: AtomicU64,
    pub cfg: &'static DeviceConfig,
    pub backend: Box<dyn DeviceContext>,
    pub events: AsyncEventSink,
    _cmd_fd: OwnedFd,
}

const CTX_OFFSET: usize = offset_of!(Context, vctx) + offset_of!(verbs_context, context);
const _: () = assert!(CTX_OFFSET == VERBS_CONTEXT_ALLOC_SZ - core::mem::size_of::<ibv_context>());

impl Context {
    pub fn c_ptr(&self) -> *mut ibv_context {
        // SAFETY: pointer arithmetic inside our own allocation.
        unsafe { core::ptr::addr_of_mut!((*self.vctx.get()).context) }
    }
}

/// Registry tag of a live context (its `ibv_context*`).
const CTX_TAG: u32 = u32::from_be_bytes(*b"rCTX");
/// Registry tag of a device list from `ibv_get_device_list` not yet freed.
const LIST_TAG: u32 = u32::from_be_bytes(*b"rDL_");

/// Recovers our context from a program's `ibv_context*`; `None` for NULL, foreign or closed ones
/// (looked up in the registry of live objects first, so those are never read).
pub fn from_ptr<'a>(ctx: *mut ibv_context) -> Option<&'a Context> {
    if ctx.is_null() || !super::live::is_live(ctx as usize, CTX_TAG) {
        return None;
    }
    // SAFETY: `ctx` is a live context of ours (registered by `new_context`, unregistered by
    // `ibv_close_device` before it is freed).
    unsafe {
        if (*ctx).abi_compat as usize != VERBS_ABI_IS_EXTENDED {
            return None;
        }
        let base = ctx.cast::<u8>().sub(CTX_OFFSET).cast::<Context>();
        let c = &*base;
        (c.inner.magic.load(Ordering::Acquire) == MAGIC).then_some(c)
    }
}

pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    guard(core::ptr::null_mut(), || {
        // A NULL-terminated array of our devices, freed by ibv_free_device_list.
        let mut v: Vec<*mut ibv_device> = devices().iter().map(|d| *d as *mut ibv_device).collect();
        let n = v.len();
        v.push(core::ptr::null_mut());
        if !num_devices.is_null() {
            // SAFETY: non-NULL out-pointer from the program.
            unsafe { *num_devices = n as c_int };
        }
        let list = Box::into_raw(v.into_boxed_slice()) as *mut *mut ibv_device;
        super::live::register(list as usize, LIST_TAG);
        list.cast()
    })
}

pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    if list.is_null() {
        return;
    }
    if !super::live::unregister(list as usize, LIST_TAG) {
        crate::log::misuse_once(
            "device list",
            "ibv_free_device_list was given a list that ibv_get_device_list did not return or \
             that was already freed; it is ignored",
        );
        return;
    }
    // SAFETY: allocated by ibv_get_device_list as a boxed slice of our devices + NULL, and
    // still registered, so not freed yet.
    drop(unsafe {
        Box::from_raw(core::ptr::slice_from_raw_parts_mut(
            list,
            devices().len() + 1,
        ))
    });
}

fn is_our_device(device: *mut ibv_device) -> bool {
    !device.is_null() && index_of(device).is_some()
}

pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    if !is_our_device(device) {
        set_errno(libc::EINVAL);
        return core::ptr::null();
    }
    // SAFETY: our leaked device; `name` is NUL-terminated.
    unsafe { core::ptr::addr_of!((*device).name).cast() }
}

pub unsafe extern "C" fn ibv_get_device_guid(device: *mut ibv_device) -> u64 {
    if !is_our_device(device) {
        return 0;
    }
    index_of(device).map_or(0, |i| configs()[i].node_guid_be())
}

pub unsafe extern "C" fn ibv_get_device_index(device: *mut ibv_device) -> c_int {
    index_of(device).map_or(-1, |i| i as c_int)
}

fn new_context(device: *mut ibv_device) -> Result<*mut ibv_context, i32> {
    let cfg = &configs()[index_of(device).ok_or(libc::ENODEV)?];
    let queue = EventQueue::new().map_err(|e| e.raw_os_error().unwrap_or(libc::EMFILE))?;
    let events = AsyncEventSink {
        queue: Arc::new(queue),
    };
    // SAFETY: plain syscall; the fd is owned from here on. It stands in for the uverbs command
    // fd, which programs only pass back to libibverbs (ibv_import_device is not supported).
    let cmd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if cmd < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EMFILE));
    }
    // SAFETY: fresh descriptor.
    let cmd = unsafe { OwnedFd::from_raw_fd(cmd) };
    let backend = backend()
        .open_device(cfg, events.clone())
        .map_err(|e| e.0)?;
    let num_comp_vectors = std::thread::available_parallelism().map_or(1, |n| n.get()) as c_int;

    let vctx = verbs_context {
        query_port: Some(super::query::query_port_ex),
        advise_mr: None,
        alloc_null_mr: None,
        read_counters: None,
        attach_counters_point_flow: None,
        create_counters: None,
        destroy_counters: None,
        reg_dm_mr: None,
        alloc_dm: None,
        free_dm: None,
        modify_flow_action_esp: None,
        destroy_flow_action: None,
        create_flow_action_esp: None,
        modify_qp_rate_limit: None,
        alloc_parent_domain: None,
        dealloc_td: None,
        alloc_td: None,
        modify_cq: None,
        post_srq_ops: None,
        destroy_rwq_ind_table: None,
        create_rwq_ind_table: None,
        destroy_wq: None,
        modify_wq: None,
        create_wq: None,
        query_rt_values: None,
        create_cq_ex: Some(super::objects::create_cq_ex_op),
        priv_: core::ptr::null_mut(),
        query_device_ex: Some(super::query::query_device_ex_op),
        ibv_destroy_flow: None,
        ABI_placeholder2: None,
        ibv_create_flow: None,
        ABI_placeholder1: None,
        open_qp: None,
        create_qp_ex: Some(super::objects::create_qp_ex_op),
        get_srq_num: None,
        create_srq_ex: None,
        open_xrcd: None,
        close_xrcd: None,
        _ABI_placeholder3: 0,
        sz: VERBS_CONTEXT_ALLOC_SZ,
        context: ibv_context {
            device,
            ops: super::objects::context_ops(),
            cmd_fd: cmd.as_raw_fd(),
            async_fd: events.queue.raw_fd(),
            num_comp_vectors,
            mutex: Default::default(),
            abi_compat: VERBS_ABI_IS_EXTENDED as *mut core::ffi::c_void,
        },
    };
    let ctx = Box::new(Context {
        head_ext: [0; VERBS_CONTEXT_HEAD_EXTRA_OPS],
        vctx: UnsafeCell::new(vctx),
        inner: ContextInner {
            magic: AtomicU64::new(MAGIC),
            cfg,
            backend,
            events,
            _cmd_fd: cmd,
        },
    });
    let c = ctx.c_ptr();
    let _ = Box::into_raw(ctx);
    super::live::register(c as usize, CTX_TAG);
    Ok(c)
}

pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    guard(core::ptr::null_mut(), || {
        if !is_our_device(device) {
            set_errno(libc::ENODEV);
            return core::ptr::null_mut();
        }
        match new_context(device) {
            Ok(c) => c,
            Err(e) => {
                set_errno(e);
                core::ptr::null_mut()
            }
        }
    })
}

pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    guard(libc::EIO, || {
        let Some(ctx) = from_ptr(context) else {
            return libc::EINVAL;
        };
        // Unregistered first: a concurrent second close finds it gone and fails.
        if !super::live::unregister(context as usize, CTX_TAG) {
            return libc::EINVAL;
        }
        ctx.inner.magic.store(0, Ordering::Release);
        let base = ctx as *const Context as *mut Context;
        // SAFETY: allocated by `new_context` as a Box; it left the registry above, so a second
        // close fails in `from_ptr` instead of freeing twice. Objects still open on the context are the
        // program's leak, as with libibverbs (their backend state goes with the backend context).
        drop(unsafe { Box::from_raw(base) });
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_roundtrip_and_layout() {
        // SAFETY: the test uses the C entry points exactly as a C program would.
        unsafe {
            let mut n = 0;
            let list = ibv_get_device_list(&mut n);
            assert_eq!(n, 1);
            let dev = *list;
            assert!((*list.add(1)).is_null());
            let ctx = ibv_open_device(dev);
            assert!(!ctx.is_null());
            assert_eq!((*ctx).abi_compat as usize, usize::MAX);
            assert_eq!((*ctx).device, dev);
            // verbs_get_ctx(): container_of with the v44 offset, then `sz`.
            let vctx = ctx
                .cast::<u8>()
                .sub(offset_of!(verbs_context, context))
                .cast::<verbs_context>();
            assert_eq!((*vctx).sz, 696);
            assert!((*vctx).query_port.is_some());
            assert!((*ctx).ops.post_send.is_some() && (*ctx).ops.poll_cq.is_some());
            assert!(from_ptr(ctx).is_some());
            assert_eq!(ibv_close_device(ctx), 0);
            // Closed: not read again, a second close is refused.
            assert!(from_ptr(ctx).is_none());
            assert_eq!(ibv_close_device(ctx), libc::EINVAL);
            ibv_free_device_list(list);
            // A second free of the same list is ignored (with a warning), not a double free.
            ibv_free_device_list(list);
            assert!(from_ptr(core::ptr::null_mut()).is_none());
        }
    }
}
