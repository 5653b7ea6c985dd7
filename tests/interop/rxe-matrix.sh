#!/usr/bin/env bash
# Baseline of the issue #5 tool list, kernel rxe <-> kernel rxe (server on guest a, client on
# guest b), so the emulator runs later have a reference for what passes and how long it takes.
#
#   rxe-matrix.sh [--mtu 1500|9000] [--loss a|b PERCENT] [--reuse]
#
# --reuse runs in the lab that is already up ($ROCE_LAB or the last one) instead of booting one.
# Not covered: write/send with immediate (perftest 4.5 in Debian 12 has no option for them).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib/common.sh"
. "$HERE/lib/pair.sh"
L=$HERE/lab.sh

MTU=1500 LOSS_SIDE="" LOSS_PCT=0 REUSE=0
while [ $# -gt 0 ]; do
  case $1 in
    --mtu) MTU=$2; shift 2 ;;
    --loss) LOSS_SIDE=$2 LOSS_PCT=$3; shift 3 ;;
    --reuse) REUSE=1; shift ;;
    *) die "unknown argument $1" ;;
  esac
done
need_root
OUT=$LAB_HOME/matrix-$(date +%Y%m%d-%H%M%S); mkdir -p "$OUT"
ROWS=() PASSED=0 FAILED=0 SKIPPED=0 T_ALL=$(now_ms)
row() { ROWS+=("$(printf '%-26s %-5s %-34s %6ss' "$1" "$2" "$3" "$4")")
        case $2 in pass) PASSED=$((PASSED + 1)) ;; skip) SKIPPED=$((SKIPPED + 1)) ;;
                   *) FAILED=$((FAILED + 1)) ;; esac; }
# UC and UD never resend a lost message, so their pingpongs wait forever under loss.
reliable_only() {
  if [ "$LOSS_PCT" = 0 ]; then pair "$@"; else row "$1" skip "no retransmission in UC/UD" "-"; fi
}
timed() { :; }

if [ "$REUSE" = 0 ]; then
  "$L" prepare
  ROCE_LAB=roce-lab-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
  export ROCE_LAB
  trap '"$L" down >/dev/null 2>&1 || true' EXIT
  trap 'exit 130' INT TERM
  "$L" up --mtu "$MTU" a=198.18.0.2 b=198.18.0.3 >/dev/null
fi
[ "$LOSS_PCT" = 0 ] || "$L" loss "$LOSS_SIDE" "$LOSS_PCT" >/dev/null
MTU_INFO=$("$L" run a "ibv_devinfo -d rxe0" | awk '/active_mtu/{print $2}')

G=1                                  # rxe0 GID 1 = ::ffff:198.18.0.x, RoCE v2 (see selftest.sh)
PP="-d rxe0 -g $G -c"                # pingpong examples, with their buffer check
PT="-d rxe0 -x $G"                   # perftest
pair "ibv_rc_pingpong"           90 "ibv_rc_pingpong $PP -n 200"
pair "ibv_rc_pingpong -s 8192"   90 "ibv_rc_pingpong $PP -s 8192 -n 100"
pair "ibv_rc_pingpong -e"        90 "ibv_rc_pingpong $PP -e -n 200"
reliable_only "ibv_uc_pingpong"  90 "ibv_uc_pingpong $PP -n 200"
reliable_only "ibv_ud_pingpong"  90 "ibv_ud_pingpong $PP -s 512 -n 200"
pair "ibv_srq_pingpong"          90 "ibv_srq_pingpong $PP -n 200"
pair "ib_write_bw"               90 "ib_write_bw $PT -s 16384 -n 200"
pair "ib_read_bw"                90 "ib_read_bw $PT -s 16384 -n 200"
pair "ib_send_bw RC"             90 "ib_send_bw $PT -s 16384 -n 200"
reliable_only "ib_send_bw UD"    90 "ib_send_bw $PT -c UD -s 512 -n 200"
pair "ib_atomic_bw CMP_AND_SWAP" 90 "ib_atomic_bw $PT -A CMP_AND_SWAP -n 200"
pair "ib_atomic_bw FETCH_AND_ADD" 90 "ib_atomic_bw $PT -A FETCH_AND_ADD -n 200"
pair "ib_write_lat"              90 "ib_write_lat $PT -s 64 -n 200"
pair "ib_read_lat"               90 "ib_read_lat $PT -s 64 -n 200"
pair "ib_send_lat"               90 "ib_send_lat $PT -s 64 -n 200"
for g in a b; do
  "$L" run "$g" rxe-drops >"$OUT/drops-$g.txt" 2>&1 && r=pass || r=fail
  row "guest $g rxe-drops" "$r" "$(cat "$OUT/drops-$g.txt")" "-"
done
[ "$LOSS_PCT" = 0 ] || "$L" loss "$LOSS_SIDE" 0 >/dev/null

echo
echo "== rxe <-> rxe matrix: netdev MTU $MTU (RoCE MTU $MTU_INFO), loss ${LOSS_PCT}% toward ${LOSS_SIDE:-none}, $(date -u '+%Y-%m-%d %H:%M UTC')"
printf '%s\n' "${ROWS[@]}"
echo "total $(secs_since "$T_ALL") s; outputs in $OUT"
echo "stage-result: $PASSED passed, $FAILED failed"
echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" = 0 ]
