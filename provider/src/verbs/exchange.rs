//! Out-of-band exchange of connection information over TCP, in place of `rdma_cm`.
//!
//! One side [`serve`]s on a TCP address, the other [`connect`]s to it; each sends its value as
//! one line of JSON and receives the peer's. Any serde type works: a [`QueuePairEndpoint`], or a
//! struct with an endpoint plus a [`super::RemoteSlice`] for RDMA WRITE/READ.
//!
//! ```
//! use roce_provider::verbs::{exchange, QueuePairEndpoint};
//! let a = QueuePairEndpoint { qpn: 17, psn: 1, gid: [0; 16], lid: 0 };
//! let b = QueuePairEndpoint { qpn: 18, psn: 2, gid: [1; 16], lid: 0 };
//! let listener = exchange::listen("127.0.0.1:0")?;
//! let addr = listener.local_addr().unwrap();
//! let server = std::thread::spawn(move || exchange::accept(&listener, &a));
//! let got_a: QueuePairEndpoint = exchange::connect(addr, &b, std::time::Duration::from_secs(5))?;
//! let got_b: QueuePairEndpoint = server.join().unwrap()?;
//! assert_eq!((got_a.qpn, got_b.qpn), (17, 18));
//! # Ok::<(), roce_provider::verbs::Error>(())
//! ```
use super::error::{Error, Result};
#[allow(unused_imports)]
use super::qp::QueuePairEndpoint;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Default TCP port for the exchange (what `ibv_rc_pingpong` uses).
pub const DEFAULT_PORT: u16 = 18515;

fn io(e: std::io::Error) -> Error {
    Error::Exchange(e)
}

fn swap<T: Serialize, R: DeserializeOwned>(stream: TcpStream, local: &T) -> Result<R> {
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(io)?;
    let mut w = stream.try_clone().map_err(io)?;
    let mut line = serde_json::to_string(local).map_err(|e| Error::Decode(e.to_string()))?;
    line.push('\n');
    w.write_all(line.as_bytes()).map_err(io)?;
    let mut r = BufReader::new(stream);
    let mut got = String::new();
    r.read_line(&mut got).map_err(io)?;
    if got.is_empty() {
        return Err(Error::Exchange(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "peer closed",
        )));
    }
    serde_json::from_str(got.trim_end()).map_err(|e| Error::Decode(e.to_string()))
}

/// Binds a TCP listener for [`accept`].
pub fn listen(addr: impl ToSocketAddrs) -> Result<TcpListener> {
    TcpListener::bind(addr).map_err(io)
}

/// Accepts one peer on `listener`, sends `local`, returns the peer's value.
pub fn accept<T: Serialize, R: DeserializeOwned>(listener: &TcpListener, local: &T) -> Result<R> {
    let (s, _) = listener.accept().map_err(io)?;
    swap(s, local)
}

/// [`listen`] + [`accept`] in one call.
pub fn serve<T: Serialize, R: DeserializeOwned>(addr: impl ToSocketAddrs, local: &T) -> Result<R> {
    accept(&listen(addr)?, local)
}

/// Connects to a peer's [`serve`], retrying until `timeout` (the server may start later), sends
/// `local`, returns the peer's value.
pub fn connect<T: Serialize, R: DeserializeOwned>(
    addr: impl ToSocketAddrs,
    local: &T,
    timeout: Duration,
) -> Result<R> {
    let addrs: Vec<_> = addr.to_socket_addrs().map_err(io)?.collect();
    let start = Instant::now();
    loop {
        let mut last = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, Duration::from_secs(1)) {
                Ok(s) => return swap(s, local),
                Err(e) => last = Some(e),
            }
        }
        if start.elapsed() >= timeout {
            return Err(io(
                last.unwrap_or_else(|| std::io::Error::other("no address"))
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
