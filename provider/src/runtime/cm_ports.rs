//! rdma_cm port reservations across the processes of this host. Kernel rdma_cm keeps one port
//! table per port space for the whole host (`cma_get_port` → `cma_check_port`), so a second
//! program binding a port another holds fails at `rdma_bind_addr`. Each emulated device has its
//! connection manager ([`roce_cm::Endpoint`]) in its program's process, whose table only knows
//! that process's ids; on a shared device several programs run on one address, and two of them
//! could listen on one port.
//!
//! So a bound port is also claimed for the whole host: an abstract Unix socket named after the
//! port space, port and address (`roce-cm-port/<uid>/<ip>/<ps>/<port>/addr`, or `.../any` for a
//! wildcard bind, one per device address), held by the process while the id lives and freed by
//! the kernel when the process exits or dies. The clash rules are `cma_check_port`'s without
//! REUSEADDR: the same address → EADDRINUSE; a wildcard on either side → EADDRNOTAVAIL;
//! different addresses share the port. Ephemeral ports (port 0) are not claimed.
use roce_cm::{errno, Id, PortSpace};
use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram};

/// The claims of this device's ids.
#[derive(Default)]
pub(super) struct Claims {
    held: HashMap<Id, Vec<UnixDatagram>>,
}

fn name(ip: IpAddr, ps: PortSpace, port: u16, wildcard: bool) -> String {
    let uid = roce_udp::os::uid();
    let kind = if wildcard { "any" } else { "addr" };
    format!("roce-cm-port/{uid}/{ip}/{:#x}/{port}/{kind}", ps.raw())
}

/// Binds the abstract name: `Ok(None)` when abstract sockets are unavailable (nothing to check).
fn take(name: &str) -> Result<Option<UnixDatagram>, ErrorKind> {
    let Ok(a) = UnixAddr::from_abstract_name(name.as_bytes()) else {
        return Ok(None);
    };
    match UnixDatagram::bind_addr(&a) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == ErrorKind::AddrInUse => Err(ErrorKind::AddrInUse),
        Err(_) => Ok(None),
    }
}

impl Claims {
    /// Claims `addr`'s port in `ps` for `id` (a wildcard address: on each of `addrs`), or the
    /// errno kernel rdma_cm gives when another id, in any process, holds it.
    pub(super) fn claim(
        &mut self,
        id: Id,
        ps: PortSpace,
        addr: SocketAddr,
        addrs: &[IpAddr],
    ) -> Result<(), i32> {
        let port = addr.port();
        if port == 0 {
            return Ok(());
        }
        let wild = addr.ip().is_unspecified();
        let ips = if wild {
            addrs.to_vec()
        } else {
            vec![addr.ip()]
        };
        let mut got = Vec::new();
        for ip in ips {
            // the other kind held by anyone: a wildcard on one side (the probe goes at once)
            if take(&name(ip, ps, port, !wild)).is_err() {
                return Err(errno::EADDRNOTAVAIL);
            }
            match take(&name(ip, ps, port, wild)) {
                Ok(s) => got.extend(s),
                Err(_) if wild => return Err(errno::EADDRNOTAVAIL),
                Err(_) => return Err(errno::EADDRINUSE),
            }
        }
        self.held.entry(id).or_default().extend(got);
        Ok(())
    }

    /// Frees `id`'s claims (the id was destroyed, or its bind failed).
    pub(super) fn release(&mut self, id: Id) {
        self.held.remove(&id);
    }
}
