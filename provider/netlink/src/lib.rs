//! RDMA netlink for `roce run`'s device view (issue 20 item 2): `rdma dev`, `rdma link` and
//! `rdma system` (iproute2) ask the kernel over `NETLINK_RDMA`, which knows nothing of a
//! userspace NIC. `roce run` preloads this library (`LD_PRELOAD=…/libroce_netlink.so`) with
//! the view; it answers those sockets itself, as `drivers/infiniband/core/nldev.c` would, from
//! the sysfs tree the view shows (`/sys/class/infiniband/<dev>/…`, `/sys/class/net/<netdev>/
//! ifindex`) and `ROCE_NETLINK_DEVICES` (`name=cap_flags,…`, set by `roce run`: which devices
//! are the emulated ones, and their `device_cap_flags`, which sysfs does not show).
//!
//! * [`wire`]: netlink message and attribute encoding and decoding.
//! * [`device`]: the devices, read from sysfs.
//! * [`answer`]: requests in, answers out (what is not implemented gets `-EOPNOTSUPP`).
//! * `preload` (not in unit tests): the interposed libc calls, the crate's only `unsafe`.
#![deny(unsafe_code)]

pub mod answer;
pub mod device;
pub mod wire;

#[cfg(not(test))]
#[allow(unsafe_code)]
mod preload;
