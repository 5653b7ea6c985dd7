//! Nothing here: see `tests/`. `layout.rs` compares our `#[repr(C)]` mirrors
//! (provider/libibverbs/src/abi/) with rdma-sys's bindgen of the installed `verbs.h`;
//! `through_our_lib.rs` calls verbs through rdma-sys (its `extern` bindings and its Rust
//! re-implementations of the inline verbs) with our library loaded in place of rdma-core's.
