//! The `ibv_cq_ex` polling API (`ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll`,
//! `ibv_wc_read_*`) of CQs made by `ibv_create_cq_ex`, on top of `DeviceContext::poll_cq`: each
//! step polls one completion into the CQ's `cur` slot and mirrors its `status`/`wr_id` into the
//! `ibv_cq_ex` fields programs read directly. The `read_*` functions return fields of `cur`.
//!
//! Return values (man ibv_create_cq_ex): `start_poll`/`next_poll` give 0 when a completion is
//! current, `ENOENT` when the CQ is empty, another errno on failure; after `ENOENT` from
//! `start_poll` the program must not call `end_poll`.
//!
//! # Safety
//! `cq` is the `ibv_cq_ex*` of one of our CQs (`ibv_cq_ex` is the first field of `Cq`; checked by
//! `obj`). `status`/`wr_id` of the C struct are written through its `UnsafeCell` under the CQ's
//! `cur` lock; programs only read them between polls (the API is single-threaded per CQ).

use super::guard;
use super::objects::{obj, Cq};
use crate::abi::*;

pub(crate) fn install(c: &mut ibv_cq_ex) {
    c.start_poll = Some(start_poll);
    c.next_poll = Some(next_poll);
    c.end_poll = Some(end_poll);
    c.read_opcode = Some(read_opcode);
    c.read_vendor_err = Some(read_vendor_err);
    c.read_byte_len = Some(read_byte_len);
    c.read_imm_data = Some(read_imm_data);
    c.read_qp_num = Some(read_qp_num);
    c.read_src_qp = Some(read_src_qp);
    c.read_wc_flags = Some(read_wc_flags);
    c.read_slid = Some(read_slid);
    c.read_sl = Some(read_sl);
    c.read_dlid_path_bits = Some(read_dlid_path_bits);
    // Timestamps, cvlan, flow tag, TM info: refused at creation, so left NULL.
}

/// Polls one completion into `cur`: 0, `ENOENT` or an errno.
fn step(cq: *mut ibv_cq_ex) -> i32 {
    guard(libc::EIO, || {
        // SAFETY: module contract.
        let Some(c) = (unsafe { obj::<Cq, _>(cq) }) else {
            return libc::EINVAL;
        };
        // SAFETY: our object's C struct; `context` never changes after creation.
        let Some(ctx) = super::context::from_ptr(unsafe { (*c.c.get()).context }) else {
            return libc::EINVAL;
        };
        let mut cur = c.cur.lock().unwrap_or_else(|e| e.into_inner());
        match ctx
            .inner
            .backend
            .poll_cq(c.id, core::slice::from_mut(&mut *cur))
        {
            Ok(0) => libc::ENOENT,
            Ok(_) => {
                // SAFETY: written under `cur`'s lock; see module docs.
                unsafe {
                    (*c.c.get()).status = cur.status;
                    (*c.c.get()).wr_id = cur.wr_id;
                }
                0
            }
            Err(e) => {
                if e.0 == libc::EOPNOTSUPP {
                    crate::log::unimplemented_once("ibv_start_poll/ibv_next_poll (poll_cq)");
                }
                e.0
            }
        }
    })
}

unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> i32 {
    // SAFETY: NULL or the program's attr struct.
    if !attr.is_null() && unsafe { (*attr).comp_mask } != 0 {
        return libc::EINVAL;
    }
    step(cq)
}

unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> i32 {
    step(cq)
}

unsafe extern "C" fn end_poll(_cq: *mut ibv_cq_ex) {}

fn read<T: Default>(cq: *mut ibv_cq_ex, f: impl FnOnce(&ibv_wc) -> T) -> T {
    guard(T::default(), || {
        // SAFETY: module contract.
        match unsafe { obj::<Cq, _>(cq) } {
            Some(c) => f(&c.cur.lock().unwrap_or_else(|e| e.into_inner())),
            None => T::default(),
        }
    })
}

unsafe extern "C" fn read_opcode(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.opcode)
}
unsafe extern "C" fn read_vendor_err(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.vendor_err)
}
unsafe extern "C" fn read_byte_len(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.byte_len)
}
unsafe extern "C" fn read_imm_data(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.imm_data)
}
unsafe extern "C" fn read_qp_num(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.qp_num)
}
unsafe extern "C" fn read_src_qp(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| w.src_qp)
}
unsafe extern "C" fn read_wc_flags(cq: *mut ibv_cq_ex) -> core::ffi::c_uint {
    read(cq, |w| w.wc_flags)
}
unsafe extern "C" fn read_slid(cq: *mut ibv_cq_ex) -> u32 {
    read(cq, |w| u32::from(w.slid))
}
unsafe extern "C" fn read_sl(cq: *mut ibv_cq_ex) -> u8 {
    read(cq, |w| w.sl)
}
unsafe extern "C" fn read_dlid_path_bits(cq: *mut ibv_cq_ex) -> u8 {
    read(cq, |w| w.dlid_path_bits)
}
