//! Safe wrappers over the process-level syscalls the rest of the product needs (the provider's
//! steering helper and runtime, the `roce` command's measurements), so that their crates need
//! no `unsafe` for syscalls: the code and its safety argument are in this crate's private `sys`
//! modules.
//!
//! * [`SharedPage`]: one page of shared memory (`memfd` + `mmap`) reached through atomics, and
//!   [`send_with_fd`]/[`recv_with_fd`] to hand its fd to another process (`SCM_RIGHTS`);
//!   [`send_line`] sends without `SIGPIPE`.
//! * [`poll_in`], [`getrandom`], [`uid`]/[`euid`], [`at_exit`].
//! * The clock and CPU facts the datapath uses itself: [`monotonic_ns`], [`cpus_allowed`],
//!   [`yield_cpu`], [`pin_to_cpu`], and [`setsockopt_int`] for integer socket options.

pub use crate::sys::os::{
    at_exit, euid, file_len, getrandom, poll_in, recv_with_fd, send_line, send_with_fd, uid,
    SharedPage, PAGE,
};
pub use crate::sys::{cpus_allowed, monotonic_ns, pin_to_cpu, setsockopt_int, yield_cpu};
