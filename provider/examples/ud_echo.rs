//! UD echo: a server QP on 127.0.0.1 sends every datagram back to whoever sent it (source QPN
//! from the completion, source address from the 40-byte header at the front of the receive
//! buffer); a client
//! on 127.0.0.2 sends a few and checks the echoes.
//!
//! ```text
//! cargo run --release -p roce-provider --example ud_echo
//! ```
use roce_provider::verbs::{AccessFlags, Device, DeviceConfig, QpType, DEFAULT_QKEY};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const GRH: usize = 40;

/// Sends `n` datagrams from `ip_client` to the echo server on `ip_server`; returns how many
/// came back intact.
pub fn run(
    ip_server: IpAddr,
    ip_client: IpAddr,
    n: usize,
) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
    // server
    let sctx = Device::open(DeviceConfig::new(ip_server))?;
    let spd = sctx.alloc_pd()?;
    let scq = sctx.create_cq(64).build()?;
    let sqp = spd.create_qp(&scq, &scq, QpType::Ud).build()?.activate()?;
    let server_ep = sqp.endpoint();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    // post the first receive before anyone can send: UD drops a datagram that finds none
    let buf = spd.allocate(GRH + 1024, AccessFlags::LOCAL_WRITE)?;
    let out = spd.allocate(1024, AccessFlags::LOCAL_WRITE)?;
    sqp.post_receive(&[buf.slice(..)], 0)?;
    let server = std::thread::spawn(
        move || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            while !st.load(Ordering::Relaxed) {
                let Ok(wc) = scq.wait_one(Duration::from_millis(20)) else {
                    continue;
                };
                wc.result()?;
                if wc.opcode() != roce_provider::verbs::WcOpcode::Recv {
                    continue;
                }
                let data = buf.to_vec();
                let len = wc.byte_len() as usize - GRH;
                out.write_at(0, &data[GRH..GRH + len]);
                sqp.post_receive(&[buf.slice(..)], 0)?;
                // back to the sender: its address from the receive header, its QPN from the completion
                let ah = spd.create_ah_from_grh(&data[..GRH])?;
                sqp.post_send_ud(&[out.slice(..len)], &ah, wc.src_qp(), DEFAULT_QKEY, 1)?;
            }
            Ok(())
        },
    );

    // client
    let cctx = Device::open(DeviceConfig::new(ip_client))?;
    let cpd = cctx.alloc_pd()?;
    let ccq = cctx.create_cq(64).build()?;
    let cqp = cpd.create_qp(&ccq, &ccq, QpType::Ud).build()?.activate()?;
    let ah = cpd.create_ah_to(&server_ep)?;
    let msg = cpd.allocate(1024, AccessFlags::LOCAL_WRITE)?;
    let rbuf = cpd.allocate(GRH + 1024, AccessFlags::LOCAL_WRITE)?;
    // UD is unreliable: resend after a silence, and skip late echoes of earlier attempts
    let mut ok = 0;
    cqp.post_receive(&[rbuf.slice(..)], 7)?;
    for i in 0..n {
        let text = format!("datagram {i} from {ip_client}");
        msg.write_at(0, text.as_bytes());
        'attempts: for _attempt in 0..5 {
            cqp.post_send_ud(
                &[msg.slice(..text.len())],
                &ah,
                server_ep.qpn,
                DEFAULT_QKEY,
                1,
            )?;
            loop {
                let Ok(wc) = ccq.wait_one(Duration::from_millis(500)) else {
                    continue 'attempts;
                };
                wc.result()?;
                if wc.opcode() != roce_provider::verbs::WcOpcode::Recv {
                    continue;
                }
                let back = rbuf.to_vec();
                let len = wc.byte_len() as usize - GRH;
                cqp.post_receive(&[rbuf.slice(..)], 7)?;
                if back[GRH..GRH + len] == *text.as_bytes() && wc.src_qp() == server_ep.qpn {
                    ok += 1;
                    break 'attempts;
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    server.join().map_err(|_| "server thread panicked")??;
    Ok(ok)
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let n = 10;
    let ok = run("127.0.0.1".parse()?, "127.0.0.2".parse()?, n)?;
    println!("UD echo 127.0.0.2 -> 127.0.0.1 -> back: {ok}/{n} datagrams returned intact");
    if ok != n {
        return Err("some echoes were wrong".into());
    }
    Ok(())
}
