//! `#[repr(C)]` mirrors of the structs that `libibverbs.so.1` shares with programs, exactly as the
//! installed rdma-core v44 `<infiniband/verbs.h>` lays them out on x86_64 (gcc, glibc:
//! `sizeof(pthread_mutex_t) = 40`, `sizeof(pthread_cond_t) = 48`).
//!
//! Sizes and the offsets that matter are pinned by compile-time asserts in [`layout`] (values from
//! roce-spec-notes E.5, which were measured against the same headers); `tests/abi_layout.rs`
//! compares every field against a C program compiled with the installed header, and
//! `tests/abi/` (rdma-sys) against rdma-sys's bindgen of it.
//!
//! Names are the C names so that a field can be grepped in `verbs.h`. C unions whose members all
//! have the same type (`imm_data`/`invalidate_rkey`) are one field; others are Rust `union`s
//! (writing them is safe; reading them is done only in `ffi`). `union ibv_gid` is 16 bytes aligned
//! to 8 (it has a `u64` member), mirrored as `[u8; 16]` with `align(8)`.
//!
//! This module contains no `unsafe`.
//!
//! One file per family: [`consts`] (enum and flag values), [`context`] (opaque helpers, the device
//! and the context with its ops tables), [`attr`] (device and port attributes), [`objects`] (PD,
//! MR, MW, CQ, SRQ, QP, AH and their init/attr structs), [`wr`] (work requests, completions, async
//! events) and [`layout`] (the compile-time size/offset asserts).
#![forbid(unsafe_code)]
#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code
)]

/// Declares zero-sized `#[repr(C)]` structs for C types this library only points at (used by
/// `context` and `attr`).
macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        /// Opaque: never dereferenced by this library.
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}

pub mod attr;
pub mod consts;
pub mod context;
pub mod layout;
pub mod objects;
pub mod rdmacm;
pub mod wr;

pub use attr::*;
pub use consts::*;
pub use context::*;
pub use layout::*;
pub use objects::*;
pub use rdmacm::*;
pub use wr::*;
