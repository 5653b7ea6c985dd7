#!/usr/bin/env bash
# Interop lab: qemu guests running Debian 12's kernel with rdma_rxe, on a bridge inside a
# network namespace, for RoCEv2 interop tests. See tests/interop/README.md.
#
#   lab.sh prepare                                  host packages, downloads, kernel, initramfs
#   lab.sh up [--mtu M] [--mem MiB] [NAME=IP ...]   namespace + bridge + guests (default a, b)
#   lab.sh run [--timeout S] [--bg] GUEST CMD...    run in a guest; its output and exit status
#   lab.sh wait GUEST ID                            result of a `run --bg`
#   lab.sh hostjoin [--name N] [--ip A]             namespace LAB-N with a veth on the bridge
#   lab.sh host [--name N] CMD...                   run CMD in that namespace
#   lab.sh capture start [--iface IF] | stop [DEST] tcpdump of the bridge into a pcap
#   lab.sh loss TARGET PERCENT | loss show          drop UDP 4791 toward a guest/peer/port
#   lab.sh restart GUEST                            reboot one guest (clean rxe state)
#   lab.sh status | down [--keep]
# The lab acted on is $ROCE_LAB, else the last one brought up.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib/common.sh"
. "$HERE/lib/prepare.sh"
. "$HERE/lib/net.sh"
. "$HERE/lib/guest.sh"

cmd=${1:-help}; shift || true
case $cmd in
  prepare)  cmd_prepare "$@" ;;
  up)       cmd_up "$@" ;;
  run)      cmd_run "$@" ;;
  wait)     cmd_wait "$@" ;;
  hostjoin) cmd_hostjoin "$@" ;;
  host)     cmd_host "$@" ;;
  capture)  cmd_capture "$@" ;;
  loss)     cmd_loss "$@" ;;
  status)   cmd_status "$@" ;;
  restart)  cmd_restart "$@" ;;
  down)     cmd_down "$@" ;;
  accel)    probe_accel ;;
  *) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; [ "$cmd" = help ] ;;
esac
