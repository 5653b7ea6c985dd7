//! rdma_cm port reservation (cma.c `cma_get_port`, `cma_alloc_any_port`, `cma_check_port`):
//! one table per port space, a port owned by one or more bound ids.
use crate::{errno, Id, PortSpace};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// `net.ipv4.ip_local_port_range` default, low end.
pub(crate) const EPHEMERAL_LOW: u16 = 32768;
/// `net.ipv4.ip_local_port_range` default, high end.
pub(crate) const EPHEMERAL_HIGH: u16 = 60999;

/// The owners of every bound port, per port space.
pub(crate) struct Ports {
    owners: BTreeMap<(u32, u16), Vec<(Id, IpAddr)>>,
    /// `last_used_port`: the kernel skips the port it handed out last.
    last_used: u16,
}

impl Ports {
    pub(crate) fn new(last_used: u16) -> Ports {
        Ports {
            owners: BTreeMap::new(),
            last_used,
        }
    }

    /// Reserves `port` for `id` bound to `addr` (`cma_use_port` → `cma_check_port` without
    /// REUSEADDR, `afonly` 0): a wildcard on either side clashes with EADDRNOTAVAIL, the same
    /// address with EADDRINUSE, different specific addresses share the port.
    pub(crate) fn reserve(
        &mut self,
        ps: PortSpace,
        port: u16,
        id: Id,
        addr: IpAddr,
    ) -> Result<(), i32> {
        let owners = self.owners.entry((ps.raw(), port)).or_default();
        for &(other, cur) in owners.iter() {
            if other == id {
                continue;
            }
            if addr.is_unspecified() || cur.is_unspecified() {
                return Err(errno::EADDRNOTAVAIL);
            }
            if cur == addr {
                return Err(errno::EADDRINUSE);
            }
        }
        owners.push((id, addr));
        Ok(())
    }

    /// A free port from 32768..=60999 starting at `rover` (`cma_alloc_any_port`; a port is free
    /// when no id of the port space holds it).
    pub(crate) fn reserve_any(
        &mut self,
        ps: PortSpace,
        id: Id,
        addr: IpAddr,
        rover: u16,
    ) -> Result<u16, i32> {
        let span = (EPHEMERAL_HIGH - EPHEMERAL_LOW) as u32 + 1;
        let mut port = rover.clamp(EPHEMERAL_LOW, EPHEMERAL_HIGH);
        for _ in 0..span {
            if port != self.last_used && !self.owners.contains_key(&(ps.raw(), port)) {
                self.owners.insert((ps.raw(), port), vec![(id, addr)]);
                self.last_used = port;
                return Ok(port);
            }
            port = if port >= EPHEMERAL_HIGH {
                EPHEMERAL_LOW
            } else {
                port + 1
            };
        }
        Err(errno::EADDRNOTAVAIL)
    }

    /// Records the address a wildcard-bound id resolved to.
    pub(crate) fn update_addr(&mut self, ps: PortSpace, port: u16, id: Id, addr: IpAddr) {
        if let Some(o) = self.owners.get_mut(&(ps.raw(), port)) {
            for e in o.iter_mut().filter(|e| e.0 == id) {
                e.1 = addr;
            }
        }
    }

    /// Releases `id`'s hold on `port`.
    pub(crate) fn release(&mut self, ps: PortSpace, port: u16, id: Id) {
        let key = (ps.raw(), port);
        if let Some(o) = self.owners.get_mut(&key) {
            o.retain(|e| e.0 != id);
            if o.is_empty() {
                self.owners.remove(&key);
            }
        }
    }

    /// The ids holding `port` in `ps`, in bind order.
    pub(crate) fn owners(&self, ps: PortSpace, port: u16) -> impl Iterator<Item = Id> + '_ {
        self.owners
            .get(&(ps.raw(), port))
            .into_iter()
            .flat_map(|o| o.iter().map(|e| e.0))
    }
}
