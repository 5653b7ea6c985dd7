#!/usr/bin/env bash
# Validate the interop lab kernel rxe <-> kernel rxe: two guests (a = 198.18.0.2 server,
# b = 198.18.0.3 client), bridge capture, ibv_rc_pingpong + perftest, 5% loss toward each
# side in turn, rxe counters, ICRC check of the capture. Prints a table and timings.
#
#   selftest.sh [--pcap DEST.pcap] [--mtu 1500|9000] [--no-loss] [--keep]
#
# Exit status 0 when every step passed. Ends with a "N passed, N failed" line.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib/common.sh"
L=$HERE/lab.sh

PCAP_DEST="" MTU=1500 LOSS=1 KEEP=0
while [ $# -gt 0 ]; do
  case $1 in
    --pcap) PCAP_DEST=$2; shift 2 ;;
    --mtu) MTU=$2; shift 2 ;;
    --no-loss) LOSS=0; shift ;;
    --keep) KEEP=1; shift ;;
    *) die "unknown argument $1" ;;
  esac
done
need_root

T_ALL=$(now_ms)
OUT=$LAB_HOME/selftest-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
ROWS=() TIMES=() PASSED=0 FAILED=0
A=198.18.0.2 B=198.18.0.3

row()  { ROWS+=("$(printf '%-34s %-5s %-32s %6ss' "$1" "$2" "$3" "$4")")
         if [ "$2" = pass ]; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi; }
timed() { TIMES+=("$(printf '%-44s %7ss' "$1" "$2")"); }

# ---- prepare -------------------------------------------------------------------------------
cold=cached; [ -f "$CACHE_DIR/current.env" ] || cold=cold
t0=$(now_ms)
"$L" prepare
timed "prepare ($cold)" "$(secs_since "$t0")"

# ---- up ------------------------------------------------------------------------------------
ROCE_LAB=roce-lab-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
export ROCE_LAB
cleanup() {
  if [ "$KEEP" = 1 ]; then log "keeping lab $ROCE_LAB (lab.sh down to remove it)"
  else "$L" down >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
t0=$(now_ms)
"$L" up --mtu "$MTU" a=$A b=$B >/dev/null
timed "boot 2 guests in parallel ($("$L" accel), wall)" "$(secs_since "$t0")"
for g in a b; do
  timed "  guest $g uptime at rxe0 ready" \
    "$(sed -n 's/^uptime=//p' "$RUN_DIR/$ROCE_LAB/guests/$g/share/ready")"
done

# The RoCEv2 GID holding the guest's IPv4 address (index 1 on rxe; checked, not assumed).
gid_index() {
  "$L" run "$1" "ibv_devinfo -v -d rxe0" |
    awk -v want="::ffff:$2, RoCE v2" 'index($0, want) && match($0, /GID\[ *[0-9]+\]/) {
      s = substr($0, RSTART, RLENGTH); gsub(/[^0-9]/, "", s); print s; exit }'
}
GA=$(gid_index a $A); GB=$(gid_index b $B)
[ -n "$GA" ] && [ "$GA" = "$GB" ] || die "no common IPv4 RoCEv2 GID index (a: '$GA', b: '$GB')"
G=$GA
ACTIVE_MTU=$("$L" run a "ibv_devinfo -d rxe0" | awk '/active_mtu/{print $2}')
log "IPv4 RoCEv2 GID index $G, active_mtu $ACTIVE_MTU"

"$L" capture start

# ---- tool runs (lib/pair.sh: server on a, client on b) -------------------------------------
. "$HERE/lib/pair.sh"

PP="ibv_rc_pingpong -d rxe0 -g $G -c"
PT="-d rxe0 -x $G"
pair "ibv_rc_pingpong -n 500"       120 "$PP -n 500"
pair "ibv_rc_pingpong -s 8192 -n 200" 120 "$PP -s 8192 -n 200"
pair "ib_write_bw -s 65536 -n 300"  180 "ib_write_bw $PT -s 65536 -n 300"
pair "ib_read_bw -s 65536 -n 300"   180 "ib_read_bw $PT -s 65536 -n 300"
pair "ib_send_bw -s 65536 -n 300"   180 "ib_send_bw $PT -s 65536 -n 300"

if [ "$LOSS" = 1 ]; then
  for side in a b; do
    "$L" loss "$side" 5 >/dev/null
    pair "5% loss->$side ibv_rc_pingpong"    180 "$PP -n 200"
    pair "5% loss->$side ib_write_bw 16K"    240 "ib_write_bw $PT -s 16384 -n 200"
    pair "5% loss->$side ib_read_bw 16K"     240 "ib_read_bw $PT -s 16384 -n 200"
    "$L" loss show | sed -n 's/.*packets \([0-9]*\) .*comment "\(.*\)"/  \2: \1 packets/p' \
      >"$OUT/loss-$side.txt"
    "$L" loss "$side" 0 >/dev/null
  done
fi

# ---- counters and capture ------------------------------------------------------------------
t0=$(now_ms)
PCAP=$("$L" capture stop ${PCAP_DEST:+"$PCAP_DEST"} 2>/dev/null)
for g in a b; do
  "$L" run "$g" "rdma statistic show link rxe0/1" >"$OUT/stat-$g.txt" 2>&1 || true
  "$L" run "$g" "dmesg | grep -iE 'rxe|icrc|rdma' | tail -n 20" >"$OUT/dmesg-$g.txt" 2>&1 || true
  # 6.1 rxe counts no ICRC/header drops; rxe-drops (armed at boot) traces them.
  if "$L" run "$g" rxe-drops >"$OUT/drops-$g.txt" 2>&1; then r=pass; else r=fail; fi
  row "guest $g rxe drops (whole run)" "$r" "$(cat "$OUT/drops-$g.txt")" "-"
done
if python3 "$HERE/icrc_check.py" "$PCAP" >"$OUT/icrc.txt" 2>&1; then
  row "capture ICRC check" pass "$(grep -o '[0-9]* RoCEv2 packets' "$OUT/icrc.txt")" "$(secs_since "$t0")"
else
  row "capture ICRC check" fail "$(cat "$OUT/icrc.txt")" "$(secs_since "$t0")"
fi
ROCE=""
for r in "$REPO_DIR/target/release/roce" "$REPO_DIR/target/debug/roce"; do
  [ -x "$r" ] && "$r" decode --help >/dev/null 2>&1 && { ROCE=$r; break; }
done
if [ -n "$ROCE" ]; then
  t0=$(now_ms)
  "$ROCE" decode "$PCAP" >"$OUT/roce-decode.txt" 2>&1 && rd=pass || rd=fail
  row "roce decode" "$rd" "$(grep -m1 -o 'ICRC valid: .*' "$OUT/roce-decode.txt" | cut -c1-32)" "$(secs_since "$t0")"
fi

# ---- host-peer path: a namespace on the bridge sends hand-built RoCEv2 to guest a ----------
t0=$(now_ms)
"$L" hostjoin --ip 198.18.0.10 >/dev/null
before=$("$L" run a "rdma statistic show link rxe0/1" | sed -n 's/.* rdma_recvs \([0-9]*\).*/\1/p')
"$L" host python3 "$HERE/peer_probe.py" --dst $A --good 4 --bad 0 >/dev/null
sleep 1
after=$("$L" run a "rdma statistic show link rxe0/1" | sed -n 's/.* rdma_recvs \([0-9]*\).*/\1/p')
if [ "$((after - before))" = 4 ] && "$L" run a rxe-drops >/dev/null; then r=pass; else r=fail; fi
row "host peer -> a: 4 UD to QP1" "$r" "rdma_recvs +$((after - before)), no drops" "$(secs_since "$t0")"

# ---- report --------------------------------------------------------------------------------
timed "total" "$(secs_since "$T_ALL")"
echo
echo "== interop lab selftest: kernel rxe <-> kernel rxe, netdev MTU $MTU (RoCE MTU $ACTIVE_MTU), $(date -u '+%Y-%m-%d %H:%M UTC')"
printf '%-34s %-5s %-32s %7s\n' step result figures time
printf '%s\n' "${ROWS[@]}"
if [ "$LOSS" = 1 ]; then
  echo "-- nftables counters (RoCEv2 frames toward the side / dropped)"
  for side in a b; do echo " toward $side:"; cat "$OUT/loss-$side.txt"; done
fi
echo "-- rdma statistic"
for g in a b; do echo " $g: $(cat "$OUT/stat-$g.txt")"; done
echo "-- guest kernel log lines about rxe/icrc"
for g in a b; do sed "s/^/ $g: /" "$OUT/dmesg-$g.txt"; done
echo "-- capture: $PCAP ($(du -h "$PCAP" | cut -f1))${PCAP_DEST:+ kept}${PCAP_DEST:- removed with the lab; --pcap DEST keeps it}"
echo "   $(cat "$OUT/icrc.txt")"
[ -n "$ROCE" ] && { echo "-- roce decode summary ($ROCE)"; sed -n '/^== /,$p' "$OUT/roce-decode.txt"; }
[ -n "$ROCE" ] || echo "-- roce decode: no target/{release,debug}/roce with a decode subcommand yet"
echo "-- timings"
printf '%s\n' "${TIMES[@]}"
echo "-- outputs in $OUT"
echo "stage-result: $PASSED passed, $FAILED failed"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
