//! RC ping-pong between two emulated NICs on 127.0.0.1 and 127.0.0.2 (two threads, each with
//! its own device), endpoints exchanged over TCP on loopback like `ibv_rc_pingpong`.
//!
//! ```text
//! cargo run --release -p roce-provider --example rc_pingpong             # two threads
//! cargo run --release -p roce-provider --example rc_pingpong server      # or two processes:
//! cargo run --release -p roce-provider --example rc_pingpong client 127.0.0.1
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
    if client.is_err() && !server.is_finished() {
        // the server may wait for us forever: report ours
        return Err(client.expect_err("checked"));
    }
    let server = server.join().map_err(|_| "server thread panicked")?;
    // the server's error first: when it failed (e.g. its address is taken), ours follows
    server?;
    let elapsed = client?;
    Ok(PingPong {
        iters,
        size,
        avg: elapsed / iters as u32,
    })
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // no arguments: both sides in this process, two threads;
    // `server [IP]` / `client SERVER_IP [IP]`: one side per process, like ibv_rc_pingpong
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (iters, size) = (1000, 4096);
    let report = |who: &str, d: Duration| {
        println!(
            "{who}: {iters} round trips of {size} B over RC: {:.1} us average, every byte checked",
            d.as_secs_f64() * 1e6 / iters as f64
        )
    };
    match args.first().map(String::as_str) {
        None => {
            let r = run(
                "127.0.0.1".parse()?,
                "127.0.0.2".parse()?,
                exchange::DEFAULT_PORT,
                iters,
                size,
            )?;
            report("127.0.0.2 <-> 127.0.0.1", r.avg * iters as u32);
        }
        Some("server") => {
            let ip: IpAddr = args.get(1).map_or("127.0.0.1", String::as_str).parse()?;
            let l = exchange::listen((ip, exchange::DEFAULT_PORT))?;
            let tcp = l.local_addr()?;
            eprintln!("server on {ip}, waiting for a client on TCP {tcp}");
            report("server", side(ip, true, Some(l), tcp, iters, size)?);
        }
        Some("client") => {
            let server: IpAddr = args.get(1).ok_or("client SERVER_IP [IP]")?.parse()?;
            let ip: IpAddr = args.get(2).map_or("127.0.0.2", String::as_str).parse()?;
            let tcp = std::net::SocketAddr::new(server, exchange::DEFAULT_PORT);
            report("client", side(ip, false, None, tcp, iters, size)?);
        }
        Some(other) => {
            return Err(format!(
                "unknown mode {other:?}: no arguments, `server [IP]` or `client SERVER_IP [IP]`"
            )
            .into())
        }
    }
    Ok(())
}
