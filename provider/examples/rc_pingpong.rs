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
    let pattern = |n: usize| (0..size).map(|k| (k + n) as u8).collect::<Vec<u8>>();
    // Completions of both kinds arrive in any order (the peer's next message can overtake
    // the ACK of our last send), so track both and never reuse a buffer that is still busy.
    let (mut recv_ready, mut send_busy) = (false, false);
    let wait = |need_recv: bool,
                recv_ready: &mut bool,
                send_busy: &mut bool|
     -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        while (need_recv && !*recv_ready) || *send_busy {
            let wc = cq.wait_one(T)?;
            wc.result()?;
            match wc.opcode() {
                WcOpcode::Recv => *recv_ready = true,
                _ => *send_busy = false,
            }
        }
        Ok(())
    };
    let start = Instant::now();
    for i in 0..iters {
        if server {
            wait(true, &mut recv_ready, &mut send_busy)?;
        } else {
            send.write_at(0, &pattern(i));
            qp.post_send(&[send.slice(..)], 1)?;
            send_busy = true;
            wait(true, &mut recv_ready, &mut send_busy)?;
        }
        let got = recv.to_vec();
        if got != pattern(i) {
            return Err(format!("message {i}: data mismatch").into());
        }
        recv_ready = false;
        if i + 1 < iters || !server {
            qp.post_receive(&[recv.slice(..)], 0)?;
        }
        if server {
            // echo it back
            send.write_at(0, &got);
            qp.post_send(&[send.slice(..)], 2)?;
            send_busy = true;
        }
    }
    wait(false, &mut recv_ready, &mut send_busy)?;
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
