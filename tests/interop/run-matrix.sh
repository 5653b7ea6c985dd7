#!/usr/bin/env bash
# CI stage `interop` (issue #5): the emulator (`roce run` in the lab's host-peer namespace,
# 198.18.0.10) against kernel rdma_rxe in one qemu guest (198.18.0.2), every tool of the issue
# once with the emulator as server and rxe as client and once the other way round, at netdev
# MTU 1500 (RoCE MTU 1024) and 9000 (RoCE 4096), without loss and with 5 % loss toward each
# side in turn. Every run gets its own bridge capture, checked with `roce decode` (no invalid
# ICRC, nothing malformed), and the guest's `rxe-drops` (no ICRC drop); `rdma statistic` is kept.
# Then the issue-23 rows (block "retx", first MTU only): the emulator as the requester of large
# RDMA READs under 0.5 % loss toward it and of ib_write_bw -q 8 toward a guest held to 30 % of a
# CPU (a cgroup quota on its qemu), each failing when what retx_share.py measures from its
# capture (early READ re-requests, the share of retransmissions) exceeds the row's bound; the
# emulator runs these on a device of its own (`--no-shared`), every other row on the default
# shared device (remote traffic through the steering helper).
# And the memory-window rows (block "mw", first MTU only, issue 22): mw_probe.c with the window
# owner on one side and the accessor on the other, both ways (type 2 and type 1 windows bound by
# the owner, WRITE/READ through them, SEND with invalidate, the invalidated rkey refused, an
# access past a window's end judged by the owner's rules: rxe the region's bounds, we the window's).
#
#   run-matrix.sh [--mtus "1500 9000"] [--loss-mtus "1500 9000"] [--losses "none mw rxe emu retx"]
#                 [--only REGEX] [--bin DIR] [--publish] [--keep]
#
#   --loss-mtus   MTUs at which the lossy rows run (default both; UC/UD under loss only at the
#                 first of them)
#   --losses      which blocks: none (no loss), rxe (5 % toward the guest), emu (5 % toward us),
#                 retx (issue 23: retransmission bounds, at the first of --mtus), mw (issue 22:
#                 memory windows, at the first of --mtus; `--losses mw` runs only those two rows)
#   --only        run only tools whose label matches REGEX (debugging)
#   --bin DIR     use DIR/roce and DIR/lib/libibverbs.so.1 instead of building (e.g. a copy of
#                 an older build, to compare engines)
#   --publish     write the table to tests/interop/MATRIX.md (only there: the top-level README
#                 has a summary of it, kept by hand)
#   --keep        leave the last lab up
#
# UC and UD never retransmit, so under loss ibv_uc_pingpong, ibv_ud_pingpong and ib_send_bw -c UD
# either complete (no datagram of theirs was dropped) or wait forever. They run under loss with
# few iterations and a bounded time and are reported "n/a" (by design) — never as a pass. They
# fail only if a side exits with an error of its own (e.g. a data check), which would mean a
# partial or corrupted message was delivered.
# Kernel rxe treats retry_cnt 7 (ibv_*_pingpong) as "retry forever": when its peer already left,
# an rxe process can spin forever. A run where the rxe side is still busy 15 s after the emulator
# side passed is retried on a restarted guest (rows say "retry"); it counts as a pass if the
# retry passes. The emulator copies that rule (emu/README.md), so under loss toward the emulator
# the same thing happens on our side: the ACK of its last message is dropped, the peer has
# already exited (the pingpong tools have no closing handshake) and nothing will ever ACK the
# retransmissions. A run where the emulator side is still running 15 s after the rxe side passed,
# with its completer_retry_err counter non-zero (it is retransmitting), is retried. Either way at
# most four retries per row (rows say "retry"; each try's capture, decode and counters are kept
# as runs/*.hangN.*).
# Prints the table, writes it as markdown into the output directory, and ends with exactly one
# "stage-result: N passed, N failed" line. CI=true: a missing prerequisite is a failure.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib/common.sh"
L=$HERE/lab.sh

MTUS="1500 9000" LOSS_MTUS="1500 9000" LOSSES="none mw rxe emu retx" ONLY="" PUBLISH=0 KEEP=0 BIN=""
while [ $# -gt 0 ]; do
  case $1 in
    --mtus) MTUS=$2; shift 2 ;;
    --loss-mtus) LOSS_MTUS=$2; shift 2 ;;
    --losses) LOSSES=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --bin) BIN=$(cd "$2" && pwd) || exit 2; shift 2 ;;
    --publish) PUBLISH=1; shift ;;
    --keep) KEEP=1; shift ;;
    *) echo "usage: run-matrix.sh [--mtus LIST] [--loss-mtus LIST] [--losses LIST] [--only RE] [--bin DIR] [--publish] [--keep]" >&2
       exit 2 ;;
  esac
done
T_ALL=$(now_ms)

# ---- prerequisites -------------------------------------------------------------------------
# Missing → loud skip, or a failure under CI=true.
skip_or_fail() {
  echo "############################################################################"
  echo "## interop: PREREQUISITE MISSING: $*"
  if [ "${CI:-}" = true ]; then
    echo "## CI=true: this is a failure"
    echo "############################################################################"
    echo "stage-result: 0 passed, 1 failed"
    exit 1
  fi
  echo "## SKIPPING the interop matrix (set CI=true to make this a failure)"
  echo "############################################################################"
  echo "stage-result: 0 passed, 0 failed"
  exit 0
}
[ "$(id -u)" = 0 ] || skip_or_fail "must run as root (network namespaces, tap, qemu)"
[ -c /dev/net/tun ] || skip_or_fail "/dev/net/tun"
ip netns list >/dev/null 2>&1 || skip_or_fail "network namespaces (ip netns)"
command -v cargo >/dev/null || skip_or_fail "cargo"
command -v gcc >/dev/null || skip_or_fail "gcc"
[ -f /usr/include/infiniband/verbs.h ] || skip_or_fail "libibverbs-dev (infiniband/verbs.h)"
for t in ibv_rc_pingpong ib_write_bw; do
  command -v $t >/dev/null || skip_or_fail "$t on the host (ibverbs-utils, perftest)"
done

OUT=$LAB_HOME/interop-matrix-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT/runs" "$OUT/bin/lib" "$OUT/stat"
LOG=$OUT/log.txt
say() { printf '[matrix %(%H:%M:%S)T] %s\n' -1 "$*" | tee -a "$LOG" >&2; }

# ---- build ---------------------------------------------------------------------------------
# `roce run` puts the directory holding libibverbs.so.1 (target/release/, a symlink to
# deps/libroce_ibverbs.so) first in LD_LIBRARY_PATH. Both are built here and then copied into
# this run's directory, so another build in the shared target/ cannot swap them mid-run.
t0=$(now_ms)
if [ -n "$BIN" ]; then
  say "using the prebuilt roce + libibverbs.so.1 in $BIN (--bin)"
  cp "$BIN/roce" "$OUT/bin/roce" && cp "$BIN/lib/libibverbs.so.1" "$OUT/bin/lib/libibverbs.so.1" ||
    { echo "interop: --bin $BIN lacks roce or lib/libibverbs.so.1"; echo "stage-result: 0 passed, 1 failed"; exit 1; }
else
say "building roce + libibverbs.so.1 (release)"
if ! (cd "$REPO_DIR" && cargo build --release -q -p roce-cli -p roce-ibverbs) >"$OUT/build.txt" 2>&1; then
  tail -n 30 "$OUT/build.txt"
  echo "interop: cargo build failed"
  echo "stage-result: 0 passed, 1 failed"
  exit 1
fi
cp "$REPO_DIR/target/release/roce" "$OUT/bin/roce"
cp "$REPO_DIR/target/release/deps/libroce_ibverbs.so" "$OUT/bin/lib/libibverbs.so.1"
fi
ROCE=$OUT/bin/roce
IMM=$OUT/bin/imm_pingpong MWP=$OUT/bin/mw_probe
for c in "$IMM:imm_pingpong.c" "$MWP:mw_probe.c"; do
  if ! gcc -O2 -Wall -o "${c%%:*}" "$HERE/${c#*:}" -libverbs >"$OUT/gcc.txt" 2>&1; then
    cat "$OUT/gcc.txt"; echo "interop: ${c#*:} does not compile"
    echo "stage-result: 0 passed, 1 failed"; exit 1
  fi
done
# The C probes go into the guest's 9p share (the guest runs the host's binaries: both Debian 12).
probes_to_share() { cp "$IMM" "$SHARE/imm_pingpong" && cp "$MWP" "$SHARE/mw_probe"; }
T_BUILD=$(secs_since "$t0")
t0=$(now_ms)
if ! "$L" prepare >"$OUT/prepare.txt" 2>&1; then
  tail -n 30 "$OUT/prepare.txt"
  if [ "${CI:-}" = true ]; then echo "interop: lab.sh prepare failed"; echo "stage-result: 0 passed, 1 failed"; exit 1; fi
  skip_or_fail "lab.sh prepare failed (Debian archive reachable? qemu installable?) — see $OUT/prepare.txt"
fi
T_PREPARE=$(secs_since "$t0")

# ---- the lab -------------------------------------------------------------------------------
GUEST_IP=198.18.0.2 EMU_IP=198.18.0.10
SERVER_GRACE=15      # seconds one side may outlive its partner's successful exit
LABS_UP=()
cleanup() {
  local lab
  guest_unthrottle
  for lab in "${LABS_UP[@]}"; do
    [ "$KEEP" = 1 ] && [ "$lab" = "${LABS_UP[-1]}" ] && { say "keeping lab $lab"; continue; }
    ROCE_LAB=$lab "$L" down >/dev/null 2>&1 || true
  done
  LABS_UP=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

lab_up() {
  local mtu=$1 t0
  t0=$(now_ms)
  ROCE_LAB=roce-lab-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
  export ROCE_LAB
  LABS_UP+=("$ROCE_LAB")
  "$L" up --mtu "$mtu" a=$GUEST_IP >>"$OUT/lab.txt" 2>&1 || return 1
  HNS=$("$L" hostjoin --ip $EMU_IP 2>>"$OUT/lab.txt") || return 1
  SHARE=$RUN_DIR/$ROCE_LAB/guests/a/share
  IBMTU=$("$L" run a "ibv_devinfo -d rxe0" | awk '/active_mtu/{print $2}')
  GIDX=$("$L" run a "ibv_devinfo -v -d rxe0" |
    awk -v want="::ffff:$GUEST_IP, RoCE v2" 'index($0, want) && match($0, /GID\[ *[0-9]+\]/) {
      s = substr($0, RSTART, RLENGTH); gsub(/[^0-9]/, "", s); print s; exit }')
  [ -n "$IBMTU" ] && [ -n "$GIDX" ] || return 1
  GUEST_KERNEL=$(sed -n 's/^kernel=//p' "$SHARE/ready" | head -1)
  T_BOOT+=("MTU $mtu: $(secs_since "$t0") s")
  say "lab $ROCE_LAB up: netdev MTU $mtu, RoCE MTU $IBMTU, rxe GID index $GIDX"
}

# ---- one run ---------------------------------------------------------------------------------
# figures FILE: bandwidth / latency / per-iteration time from a tool's client output.
. "$HERE/lib/pair.sh"      # for figures()

ROWS=() MD_ROWS=() PASSED=0 FAILED=0 NA=0 RETRIES=0 FAILURES=()
# The text table's result column: "pass+retry" for any pass after a retry.
short_res() { case $1 in "pass ("*) echo "pass+retry" ;; *) echo "$1" ;; esac; }

# The emulator's own counters while it is still running (evidence before it is killed).
# The program's device only (`--dev rxe0`): the shared device's steering helper has an entry of
# its own (`steer`, with zero engine counters) that the checks below must not read; it goes to
# "$1.steerstat".
emu_stat() {
  { "$ROCE" stat --stat-dir "$OUT/stat" --ip $EMU_IP --dev rxe0 -a; ip netns exec "$HNS" ss -uanmp; udp_counters; } >"$1.emustat" 2>&1 || true
  "$ROCE" stat --stat-dir "$OUT/stat" --ip $EMU_IP --dev steer -a >"$1.steerstat" 2>&1 || true
}
udp_counters() { ip netns exec "$HNS" awk '/^Udp:/ && /[0-9]/ {print "InErrors=" $4, "RcvbufErrors=" $6}' /proc/net/snmp 2>/dev/null; }
# Kill a background emulator run: the tool is the child of `timeout` (ip netns exec and roce run
# exec), and SIGKILL to `timeout` alone would leave it running (and bound to UDP 4791).
emu_kill() { pkill -KILL -P "$1" 2>/dev/null; kill -KILL "$1" 2>/dev/null; wait "$1" 2>/dev/null; }
guest_done() { [ -f "$SHARE/out/$1.rc" ]; }
guest_rc() { cat "$SHARE/out/$1.rc" 2>/dev/null || echo "?"; }
guest_collect() { cat "$SHARE/out/$1.stdout" "$SHARE/out/$1.stderr" >"$2" 2>/dev/null || true; }
# "[x]yz" so that pkill's own command line (which holds the pattern) does not match it.
guest_kill() { "$L" run --timeout 15 a "pkill -9 -f '[${1:0:1}]${1:1}' ; true" >/dev/null 2>&1 || true; }
# Packets the loss rule toward the emulator (`lab.sh loss host P`) has dropped so far.
loss_dropped() {
  local n; n=$("$L" loss show 2>/dev/null | sed -n 's/.*counter packets \([0-9]*\) bytes.*comment "loss vh-host".*/\1/p' | head -1)
  echo "${n:-0}"
}
# Receive counters along the path to the guest's rxe, for the retransmission rows' figures: the
# lab's tap toward the guest (frames qemu did not take in time), the guest's eth0 and input
# backlog, rxe. (The guest's `ip` is busybox's: no -s.)
guest_net_cmd='rdma statistic show link rxe0/1; for s in rx_packets rx_dropped rx_missed_errors rx_fifo_errors; do echo "eth0_$s $(cat /sys/class/net/eth0/statistics/$s)"; done; cat /proc/net/softnet_stat'
net_snap() {
  "$L" run --timeout 30 a "$guest_net_cmd" >"$1" 2>&1 || true
  echo "tap_tx_dropped $(ip netns exec "$ROCE_LAB" cat /sys/class/net/tap-a/statistics/tx_dropped 2>/dev/null)" >>"$1"
}
# The "slow peer" of issue 23: guest_throttle PERCENT limits guest a's qemu (all its threads) to
# PERCENT % of one CPU with a cgroup CPU quota over a 10 ms period (short, so that the guest is
# slow rather than stopped for long stretches: a 100 ms period would freeze it for longer than
# the 67 ms ACK timeout); guest_unthrottle puts it back. cgroup v1 (cpu controller) or v2
# (cpu.max). Returns 1, with the reason in THROTTLE_ERR, when neither works.
THROTTLE_CG="" THROTTLE_PCT=""
guest_throttle() {
  local pct=$1 pid period=10000 q cg
  THROTTLE_ERR="" THROTTLE_PCT=$pct
  q=$((period * pct / 100))
  pid=$(cat "$RUN_DIR/$ROCE_LAB/guests/a/qemu.pid" 2>/dev/null) || { THROTTLE_ERR="no qemu pid"; return 1; }
  if [ -z "$THROTTLE_CG" ]; then
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
      cg=/sys/fs/cgroup/$ROCE_LAB-slow
      { grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control; } 2>/dev/null &&
        mkdir -p "$cg" && echo "$q $period" >"$cg/cpu.max" ||
        { rmdir "$cg" 2>/dev/null; THROTTLE_ERR="cgroup v2: cannot set cpu.max"; return 1; }
    elif [ -d /sys/fs/cgroup/cpu ]; then
      cg=/sys/fs/cgroup/cpu/$ROCE_LAB-slow
      mkdir -p "$cg" && echo $period >"$cg/cpu.cfs_period_us" && echo "$q" >"$cg/cpu.cfs_quota_us" ||
        { rmdir "$cg" 2>/dev/null; THROTTLE_ERR="cgroup v1: cannot set the cpu quota"; return 1; }
    else THROTTLE_ERR="no cgroup cpu controller"; return 1; fi
    THROTTLE_CG=$cg
  fi
  echo "$pid" >"$THROTTLE_CG/cgroup.procs" 2>/dev/null || { THROTTLE_ERR="cannot move qemu ($pid) into $THROTTLE_CG"; guest_unthrottle; return 1; }
}
guest_unthrottle() {
  THROTTLE_PCT=""
  [ -n "$THROTTLE_CG" ] || return 0
  local p
  for p in $(cat "$THROTTLE_CG/cgroup.procs" 2>/dev/null); do echo "$p" >"$(dirname "$THROTTLE_CG")/cgroup.procs"; done
  rmdir "$THROTTLE_CG" 2>/dev/null
  THROTTLE_CG=""
}
# cap_start F KIND: start a try's capture; retransmission rows (rt) also note the loss counter
# and the guest's receive counters.
cap_start() {
  "$L" capture start >/dev/null 2>"$1.capture"
  [ "$2" = rt ] || return 0
  LOST0=$(loss_dropped)
  net_snap "$1.net0"
}
emu_listening() { ip netns exec "$HNS" ss -ltn 2>/dev/null | grep -q ':18515 '; }
guest_clean_cmd='for i in 1 2 3 4 5 6; do sleep 0.5; rdma res show qp | grep -v " lqpn 1 " | grep -q lqpn || { ss -tan | grep -v TIME-WAIT | grep -q ":18515 " || exit 0; }; done; rdma res show qp; ss -tan; exit 1'
guest_listen_cmd='for i in $(seq 150); do ss -ltn | grep -q ":18515 " && exit 0; sleep 0.1; done; exit 1'

# run_once F DIR TIMEOUT CMD: one server/client pair. DIR is emu-srv (emulator server, rxe
# client) or rxe-srv. Sets RC_S RC_C (numbers, "killed" or "listen") and HUNG_RXE (1 if the
# rxe side was killed while the emulator side had passed).
run_once() {
  local f=$1 dir=$2 to=$3 cmd=$4 gid="" epid="" t_start t_first="" tool=${4%% *}
  tool=${tool/@IMM@/imm_pingpong}; tool=${tool/@MW@/mw_probe}
  # the C probes: the host's copy for the emulator side, the share's for the guest
  local ecmd=${cmd//@IMM@/$IMM} gcmd=${cmd//@IMM@//share/imm_pingpong}
  ecmd=${ecmd//@MW@/$MWP} gcmd=${gcmd//@MW@//share/mw_probe}
  RC_S="" RC_C="" HUNG_RXE=0 HUNG_EMU=0
  # The emulator's own bound is later than the loop's deadline (to + 10 s), so a hung emulator
  # is killed by the loop, which saves its counters first.
  # The retx rows measure the requester's retransmission timer against its peer: the emulator
  # runs them on a device of its own (--no-shared), without the steering helper's hop (a
  # second process to schedule on this 2-core machine) between rxe and the engine; every
  # other row runs on the default shared device.
  local own=(); [ "$CUR_LOSS" = retx ] && own=(--no-shared)
  local emu_cmd=(timeout -s KILL "$((to + 20))" ip netns exec "$HNS" env ROCE_STAT_DIR="$OUT/stat" "$ROCE" run "${own[@]}" --lib-dir "$OUT/bin/lib"
                 --ip $EMU_IP --mtu "$IBMTU" --)
  if [ "$dir" = emu-srv ]; then
    # shellcheck disable=SC2086
    "${emu_cmd[@]}" $ecmd >"$f.server" 2>&1 & epid=$!
    local i=0; until emu_listening; do
      i=$((i + 1)); kill -0 "$epid" 2>/dev/null && [ $i -lt 150 ] || { RC_S=listen; break; }; sleep 0.1; done
    [ -n "$RC_S" ] || gid=$("$L" run --bg --timeout "$to" a "$gcmd $EMU_IP")
  else
    gid=$("$L" run --bg --timeout "$to" a "$gcmd")
    if "$L" run --timeout 30 a "$guest_listen_cmd" >/dev/null 2>&1; then
      # shellcheck disable=SC2086
      "${emu_cmd[@]}" $ecmd $GUEST_IP >"$f.client" 2>&1 & epid=$!
    else RC_S=listen; fi
  fi
  if [ "$RC_S" = listen ]; then
    [ -n "${epid:-}" ] && { emu_kill "$epid"; }
    [ -n "${gid:-}" ] && { guest_kill "$tool"; "$L" wait a "$gid" 20 >"$f.server" 2>&1; }
    RC_C=none; return
  fi
  # Wait for both; once one side passed, the other gets SERVER_GRACE seconds.
  t_start=$(now_ms)
  local e_rc="" g_rc=""
  # UC/UD under loss (RUN_KIND=nd) wait for a lost datagram by design: stop them at their
  # timeout. Everything else gets 10 s more than its own timeout.
  local deadline=$((to + 10)); [ "${RUN_KIND:-rc}" != nd ] || deadline=$to
  while :; do
    if [ -z "$e_rc" ] && ! kill -0 "$epid" 2>/dev/null; then wait "$epid"; e_rc=$?; fi
    if [ -z "$g_rc" ] && guest_done "$gid"; then g_rc=$(guest_rc "$gid"); fi
    [ -n "$e_rc" ] && [ -n "$g_rc" ] && break
    if [ -z "$t_first" ] && { [ "$e_rc" = 0 ] || [ "$g_rc" = 0 ]; }; then t_first=$(now_ms); fi
    if [ -n "$t_first" ] && [ $(( $(now_ms) - t_first )) -ge $((SERVER_GRACE * 1000)) ]; then
      if [ -z "$g_rc" ]; then guest_kill "$tool"; g_rc=killed; HUNG_RXE=1; fi
      if [ -z "$e_rc" ]; then
        emu_stat "$f"; emu_kill "$epid"; e_rc=killed
        # Retransmitting to a peer that passed and left: the retry_cnt=7 rule above.
        [ "$g_rc" = 0 ] && ! grep -qE '^ *completer_retry_err 0$' "$f.emustat" &&
          grep -qE '^ *completer_retry_err [0-9]+$' "$f.emustat" && HUNG_EMU=1
      fi
      break
    fi
    if [ $(( $(now_ms) - t_start )) -ge $(( deadline * 1000 )) ]; then
      [ -n "$g_rc" ] || { guest_kill "$tool"; g_rc=killed; }
      [ -n "$e_rc" ] || { emu_stat "$f"; emu_kill "$epid"; e_rc=killed; }
      break
    fi
    sleep 0.2
  done
  # The guest's own `timeout -s KILL` exits 137; it kills only the shell, so kill the tool too.
  [ "$g_rc" = 137 ] && { g_rc=killed; guest_kill "$tool"; }
  [ "$e_rc" = 137 ] && e_rc=killed
  if [ "$dir" = emu-srv ]; then
    RC_S=$e_rc RC_C=$g_rc; guest_collect "$gid" "$f.client"
  else
    RC_S=$g_rc RC_C=$e_rc; guest_collect "$gid" "$f.server"
  fi
  # A killed guest process that does not go away (rxe spinning in the kernel) taints the guest.
  # (A process stuck in the kernel has an empty cmdline, so look for QPs and the TCP port.)
  if [ "$g_rc" = killed ]; then
    "$L" run --timeout 15 a "$guest_clean_cmd" >"$f.leftover" 2>&1 || NEED_RESTART=1
  fi
}

restart_guest() {
  say "restarting guest a ($1)"
  "$L" restart a >>"$OUT/lab.txt" 2>&1 || { say "restart failed"; return 1; }
  # a restarted guest is a new qemu: slow it down again
  [ -z "$THROTTLE_PCT" ] || guest_throttle "$THROTTLE_PCT" ||
    { say "cannot slow the restarted guest down: $THROTTLE_ERR"; RT_PRE="cannot slow the restarted guest down: $THROTTLE_ERR"; }
  probes_to_share
  NEED_RESTART=0
}

# check_run F: capture (roce decode) and guest (rxe-drops, rdma statistic) checks of one run.
# Sets CHK (empty if fine, else the reason) and CHK_FIG.
check_run() {
  local f=$1 pcap=$1.pcap inv mal val icrc rcv
  CHK="" CHK_FIG=""
  sleep 0.3   # let the last frames (final ACKs) reach the capture
  "$L" capture stop "$pcap" >/dev/null 2>>"$f.capture"
  "$ROCE" decode "$pcap" >"$f.decode" 2>&1; local drc=$?
  read -r val inv mal < <(sed -n 's/.*ICRC valid: \([0-9]*\), invalid: \([0-9]*\), truncated: [0-9]*, malformed: \([0-9]*\).*/\1 \2 \3/p' "$f.decode" | head -1)
  if [ -z "${val:-}" ]; then CHK="roce decode: no summary (rc $drc)"
  elif [ "$drc" != 0 ] || [ "$inv" != 0 ] || [ "$mal" != 0 ]; then CHK="roce decode: $inv invalid ICRC, $mal malformed (rc $drc)"
  elif [ "$val" = 0 ]; then CHK="capture holds no RoCE packet (capture broken?)"; fi
  "$L" run --timeout 30 a 'rxe-drops; rc=$?; [ $rc = 0 ] || rxe-drops list | tail -n 20; echo; rdma statistic show link rxe0/1; rxe-drops reset; exit $rc' \
    >"$f.guest" 2>&1 || CHK="${CHK:+$CHK; }guest rxe-drops: $(head -1 "$f.guest")"
  icrc=$(sed -n 's/^icrc_errors=\([0-9]*\) rxe_rcv_drops=\([0-9]*\).*/\1/p' "$f.guest" | head -1)
  rcv=$(sed -n 's/^icrc_errors=\([0-9]*\) rxe_rcv_drops=\([0-9]*\).*/\2/p' "$f.guest" | head -1)
  CHK_FIG="${val:-?} pkts, icrc ${inv:-?}/${icrc:-?}"
  local cdrop; cdrop=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$f.capture" | tail -1)
  [ "${cdrop:-0}" = 0 ] || CHK_FIG+=" (tcpdump missed $cdrop frames)"
  [ "${rcv:-0}" = 0 ] || CHK_FIG+=", rxe_rcv_drops $rcv"
  # Memory-window rows: nothing of theirs may be dropped by rxe (every QP is alive until both
  # sides have finished, and the refused WRITEs end in a NAK, not in a drop).
  [ "${RUN_KIND:-}" != mw ] || [ "${rcv:-0}" = 0 ] || CHK="${CHK:+$CHK; }rxe dropped $rcv packets"
}
# mw_figures F: what the memory-window rows checked, from each side's closing line.
mw_figures() {
  local o a
  o=$(sed -n 's/^mw_probe: result: [^;]*; //p' "$1.server" | head -1)
  a=$(sed -n 's/^mw_probe: result: [^;]*; //p' "$1.client" | head -1)
  echo "owner: ${o:-?}; accessor: ${a:-?}"
}

# run_tool LABEL DIR TIMEOUT KIND CMD. KIND: rc (must pass), nd (UC/UD under loss: n/a) or rt
# (must pass, and retx_share.py with the bounds in RT_BOUNDS must accept the capture).
run_tool() {
  local label=$1 dir=$2 to=$3 kind=$4 cmd=$5 f t0 res fig tries=0
  [ -z "$ONLY" ] || [[ $label =~ $ONLY ]] || return 0
  f=$OUT/runs/m${CUR_MTU}-${CUR_LOSS}-${dir}-${label//[^A-Za-z0-9_]/_}
  t0=$(now_ms)
  [ "${NEED_RESTART:-0}" = 0 ] || restart_guest "left over from the previous run"
  [ -f "$SHARE/imm_pingpong" ] && [ -f "$SHARE/mw_probe" ] || probes_to_share
  cap_start "$f" "$kind"
  UDP0=$(udp_counters)
  RUN_KIND=$kind
  run_once "$f" "$dir" "$to" "$cmd"
  # The retry-forever rule (see top) on either side: at most four retries per row. A run with
  # 4 QPs (ibv_srq_pingpong) under 5 % loss leaves one side retransmitting in about one run
  # of five (each QP's last ACK is lost with 5 %), and the matrix has eight such rows: with two
  # retries a CI run failed now and then (2026-12-02: three hung tries in a row, the rxe server
  # retransmitting a SEND whose ACK the emulator had sent, in the capture, before the loss rule
  # dropped it); with four, about one run in 500.
  local hung=0
  while [ "$kind" != nd ] && [ $hung -lt 4 ] && { [ "$HUNG_RXE" = 1 ] || [ "$HUNG_EMU" = 1 ]; }; do
    hung=$((hung + 1)); RETRIES=$((RETRIES + 1))
    for x in server client emustat; do [ -f "$f.$x" ] && mv "$f.$x" "$f.hang$hung.$x"; done
    "$L" capture stop "$f.hang$hung.pcap" >/dev/null 2>&1
    "$ROCE" decode "$f.hang$hung.pcap" >"$f.hang$hung.decode" 2>&1
    if [ "$HUNG_RXE" = 1 ]; then
      # Kernel rxe spinning: restart the guest.
      tries=1
      say "$label $dir: rxe side still running ${SERVER_GRACE}s after the emulator side passed; restart + retry ($hung)"
      restart_guest "rxe hang" || true
    else
      # The emulator retransmits to an rxe peer that passed and exited. rxe counted those
      # retransmissions to its destroyed QP as drops; they belong to this try.
      tries=3
      say "$label $dir: emulator still retransmitting ${SERVER_GRACE}s after the rxe side passed and exited; retry ($hung)"
      "$L" run --timeout 30 a 'rxe-drops reset' >"$f.hang$hung.guest" 2>&1 || true
    fi
    cap_start "$f" "$kind"
    run_once "$f" "$dir" "$to" "$cmd"
  done
  if [ "$tries" = 0 ] && { [ "$RC_S" != 0 ] || [ "$RC_C" != 0 ]; } &&
    grep -qs "Can't produce a report" "$f.server" "$f.client"; then
    # perftest calibrates its cycle counter ("Correlation coefficient r^2 < 0.9") when it
    # writes its report, after the transfer, and exits 1 when the TCG guest's clock is too
    # jittery: an environment fault, not a RoCE one. Retry once, UC/UD under loss (nd) too
    # (an ib_send_bw -c UD client once failed CI this way: server rc 0, client rc 1); the row
    # says so.
    tries=2; RETRIES=$((RETRIES + 1))
    say "$label $dir: perftest could not calibrate its clock (r^2 < 0.9); retry once"
    for x in server client; do [ -f "$f.$x" ] && mv "$f.$x" "$f.try1.$x"; done
    "$L" capture stop "$f.try1.pcap" >/dev/null 2>&1
    # A side killed on the first try (a UD server still waiting when its client gave up) may
    # have left the guest tainted: restart it first, as the next row would.
    [ "${NEED_RESTART:-0}" = 0 ] || restart_guest "left over from the first try"
    cap_start "$f" "$kind"
    run_once "$f" "$dir" "$to" "$cmd"
  fi
  check_run "$f"
  # Retransmission rows (issue 23): figures and bounds from the capture, see retx_share.py.
  local rtfig="" rtrc lost
  if [ "$kind" = rt ]; then
    lost=$(( $(loss_dropped) - ${LOST0:-0} ))
    net_snap "$f.net1"
    # shellcheck disable=SC2086
    rtfig=$(python3 "$HERE/retx_share.py" --roce "$ROCE" --emu $EMU_IP --pmtu "$IBMTU" --lost "$lost" \
      --guest-before "$f.net0" --guest-after "$f.net1" $RT_BOUNDS --detail "$f.retx" "$f.pcap" \
      2>>"$f.retx.err"); rtrc=$?
    # a slow-peer row whose guest could not be slowed down proves nothing: fail it
    [ -z "${RT_PRE:-}" ] || CHK="${CHK:+$CHK; }$RT_PRE"
    case $rtrc in
      0) ;;
      1) CHK="${CHK:+$CHK; }retransmission bound exceeded" ;;
      *) CHK="${CHK:+$CHK; }retx_share.py failed (rc $rtrc)" ;;
    esac
  fi
  local udp1; udp1=$(udp_counters)
  [ "$udp1" = "$UDP0" ] || { echo "emulator namespace UDP: before $UDP0, after $udp1" >>"$f.guest"; CHK_FIG+=", ns UDP errors: $udp1"; }
  local secs; secs=$(secs_since "$t0")
  if [ "$kind" = nd ]; then
    # UC/UD under loss: completing or being killed while waiting are both by design.
    if { [ "$RC_S" = 0 ] || [ "$RC_S" = killed ]; } && { [ "$RC_C" = 0 ] || [ "$RC_C" = killed ]; } && [ -z "$CHK" ]; then
      res=n/a
      if [ "$RC_S" = 0 ] && [ "$RC_C" = 0 ]; then fig="completed, data check ok (no datagram of it lost)"
      else fig="waited for a lost datagram; killed after ${to}s"; fi
      [ "$tries" != 2 ] || fig="after a retry (perftest clock check): $fig"
    else
      res=fail; fig="server rc $RC_S, client rc $RC_C${CHK:+; $CHK}"
    fi
  elif [ "$RC_S" = 0 ] && [ "$RC_C" = 0 ] && [ -z "$CHK" ]; then
    res=pass; fig=$(figures "$f.client")
    [ -n "$fig" ] || fig=$(grep -m1 -o '[0-9.]* usec/iter' "$f.client")
    [ "$kind" != mw ] || fig=$(mw_figures "$f")
    [ "$tries" != 1 ] || res="pass (retry after rxe restart)"
    [ "$tries" != 2 ] || res="pass (retry after perftest clock check)"
    [ "$tries" != 3 ] || res="pass (retry after the emulator retried forever, rxe peer gone)"
  else
    res=fail; fig="server rc $RC_S, client rc $RC_C${CHK:+; $CHK}"
    [ "$tries" = 0 ] || fig="after a retry: $fig"
  fi
  [ -z "$rtfig" ] || fig="$fig; $rtfig"
  [ "$res" = fail ] || fig="$fig; $CHK_FIG"
  local lossd; case $CUR_LOSS in none) lossd="-" ;; rxe) lossd="5% → rxe" ;; emu) lossd="5% → emu" ;; retx) lossd=$RT_LOSSD ;; mw) lossd="-" ;; esac
  local dird; [ "$dir" = emu-srv ] && dird="emu srv ← rxe cli" || dird="rxe srv ← emu cli"
  ROWS+=("$(printf '%-28s %-18s %5s %-10s %-8s %6ss  %s' "$label" "$dird" "$CUR_MTU" "$lossd" "$(short_res "$res")" "$secs" "$fig")")
  MD_ROWS+=("| $label | $dird | $CUR_MTU / $IBMTU | $lossd | $res | $fig | $secs |")
  # Captures are large: kept only as evidence of a failure or retry.
  [ "$res" = fail ] || [ "$tries" != 0 ] || rm -f "$f.pcap"
  # A retransmission storm writes gigabytes (issue 23: 3 million packets in 240 s): keep the head.
  if [ -f "$f.pcap" ] && [ "$(stat -c %s "$f.pcap")" -gt $((256 << 20)) ]; then
    command -v editcap >/dev/null && editcap -r "$f.pcap" "$f.head.pcap" 1-200000 >/dev/null 2>&1
    rm -f "$f.pcap"
    { head -n 2000 "$f.decode"; echo "[... cut: the first 2,000 and the last 40 lines only ...]"
      tail -n 40 "$f.decode"; } >"$f.decode.cut" && mv "$f.decode.cut" "$f.decode"
    say "$label: capture over 256 MiB, kept its first 200,000 frames only ($f.head.pcap)"
  fi
  case $res in
    pass*) PASSED=$((PASSED + 1)) ;;
    n/a) NA=$((NA + 1)) ;;
    *) FAILED=$((FAILED + 1)); FAILURES+=("$label, $dird, MTU $CUR_MTU, loss $lossd: $fig (files $f.*)")
       # The files stay on the CI machine: the summary carries each side's last words.
       for x in server client; do
         FAILURES+=("    $x's last lines: $(tail -n 3 "$f.$x" 2>/dev/null | tr -s '\n\t' '  ' | cut -c1-300)")
       done
       say "FAIL $label $dir MTU $CUR_MTU loss $CUR_LOSS: $fig"
       for x in client server; do echo "--- $x:"; tail -n 6 "$f.$x" 2>/dev/null; done | tee -a "$LOG" >&2 ;;
  esac
  say "$(printf '%-8s %-28s %-8s MTU %-4s loss %-4s %6ss  %s' "${res%% *}" "$label" "$dir" "$CUR_MTU" "$CUR_LOSS" "$secs" "$fig")"
}

# ---- the matrix ------------------------------------------------------------------------------
# Iteration counts are small: everything runs under TCG on a shared 2-core machine.
tools() {   # tools LOSS: prints "LABEL|KIND|TIMEOUT|CMD" lines
  local lossy=$1 PP="-d rxe0 -g $GIDX -m $IBMTU -c" PT="-d rxe0 -x $GIDX" nd=rc
  local udsz=$((IBMTU / 2))
  if [ "$lossy" = none ]; then
    echo "ibv_rc_pingpong|rc|45|ibv_rc_pingpong $PP -n 100"
    echo "ibv_rc_pingpong -s 8192|rc|45|ibv_rc_pingpong $PP -s 8192 -n 50"
    echo "ibv_rc_pingpong -e|rc|45|ibv_rc_pingpong $PP -e -n 100"
    echo "ibv_uc_pingpong|rc|30|ibv_uc_pingpong $PP -n 100"
    echo "ibv_ud_pingpong|rc|30|ibv_ud_pingpong -d rxe0 -g $GIDX -c -s $udsz -n 100"
    echo "ibv_srq_pingpong|rc|45|ibv_srq_pingpong $PP -n 20"
    echo "ib_write_bw|rc|45|ib_write_bw $PT -s 16384 -n 100"
    echo "ib_read_bw|rc|45|ib_read_bw $PT -s 16384 -n 100"
    echo "ib_send_bw RC|rc|45|ib_send_bw $PT -s 16384 -n 100"
    echo "ib_send_bw -c UD|rc|45|ib_send_bw $PT -c UD -s $udsz -n 100"
    echo "ib_atomic_bw CMP_AND_SWAP|rc|45|ib_atomic_bw $PT -A CMP_AND_SWAP -n 100"
    echo "ib_atomic_bw FETCH_AND_ADD|rc|45|ib_atomic_bw $PT -A FETCH_AND_ADD -n 100"
    echo "ib_write_lat|rc|45|ib_write_lat $PT -s 64 -n 100"
    echo "ib_read_lat|rc|45|ib_read_lat $PT -s 64 -n 100"
    echo "ib_send_lat|rc|45|ib_send_lat $PT -s 64 -n 100"
    echo "imm write+send|rc|45|@IMM@ -d rxe0 -g $GIDX -m $IBMTU -s 4096 -n 50"
  else
    echo "ibv_rc_pingpong|rc|120|ibv_rc_pingpong $PP -n 30"
    echo "ibv_rc_pingpong -s 8192|rc|120|ibv_rc_pingpong $PP -s 8192 -n 20"
    echo "ibv_rc_pingpong -e|rc|120|ibv_rc_pingpong $PP -e -n 30"
    # UC/UD under loss prove one thing about the emulator: a gap in what it receives drops
    # whole messages and nothing partial is delivered. Loss toward rxe tests only rxe's receive
    # side, the proof is the same at every MTU, and a killed run costs a guest restart: they run
    # under loss toward the emulator at the first loss MTU only.
    if [ "$CUR_MTU" = "${LOSS_MTUS%% *}" ] && [ "$lossy" = emu ]; then
    echo "ibv_uc_pingpong|nd|8|ibv_uc_pingpong $PP -n 10"
    echo "ibv_ud_pingpong|nd|8|ibv_ud_pingpong -d rxe0 -g $GIDX -c -s $udsz -n 10"
    echo "ib_send_bw -c UD|nd|8|ib_send_bw $PT -c UD -s $udsz -n 10"
    fi
    echo "ibv_srq_pingpong|rc|120|ibv_srq_pingpong $PP -q 4 -n 10"
    echo "ib_write_bw|rc|120|ib_write_bw $PT -s 8192 -n 30"
    echo "ib_read_bw|rc|120|ib_read_bw $PT -s 8192 -n 30"
    echo "ib_send_bw RC|rc|120|ib_send_bw $PT -s 8192 -n 30"
    echo "ib_atomic_bw CMP_AND_SWAP|rc|120|ib_atomic_bw $PT -A CMP_AND_SWAP -n 30"
    echo "ib_atomic_bw FETCH_AND_ADD|rc|120|ib_atomic_bw $PT -A FETCH_AND_ADD -n 30"
    echo "ib_write_lat|rc|120|ib_write_lat $PT -s 64 -n 30"
    echo "ib_read_lat|rc|120|ib_read_lat $PT -s 64 -n 30"
    echo "ib_send_lat|rc|120|ib_send_lat $PT -s 64 -n 30"
    echo "imm write+send|rc|120|@IMM@ -d rxe0 -g $GIDX -m $IBMTU -s 2048 -n 20"
  fi
}

# Issue 23: the emulator as the requester (perftest client) against a lossy or slow rxe
# responder; each row's capture must show no more retransmissions than its bound (retx_share.py;
# the bounds and why are in README.md, "Retransmission rows"). One QP per READ row.
# Prints "LABEL|LOSS % toward the emulator (0: none)|TIMEOUT|BOUNDS|CMD|GUEST CPU %" lines (the
# last one empty or 0: the guest runs at full speed).
retx_tools() {
  local PT="-d rxe0 -x $GIDX" RB="--max-rereq-per-lost 3 --max-early 2"
  echo "ib_read_bw -s 4194304|0.5|${RETX_READ_TO:-90}|$RB|ib_read_bw $PT -s 4194304 -n 5"
  echo "ib_read_bw -a|0.5|${RETX_READ_A_TO:-240}|$RB|ib_read_bw $PT -a -n 5"
  # toward a slow peer: guest a's qemu held to ${RETX_WRITE_CPU:-30} % of a CPU for this row
  echo "ib_write_bw -q 8 -s 65536|0|${RETX_WRITE_TO:-90}|--max-share ${RETX_WRITE_MAX_SHARE:-0.75}|ib_write_bw $PT -q 8 -s 65536 -n 100|${RETX_WRITE_CPU:-30}"
}

T_BOOT=() T_BLOCKS=() LAB_FAIL=0 NEED_RESTART=0 GUEST_KERNEL=""
# mtu_has_block MTU: whether any block of --losses runs at MTU (no lab is booted for nothing).
mtu_has_block() {
  local b
  for b in $LOSSES; do
    case $b in
      none) return 0 ;;
      retx|mw) [ "$1" = "${MTUS%% *}" ] && return 0 ;;
      *) [[ " $LOSS_MTUS " == *" $1 "* ]] && return 0 ;;
    esac
  done
  return 1
}
for CUR_MTU in $MTUS; do
  mtu_has_block "$CUR_MTU" || continue
  if ! lab_up "$CUR_MTU"; then
    say "lab at MTU $CUR_MTU did not come up; see $OUT/lab.txt"; tail -n 20 "$OUT/lab.txt" >&2
    FAILED=$((FAILED + 1)); FAILURES+=("lab up at MTU $CUR_MTU failed ($OUT/lab.txt)"); LAB_FAIL=1
    cleanup; continue
  fi
  probes_to_share
  for CUR_LOSS in $LOSSES; do
    case $CUR_LOSS in
      none) ;;
      retx|mw) [ "$CUR_MTU" = "${MTUS%% *}" ] || continue ;;
      *) [[ " $LOSS_MTUS " == *" $CUR_MTU "* ]] || continue ;;
    esac
    tb=$(now_ms)
    if [ "$CUR_LOSS" = retx ]; then
      # Emulator as client only; the loss (toward the emulator) is set per row.
      while IFS='|' read -r -u 9 label pct to RT_BOUNDS cmd cpu; do
        [ -z "$ONLY" ] || [[ $label =~ $ONLY ]] || continue
        "$L" loss host "$pct" >/dev/null 2>&1
        if [ "$pct" = 0 ]; then RT_LOSSD="-"; else RT_LOSSD="$pct% → emu"; fi
        RT_PRE=""
        if [ "${cpu:-0}" != 0 ]; then
          if [ "$pct" = 0 ]; then RT_LOSSD="rxe ${cpu}% CPU"; else RT_LOSSD="$RT_LOSSD, rxe ${cpu}% CPU"; fi
          guest_throttle "$cpu" || RT_PRE="cannot slow the guest down: $THROTTLE_ERR"
        fi
        run_tool "$label" rxe-srv "$to" rt "$cmd"
        guest_unthrottle
        # A side killed in a storm can leave rxe replaying into the next row (seen with the
        # engine before f2782a0: the next row's client could not even connect): fresh guest.
        [[ "$RC_S $RC_C" != *killed* ]] || NEED_RESTART=1
        { echo "== $label"; "$L" loss show; } >>"$OUT/loss-m$CUR_MTU-retx.txt" 2>&1
      done 9< <(retx_tools)
      "$L" loss host 0 >/dev/null 2>&1
      T_BLOCKS+=("MTU $CUR_MTU retx (issue 23): $(secs_since "$tb") s")
      continue
    fi
    if [ "$CUR_LOSS" = mw ]; then
      # Issue 22: memory windows, the window owner as the server (TCP side channel) and the
      # accessor as the client. -x names the owner's implementation: what an access past the
      # window's end (inside the region) must do, and which flag bit marks SEND with invalidate.
      for dir in emu-srv rxe-srv; do
        if [ "$dir" = emu-srv ]; then x=emu; else x=rxe; fi
        run_tool "memory windows" "$dir" 30 mw "@MW@ -d rxe0 -g $GIDX -m $IBMTU -t 30 -x $x"
      done
      T_BLOCKS+=("MTU $CUR_MTU mw (issue 22): $(secs_since "$tb") s")
      continue
    fi
    case $CUR_LOSS in rxe) "$L" loss a 5 >/dev/null 2>&1 ;; emu) "$L" loss host 5 >/dev/null 2>&1 ;; esac
    for dir in emu-srv rxe-srv; do
      while IFS='|' read -r -u 9 label kind to cmd; do
        run_tool "$label" "$dir" "$to" "$kind" "$cmd"
      done 9< <(tools "$CUR_LOSS")
    done
    "$L" loss show >"$OUT/loss-m$CUR_MTU-$CUR_LOSS.txt" 2>&1
    case $CUR_LOSS in rxe) "$L" loss a 0 >/dev/null 2>&1 ;; emu) "$L" loss host 0 >/dev/null 2>&1 ;; esac
    T_BLOCKS+=("MTU $CUR_MTU loss $CUR_LOSS: $(secs_since "$tb") s")
  done
  "$L" run a "rdma statistic show link rxe0/1" >"$OUT/rdma-statistic-m$CUR_MTU.txt" 2>&1 || true
  cleanup
done

# ---- report --------------------------------------------------------------------------------
TOTAL=$(secs_since "$T_ALL")
DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
loss_note="5 % loss rows at netdev MTU $(echo $LOSS_MTUS | sed 's/ / and /g') only"
[ "$LOSS_MTUS" = "$MTUS" ] && loss_note="5 % loss rows at every MTU (UC/UD under loss toward the emulator at MTU ${LOSS_MTUS%% *} only)"
[[ $LOSSES == *rxe* || $LOSSES == *emu* ]] || loss_note="no loss rows (--losses $LOSSES)"
echo
echo "== interop matrix: emulator ($(cd "$REPO_DIR" && git rev-parse --short HEAD 2>/dev/null)) <-> kernel rdma_rxe (Debian 12, ${GUEST_KERNEL:-?}), $DATE"
printf '%-28s %-18s %5s %-10s %-8s %7s  %s\n' tool "server ← client" MTU loss result time figures
printf '%s\n' "${ROWS[@]}"
echo "-- $loss_note; $PASSED passed, $FAILED failed, $NA n/a by design (UC/UD under loss), $RETRIES retries (the rows say why)"
echo "-- build ${T_BUILD} s, prepare ${T_PREPARE} s, boots: ${T_BOOT[*]:-none}"
printf -- '-- %s\n' "${T_BLOCKS[@]}"
echo "-- total wall time ${TOTAL} s; outputs in $OUT"
if [ "${#FAILURES[@]}" -gt 0 ]; then echo "-- failures:"; printf '   %s\n' "${FAILURES[@]}"; fi

{
  echo "Last run: $DATE, commit $(cd "$REPO_DIR" && git rev-parse --short HEAD 2>/dev/null), \`tests/interop/run-matrix.sh\`"
  echo "(total wall time $TOTAL s on a 2-core TCG machine). Emulator = \`roce run\` in the lab's host"
  echo "namespace; rxe = Debian 12 kernel rdma_rxe in a qemu guest. MTU = netdev / RoCE MTU. $loss_note."
  echo "Result: **$PASSED passed, $FAILED failed**, $NA n/a (UC/UD under loss, by design), $RETRIES retries (rxe restart, emulator retrying forever after its peer left, perftest clock check; the rows say which)."
  echo "Figures: client-side MB/s (bw), typical µs (lat) or µs/iter (pingpong); then RoCE packets in the"
  echo "run's bridge capture and invalid ICRCs (roce decode / guest rxe-drops). The issue-23 rows (ib_read_bw -s 4194304,"
  echo "ib_read_bw -a, ib_write_bw -q 8) also show the emulator's retransmissions measured from the capture"
  echo "(tests/interop/retx_share.py; bounds in tests/interop/README.md). The memory-window rows (issue 22;"
  echo "server = window owner, client = accessor; tests/interop/mw_probe.c) show each side's closing line."
  echo
  echo "| tool | server ← client | MTU | loss | result | figures | s |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  printf '%s\n' "${MD_ROWS[@]}"
} >"$OUT/matrix.md"
echo "-- markdown table: $OUT/matrix.md"

if [ "$PUBLISH" = 1 ]; then
  cp "$OUT/matrix.md" "$HERE/MATRIX.md"
  echo "-- published to tests/interop/MATRIX.md (README.md's interop summary is updated by hand)"
fi

echo "stage-result: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ] && [ "$LAB_FAIL" = 0 ]
