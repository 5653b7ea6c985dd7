//! The exported C functions. All of this crate's `unsafe` lives under `ffi/`, one module per
//! concern, each with its safety argument at the top. The rules every module follows:
//!
//! * A pointer argument is used only after a NULL check; a NULL where libibverbs would crash is
//!   answered with `EINVAL` (or `NULL` + `errno = EINVAL`) instead.
//! * Pointers to our objects (`ibv_context`, `ibv_pd`, `ibv_cq`, …) are looked up in the
//!   registry of live objects ([`live`]) before they are dereferenced, so a foreign, destroyed or
//!   wrong-typed object fails with `EINVAL` and is never read.
//! * Our objects are `#[repr(C)]` wrappers whose first field is the C struct, allocated with
//!   `Box` and freed by the matching destroy verb only; the C pointer is the `Box` pointer.
//! * No panic crosses the C boundary: every entry point that runs non-trivial Rust code is
//!   wrapped in [`guard`], which turns a panic into the verb's error value.
//! * Nothing is written past a length the caller gave (`query_port`, `query_gid_ex`, …).

pub mod context;
pub mod cq_ex;
pub mod events;
pub mod live;
pub mod memory;
pub mod misc;
pub mod objects;
pub mod query;
pub mod rdmacm;
pub mod stubs;
pub mod wr;

#[cfg(test)]
mod seam_tests;

/// Every exported function, by its C name; `build.rs`'s generated assembly defines each
/// versioned C symbol as a jump to `crate::ffi::exports::NAME`.
pub mod exports {
    pub use super::context::*;
    pub use super::events::*;
    pub use super::misc::*;
    pub use super::objects::*;
    pub use super::query::*;
    pub use super::rdmacm::*;
    pub use super::stubs::*;
}

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Sets the calling thread's `errno`.
pub fn set_errno(e: i32) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e }
}

/// Runs `f`, turning a panic into `on_panic` (after setting `errno = EIO` and saying so on
/// stderr), so that no unwinding crosses an `extern "C"` boundary.
pub fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            crate::log::warn("internal error (panic) in a verb; returning an error");
            set_errno(libc::EIO);
            on_panic
        }
    }
}

/// Copies `s` into a fixed C char array, NUL-terminated and truncated if needed.
pub fn copy_cstr(dst: &mut [core::ffi::c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as core::ffi::c_char;
    }
    for d in dst[n..].iter_mut() {
        *d = 0;
    }
}
