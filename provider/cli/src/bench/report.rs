//! Results, ratios against the raw UDP ceiling, the issue-6 checks, tables and JSON.
use super::measure::{BwResult, LatResult, Op};
use super::Plan;
use roce_udp::baseline::PingPong;
use serde::Serialize;
use serde_json::json;
use std::io::{self, Write};
use std::net::IpAddr;

/// A raw UDP throughput baseline.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Baseline {
    /// `gso_gro` or `mmsg`.
    pub technique: &'static str,
    /// UDP payload bytes per datagram.
    pub datagram_size: usize,
    /// Payload Gbit/s.
    pub gbit_per_s: f64,
    /// Datagrams per second.
    pub datagrams_per_s: f64,
}

/// One bandwidth row.
#[derive(Clone, Copy, Debug)]
pub struct BwRow {
    /// Operation.
    pub op: Op,
    /// Message size.
    pub size: usize,
    /// Result.
    pub r: BwResult,
    /// Data packets per message.
    pub pkts: u64,
    /// RoCE datagram size (UDP payload).
    pub dgram: usize,
    /// Raw UDP at that size with GSO/GRO.
    pub base: Option<Baseline>,
}

impl BwRow {
    pub(crate) fn new(
        op: Op,
        r: BwResult,
        pkts: u64,
        dgram: usize,
        base: Option<Baseline>,
    ) -> BwRow {
        BwRow {
            op,
            size: r.size,
            r,
            pkts,
            dgram,
            base,
        }
    }
    /// RoCE data packets per second.
    pub fn pkt_per_s(&self) -> f64 {
        self.r.msg_per_s() * self.pkts as f64
    }
    /// Packet rate over the baseline's datagram rate.
    pub fn ratio(&self) -> Option<f64> {
        self.base.map(|b| self.over(b))
    }
    /// Packet rate over the datagram rate of baseline `b`.
    fn over(&self, b: Baseline) -> f64 {
        self.pkt_per_s() / b.datagrams_per_s.max(1.0)
    }
}

/// The latency row.
#[derive(Clone, Copy, Debug)]
pub struct LatRow {
    /// RoCE.
    pub r: LatResult,
    /// Raw UDP ping-pong at the same datagram size.
    pub base: Option<PingPong>,
    /// The same, each datagram followed by a 20-byte one in the same GSO send (received with
    /// GRO): the kernel's share of the RC ACK that leaves with every reply. Information: the
    /// targets stay against `base`.
    pub acked: Option<PingPong>,
}

impl LatRow {
    pub(crate) fn new(r: LatResult, base: Option<PingPong>, acked: Option<PingPong>) -> LatRow {
        LatRow { r, base, acked }
    }
    fn base_us(&self) -> Option<(f64, f64)> {
        us(self.base)
    }
    fn acked_us(&self) -> Option<(f64, f64)> {
        us(self.acked)
    }
}

fn us(p: Option<PingPong>) -> Option<(f64, f64)> {
    p.map(|b| (b.p50.as_secs_f64() * 1e6, b.p99.as_secs_f64() * 1e6))
}

/// `--check` extras.
#[derive(Clone, Debug)]
pub struct Scale {
    /// 64 KiB Write, lossless, measured right before the others.
    pub lossless: BwResult,
    /// 64 KiB Write with 1% loss injected on both devices (None: see `lossy_error`).
    pub lossy: Option<BwResult>,
    /// Why there is no lossy figure: the extra devices could not be opened, or a lossy run
    /// failed (one failed run of the `--repeat` counts: it is a finding, not noise).
    pub lossy_error: Option<String>,
    /// Addresses of the lossy pair.
    pub lossy_ips: (IpAddr, IpAddr),
    /// 1,000 QPs aggregate, 64 KiB Writes.
    pub many: BwResult,
    /// QPs.
    pub qps: usize,
    /// Engine memory per QP (state + queues), bytes.
    pub bytes_per_qp: usize,
}

/// One issue-6 target.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// What.
    pub name: String,
    /// Measured ratio.
    pub value: f64,
    /// Target.
    pub target: f64,
    /// `>=` or `<=`.
    pub op: &'static str,
    /// Met.
    pub pass: bool,
}

/// One `--loss` point: 4 MiB of `op`, lossless and lossy.
#[derive(Clone, Copy, Debug)]
pub struct LossRow {
    /// Write or Read.
    pub op: Op,
    /// Fraction of every datagram dropped on the lossy pair.
    pub loss: f64,
    /// The lossy pair's addresses.
    pub lossy_ips: (IpAddr, IpAddr),
    /// Without loss, on the main pair.
    pub lossless: BwResult,
    /// Share of the data packets retransmitted without loss.
    pub lossless_retransmitted: f64,
    /// With loss.
    pub lossy: BwResult,
    /// Share of the data packets retransmitted with loss.
    pub lossy_retransmitted: f64,
    /// Local ACK timeouts of the lossy requester.
    pub retry_timeouts: u64,
    /// Local ACK timeout attribute of the lossy pair's QPs.
    pub qp_timeout: u8,
}

/// Everything one run measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// Path MTU.
    pub mtu: u32,
    /// Seconds per point.
    pub duration: f64,
    /// Active device.
    pub local_ip: IpAddr,
    /// Bandwidth rows.
    pub bw: Vec<BwRow>,
    /// Latency.
    pub lat: Option<LatRow>,
    /// Raw UDP one datagram per packet, 64 KiB Write datagram size.
    pub mmsg_64k: Option<Baseline>,
    /// Same at the 64 B Write datagram size.
    pub mmsg_64b: Option<Baseline>,
    /// `--check`: raw UDP GSO+GRO plus one payload copy and the ICRC per packet on each side,
    /// at the 64 KiB points' datagram size (information, no target).
    pub floor_64k: Option<Baseline>,
    /// Loss and scale.
    pub scale: Option<Scale>,
    /// `--loss`: 4 MiB Write and Read with and without loss.
    pub loss: Vec<LossRow>,
    /// `--tests cm`: RDMA CM connections per second next to TCP's.
    pub cm: Option<super::measure::CmRow>,
    /// Issue-6 checks (with `--check`).
    pub checks: Vec<Check>,
    /// `--perftest`: unmodified perftest through the drop-in library.
    pub perftest: Option<crate::perfbench::Report>,
    /// `--perftest` could not run (why).
    pub perftest_error: Option<String>,
}

impl Report {
    pub(crate) fn new(plan: &Plan, local_ip: IpAddr) -> Report {
        Report {
            mtu: plan.mtu.bytes(),
            duration: plan.duration.as_secs_f64(),
            local_ip,
            bw: Vec::new(),
            lat: None,
            mmsg_64k: None,
            mmsg_64b: None,
            floor_64k: None,
            scale: None,
            loss: Vec::new(),
            cm: None,
            checks: Vec::new(),
            perftest: None,
            perftest_error: None,
        }
    }

    /// perftest figures over this run's own: `ib_send_lat` round trip (2 × t_typical) / RC
    /// Send/Recv p50, and `ib_write_bw -s 65536` / RC Write 64 KiB (when measured).
    pub fn perftest_consistency(&self) -> (Option<f64>, Option<f64>) {
        let Some(p) = &self.perftest else {
            return (None, None);
        };
        let lat = self
            .lat
            .map(|l| 2.0 * p.send_lat_typical_us / l.r.p50_us.max(1e-3));
        let bw = self
            .row(Op::Write, 65536)
            .map(|r| p.write_bw_gbps / r.r.gbit_per_s().max(1e-9));
        (lat, bw)
    }

    fn row(&self, op: Op, size: usize) -> Option<&BwRow> {
        self.bw.iter().find(|r| r.op == op && r.size == size)
    }

    /// Fills `checks` from what was measured (issue 6, "How it is checked").
    pub(crate) fn compute_checks(&mut self) {
        let mut c = Vec::new();
        let mut ge = |name: String, value: Option<f64>, target: f64| {
            if let Some(v) = value {
                c.push(Check {
                    name,
                    value: v,
                    target,
                    op: ">=",
                    pass: v >= target,
                });
            }
        };
        let vs_mmsg = |r: &BwRow, b: Option<Baseline>| b.map(|b| r.over(b));
        if let Some(r) = self.row(Op::Write, 65536) {
            ge(
                "RC Write 64 KiB / raw UDP sendmmsg+recvmmsg (packets/s)".into(),
                vs_mmsg(r, self.mmsg_64k),
                0.85,
            );
            ge(
                "RC Write 64 KiB / raw UDP GSO+GRO (packets/s)".into(),
                r.ratio(),
                0.60,
            );
        }
        // Issue 6 asks Read and Send for 75% and 80% "of the same baselines" as the Write:
        // both, one datagram per packet and GSO+GRO (the technique our datapath uses). The
        // 64-byte message rate is checked against both as well.
        if let Some(r) = self.row(Op::Read, 65536) {
            ge(
                "RC Read 64 KiB / raw UDP sendmmsg+recvmmsg (packets/s)".into(),
                vs_mmsg(r, self.mmsg_64k),
                0.75,
            );
            ge(
                "RC Read 64 KiB / raw UDP GSO+GRO (packets/s)".into(),
                r.ratio(),
                0.75,
            );
        }
        if let Some(r) = self.row(Op::Send, 65536) {
            ge(
                "RC Send 64 KiB / raw UDP sendmmsg+recvmmsg (packets/s)".into(),
                vs_mmsg(r, self.mmsg_64k),
                0.80,
            );
            ge(
                "RC Send 64 KiB / raw UDP GSO+GRO (packets/s)".into(),
                r.ratio(),
                0.80,
            );
        }
        if let Some(r) = self.row(Op::Write, 64) {
            ge(
                "RC Write 64 B message rate / raw UDP datagrams/s (sendmmsg+recvmmsg)".into(),
                vs_mmsg(r, self.mmsg_64b),
                0.60,
            );
            ge(
                "RC Write 64 B message rate / raw UDP datagrams/s (GSO+GRO)".into(),
                r.ratio(),
                0.60,
            );
        }
        if let Some(l) = &self.lat {
            if let Some((b50, b99)) = l.base_us() {
                let v = l.r.p50_us / b50.max(1e-3);
                c.push(Check {
                    name: "RC Send/Recv 64 B p50 / raw UDP ping-pong p50".into(),
                    value: v,
                    target: 1.3,
                    op: "<=",
                    pass: v <= 1.3,
                });
                let v = l.r.p99_us / b99.max(1e-3);
                c.push(Check {
                    name: "RC Send/Recv 64 B p99 / raw UDP ping-pong p99".into(),
                    value: v,
                    target: 1.5,
                    op: "<=",
                    pass: v <= 1.5,
                });
            }
        }
        if let Some(p) = &self.perftest {
            let v = p.lat_ratio();
            c.push(Check {
                name: "ib_send_lat -s 64 (drop-in) RTT / raw UDP ping-pong p50 (issue 4)".into(),
                value: v,
                target: 2.0,
                op: "<=",
                pass: v <= 2.0,
            });
            let (lat, bw) = self.perftest_consistency();
            for (what, r) in [
                ("ib_send_lat RTT / roce bench RC Send/Recv p50", lat),
                ("ib_write_bw 64 KiB / roce bench RC Write 64 KiB", bw),
            ] {
                if let Some(r) = r {
                    let v = (r - 1.0).abs();
                    c.push(Check {
                        name: format!("|1 - {what}| ({r:.2})"),
                        value: v,
                        target: 0.2,
                        op: "<=",
                        pass: v <= 0.2,
                    });
                }
            }
        }
        if let Some(s) = &self.scale {
            let base = s.lossless.gbit_per_s().max(1e-9);
            match s.lossy {
                Some(l) => c.push(Check {
                    name: format!(
                        "RC Write 64 KiB with 1% loss / lossless (QP timeout {} = {:.1} ms)",
                        super::measure::LOSSY_QP_TIMEOUT,
                        4.096e-3 * f64::from(1u32 << super::measure::LOSSY_QP_TIMEOUT)
                    ),
                    value: l.gbit_per_s() / base,
                    target: 0.75,
                    op: ">=",
                    pass: l.gbit_per_s() / base >= 0.75,
                }),
                None => c.push(Check {
                    name: format!(
                        "RC Write 64 KiB with 1% loss: {}",
                        s.lossy_error.as_deref().unwrap_or("not measured")
                    ),
                    value: 0.0,
                    target: 0.75,
                    op: ">=",
                    pass: false,
                }),
            }
            let v = s.many.gbit_per_s() / base;
            c.push(Check {
                name: format!("{} RC QPs aggregate / one QP (64 KiB Write)", s.qps),
                value: v,
                target: 0.90,
                op: ">=",
                pass: v >= 0.90,
            });
        }
        self.checks = c;
    }

    /// perftest-style tables.
    pub fn print(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.bw.is_empty() && self.lat.is_none() {
            writeln!(out, "roce bench: {} -> peer", self.local_ip)?;
        } else {
            self.print_bw_lat(out)?;
        }
        if let Some(c) = &self.cm {
            c.print(out)?;
        }
        self.print_extras(out)
    }

    fn print_bw_lat(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "roce bench: RC, 1 QP, MTU {}, {:.2} s per point, {} -> peer",
            self.mtu, self.duration, self.local_ip
        )?;
        writeln!(out, "ratio = RoCE data packets/s / raw UDP datagrams/s at the same datagram size (UDP GSO send + GRO receive, as our datapath)")?;
        let mut last = None;
        for r in &self.bw {
            if last != Some(r.op) {
                writeln!(out)?;
                writeln!(out, " {} bandwidth", r.op.title())?;
                writeln!(
                    out,
                    " {:>9} {:>11} {:>12} {:>12} {:>9} {:>13} {:>7}",
                    "#bytes",
                    "#iterations",
                    "BW[Gb/sec]",
                    "MsgRate[Mpps]",
                    "dgram[B]",
                    "rawUDP[Gb/s]",
                    "ratio"
                )?;
                last = Some(r.op);
            }
            let (bg, ratio) = match (r.base, r.ratio()) {
                (Some(b), Some(x)) => (format!("{:.2}", b.gbit_per_s), format!("{:.2}", x)),
                _ => ("-".into(), "-".into()),
            };
            writeln!(
                out,
                " {:>9} {:>11} {:>12.3} {:>12.4} {:>9} {:>13} {:>7}",
                r.size,
                r.r.iterations,
                r.r.gbit_per_s(),
                r.r.msg_per_s() / 1e6,
                r.dgram,
                bg,
                ratio
            )?;
        }
        if let Some(l) = &self.lat {
            writeln!(out)?;
            writeln!(
                out,
                " RC Send/Recv latency, 64 B, round trip, both sides busy-polling"
            )?;
            writeln!(
                out,
                " {:>9} {:>11} {:>12} {:>12} {:>12} {:>20} {:>13}",
                "#bytes",
                "#iterations",
                "t_min[usec]",
                "t_p50[usec]",
                "t_p99[usec]",
                "rawUDP p50/p99[usec]",
                "ratio p50/p99"
            )?;
            let (b, ratio) = match l.base_us() {
                Some((b50, b99)) => (
                    format!("{b50:.1}/{b99:.1}"),
                    format!(
                        "{:.2}/{:.2}",
                        l.r.p50_us / b50.max(1e-3),
                        l.r.p99_us / b99.max(1e-3)
                    ),
                ),
                None => ("-".into(), "-".into()),
            };
            writeln!(
                out,
                " {:>9} {:>11} {:>12.1} {:>12.1} {:>12.1} {:>20} {:>13}",
                64, l.r.iterations, l.r.min_us, l.r.p50_us, l.r.p99_us, b, ratio
            )?;
            if let (Some((a50, a99)), Some((b50, b99))) = (l.acked_us(), l.base_us()) {
                writeln!(
                    out,
                    " raw UDP ping-pong carrying RC's ACK (reply + 20-byte ACK in one GSO send): p50/p99 {a50:.1}/{a99:.1} us = {:.2}/{:.2} x the plain one; RoCE / this {:.2}/{:.2}",
                    a50 / b50.max(1e-3),
                    a99 / b99.max(1e-3),
                    l.r.p50_us / a50.max(1e-3),
                    l.r.p99_us / a99.max(1e-3),
                )?;
            }
        }
        Ok(())
    }

    fn print_extras(&self, out: &mut dyn Write) -> io::Result<()> {
        if let Some(s) = &self.scale {
            writeln!(out)?;
            writeln!(out, " 64 KiB RC Write: lossless {:.3} Gb/s; 1% loss ({} -> {}) {}; {} QPs {:.3} Gb/s; engine memory {} B per QP", s.lossless.gbit_per_s(), s.lossy_ips.0, s.lossy_ips.1, s.lossy.map(|l| format!("{:.3} Gb/s", l.gbit_per_s())).unwrap_or_else(|| "n/a".into()), s.qps, s.many.gbit_per_s(), s.bytes_per_qp)?;
        }
        if !self.loss.is_empty() {
            writeln!(out)?;
            let l = &self.loss[0];
            writeln!(
                out,
                " {} MiB transfers, lossless ({} -> peer) and with {:.2}% of every datagram dropped ({} -> {}), QP timeout {} = {:.1} ms",
                super::measure::LOSS_MSG >> 20,
                self.local_ip,
                l.loss * 100.0,
                l.lossy_ips.0,
                l.lossy_ips.1,
                l.qp_timeout,
                4.096e-3 * f64::from(1u32 << l.qp_timeout)
            )?;
            writeln!(
                out,
                " {:<8} {:>14} {:>14} {:>7} {:>12} {:>12} {:>9}",
                "op",
                "lossless Gb/s",
                "lossy Gb/s",
                "ratio",
                "retx clean",
                "retx lossy",
                "timeouts"
            )?;
            for l in &self.loss {
                writeln!(
                    out,
                    " {:<8} {:>14.3} {:>14.3} {:>7.2} {:>11.1}% {:>11.1}% {:>9}",
                    l.op.title(),
                    l.lossless.gbit_per_s(),
                    l.lossy.gbit_per_s(),
                    l.lossy.gbit_per_s() / l.lossless.gbit_per_s().max(1e-9),
                    l.lossless_retransmitted * 100.0,
                    l.lossy_retransmitted * 100.0,
                    l.retry_timeouts
                )?;
            }
            writeln!(out, " retx: share of the data packets sent that were retransmissions (sent beyond what the completed messages needed); timeouts: local ACK timer expiries of the lossy requester")?;
        }
        if let Some(p) = &self.perftest {
            crate::perfbench::print(p, out);
            let (lat, bw) = self.perftest_consistency();
            let f = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.2}"));
            writeln!(
                out,
                "  consistency with roce bench: ib_send_lat RTT / RC Send/Recv p50 {}, ib_write_bw / RC Write 64 KiB {} (target within 20%)",
                f(lat),
                f(bw)
            )?;
        }
        if let Some(e) = &self.perftest_error {
            writeln!(out)?;
            writeln!(out, " perftest: not run: {e}")?;
        }
        if !self.checks.is_empty() {
            writeln!(out)?;
            writeln!(
                out,
                " issue-6 targets (information: the machine is shared and noisy)"
            )?;
            for c in &self.checks {
                writeln!(
                    out,
                    " {:<4} {:<72} {:>7.2} {} {:.2}",
                    if c.pass { "ok" } else { "MISS" },
                    c.name,
                    c.value,
                    c.op,
                    c.target
                )?;
            }
        }
        if let Some(f) = self.floor_64k {
            let vs = |op: Op| {
                self.row(op, 65536)
                    .map(|r| format!("{:.2}", r.over(f)))
                    .unwrap_or_else(|| "-".into())
            };
            let plain = self
                .row(Op::Write, 65536)
                .and_then(|r| r.base)
                .map(|b| {
                    format!(
                        " = {:.2} of plain GSO+GRO",
                        f.datagrams_per_s / b.datagrams_per_s.max(1.0)
                    )
                })
                .unwrap_or_default();
            writeln!(
                out,
                " (information, no target) raw UDP GSO+GRO plus one payload copy and the ICRC per packet on each side, {} B datagrams: {:.2} Gb/s{plain}; RC Write / Read / Send 64 KiB against it: {} / {} / {}",
                f.datagram_size,
                f.gbit_per_s,
                vs(Op::Write),
                vs(Op::Read),
                vs(Op::Send)
            )?;
        }
        Ok(())
    }

    /// One JSON object.
    pub fn to_json(&self) -> String {
        let bw: Vec<_> = self
            .bw
            .iter()
            .map(|r| {
                json!({
                    "test": r.op,
                    "size": r.size,
                    "iterations": r.r.iterations,
                    "seconds": r.r.seconds,
                    "gbit_per_s": r.r.gbit_per_s(),
                    "msg_per_s": r.r.msg_per_s(),
                    "packets_per_msg": r.pkts,
                    "datagram_size": r.dgram,
                    "baseline": r.base,
                    "ratio": r.ratio(),
                })
            })
            .collect();
        let lat = self.lat.map(|l| {
            json!({
                "size": 64,
                "iterations": l.r.iterations,
                "min_us": l.r.min_us,
                "p50_us": l.r.p50_us,
                "p99_us": l.r.p99_us,
                "baseline": l.base_us().map(|(a, b)| json!({"technique": "udp_pingpong_busy_poll", "p50_us": a, "p99_us": b})),
                "ratio_p50": l.base_us().map(|(a, _)| l.r.p50_us / a.max(1e-3)),
                "ratio_p99": l.base_us().map(|(_, b)| l.r.p99_us / b.max(1e-3)),
                "baseline_with_ack": l.acked_us().map(|(a, b)| json!({"technique": "udp_pingpong_busy_poll_gso_reply_plus_20_byte_ack", "p50_us": a, "p99_us": b})),
            })
        });
        let scale = self.scale.as_ref().map(|s| {
            json!({
                "lossless_gbit_per_s": s.lossless.gbit_per_s(),
                "loss_1pct_gbit_per_s": s.lossy.map(|l| l.gbit_per_s()),
                "loss_1pct_error": s.lossy_error,
                "loss_qp_timeout": super::measure::LOSSY_QP_TIMEOUT,
                "qps": s.qps,
                "qps_gbit_per_s": s.many.gbit_per_s(),
                "engine_bytes_per_qp": s.bytes_per_qp,
            })
        });
        json!({
            "tool": "roce bench",
            "transport": "RC",
            "mtu": self.mtu,
            "duration_s": self.duration,
            "local_ip": self.local_ip.to_string(),
            "ratio": "RoCE data packets/s / raw UDP datagrams/s at the same datagram size",
            "bandwidth": bw,
            "latency": lat,
            "mmsg_baseline_64k": self.mmsg_64k,
            "mmsg_baseline_64b": self.mmsg_64b,
            "gso_gro_copy_icrc_baseline_64k": self.floor_64k,
            "scale": scale,
            "loss": self.loss.iter().map(|l| json!({
                "op": l.op.title(),
                "size": super::measure::LOSS_MSG,
                "loss": l.loss,
                "qp_timeout": l.qp_timeout,
                "lossless_gbit_per_s": l.lossless.gbit_per_s(),
                "lossy_gbit_per_s": l.lossy.gbit_per_s(),
                "lossless_retransmitted_share": l.lossless_retransmitted,
                "lossy_retransmitted_share": l.lossy_retransmitted,
                "lossy_retry_timeouts": l.retry_timeouts,
            })).collect::<Vec<_>>(),
            "perftest": self.perftest.as_ref().map(|p| {
                let (lat, bw) = self.perftest_consistency();
                json!({
                    "figures": p,
                    "send_lat_ratio_vs_udp": p.lat_ratio(),
                    "write_bw_ratio_vs_udp_mmsg": p.bw_ratio_mmsg(),
                    "write_bw_ratio_vs_udp_gso": p.bw_ratio_gso(),
                    "send_lat_rtt_over_bench_p50": lat,
                    "write_bw_over_bench_write_64k": bw,
                })
            }),
            "cm": self.cm.as_ref().map(|c| c.json()),
            "perftest_error": self.perftest_error,
            "checks": self.checks,
        })
        .to_string()
    }
}
