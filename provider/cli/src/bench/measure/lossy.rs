//! `roce bench --loss P`: RC Write and Read of [`LOSS_MSG`] bytes with `P` of the datagrams of
//! both devices dropped (a second pair of devices on the next two addresses), next to the same
//! transfer without loss in the same run: goodput, and the share of the data packets that were
//! retransmissions.

use super::*;
use crate::bench::report::LossRow;

/// Message size of the loss points: 4 MiB, a READ response far longer than one local ACK
/// timeout on a slow path, where re-requesting a READ whose response is still arriving makes
/// the retransmissions pile up.
pub const LOSS_MSG: usize = 4 << 20;

/// Engine counters of both devices, for the packets a point sent.
fn snap(
    a: &Side,
    b: &Side,
) -> (
    roce_provider::verbs::Counters,
    roce_provider::verbs::Counters,
) {
    (a.ctx.counters(), b.ctx.counters())
}

/// One point: `op` of [`LOSS_MSG`] bytes for `dur`; the data packets it sent and the local ACK
/// timeouts of the requester.
fn point(
    a: &Side,
    passive: &mut LocalPassive,
    op: Op,
    dur: Duration,
) -> Result<(BwResult, u64, u64), String> {
    let (a0, b0) = snap(a, &passive.side);
    let r = run_bw(a, passive, op, LOSS_MSG, dur)?;
    let (a1, b1) = snap(a, &passive.side);
    // The data packets leave the requester for a Write and the responder for a Read; neither
    // sends anything else but a few ACKs / READ requests, which are not counted as data.
    let sent = match op {
        Op::Read => b1.sent_pkts - b0.sent_pkts,
        _ => a1.sent_pkts - a0.sent_pkts,
    };
    Ok((r, sent, a1.retry_timeouts - a0.retry_timeouts))
}

/// Retransmitted share of the data packets: those beyond what the completed messages needed.
fn retransmitted(r: &BwResult, sent: u64, mtu: Mtu) -> f64 {
    let needed = r.iterations * packets_per_msg(LOSS_MSG, mtu);
    if sent == 0 {
        return 0.0;
    }
    (sent.saturating_sub(needed)) as f64 / sent as f64
}

/// Write and Read at [`LOSS_MSG`] on the main pair (lossless) and on a second pair dropping
/// `loss` of every device's datagrams, alternately.
pub(super) fn loss_points(
    ips: (IpAddr, IpAddr),
    plan: &Plan,
    loss: f64,
    a: &Side,
    passive: &mut LocalPassive,
) -> Result<Vec<LossRow>, String> {
    let (la, lb) = (next_ip(ips.0, 2), next_ip(ips.1, 2));
    let mut a2 = Side::open(la, plan.mtu, LOSS_MSG, loss)?;
    let mut b2 = Side::open(lb, plan.mtu, LOSS_MSG, loss)?;
    a2.timeout = LOSSY_QP_TIMEOUT;
    b2.timeout = LOSSY_QP_TIMEOUT;
    let mut p2 = LocalPassive {
        side: b2,
        running: None,
    };
    // a 4 MiB message takes a while; at least a few per point, lossy ones longer
    let dur = plan.duration.max(Duration::from_millis(500));
    let mut rows = Vec::new();
    for op in [Op::Write, Op::Read] {
        let (clean, sent, _) = point(a, passive, op, dur)?;
        let (lossy, lsent, timeouts) = point(&a2, &mut p2, op, dur * 2)?;
        rows.push(LossRow {
            op,
            loss,
            lossy_ips: (la, lb),
            lossless: clean,
            lossless_retransmitted: retransmitted(&clean, sent, plan.mtu),
            lossy,
            lossy_retransmitted: retransmitted(&lossy, lsent, plan.mtu),
            retry_timeouts: timeouts,
            qp_timeout: LOSSY_QP_TIMEOUT,
        });
    }
    Ok(rows)
}

/// `ip` with `k` added to its last IPv4 octet (IPv6 unchanged).
pub(super) fn next_ip(ip: IpAddr, k: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v) => {
            let o = v.octets();
            IpAddr::from([o[0], o[1], o[2], o[3].wrapping_add(k)])
        }
        v6 => v6,
    }
}
