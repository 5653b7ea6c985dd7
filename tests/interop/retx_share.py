#!/usr/bin/env python3
"""Retransmissions of the emulator's requester, measured from a lab bridge capture (issue 23).

Reads `roce decode --json CAPTURE` (the project's decoder) and looks at the RC request packets
the emulator (--emu ADDRESS) sent and at the RDMA READ responses its peer sent back. The bridge
capture (br0) holds every frame before the lab's loss rule drops it, so a response "lost" on
its way to the emulator is still in the capture; how many the rule dropped is given with --lost
(the nft counter of `lab.sh loss`).

Figures (one line on stdout, for the matrix's figures column):
  all rows   request packets, and retransmitted ones: a request packet is retransmitted when
             its (destination, dest QPN, PSN) was already sent earlier in the capture; the
             retransmitted share is their fraction of all request packets. Other than READ:
             the retransmission episodes (a run of retransmitted packets on one QP), split by
             what started them: a NAK from the peer for that QP in the --burst-ms before, or
             nothing (the retransmit timer); of the timer's, how many are one packet (the
             engine's probe on a first expiry, emu README deviation 16).
  READ       READ requests: new ones (their first PSN was never covered by an earlier request
             of the QP) and re-requests (it was: a re-read from the first missing PSN or a
             duplicate of the same request); of the re-requests, those with the same PSN as an
             earlier request ("same PSN") and those sent while the peer was still sending READ
             responses on that QP ("early"). A requester whose retransmit timer is re-armed by
             every response (kernel rxe) re-requests only after the responses stop; a
             re-request while they still arrive makes the peer replay the rest of a response
             already in flight. Re-requests come in bursts (the re-read from the first missing
             PSN, then the later READs outstanding behind it, go-back-N): a burst is early when
             its first re-request followed a READ response on the QP by less than --quiet-ms
             (20 ms; the ACK timeout perftest sets is 67 ms) and that response's PSN was still
             inside the READ being re-requested (its original PSN range). A response beyond it
             (the next READ's) means the peer has finished that READ with packets missing, and
             the immediate re-request rxe's completer makes then (COMPST_ERROR_RETRY) is not
             early. Every re-request of an early burst is early; a re-request less than
             --burst-ms (5 ms) after the previous request of the QP belongs to its burst.
             Then the response packets: sent per PSN on average (duplication factor) and at
             most.
  guest      with --guest-before/--guest-after (snapshots of the peer's counters before and
             after the run: `rdma statistic show link`, "eth0_rx_dropped N"-style lines from
             sysfs, /proc/net/softnet_stat, and "tap_tx_dropped N" of the lab's tap toward the
             guest): how many packets the peer's rxe received of those the emulator sent toward
             it, rxe's PSN sequence NAKs (out_of_seq_request) and duplicates (packets resent
             although rxe had them), and the drops on the way (tap queue, eth0, input
             backlog): where packets were lost at a slow peer.
Bounds (exit status 1 when one is exceeded, the reason on stdout):
  --max-share F              retransmitted share of request packets (write rows)
  --max-rereq-per-lost K     READ re-requests <= K x lost response packets + --rereq-slack
  --max-early N              READ re-requests sent while responses still arrived <= N
Exit status 2: the capture could not be decoded. --detail FILE writes a per-QP breakdown.
"""
import argparse
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict

PSN_MOD = 1 << 24
READ_REQUEST = 0x0C
READ_RESPONSES = (0x0D, 0x0E, 0x0F, 0x10)   # FIRST, MIDDLE, LAST, ONLY
RESPONDER_OPS = READ_RESPONSES + (0x11, 0x12)  # + ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE


def packets(roce, capture):
    """(time, src, dst, opcode, qpn, psn, dma_len, AETH syndrome) of every RC packet; raises on a
    decode error."""
    proc = subprocess.Popen([roce, "decode", "--json", capture], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1 << 20)
    errors = []
    for line in proc.stdout:
        # Cheap pre-filter: only packet records are parsed.
        if not line.startswith('{"kind":"packet"'):
            if '"kind":"error"' in line:
                errors.append(json.loads(line).get("error"))
            continue
        rec = json.loads(line)
        bth = rec.get("bth")
        if not bth or bth["opcode"] >> 5 != 0:      # RC only
            continue
        ext = rec.get("ext") or {}
        reth, aeth = ext.get("reth"), ext.get("aeth")
        yield (rec["time"], rec["src"], rec["dst"], bth["opcode"], bth["qpn"], bth["psn"],
               reth["dma_len"] if reth else None, aeth["syndrome"] if aeth else None)
    rc = proc.wait()
    if errors or rc == 2:
        raise RuntimeError("roce decode: %s" % (errors[0] if errors else proc.stderr.read().strip()))


def guest_counters(path):
    """rxe link counters, eth0 and tap counters and the backlog drops from a snapshot."""
    text = open(path).read()
    c = {}
    m = re.search(r"^link \S+ (.*)$", text, re.M)
    if m:
        toks = m.group(1).split()
        c.update((k, int(v)) for k, v in zip(toks[::2], toks[1::2]) if v.isdigit())
    c.update((k, int(v)) for k, v in re.findall(r"^((?:eth0|tap)_\w+) (\d+)$", text, re.M))
    rows = re.findall(r"^((?:[0-9a-f]{8} ){8,}[0-9a-f]{8})$", text, re.M)
    if rows:
        c["backlog_dropped"] = sum(int(r.split()[1], 16) for r in rows)
    return c


def pct(x):
    return "%.1f %%" % (100.0 * x)


def analyse(args):
    emu = args.emu
    sent = set()                # (dst, qpn, psn) of request packets the emulator sent
    req_pkts = resent = 0
    # READ requests per requester-side key (peer address, peer QPN)
    reads = defaultdict(lambda: {"base": None, "next": 0, "psns": set(), "new": 0, "rereq": 0,
                                 "same": 0, "early": 0, "gaps": [], "last_t": None,
                                 "burst_early": False, "ranges": []})
    # READ responses: (peer address, emulator QPN, PSN) -> times sent
    resp = Counter()
    last_resp = {}              # (peer address, emulator QPN) -> (time, PSN) of the last READ response
    # Which emulator QPN a peer QP answers to: learned from a response whose PSN is a request's.
    req_by_psn = {}             # (peer address, PSN) -> peer QPN of a READ request
    peer_to_emu = {}            # (peer address, peer QPN) -> emulator QPN
    # Retransmission episodes of other requests: which emulator QPN a peer QP ACKs to (learned
    # from ACK PSNs), the last NAK per (peer, emulator QPN), whether a QP's last packet was resent.
    owner = {}                  # (peer address, PSN) -> peer QPN of a (non-READ) request packet
    ack_to = {}                 # (peer address, peer QPN) -> emulator QPN
    last_nak = {}               # (peer address, emulator QPN) -> time
    was_resent = {}             # (peer address, peer QPN) -> the QP's last packet was resent
    episodes = Counter()        # "NAK" / "timer"
    ep_open = {}                # (peer address, peer QPN) -> [kind, packets] of its current episode
    ep_sizes = []               # [kind, packets] of every episode
    n_pkts = 0
    for t, src, dst, op, qpn, psn, dma_len, syndrome in packets(args.roce, args.capture):
        n_pkts += 1
        if src == emu and op not in RESPONDER_OPS:
            req_pkts += 1
            key = (dst, qpn, psn)
            dup = key in sent
            if dup:
                resent += 1
            else:
                sent.add(key)
            if op != READ_REQUEST:
                owner[(dst, psn)] = qpn
                if dup and not was_resent.get((dst, qpn)):
                    e = ack_to.get((dst, qpn))
                    nt = last_nak.get((dst, e)) if e is not None else None
                    kind = ("NAK" if nt is not None and (t - nt) * 1000.0 < args.burst_ms
                            else "timer")
                    episodes[kind] += 1
                    ep_open[(dst, qpn)] = [kind, 0]
                    ep_sizes.append(ep_open[(dst, qpn)])
                if dup and (dst, qpn) in ep_open:
                    ep_open[(dst, qpn)][1] += 1
                was_resent[(dst, qpn)] = dup
            if op == READ_REQUEST:
                q = reads[(dst, qpn)]
                if q["base"] is None:
                    q["base"] = psn
                u = (psn - q["base"]) % PSN_MOD
                npk = max(1, -(-(dma_len or 0) // args.pmtu))
                in_burst = q["last_t"] is not None and (t - q["last_t"]) * 1000.0 < args.burst_ms
                if u >= q["next"]:
                    q["new"] += 1
                    q["ranges"].append((u, u + npk - 1))
                    q["burst_early"] = in_burst and q["burst_early"]
                else:
                    q["rereq"] += 1
                    q["same"] += psn in q["psns"]
                    if not in_burst:
                        emu_qpn = peer_to_emu.get((dst, qpn))
                        last = last_resp.get((dst, emu_qpn)) if emu_qpn is not None else None
                        gap_ms = (t - last[0]) * 1000.0 if last else float("inf")
                        q["gaps"].append(gap_ms)
                        # The original READ this re-request belongs to, and whether the last
                        # response was still inside it.
                        end = next((e for s, e in reversed(q["ranges"]) if s <= u <= e), u)
                        inside = last is not None and (last[1] - q["base"]) % PSN_MOD <= end
                        q["burst_early"] = gap_ms < args.quiet_ms and inside
                    q["early"] += q["burst_early"]
                q["last_t"] = t
                q["psns"].add(psn)
                q["next"] = max(q["next"], u + npk)
                req_by_psn[(dst, psn)] = qpn
        elif dst == emu and op == 0x11:
            r = owner.get((src, psn))
            if r is not None:
                ack_to.setdefault((src, r), qpn)
            if syndrome is not None and syndrome >> 5 == 3:     # NAK
                last_nak[(src, qpn)] = t
        elif dst == emu and op in READ_RESPONSES:
            resp[(src, qpn, psn)] += 1
            last_resp[(src, qpn)] = (t, psn)
            if op in (0x0D, 0x10) and (src, psn) in req_by_psn:
                peer_to_emu.setdefault((src, req_by_psn[(src, psn)]), qpn)
    # A timer episode of one packet is the engine's probe (emu README, deviation 16).
    episodes["probe"] = sum(1 for k, n in ep_sizes if k == "timer" and n == 1)
    return n_pkts, req_pkts, resent, reads, resp, episodes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--roce", default="roce", help="the roce binary (for `roce decode --json`)")
    ap.add_argument("--emu", required=True, help="the emulator's IP address")
    ap.add_argument("--pmtu", type=int, required=True, help="RoCE path MTU (READ response size)")
    ap.add_argument("--lost", type=int, help="packets the loss rule dropped toward the emulator")
    ap.add_argument("--quiet-ms", type=float, default=20.0,
                    help="a re-request less than this after a READ response is 'early' (20)")
    ap.add_argument("--burst-ms", type=float, default=5.0,
                    help="requests closer than this to the previous one form a burst (5)")
    ap.add_argument("--max-share", type=float)
    ap.add_argument("--max-rereq-per-lost", type=float)
    ap.add_argument("--rereq-slack", type=int, default=2)
    ap.add_argument("--max-early", type=int)
    ap.add_argument("--detail", help="write a per-QP breakdown here")
    ap.add_argument("--guest-before", help="the peer guest's counters before the run")
    ap.add_argument("--guest-after", help="... and after it")
    args = ap.parse_args()
    try:
        n_pkts, req_pkts, resent, reads, resp, episodes = analyse(args)
    except (RuntimeError, OSError, ValueError, KeyError) as e:
        print("retx_share: %s" % e)
        return 2
    share = resent / req_pkts if req_pkts else 0.0
    fails = []
    parts = []
    r_new = sum(q["new"] for q in reads.values())
    if r_new:
        r_re = sum(q["rereq"] for q in reads.values())
        r_same = sum(q["same"] for q in reads.values())
        r_early = sum(q["early"] for q in reads.values())
        s = "READ req %d = %d new + %d re-req (%d same PSN, %d early)" % (
            r_new + r_re, r_new, r_re, r_same, r_early)
        if args.lost is not None:
            s += "; %d resp lost" % args.lost
            if args.lost:
                s += ", %.2f re-req/lost" % (r_re / args.lost)
        n_resp, n_psn = sum(resp.values()), len(resp)
        if n_psn:
            s += "; resp %d pkts, x%.2f per PSN (max %d)" % (n_resp, n_resp / n_psn,
                                                            max(resp.values()))
        parts.append(s)
        if args.max_rereq_per_lost is not None and args.lost is not None:
            bound = args.max_rereq_per_lost * args.lost + args.rereq_slack
            if r_re > bound:
                fails.append("%d re-requests > %g x %d lost + %d" % (
                    r_re, args.max_rereq_per_lost, args.lost, args.rereq_slack))
        if args.max_early is not None and r_early > args.max_early:
            fails.append("%d re-requests while responses still arrived > %d" % (
                r_early, args.max_early))
    else:
        parts.append("req pkts %d, %d resent (%s) in %d episodes (%d after a NAK, %d by the"
                     " timer, %d of them one-packet probes)"
                     % (req_pkts, resent, pct(share), episodes["NAK"] + episodes["timer"],
                        episodes["NAK"], episodes["timer"], episodes["probe"]))
    if args.guest_before and args.guest_after and not r_new:
        try:
            g0, g1 = guest_counters(args.guest_before), guest_counters(args.guest_after)
            d = {k: g1[k] - g0[k] for k in g1 if k in g0}
            drops = " + ".join("%s %d" % (n, d[k]) for n, k in (
                ("tap", "tap_tx_dropped"), ("eth0", "eth0_rx_dropped"),
                ("eth0 missed", "eth0_rx_missed_errors"), ("backlog", "backlog_dropped"))
                if d.get(k))
            parts.append("rxe rcvd %d of them (NAK seq %d, dup %d); dropped before rxe: %s"
                         % (d["rcvd_pkts"], d["out_of_seq_request"], d["duplicate_request"],
                            drops or "none counted"))
        except (OSError, KeyError) as e:
            parts.append("guest counters unreadable (%s)" % e)
    if args.max_share is not None and share > args.max_share:
        fails.append("retransmitted share %s > %s" % (pct(share), pct(args.max_share)))
    if req_pkts == 0:
        fails.append("no request packet from %s in the capture" % args.emu)
    print("; ".join(parts) + ("; BOUND EXCEEDED: " + ", ".join(fails) if fails else ""))
    if args.detail:
        with open(args.detail, "w") as f:
            f.write("capture %s: %d RC packets, %d request packets from %s, %d resent (%s)\n"
                    % (args.capture, n_pkts, req_pkts, args.emu, resent, pct(share)))
            for (dst, qpn), q in sorted(reads.items()):
                gaps = sorted(q["gaps"])
                med = gaps[len(gaps) // 2] if gaps else float("nan")
                f.write("READ to %s qpn %d: %d new, %d re-req in %d bursts, %d same PSN, %d early;"
                        " ms from the last response to a burst: min %.1f median %.1f\n"
                        % (dst, qpn, q["new"], q["rereq"], len(gaps), q["same"], q["early"],
                           gaps[0] if gaps else float("nan"), med))
            # PSNs by how often their READ response packet was sent: 1, 2, 3-4, 5-8, ...
            hist = Counter((n - 1).bit_length() for n in resp.values())
            f.write("READ response PSNs by times sent: %s\n" % ", ".join(
                "%s: %d" % (str(1 << b) if b < 2 else "%d-%d" % ((1 << (b - 1)) + 1, 1 << b), c)
                for b, c in sorted(hist.items())))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
