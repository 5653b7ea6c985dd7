#!/bin/sh
# rxe-drops (installed in the guest as /usr/local/bin/rxe-drops).
# Kernel 6.1's rxe drops packets with a bad ICRC or a failing header check silently: no
# `rdma statistic` counter and no log line. This arms two trace events that count them:
#   icrc   kretprobe on rxe_icrc_check, recorded only when it returns an error;
#   rcv    skb:kfree_skb whose caller lies inside rxe_rcv or rxe_udp_encap_recv (every drop
#          taken there: bad ICRC, unknown QP, P_Key/Q_Key mismatch, bad transport version,
#          wrong state, ...).
#   rxe-drops arm     (done by the guest init at boot)
#   rxe-drops         prints "icrc_errors=N rxe_rcv_drops=M"; fails if N > 0
#   rxe-drops strict  the same, but also fails if M > 0
#   rxe-drops list    the recorded events (the task name shows which tool was running)
#   rxe-drops reset   clears the counts
# rxe_rcv_drops is not always a fault: packets that arrive for a QP the peer already destroyed
# (e.g. the last ACKs of ibv_srq_pingpong's 16 QPs at teardown) are dropped there too.
T=/sys/kernel/debug/tracing

# Only the module's own symbols are read twice (all of /proc/kallsyms is slow under TCG).
SYMS=/run/rxe.syms
sym() { awk -v f="$1" '$3 == f {print $1; exit}' $SYMS; }
# The address of the first module symbol after ADDR (fixed-width hex compares as text).
next_sym() { cut -d' ' -f1 $SYMS | sort -u | awk -v a="$1" '$1 > a {print; exit}'; }

arm() {
  grep -q ' /sys/kernel/debug ' /proc/mounts || mount -t debugfs none /sys/kernel/debug
  echo 'r:rxe_icrc rdma_rxe:rxe_icrc_check ret=$retval:s32' >>$T/kprobe_events
  echo 'ret != 0' >$T/events/kprobes/rxe_icrc/filter
  echo 1 >$T/events/kprobes/rxe_icrc/enable
  grep -F '[rdma_rxe]' /proc/kallsyms | tr '\t' ' ' >$SYMS
  f=""
  for fn in rxe_rcv rxe_udp_encap_recv; do
    lo=$(sym $fn); [ -n "$lo" ] || continue
    hi=$(next_sym "$lo")
    f="${f:+$f || }(location >= 0x$lo && location < 0x$hi)"
  done
  echo "$f" >$T/events/skb/kfree_skb/filter
  echo 1 >$T/events/skb/kfree_skb/enable
  echo 4096 >$T/buffer_size_kb
}

cmd=${1:-show}
case $cmd in
  arm) arm ;;
  show|strict)
    icrc=$(grep -c 'rxe_icrc:' $T/trace)
    rcv=$(grep -c 'kfree_skb:' $T/trace)
    echo "icrc_errors=$icrc rxe_rcv_drops=$rcv"
    [ "$icrc" = 0 ] && { [ "$cmd" != strict ] || [ "$rcv" = 0 ]; } ;;
  list) grep -v '^#' $T/trace ;;
  reset) echo >$T/trace ;;
  *) echo "usage: rxe-drops [arm|show|strict|list|reset]" >&2; exit 2 ;;
esac
