//! The direct path for local traffic (design §2.2 "Transmit"): a datagram from a process to a
//! shared device on this host goes socket to socket, to the UDP port of the process owning its
//! destination QP, instead of through that device's steering helper.
//!
//! Each helper publishes its slots' ports in a [`PortTable`]: one page of shared memory (a
//! `memfd`, nothing on disk) that it hands to every process over the control socket
//! (`SCM_RIGHTS`): with the `SLOT` answer to a member, and to an observer, a process of another
//! device that asks with `OBSERVE`. The helper writes a slot's port when its process registers,
//! clears it when the process's control socket closes (exit, kill -9), and writes a heartbeat
//! every pass of its loop (at least every 50 ms). A sender trusts a table only while its
//! heartbeat is under [`STALE_NS`] old, so a dead helper's frozen table is not used for long;
//! then it sends to `<ip>:4791` as before.
//!
//! A sender that sent a device's datagrams through its helper (while it asked for the table,
//! or while the table was stale) goes straight again only once the helper has forwarded them:
//! else the first datagrams straight would overtake them (a UC message split between the two
//! paths arrived out of order and was dropped, and a ping-pong waited for it forever). The
//! helper publishes in the table when it last found its socket empty ([`PortTable::drained`]:
//! everything sent to it before then is forwarded); the sender keeps to the helper until that
//! is later than its last datagram through it.
//!
//! The ICRC stays sealed for destination port 4791 and the receiving runtime checks a datagram
//! that did not come from the helper as if it had been sent to 4791, so the datagram is the
//! RoCEv2 datagram it would have been on the wire (`ROCE_PCAP` shows it so); only the UDP
//! destination port differs, which `tcpdump -i lo` shows. CM MADs (QP1) still go through the
//! helper, which routes them by service ID and comm ID. A datagram for a QP of a local shared
//! device that no process owns is dropped at the sender and counted (`tx_no_owner`), as the
//! helper would drop it. `ROCE_DIRECT=0` sends everything to `<ip>:4791`.
use std::io;
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixStream};
use std::sync::atomic::{AtomicU32, Ordering};

use roce_udp::os::{self, recv_with_fd, send_line, SharedPage};

use super::SLOTS;

/// A table whose heartbeat is older than this is not used (its helper is gone or stuck).
pub const STALE_NS: u64 = 1_000_000_000;
/// How long a sender waits before it looks again for the helper of an address that had none.
const RETRY_NS: u64 = 1_000_000_000;
const MAGIC: u64 = u64::from_be_bytes(*b"ROCEPRT2");
const PORTS_AT: usize = 16;
/// Where [`PortTable::drained`] is, after the ports.
const DRAINED_AT: usize = PORTS_AT + 4 * SLOTS as usize;

/// A helper's slot-to-port table in shared memory (see the module docs): one
/// [`SharedPage`] laid out as magic (8 bytes), heartbeat (8 bytes), one 32-bit port per
/// slot, then the time the helper last found its socket empty (8 bytes).
pub struct PortTable {
    page: SharedPage,
}

impl PortTable {
    /// A new, empty table (the helper's) and the `memfd` that maps it.
    pub fn create() -> io::Result<(PortTable, OwnedFd)> {
        let (page, fd) = SharedPage::create(c"roce-ports")?;
        let t = PortTable { page };
        t.page.word64(0).store(MAGIC, Ordering::Release);
        Ok((t, fd))
    }

    /// Maps a table received from a helper.
    pub fn map(fd: &OwnedFd) -> io::Result<PortTable> {
        if os::file_len(fd)? < os::PAGE as u64 {
            return Err(io::Error::other(
                "roce: the steering helper sent no port table",
            ));
        }
        let t = PortTable {
            page: SharedPage::map(fd)?,
        };
        if t.page.word64(0).load(Ordering::Acquire) != MAGIC {
            return Err(io::Error::other(
                "roce: the steering helper's port table is of another version",
            ));
        }
        Ok(t)
    }

    fn port_word(&self, slot: u32) -> Option<&AtomicU32> {
        // inside the page: 16 + 4 * 64 < PAGE
        (slot < SLOTS).then(|| self.page.word32(PORTS_AT + 4 * slot as usize))
    }

    /// The helper: `slot`'s process receives on `port` (0: no process).
    pub fn set_port(&self, slot: u32, port: u16) {
        if let Some(w) = self.port_word(slot) {
            w.store(u32::from(port), Ordering::Release);
        }
    }

    /// The UDP port of `slot`'s process; 0 when the slot is free.
    pub fn port(&self, slot: u32) -> u16 {
        self.port_word(slot)
            .map_or(0, |w| w.load(Ordering::Acquire) as u16)
    }

    /// The helper is alive at `now_ns` (`CLOCK_MONOTONIC`).
    pub fn beat(&self, now_ns: u64) {
        self.page.word64(8).store(now_ns, Ordering::Release);
    }

    /// The helper: every datagram sent to its socket before `at_ns` (`CLOCK_MONOTONIC`) has
    /// been forwarded (it found the socket empty after `at_ns`, and has sent on what it read).
    pub fn set_drained(&self, at_ns: u64) {
        self.page.word64(DRAINED_AT).store(at_ns, Ordering::Release);
    }

    /// The last [`PortTable::set_drained`] time (0: not yet).
    pub fn drained(&self) -> u64 {
        self.page.word64(DRAINED_AT).load(Ordering::Acquire)
    }

    /// The helper beat within [`STALE_NS`] of `now_ns`.
    pub fn fresh(&self, now_ns: u64) -> bool {
        now_ns.saturating_sub(self.page.word64(8).load(Ordering::Acquire)) < STALE_NS
    }
}

/// Where a datagram the engine addressed to `<ip>:4791` goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// To `<ip>:4791`, as addressed: not a local shared device, a CM MAD, a stale table, or
    /// datagrams sent through the helper that it has not forwarded yet.
    Wire,
    /// Straight to this UDP port of the owning process.
    Port(u16),
    /// A QP of a local shared device that no process owns: dropped (counted).
    NoOwner,
}

enum Peer {
    /// No helper for the address (not a local shared device) when last looked.
    Absent,
    /// Asked a helper for its table; the answer is not in yet.
    Asking(UnixStream),
    Ready(PortTable),
}

/// Datagrams for QPs of one device sent through its helper ([`Route::Wire`]).
#[derive(Default)]
struct Through {
    /// Some were routed since the last [`Direct::sent`].
    pending: bool,
    /// When the last of them had been sent (`CLOCK_MONOTONIC`; 0: none).
    sent_ns: u64,
}

/// A process's view of the local shared devices: its own device's table (from its membership)
/// and those of the other addresses it sends to, found on first use (see the module docs).
pub struct Direct {
    ip: IpAddr,
    own: PortTable,
    own_through: Through,
    /// Address, its table, when to ask again, what went through its helper.
    peers: Vec<(IpAddr, Peer, u64, Through)>,
    any_pending: bool,
}

impl Direct {
    /// The direct path of the device at `ip`, whose helper's table is `own`.
    pub fn new(ip: IpAddr, own: PortTable) -> Direct {
        Direct {
            ip,
            own,
            own_through: Through::default(),
            peers: Vec::new(),
            any_pending: false,
        }
    }

    /// The datagrams routed since the last call have been sent (or dropped): those through a
    /// helper count as sent at `now_ns()` (`CLOCK_MONOTONIC`, read only if there were any; see
    /// [`Direct::route`]).
    pub fn sent(&mut self, now_ns: impl FnOnce() -> u64) {
        if !std::mem::take(&mut self.any_pending) {
            return;
        }
        let now_ns = now_ns();
        let all =
            std::iter::once(&mut self.own_through).chain(self.peers.iter_mut().map(|p| &mut p.3));
        for t in all.filter(|t| t.pending) {
            t.pending = false;
            t.sent_ns = now_ns;
        }
    }

    /// Where a datagram to `dst`, BTH DestQP `dqp`, goes at `now_ns` (`CLOCK_MONOTONIC`).
    pub fn route(&mut self, dst: IpAddr, dqp: u32, now_ns: u64) -> Route {
        if dqp == roce_wire::mad::GSI_QPN {
            return Route::Wire;
        }
        let Some(slot) = super::slot_of_qpn(dqp) else {
            return Route::Wire;
        };
        let (table, through) = if dst == self.ip {
            (Some(&self.own), &mut self.own_through)
        } else {
            self.peer(dst, now_ns)
        };
        let r = match table {
            Some(t) if t.fresh(now_ns) => match t.port(slot) {
                0 => return Route::NoOwner,
                // straight once the helper has forwarded what went through it
                p if !through.pending
                    && (through.sent_ns == 0 || t.drained() > through.sent_ns) =>
                {
                    through.sent_ns = 0;
                    return Route::Port(p);
                }
                _ => Route::Wire,
            },
            _ => Route::Wire,
        };
        through.pending = true;
        self.any_pending = true;
        r
    }

    fn peer(&mut self, dst: IpAddr, now_ns: u64) -> (Option<&PortTable>, &mut Through) {
        let i = match self.peers.iter().position(|p| p.0 == dst) {
            Some(i) => i,
            None => {
                self.peers.push((dst, Peer::Absent, 0, Through::default()));
                self.peers.len() - 1
            }
        };
        let (_, state, retry_at, through) = &mut self.peers[i];
        if let Peer::Ready(t) = state {
            if !t.fresh(now_ns) {
                // its helper left (or hangs): look for a new one now, then once a second
                *state = Peer::Absent;
            }
        }
        if matches!(state, Peer::Absent) && now_ns >= *retry_at {
            *retry_at = now_ns + RETRY_NS;
            if let Some(s) = ask(dst) {
                *state = Peer::Asking(s);
            }
        }
        if let Peer::Asking(s) = state {
            let mut buf = [0u8; 64];
            match recv_with_fd(s, &mut buf, true) {
                Ok((n, Some(fd))) if buf[..n].starts_with(b"TABLE") => {
                    *state = PortTable::map(&fd).map_or(Peer::Absent, Peer::Ready);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && now_ns < *retry_at => {}
                _ => *state = Peer::Absent,
            }
        }
        match state {
            Peer::Ready(t) => (Some(t), through),
            _ => (None, through),
        }
    }
}

/// Connects to the helper of `ip` (if one runs: `ip` is then a shared device of this host and
/// user) and asks for its table; `None` when there is none.
fn ask(ip: IpAddr) -> Option<UnixStream> {
    let addr = UnixAddr::from_abstract_name(super::control_name(ip).as_bytes()).ok()?;
    let s = UnixStream::connect_addr(&addr).ok()?;
    send_line(&s, b"OBSERVE\n").ok()?;
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_through_a_socket_and_routes() {
        let (t, fd) = PortTable::create().unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        os::send_with_fd(&a, b"SLOT 3\n", &fd).unwrap();
        let mut buf = [0u8; 64];
        let (n, got) = recv_with_fd(&b, &mut buf, false).unwrap();
        assert_eq!(&buf[..n], b"SLOT 3\n");
        let seen = PortTable::map(&got.unwrap()).unwrap();
        let now = os::monotonic_ns();
        t.beat(now);
        t.set_port(1, 40001);
        assert_eq!(seen.port(1), 40001);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let mut d = Direct::new(ip, seen);
        let (q1, _) = super::super::qpn_range(1);
        let (q2, _) = super::super::qpn_range(2);
        assert_eq!(d.route(ip, q1, now), Route::Port(40001));
        assert_eq!(d.route(ip, q2, now), Route::NoOwner, "a free slot");
        assert_eq!(
            d.route(ip, 1, now),
            Route::Wire,
            "CM MADs through the helper"
        );
        assert_eq!(
            d.route(ip, q1, now + STALE_NS),
            Route::Wire,
            "a stale table"
        );
        t.set_port(1, 0);
        assert_eq!(d.route(ip, q1, now), Route::NoOwner, "its process died");
        // an address with no helper of this user: as addressed, and asked again a second later
        let other: IpAddr = "127.0.99.77".parse().unwrap();
        assert_eq!(d.route(other, q1, now), Route::Wire);
        assert_eq!(d.peers.len(), 1);
    }

    /// What went through the helper (a stale table, or one still asked for) is not overtaken:
    /// the sender goes straight again only once the helper found its socket empty after the
    /// last of it was sent. Before, a UC message split between the two paths at first contact
    /// arrived out of order and was dropped (`ibv_uc_pingpong` waited forever).
    #[test]
    fn straight_again_only_once_the_helper_forwarded_what_went_through_it() {
        let (t, fd) = PortTable::create().unwrap();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let mut d = Direct::new(ip, PortTable::map(&fd).unwrap());
        let (q1, _) = super::super::qpn_range(1);
        let now = os::monotonic_ns();
        t.set_port(1, 40001);
        t.beat(now);
        assert_eq!(d.route(ip, q1, now), Route::Port(40001));
        d.sent(|| unreachable!("nothing went through the helper"));
        // the helper stalls: its table goes stale, datagrams go through it
        let later = now + STALE_NS;
        assert_eq!(d.route(ip, q1, later), Route::Wire);
        t.beat(later);
        assert_eq!(
            d.route(ip, q1, later),
            Route::Wire,
            "the rest of the burst follows, although the table is fresh again"
        );
        d.sent(|| later + 10);
        t.set_drained(later + 5);
        assert_eq!(
            d.route(ip, q1, later + 20),
            Route::Wire,
            "the helper found its socket empty before they were sent"
        );
        d.sent(|| later + 30);
        t.set_drained(later + 40);
        assert_eq!(d.route(ip, q1, later + 50), Route::Port(40001));
        assert_eq!(d.route(ip, q1, later + 60), Route::Port(40001));
        d.sent(|| unreachable!("nothing went through the helper"));
        // another address: the first datagrams go through its helper (none here), and the own
        // device's route is not affected
        let other: IpAddr = "127.0.99.78".parse().unwrap();
        assert_eq!(d.route(other, q1, later + 70), Route::Wire);
        assert_eq!(d.route(ip, q1, later + 70), Route::Port(40001));
    }
}
