//! The rest of librdmacm's API: devices, `rdma_event_str`, options, `rdma_getaddrinfo`, the
//! endpoint calls (`rdma_create_ep`, `rdma_get_request`), and the calls this NIC refuses with a
//! clear error: multicast and rsockets (but `rpoll`, `rselect`, `rfcntl` and `rclose`,
//! which rdma-core's examples call on ordinary file descriptors, pass through to the system).
//!
//! # Safety
//! See the module documentation of `ffi::rdmacm`; `rdma_getaddrinfo` hands the strings and
//! hints the program gave to the C library's `getaddrinfo` and frees its result.
use super::addr;
use super::ops::*;
use super::*;
use crate::ffi::guard;
use core::ffi::{c_char, c_void};
use core::ptr::null_mut;

pub unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
    guard(null_mut(), || {
        let d = match cm_device() {
            Ok(d) => d,
            Err(e) => {
                set_errno(e);
                return null_mut();
            }
        };
        let list: Box<[*mut ibv_context; 2]> = Box::new([d.ctx as *mut ibv_context, null_mut()]);
        if !num_devices.is_null() {
            // SAFETY: non-NULL out-pointer.
            unsafe { *num_devices = 1 };
        }
        let p = Box::into_raw(list);
        live::register(p as usize, DEVLIST_TAG);
        p.cast()
    })
}

pub unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    guard((), || {
        if live::unregister(list as usize, DEVLIST_TAG) {
            // SAFETY: allocated by rdma_get_devices, just unregistered.
            drop(unsafe { Box::from_raw(list as *mut [*mut ibv_context; 2]) });
        }
    })
}

pub unsafe extern "C" fn rdma_event_str(event: u32) -> *const c_char {
    const NAMES: [&[u8]; 16] = [
        b"RDMA_CM_EVENT_ADDR_RESOLVED\0",
        b"RDMA_CM_EVENT_ADDR_ERROR\0",
        b"RDMA_CM_EVENT_ROUTE_RESOLVED\0",
        b"RDMA_CM_EVENT_ROUTE_ERROR\0",
        b"RDMA_CM_EVENT_CONNECT_REQUEST\0",
        b"RDMA_CM_EVENT_CONNECT_RESPONSE\0",
        b"RDMA_CM_EVENT_CONNECT_ERROR\0",
        b"RDMA_CM_EVENT_UNREACHABLE\0",
        b"RDMA_CM_EVENT_REJECTED\0",
        b"RDMA_CM_EVENT_ESTABLISHED\0",
        b"RDMA_CM_EVENT_DISCONNECTED\0",
        b"RDMA_CM_EVENT_DEVICE_REMOVAL\0",
        b"RDMA_CM_EVENT_MULTICAST_JOIN\0",
        b"RDMA_CM_EVENT_MULTICAST_ERROR\0",
        b"RDMA_CM_EVENT_ADDR_CHANGE\0",
        b"RDMA_CM_EVENT_TIMEWAIT_EXIT\0",
    ];
    NAMES
        .get(event as usize)
        .copied()
        .unwrap_or(b"UNKNOWN EVENT\0")
        .as_ptr()
        .cast()
}

pub unsafe extern "C" fn rdma_set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    guard(-1, || {
        if id_from(id).is_none() || optval.is_null() {
            return fail(libc::EINVAL);
        }
        match (level, optname) {
            // ucma: both take exactly one byte (EINVAL otherwise)
            (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS | RDMA_OPTION_ID_ACK_TIMEOUT) if optlen == 1 => {
                let Some(i) = id_from(id) else {
                    return fail(libc::EINVAL);
                };
                // SAFETY: non-NULL, optlen 1.
                let v = unsafe { *(optval as *const u8) };
                let r = i.dev.cm(|c, _| {
                    if optname == RDMA_OPTION_ID_TOS {
                        c.set_tos(i.cm, v)
                    } else {
                        c.set_ack_timeout(i.cm, v)
                    }
                });
                match r {
                    Ok(()) => 0,
                    Err(e) => fail(e),
                }
            }
            (RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR | RDMA_OPTION_ID_AFONLY) if optlen >= 4 => 0,
            (RDMA_OPTION_IB, RDMA_OPTION_IB_PATH) => {
                crate::log::explain_once(
                    "rdma_set_option: RDMA_OPTION_IB_PATH is not supported on this RoCE device \
                     (EOPNOTSUPP)",
                );
                fail(libc::EOPNOTSUPP)
            }
            _ => fail(libc::EINVAL),
        }
    })
}

/// Frees one `rdma_addrinfo` of ours (and its addresses).
///
/// # Safety
/// `ai` was made by `rdma_getaddrinfo` and is no longer registered.
unsafe fn free_ai(ai: *mut rdma_addrinfo) {
    // SAFETY: per the contract; the addresses are `Box<sockaddr_storage>`s or NULL.
    unsafe {
        let a = Box::from_raw(ai);
        if !a.ai_src_addr.is_null() {
            drop(Box::from_raw(a.ai_src_addr as *mut libc::sockaddr_storage));
        }
        if !a.ai_dst_addr.is_null() {
            drop(Box::from_raw(a.ai_dst_addr as *mut libc::sockaddr_storage));
        }
    }
}

fn boxed_addr(a: std::net::SocketAddr) -> (*mut libc::sockaddr, libc::socklen_t) {
    let (s, len) = addr::storage(a);
    (Box::into_raw(Box::new(s)) as *mut libc::sockaddr, len)
}

/// One address for `node`/`service` from the C library (numeric or a name).
fn lookup(
    node: *const c_char,
    service: *const c_char,
    family: c_int,
    passive: bool,
    numeric: bool,
) -> Result<std::net::SocketAddr, i32> {
    // SAFETY: all-zero is a valid addrinfo hints struct.
    let mut hints: libc::addrinfo = unsafe { core::mem::zeroed() };
    hints.ai_family = family;
    hints.ai_socktype = libc::SOCK_STREAM;
    hints.ai_flags = (if passive { libc::AI_PASSIVE } else { 0 })
        | (if numeric { libc::AI_NUMERICHOST } else { 0 });
    let mut res: *mut libc::addrinfo = null_mut();
    // SAFETY: the program's NUL-terminated strings (or NULL), our hints and out-pointer.
    let r = unsafe { libc::getaddrinfo(node, service, &hints, &mut res) };
    if r != 0 || res.is_null() {
        return Err(libc::EADDRNOTAVAIL);
    }
    // SAFETY: the first result's address, freed right after.
    let a = unsafe { addr::read((*res).ai_addr) };
    // SAFETY: the list getaddrinfo returned.
    unsafe { libc::freeaddrinfo(res) };
    a.ok().flatten().ok_or(libc::EAFNOSUPPORT)
}

pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    guard(-1, || {
        // SAFETY: NULL or the program's hints.
        let h = unsafe { hints.as_ref() };
        // without a node or service, the addresses come from the hints (librdmacm copies
        // them; libfabric's verbs provider asks that way)
        // SAFETY: the hints' addresses, read as far as their family says.
        let hint_addr = |p: *mut libc::sockaddr| unsafe { addr::read(p) }.ok().flatten();
        let from_hints = h.and_then(|h| hint_addr(h.ai_dst_addr).or(hint_addr(h.ai_src_addr)));
        if res.is_null() || (node.is_null() && service.is_null() && from_hints.is_none()) {
            return fail(libc::EINVAL);
        }
        let flags = h.map_or(0, |h| h.ai_flags);
        let passive = flags & RAI_PASSIVE != 0;
        let family = h.map_or(0, |h| h.ai_family);
        // SAFETY: all-zero is a valid rdma_addrinfo (NULL pointers).
        let mut ai: Box<rdma_addrinfo> = Box::new(unsafe { core::mem::zeroed() });
        ai.ai_flags = flags;
        ai.ai_qp_type = h.map_or(0, |h| h.ai_qp_type);
        if ai.ai_qp_type == 0 {
            ai.ai_qp_type = IBV_QPT_RC as c_int;
        }
        ai.ai_port_space = h.map_or(0, |h| h.ai_port_space);
        if ai.ai_port_space == 0 {
            ai.ai_port_space = if ai.ai_qp_type == IBV_QPT_UD as c_int {
                RDMA_PS_UDP as c_int
            } else {
                RDMA_PS_TCP as c_int
            };
        }
        let a = if node.is_null() && service.is_null() {
            match h.and_then(|h| {
                if passive {
                    hint_addr(h.ai_src_addr)
                } else {
                    hint_addr(h.ai_dst_addr)
                }
            }) {
                Some(a) => a,
                None => return fail(libc::EINVAL),
            }
        } else {
            match lookup(node, service, family, passive, flags & RAI_NUMERICHOST != 0) {
                Ok(a) => a,
                Err(e) => return fail(e),
            }
        };
        ai.ai_family = if a.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        if passive {
            (ai.ai_src_addr, ai.ai_src_len) = boxed_addr(a);
        } else {
            (ai.ai_dst_addr, ai.ai_dst_len) = boxed_addr(a);
            if let Some(h) = h {
                // SAFETY: the hints' source address, read as far as its family says.
                if let Ok(Some(s)) = unsafe { addr::read(h.ai_src_addr) } {
                    (ai.ai_src_addr, ai.ai_src_len) = boxed_addr(s);
                }
            }
        }
        let p = Box::into_raw(ai);
        live::register(p as usize, AI_TAG);
        // SAFETY: non-NULL out-pointer.
        unsafe { *res = p };
        0
    })
}

pub unsafe extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    guard((), || {
        let mut p = res;
        while !p.is_null() && live::unregister(p as usize, AI_TAG) {
            // SAFETY: ours, just unregistered.
            let next = unsafe { (*p).ai_next };
            // SAFETY: as above.
            unsafe { free_ai(p) };
            p = next;
        }
    })
}

pub unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    guard(-1, || {
        if id.is_null() || res.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: the program's address info (ours or its own, read as rdma_addrinfo).
        let r = unsafe { &*res };
        let Some(space) = roce_cm::PortSpace::from_raw(r.ai_port_space as u32) else {
            return fail(libc::EINVAL);
        };
        let mut cid = null_mut();
        if create_id(null_mut(), &mut cid, null_mut(), space, r.ai_qp_type as u32) != 0 {
            return -1;
        }
        let Some(i) = id_from(cid) else {
            return fail(libc::EINVAL);
        };
        let ok = if r.ai_flags & RAI_PASSIVE != 0 {
            // SAFETY: our id and the program's address.
            let b = unsafe { rdma_bind_addr(cid, r.ai_src_addr) };
            if b == 0 {
                let mut st = i.state();
                if !qp_init_attr.is_null() {
                    // SAFETY: non-NULL program struct, copied.
                    st.qp_init_attr = Some(unsafe { core::ptr::read(qp_init_attr) });
                }
                if !pd.is_null() {
                    i.c().pd = pd;
                }
            }
            b
        } else {
            // SAFETY: our id and the program's addresses.
            let mut b = unsafe { rdma_resolve_addr(cid, r.ai_src_addr, r.ai_dst_addr, 2000) };
            if b == 0 {
                // SAFETY: our id.
                b = unsafe { rdma_resolve_route(cid, 2000) };
            }
            if b == 0 && !qp_init_attr.is_null() {
                // SAFETY: our id, the program's PD (or NULL) and init attributes.
                b = qp::create_qp(i, pd, unsafe { &mut *qp_init_attr });
            }
            b
        };
        if ok != 0 {
            let e = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL);
            destroy_id(i);
            return fail(e);
        }
        // SAFETY: non-NULL out-pointer.
        unsafe { *id = cid };
        0
    })
}

pub unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    guard((), || {
        let Some(i) = id_from(id) else { return };
        // SAFETY: our id.
        unsafe {
            rdma_destroy_qp(id);
            rdma_destroy_srq(id);
        }
        destroy_id(i);
    })
}

pub unsafe extern "C" fn rdma_get_request(
    listen: *mut rdma_cm_id,
    id: *mut *mut rdma_cm_id,
) -> c_int {
    guard(-1, || {
        let Some(l) = id_from(listen) else {
            return fail(libc::EINVAL);
        };
        if id.is_null() || !l.sync() {
            return fail(libc::EINVAL);
        }
        let c = l.c();
        if !c.event.is_null() {
            // SAFETY: the event kept by the previous call.
            unsafe { rdma_ack_cm_event(c.event) };
            c.event = null_mut();
        }
        let mut ev = null_mut();
        // SAFETY: the listener's private channel and a local out-pointer.
        if unsafe { rdma_get_cm_event(c.channel, &mut ev) } != 0 {
            return -1;
        }
        // SAFETY: the event just returned.
        let e = unsafe { &*ev };
        let bad = if e.status != 0 {
            Some(if e.status < 0 { -e.status } else { e.status })
        } else if e.event != roce_cm::EventKind::ConnectRequest.raw() {
            Some(libc::EINVAL)
        } else {
            None
        };
        if let Some(err) = bad {
            // SAFETY: as above.
            unsafe { rdma_ack_cm_event(ev) };
            return fail(err);
        }
        let Some(child) = id_from(e.id) else {
            // SAFETY: as above.
            unsafe { rdma_ack_cm_event(ev) };
            return fail(libc::EINVAL);
        };
        // SAFETY: a plain C struct (pointers and numbers), copied bit for bit.
        let attr = l
            .state()
            .qp_init_attr
            .as_ref()
            .map(|a| unsafe { core::ptr::read(a) });
        if let Some(mut a) = attr {
            if qp::create_qp(child, c.pd, &mut a) != 0 {
                let err = std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EINVAL);
                // SAFETY: as above.
                unsafe { rdma_ack_cm_event(ev) };
                // SAFETY: the new id, ours.
                unsafe { rdma_reject(e.id, core::ptr::null(), 0) };
                destroy_id(child);
                return fail(err);
            }
        }
        child.c().event = ev;
        // SAFETY: non-NULL out-pointer.
        unsafe { *id = e.id };
        0
    })
}

/// Says once why `what` fails, then fails with EOPNOTSUPP.
fn refused(what: &str) -> c_int {
    crate::log::explain_once(&format!(
        "{what} is not supported by this emulated device yet (EOPNOTSUPP)"
    ));
    fail(libc::EOPNOTSUPP)
}

pub unsafe extern "C" fn rdma_join_multicast(
    _id: *mut rdma_cm_id,
    _addr: *mut libc::sockaddr,
    _context: *mut c_void,
) -> c_int {
    refused("RDMA CM multicast (rdma_join_multicast)")
}

pub unsafe extern "C" fn rdma_join_multicast_ex(
    _id: *mut rdma_cm_id,
    _attr: *mut c_void,
    _context: *mut c_void,
) -> c_int {
    refused("RDMA CM multicast (rdma_join_multicast_ex)")
}

pub unsafe extern "C" fn rdma_leave_multicast(
    _id: *mut rdma_cm_id,
    _addr: *mut libc::sockaddr,
) -> c_int {
    refused("RDMA CM multicast (rdma_leave_multicast)")
}

// rsockets: refused; the four calls examples make on ordinary fds pass through.

pub unsafe extern "C" fn rpoll(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    // SAFETY: the program's arguments, passed on unchanged.
    unsafe { libc::poll(fds, nfds, timeout) }
}

pub unsafe extern "C" fn rselect(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> c_int {
    // SAFETY: the program's arguments, passed on unchanged.
    unsafe { libc::select(nfds, r, w, e, timeout) }
}

/// `int rfcntl(int socket, int cmd, ... /* arg */)`: the one variadic argument arrives in the
/// third argument register on x86_64, as a fixed one would.
pub unsafe extern "C" fn rfcntl(fd: c_int, cmd: c_int, arg: usize) -> c_int {
    // SAFETY: the program's arguments, passed on unchanged.
    unsafe { libc::fcntl(fd, cmd, arg) }
}

pub unsafe extern "C" fn rclose(fd: c_int) -> c_int {
    // SAFETY: the program's descriptor.
    unsafe { libc::close(fd) }
}

macro_rules! rsocket_refused {
    ($($name:ident -> $ret:ty),* $(,)?) => {$(
        pub unsafe extern "C" fn $name() -> $ret {
            refused(concat!("rsockets (", stringify!($name), ")")) as $ret
        }
    )*};
}
rsocket_refused!(
    rsocket -> c_int, rbind -> c_int, rlisten -> c_int, raccept -> c_int, rconnect -> c_int,
    rshutdown -> c_int, rgetpeername -> c_int, rgetsockname -> c_int, rsetsockopt -> c_int,
    rgetsockopt -> c_int, riounmap -> c_int,
    rrecv -> isize, rrecvfrom -> isize, rrecvmsg -> isize, rsend -> isize, rsendto -> isize,
    rsendmsg -> isize, rread -> isize, rreadv -> isize, rwrite -> isize, rwritev -> isize,
    riowrite -> isize, riomap -> i64,
);
