//! The measurements: bandwidth and latency loops on the verbs API, the passive side (in this
//! process or behind a TCP control connection) and the raw UDP baselines.
//!
//! This file has the result types, the constants and a benchmark [`Side`] (device, PD, CQ, MR);
//! the active side's bandwidth and latency loops are in [`loops`], the passive side (local
//! thread or `--server`) in [`passive`], the runs over a plan (progress line, baselines,
//! `in_process`, `client`) in [`runs`], the `--check` loss and 1,000-QP extras in [`scale`],
//! the RDMA CM connection rate in [`cm`].
use super::report::{Baseline, BwRow, LatRow, Report, Scale};
use super::Plan;
use roce_provider::verbs::{
    AccessFlags, CompletionQueue, Context, DeviceConfig, Error, MemoryRegion, Mtu,
    ProtectionDomain, QpType, QueuePair, QueuePairEndpoint, RemoteSlice, SendRequest, WcOpcode,
    WorkCompletion,
};
use roce_udp::baseline::{self, PingPong, Technique};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod cm;
mod loops;
mod lossy;
mod passive;
mod runs;
mod scale;
mod shared;

pub use cm::CmRow;
use cm::*;
use loops::*;
pub use lossy::LOSS_MSG;
use lossy::*;
pub use passive::*;
pub use runs::*;
use scale::*;
pub use shared::*;

/// A benchmarked operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// RDMA WRITE bandwidth.
    Write,
    /// RDMA READ bandwidth.
    Read,
    /// SEND/RECV bandwidth.
    Send,
    /// SEND/RECV ping-pong latency.
    Lat,
}

impl Op {
    /// Table title.
    pub fn title(self) -> &'static str {
        match self {
            Op::Write => "RC Write",
            Op::Read => "RC Read",
            Op::Send => "RC Send",
            Op::Lat => "RC Send/Recv latency",
        }
    }
}

/// A bandwidth point.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct BwResult {
    /// Message size.
    pub size: usize,
    /// Messages completed.
    pub iterations: u64,
    /// Time from the first post to the last completion.
    pub seconds: f64,
}

impl BwResult {
    /// Payload Gbit/s.
    pub fn gbit_per_s(&self) -> f64 {
        self.iterations as f64 * self.size as f64 * 8.0 / self.seconds.max(1e-9) / 1e9
    }
    /// Messages per second.
    pub fn msg_per_s(&self) -> f64 {
        self.iterations as f64 / self.seconds.max(1e-9)
    }
}

/// A latency result.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct LatResult {
    /// Round trips measured.
    pub iterations: usize,
    /// Fastest.
    pub min_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
}

/// Bytes the wire packets of `op` add around the payload: BTH 12 + ICRC 4, RETH 16 on a WRITE's
/// only packet, AETH 4 on a READ response's only packet.
pub fn datagram_size(op: Op, size: usize, mtu: Mtu) -> usize {
    let mtu = mtu.bytes() as usize;
    if size > mtu {
        return mtu + 16;
    }
    size.max(1)
        + 16
        + match op {
            Op::Write => 16,
            Op::Read => 4,
            Op::Send | Op::Lat => 0,
        }
}

/// Data packets per message.
pub fn packets_per_msg(size: usize, mtu: Mtu) -> u64 {
    size.max(1).div_ceil(mtu.bytes() as usize) as u64
}

const ALL: AccessFlags = AccessFlags::ALL_REMOTE;
const SQ_DEPTH: u32 = 256;
/// READs in flight on a READ point: the device's `max_qp_rd_atom` (128, as rxe's), which is what
/// `ib_read_bw` uses when `-o` is not given. (The QP default, 16, limited small READs to 16 per
/// round trip.)
const READ_OUTSTANDING: u8 = 128;
const RQ_DEPTH: u32 = 512;
/// Bytes in flight per QP in the bandwidth loop.
const WINDOW_BYTES: usize = 2 << 20;
const T: Duration = Duration::from_secs(20);

/// Whether devices run the runtime's background progress thread (`--no-progress-thread`
/// turns it off; the passive side then always has a polling thread of its own).
pub(crate) static PROGRESS_THREAD: AtomicBool = AtomicBool::new(true);

fn e2s(e: Error) -> String {
    e.to_string()
}

/// One device with what every test needs.
pub(crate) struct Side {
    pub ctx: Context,
    pub pd: ProtectionDomain,
    pub mr: Arc<MemoryRegion>,
    pub mtu: Mtu,
    /// Local ACK timeout exponent of this side's QPs (4.096 µs × 2^t; the verbs default is 14).
    pub timeout: u8,
}

/// Local ACK timeout of the lossy pair's QPs under `--check`: 12 = 16.8 ms (perftest's `-u`).
/// Loss recovery does not wait on the timer except when both copies of a retry's first packet
/// or the last packet of the final drain are lost; at 14 (67 ms) one such stall costs 13% of a
/// 0.5 s point, at 12 about 3%, and at 10 or less a loaded machine fires it spuriously
/// (emu/README.md, "Loss recovery").
pub(crate) const LOSSY_QP_TIMEOUT: u8 = 12;

/// Runtime counters of both devices, for `--counters`.
struct CounterSnap(Vec<(&'static str, u64)>, Vec<(&'static str, u64)>);

impl CounterSnap {
    fn take(a: &Side, b: Option<&Side>) -> CounterSnap {
        let snap = |s: Option<&Side>| {
            s.and_then(|s| s.ctx.runtime())
                .map(|d| d.runtime_counters().iter().collect())
                .unwrap_or_default()
        };
        CounterSnap(snap(Some(a)), snap(b))
    }
    /// Prints the counters that moved, per message, for the active and the passive device.
    fn print(&self, later: &CounterSnap, per: u64, what: &str, err: &mut dyn Write) {
        let per = per.max(1) as f64;
        for (side, (x, y)) in [
            ("active", (&self.0, &later.0)),
            ("passive", (&self.1, &later.1)),
        ] {
            let mut line = format!("counters {what} {side}, per message:");
            for ((n, v0), (_, v1)) in x.iter().zip(y.iter()) {
                if v1 > v0 {
                    line.push_str(&format!(" {n} {:.3}", (v1 - v0) as f64 / per));
                }
            }
            let _ = writeln!(err, "{line}");
        }
    }
}

impl Side {
    pub(crate) fn open(ip: IpAddr, mtu: Mtu, len: usize, loss: f64) -> Result<Side, String> {
        Side::open_as(ip, mtu, len, loss, Sharing::current())
    }

    /// [`Side::open`], shared with other processes or not (`--tests shared`).
    pub(crate) fn open_as(
        ip: IpAddr,
        mtu: Mtu,
        len: usize,
        loss: f64,
        sharing: Sharing,
    ) -> Result<Side, String> {
        let cfg = DeviceConfig {
            shared: sharing != Sharing::No,
            direct: sharing == Sharing::Direct,
            mtu,
            loss,
            progress_thread: PROGRESS_THREAD.load(Ordering::Relaxed),
            // The bench's own receivers fall behind now and then (Send bandwidth: RNR NAKs by
            // design); a 'post receive WRs' hint for its QPs would only confuse its reader.
            quiet: true,
            ..DeviceConfig::new(ip)
        };
        let ctx = cfg.open().map_err(|e| format!("{e} (is another `roce bench` or program using {ip}:4791? pick others with --ip/--peer-ip)"))?;
        let pd = ctx.alloc_pd().map_err(e2s)?;
        let mr = Arc::new(pd.allocate(len.max(64), ALL).map_err(e2s)?);
        mr.fill(0x5A);
        Ok(Side {
            ctx,
            pd,
            mr,
            mtu,
            timeout: 14,
        })
    }

    fn qp(
        &self,
        cq: &CompletionQueue,
        max_send_wr: u32,
        max_recv_wr: u32,
    ) -> Result<roce_provider::verbs::PreparedQueuePair, String> {
        self.qp_for(None, cq, max_send_wr, max_recv_wr)
    }

    /// [`Side::qp`] for a point of `op`: a READ point allows [`READ_OUTSTANDING`] READs in
    /// flight (both sides), as `ib_read_bw` does by default.
    fn qp_for(
        &self,
        op: Option<Op>,
        cq: &CompletionQueue,
        max_send_wr: u32,
        max_recv_wr: u32,
    ) -> Result<roce_provider::verbs::PreparedQueuePair, String> {
        let b = self
            .pd
            .create_qp(cq, cq, QpType::Rc)
            .set_max_send_wr(max_send_wr)
            .set_max_recv_wr(max_recv_wr)
            .set_max_inline_data(256)
            .set_path_mtu(self.mtu)
            .set_min_rnr_timer(1)
            .set_timeout(self.timeout);
        let b = if op == Some(Op::Read) {
            b.set_rd_atomic(READ_OUTSTANDING, READ_OUTSTANDING)
        } else {
            b
        };
        b.build().map_err(e2s)
    }
}
