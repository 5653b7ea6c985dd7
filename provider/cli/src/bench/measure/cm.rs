//! `roce bench --tests cm`: RDMA CM connections set up and torn down per second between the two
//! devices, ucmatose-style (an RC QP created on each side, connect, accept, established,
//! disconnect, the QPs destroyed), one connection at a time, next to raw TCP connect / accept /
//! close between the same two addresses in the same run (issue 19).
//!
//! One RDMA CM connection is REQ → REP → RTU → DREQ → DREP between the devices' connection
//! managers (`verbs::cm`, the CM of each runtime device) plus the QP transitions both sides make;
//! one TCP connection is SYN → SYN/ACK → ACK → FIN → FIN (the server closes first, the client
//! reads the EOF and closes).

use super::*;
use roce_provider::verbs::cm;
use serde_json::{json, Value};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;

/// How long one step of a connection may take before the run fails.
const STEP: Duration = Duration::from_secs(10);

/// Connections completed in a time.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Rate {
    /// Connections set up and torn down.
    pub connections: u64,
    /// Seconds they took.
    pub seconds: f64,
}

impl Rate {
    /// Connections per second.
    pub fn per_s(&self) -> f64 {
        self.connections as f64 / self.seconds.max(1e-9)
    }
}

/// The `cm` test's result.
#[derive(Clone, Debug)]
pub struct CmRow {
    /// RDMA CM, RC, QPs created and destroyed per connection.
    pub rdma_cm: Rate,
    /// Raw TCP connect/accept/close on the same addresses (None: not measured).
    pub tcp: Option<Rate>,
    /// The two addresses (active, passive).
    pub ips: (IpAddr, IpAddr),
}

impl CmRow {
    /// RDMA CM connections/s over TCP connections/s.
    pub fn ratio(&self) -> Option<f64> {
        self.tcp.map(|t| self.rdma_cm.per_s() / t.per_s().max(1e-9))
    }

    pub(crate) fn print(&self, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(out)?;
        writeln!(
            out,
            " RDMA CM connection rate, RC, {} -> {}, one at a time: create QP, connect, accept, established, disconnect (DREQ/DREP), destroy QP",
            self.ips.0, self.ips.1
        )?;
        writeln!(
            out,
            " {:>13} {:>11} {:>10} {:>15} {:>7}",
            "#connections", "conn/sec", "usec/conn", "rawTCP[conn/s]", "ratio"
        )?;
        let (t, r) = match (self.tcp, self.ratio()) {
            (Some(t), Some(r)) => (format!("{:.0}", t.per_s()), format!("{r:.2}")),
            _ => ("-".into(), "-".into()),
        };
        writeln!(
            out,
            " {:>13} {:>11.0} {:>10.1} {:>15} {:>7}",
            self.rdma_cm.connections,
            self.rdma_cm.per_s(),
            1e6 / self.rdma_cm.per_s().max(1e-9),
            t,
            r
        )?;
        writeln!(out, " rawTCP: connect, accept, the server closes, the client reads its EOF and closes (SYN, SYN/ACK, ACK, FIN, FIN) between the same addresses")
    }

    pub(crate) fn json(&self) -> Value {
        json!({
            "test": "cm",
            "transport": "RC",
            "rdma_cm": self.rdma_cm,
            "rdma_cm_conn_per_s": self.rdma_cm.per_s(),
            "tcp": self.tcp,
            "tcp_conn_per_s": self.tcp.map(|t| t.per_s()),
            "ratio": self.ratio(),
        })
    }
}

fn e2s(e: Error) -> String {
    e.to_string()
}

/// The passive side of the RDMA CM loop: accepts every request on `listener` with a fresh QP and
/// answers the client's DREQ, until `stop`.
fn serve_cm(ctx: Context, listener: cm::Listener, stop: Arc<AtomicBool>) -> Result<u64, String> {
    let pd = ctx.alloc_pd().map_err(e2s)?;
    let cq = ctx.create_cq(16).build().map_err(e2s)?;
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let req = match listener.next_request(Duration::from_millis(50)) {
            Ok(r) => r,
            Err(Error::Timeout(_)) => continue,
            Err(e) => return Err(format!("cm bench: next request: {e}")),
        };
        let qp = pd.create_qp(&cq, &cq, QpType::Rc).build().map_err(e2s)?;
        let conn = req
            .accept(qp, b"", STEP)
            .map_err(|e| format!("cm bench: accept: {e}"))?;
        conn.wait_disconnect(STEP)
            .map_err(|e| format!("cm bench: wait for the DREQ: {e}"))?;
        n += 1;
    }
    Ok(n)
}

/// RDMA CM connections from `a` to `b` for `dur`.
fn rdma_cm_rate(a: &Side, b: &Side, dur: Duration) -> Result<Rate, String> {
    let listener = cm::Listener::bind(&b.ctx, 0).map_err(e2s)?;
    let to = listener.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let (ctx, s) = (b.ctx.clone(), stop.clone());
    let server = std::thread::spawn(move || serve_cm(ctx, listener, s));
    let run = || -> Result<Rate, String> {
        let cq = a.ctx.create_cq(16).build().map_err(e2s)?;
        let (start, mut n) = (Instant::now(), 0u64);
        while n == 0 || start.elapsed() < dur {
            let qp = a.pd.create_qp(&cq, &cq, QpType::Rc).build().map_err(e2s)?;
            let conn = cm::connect(&a.ctx, qp, to, b"", STEP)
                .map_err(|e| format!("cm bench: connect: {e}"))?;
            conn.disconnect(STEP)
                .map_err(|e| format!("cm bench: disconnect: {e}"))?;
            n += 1;
        }
        Ok(Rate {
            connections: n,
            seconds: start.elapsed().as_secs_f64(),
        })
    };
    let r = run();
    stop.store(true, Ordering::Relaxed);
    let served = server
        .join()
        .map_err(|_| "cm bench: the passive thread panicked".to_string())?;
    let r = r?;
    let served = served?;
    if served != r.connections {
        return Err(format!(
            "cm bench: {} connections made, {served} served",
            r.connections
        ));
    }
    Ok(r)
}

/// TCP connections from `a` to `b` for `dur` (the client bound to `a`).
fn tcp_rate(a: IpAddr, b: IpAddr, dur: Duration) -> Result<Rate, String> {
    let l = TcpListener::bind((b, 0)).map_err(|e| format!("tcp baseline: bind {b}: {e}"))?;
    let to = l.local_addr().map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicU64::new(0));
    let (s, count) = (stop.clone(), served.clone());
    let server = std::thread::spawn(move || {
        let mut buf = [0u8; 16];
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            if s.load(Ordering::Relaxed) {
                break;
            }
            // the server closes first: the TIME_WAIT stays on its side (one listening port,
            // where loopback SYNs reuse it), not on the client's ephemeral ports, which a run
            // of tens of thousands of connections would otherwise exhaust
            let _ = c.shutdown(std::net::Shutdown::Write);
            while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
            count.fetch_add(1, Ordering::Relaxed);
        }
    });
    let one = |to: SocketAddr| -> std::io::Result<()> {
        let s = Socket::new(Domain::for_address(to), Type::STREAM, Some(Protocol::TCP))?;
        // the port chosen at connect, for the 4-tuple (IP_BIND_ADDRESS_NO_PORT), not at bind
        if to.is_ipv4() {
            roce_udp::os::setsockopt_int(&s, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1)?;
        }
        s.bind(&SockAddr::from(SocketAddr::new(a, 0)))?;
        s.connect(&SockAddr::from(to))?;
        let mut s = TcpStream::from(s);
        let mut buf = [0u8; 16];
        while s.read(&mut buf)? > 0 {}
        Ok(())
    };
    let (start, mut n) = (Instant::now(), 0u64);
    let mut res = Ok(());
    while n == 0 || start.elapsed() < dur {
        if let Err(e) = one(to) {
            res = Err(format!("tcp baseline: {e}"));
            break;
        }
        n += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    // wakes the accept loop, which sees `stop`
    let _ = TcpStream::connect_timeout(&to, STEP);
    let _ = server.join();
    res?;
    Ok(Rate {
        connections: n.min(served.load(Ordering::Relaxed)),
        seconds,
    })
}

/// RDMA CM and (with `baseline`) TCP alternately, `repeat` times; the best of each.
pub(super) fn cm_rates(
    a: &Side,
    b: &Side,
    dur: Duration,
    repeat: usize,
    baseline: bool,
) -> Result<CmRow, String> {
    let (mut best, mut tcp): (Option<Rate>, Option<Rate>) = (None, None);
    for _ in 0..repeat.max(1) {
        let r = rdma_cm_rate(a, b, dur)?;
        if !best.is_some_and(|x| x.per_s() >= r.per_s()) {
            best = Some(r);
        }
        if baseline {
            let t = tcp_rate(a.ctx.ip(), b.ctx.ip(), dur)?;
            if !tcp.is_some_and(|x| x.per_s() >= t.per_s()) {
                tcp = Some(t);
            }
        }
    }
    Ok(CmRow {
        rdma_cm: best.expect("repeat >= 1"),
        tcp,
        ips: (a.ctx.ip(), b.ctx.ip()),
    })
}
