//! RC ping-pong between two emulated NICs on 127.0.0.1 and 127.0.0.2 (two threads, each with
//! its own device), endpoints exchanged over TCP on loopback like `ibv_rc_pingpong`.
//!
//! ```text
//! cargo run --release -p roce-provider --example rc_pingpong
//! ```
use roce_provider::verbs::{
    exchange, AccessFlags, Device, DeviceConfig, QpType, QueuePairEndpoint, WcOpcode,
};
use std::net::IpAddr;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(10);

/// What one run measured.
#[derive(Debug)]
pub struct PingPong {
    /// Round trips.
    pub iters: usize,
    /// Bytes per message.
    pub size: usize,
    /// Average round trip.
    pub avg: Duration,
}

/// One side: open a device at `ip`, exchange endpoints (`server`: listen, else connect), then
/// `iters` round trips of `size`-byte SENDs, checking every byte of every message.
fn side(
    ip: IpAddr,
    server: bool,
    listener: Option<std::net::TcpListener>,
    tcp: std::net::SocketAddr,
    iters: usize,
    size: usize,
) -> Result<Duration, Box<dyn std::error::Error + Send + Sync>> {
    let ctx = Device::open(DeviceConfig::new(ip))?;
    let pd = ctx.alloc_pd()?;
    let cq = ctx.create_cq(16).build()?;
    let qp = pd.create_qp(&cq, &cq, QpType::Rc).build()?;
    let send = pd.allocate(size, AccessFlags::LOCAL_WRITE)?;
    let recv = pd.allocate(size, AccessFlags::LOCAL_WRITE)?;
    qp.post_receive(&[recv.slice(..)], 0)?;
    let local = qp.endpoint();
    let remote: QueuePairEndpoint = match listener {
        Some(l) => exchange::accept(&l, &local)?,
        None => exchange::connect(tcp, &local, T)?,
    };
    let qp = qp.handshake(remote)?;
    let start = Instant::now();
    for i in 0..iters {
        let pattern = |b: &mut Vec<u8>, n: usize| {
            b.iter_mut()
                .enumerate()
                .for_each(|(k, x)| *x = (k + n) as u8)
        };
        if !server {
            let mut msg = vec![0; size];
            pattern(&mut msg, i);
            send.write_at(0, &msg);
            qp.post_send(&[send.slice(..)], 1)?;
        }
        // wait for the peer's message (and our own send completion)
        let mut got_recv = false;
        let mut got_send = server;
        while !(got_recv && got_send) {
            let wc = cq.wait_one(T)?;
            wc.result()?;
            match wc.opcode() {
                WcOpcode::Recv => {
                    let mut want = vec![0; size];
                    pattern(&mut want, i);
                    if recv.to_vec() != want {
                        return Err(format!("message {i}: data mismatch").into());
                    }
                    got_recv = true;
                    if i + 1 < iters || !server {
                        qp.post_receive(&[recv.slice(..)], 0)?;
                    }
                }
                _ => got_send = true,
            }
        }
        if server {
            // echo it back, then wait for that send's completion
            let data = recv.to_vec();
            send.write_at(0, &data);
            qp.post_send(&[send.slice(..)], 2)?;
            cq.wait_one(T)?.result()?;
        }
    }
    Ok(start.elapsed())
}

/// Runs both sides in two threads: the server on `ip_server` (listening for the endpoint
/// exchange on TCP `ip_server:tcp_port`, 0 = any free port), the client on `ip_client`.
pub fn run(
    ip_server: IpAddr,
    ip_client: IpAddr,
    tcp_port: u16,
    iters: usize,
    size: usize,
) -> Result<PingPong, Box<dyn std::error::Error + Send + Sync>> {
    let listener = exchange::listen((ip_server, tcp_port))?;
    let tcp = listener.local_addr()?;
    let server =
        std::thread::spawn(move || side(ip_server, true, Some(listener), tcp, iters, size));
    let client = side(ip_client, false, None, tcp, iters, size);
    let server = server.join().map_err(|_| "server thread panicked")?;
    let elapsed = client?;
    server?;
    Ok(PingPong {
        iters,
        size,
        avg: elapsed / iters as u32,
    })
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let r = run(
        "127.0.0.1".parse()?,
        "127.0.0.2".parse()?,
        exchange::DEFAULT_PORT,
        1000,
        4096,
    )?;
    println!("{} round trips of {} B over RC, 127.0.0.2 <-> 127.0.0.1: {:.1} us average, every byte checked", r.iters, r.size, r.avg.as_secs_f64() * 1e6);
    Ok(())
}
