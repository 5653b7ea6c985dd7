#!/usr/bin/env bash
# Smoke test of the emulator as a peer of kernel rxe: guest a (198.18.0.2, kernel rxe) and the
# host-peer namespace (198.18.0.10, unmodified rdma-core tools through `roce run`), each tool
# once with the emulator as client and once as server, without loss and with 5% loss toward
# each side; bridge capture checked by icrc_check.py and `roce decode`; rxe-drops in the guest.
#
#   emu-smoke.sh [--roce PATH] [--mtu 1500|9000] [--pcap DEST] [--keep]
#
# Ends with "N passed, N failed"; exit 0 only if all passed. A first step toward issue #5.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib/common.sh"
L=$HERE/lab.sh

ROCE="" MTU=1500 PCAP_DEST="" KEEP=0
while [ $# -gt 0 ]; do
  case $1 in
    --roce) ROCE=$2; shift 2 ;;
    --mtu) MTU=$2; shift 2 ;;
    --pcap) PCAP_DEST=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) die "unknown argument $1" ;;
  esac
done
need_root
for r in "$ROCE" "$REPO_DIR/target/release/roce" "$REPO_DIR/target/debug/roce"; do
  [ -n "$r" ] && [ -x "$r" ] && { ROCE=$r; break; }
done
[ -x "$ROCE" ] || die "no roce binary (build it: cargo build --release, or pass --roce)"
GUEST_IP=198.18.0.2 EMU_IP=198.18.0.10
OUT=$LAB_HOME/emu-smoke-$(date +%Y%m%d-%H%M%S); mkdir -p "$OUT"
ROWS=() PASSED=0 FAILED=0 T_ALL=$(now_ms)
row() { ROWS+=("$(printf '%-44s %-5s %-30s %6ss' "$1" "$2" "$3" "$4")")
        if [ "$2" = pass ]; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi; }

"$L" prepare
ROCE_LAB=roce-lab-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
export ROCE_LAB
cleanup() { [ "$KEEP" = 1 ] || "$L" down >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM
"$L" up --mtu "$MTU" a=$GUEST_IP >/dev/null
HNS=$("$L" hostjoin --ip $EMU_IP 2>/dev/null)
IBMTU=$("$L" run a "ibv_devinfo -d rxe0" | awk '/active_mtu/{print $2}')
"$L" capture start

emu() { timeout "$1" "$L" host "$ROCE" run --ip $EMU_IP --mtu "$IBMTU" -- "${@:2}"; }
emu_listening() { local i; for i in $(seq 150); do
  ip netns exec "$HNS" ss -ltn | grep -q ':18515 ' && return 0; sleep 0.1; done; return 1; }
figure() { grep -hE 'usec/iter|^ +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+' "$1" | tail -1 |
           awk '/usec/{print $(NF-1) " us/iter"; next} {print $4 " MB/s avg"}'; }

# run LABEL DIRECTION CMD: DIRECTION emu-client (rxe server in the guest) or emu-server.
run() {
  local label=$1 dir=$2 cmd=$3 f=$OUT/${1//[ ,\/>]/_} t0 rc_c=0 rc_s=0 id pid
  t0=$(now_ms)
  if [ "$dir" = emu-client ]; then
    id=$("$L" run --bg --timeout 90 a "$cmd")
    "$L" run a 'until ss -ltn | grep -q ":18515 "; do sleep 0.1; done' >/dev/null
    # shellcheck disable=SC2086
    emu 90 $cmd $GUEST_IP >"$f.client" 2>&1 || rc_c=$?
    "$L" wait a "$id" 30 >"$f.server" 2>&1 || rc_s=$?
    [ "$rc_s" != 124 ] || "$L" run a "pkill -9 ${cmd%% *}" >/dev/null 2>&1 || true
  else
    # shellcheck disable=SC2086
    emu 90 $cmd >"$f.server" 2>&1 & pid=$!
    emu_listening || rc_s=listen
    "$L" run --timeout 90 a "$cmd $EMU_IP" >"$f.client" 2>&1 || rc_c=$?
    wait "$pid" || rc_s=$?
  fi
  if [ "$rc_c" = 0 ] && [ "$rc_s" = 0 ]; then
    row "$label" pass "$(figure "$f.client")" "$(secs_since "$t0")"
  else
    row "$label" fail "client rc $rc_c, server rc $rc_s" "$(secs_since "$t0")"
  fi
}

# GID index 1 is the IPv4 RoCEv2 GID on both sides; the emulator names its device rxe0 too.
NAMES=(rc_pingpong "rc_pingpong 8K" write_bw read_bw send_bw)
TOOLS=("ibv_rc_pingpong -g 1 -c -n 100" "ibv_rc_pingpong -g 1 -c -s 8192 -n 50"
       "ib_write_bw -d rxe0 -x 1 -s 16384 -n 100" "ib_read_bw -d rxe0 -x 1 -s 16384 -n 100"
       "ib_send_bw -d rxe0 -x 1 -s 16384 -n 100")
for loss in none a host; do
  [ "$loss" = none ] || "$L" loss "$loss" 5 >/dev/null
  for dir in emu-client emu-server; do
    for i in "${!TOOLS[@]}"; do
      run "$dir ${NAMES[$i]}, loss->$loss" "$dir" "${TOOLS[$i]}"
    done
  done
  [ "$loss" = none ] || "$L" loss "$loss" 0 >/dev/null
done

PCAP=$("$L" capture stop ${PCAP_DEST:+"$PCAP_DEST"} 2>/dev/null)
"$L" run a rxe-drops >"$OUT/drops.txt" 2>&1 && r=pass || r=fail
row "guest rxe-drops" "$r" "$(cat "$OUT/drops.txt")" "-"
python3 "$HERE/icrc_check.py" "$PCAP" >"$OUT/icrc.txt" 2>&1 && r=pass || r=fail
row "capture icrc_check.py" "$r" "$(grep -o '[0-9]* ICRC errors' "$OUT/icrc.txt")" "-"
"$ROCE" decode "$PCAP" >"$OUT/decode.txt" 2>&1 && r=pass || r=fail
row "capture roce decode" "$r" "$(grep -m1 -o 'invalid: [0-9]*' "$OUT/decode.txt")" "-"

echo
echo "== emulator ($ROCE) <-> kernel rxe, netdev MTU $MTU (RoCE MTU $IBMTU), $(date -u '+%Y-%m-%d %H:%M UTC')"
printf '%s\n' "${ROWS[@]}"
[ -n "$PCAP_DEST" ] || PCAP="$PCAP (removed with the lab; --pcap DEST keeps it)"
echo "capture $PCAP; total $(secs_since "$T_ALL") s; outputs in $OUT"
echo "stage-result: $PASSED passed, $FAILED failed"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
