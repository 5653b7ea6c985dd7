#!/bin/sh
# /init of the lab guest (busybox sh). Two phases:
#   /init          (PID 1) mounts, loads modules, configures eth0 and rxe0, then execs busybox
#                  init, which reaps zombies and runs "/init serve" once;
#   /init serve    the command loop over the 9p share mounted at /share:
#       host writes  cmd/ID.sh          (first line may be "# timeout=SECONDS")
#       guest moves  it to out/ID.sh, runs it with sh in the background, and writes
#                    out/ID.stdout, out/ID.stderr, then out/ID.rc last (atomically)
#       host creates poweroff           -> the guest powers off
# Kernel command line: lab.name=NAME lab.ip=A.B.C.D/N lab.mtu=MTU
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root

param() { sed -n "s/.*\blab\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }

serve() {
  mkdir -p /share/cmd /share/out
  while :; do
    [ -e /share/poweroff ] && { sync; poweroff -f; }
    for f in /share/cmd/*.sh; do
      [ -e "$f" ] || continue
      id=${f##*/}; id=${id%.sh}
      mv "$f" "/share/out/$id.sh" 2>/dev/null || continue
      run_one "$id" &
    done
    sleep 0.2
  done
}

run_one() {
  o=/share/out/$1
  t=$(sed -n '1s/^# timeout=\([0-9]*\).*/\1/p' "$o.sh")
  (cd /root && exec timeout -s KILL "${t:-600}" sh "$o.sh") >"$o.stdout" 2>"$o.stderr" </dev/null
  echo $? >"$o.rc.tmp" && mv "$o.rc.tmp" "$o.rc"
}

setup() {
  mount -t proc proc /proc
  mount -t sysfs sysfs /sys
  mount -t devtmpfs devtmpfs /dev
  mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
  mount -t tmpfs tmpfs /tmp
  mount -t tmpfs tmpfs /run
  echo "lab-init: loading modules at $(cut -d' ' -f1 /proc/uptime) s"
  while read -r m; do
    insmod "/lib/modules/$m" || echo "lab-init: insmod $m failed"
  done </lib/modules/modules.load
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 lab /share ||
    echo "lab-init: cannot mount the 9p share"
  name=$(param name); ip=$(param ip); mtu=$(param mtu)
  hostname "${name:-guest}"
  ip link set lo up
  ip link set eth0 mtu "${mtu:-1500}" up
  ip addr add "$ip" dev eth0
  rdma link add rxe0 type rxe netdev eth0 || echo "lab-init: rdma link add failed"
  rxe-drops arm || echo "lab-init: rxe-drops arm failed"
  state=/sys/class/infiniband/rxe0/ports/1/state
  i=0
  while ! grep -q ACTIVE "$state" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  status=ok; grep -q ACTIVE "$state" 2>/dev/null || status=rxe0-not-active
  {
    echo "status=$status"
    echo "uptime=$(cut -d' ' -f1 /proc/uptime)"
    echo "kernel=$(uname -r)"
    echo "ip=$ip mtu=$mtu"
    echo "active_mtu=$(ibv_devinfo -d rxe0 2>/dev/null | awk '/active_mtu/{print $2}')"
    for g in 0 1 2 3; do
      f=/sys/class/infiniband/rxe0/ports/1/gids/$g
      gid=$(cat "$f" 2>/dev/null) || continue
      case $gid in 0000:0000:0000:0000:0000:0000:0000:0000) continue ;; esac
      echo "gid$g=$gid $(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$g 2>/dev/null)"
    done
    rdma link show
  } >/share/ready.tmp 2>&1
  mv /share/ready.tmp /share/ready
  echo "lab-init: ready ($status) at $(cut -d' ' -f1 /proc/uptime) s"
}

case "$1" in
  serve) serve ;;
  *)
    if [ "$$" = 1 ]; then
      setup
      printf '::once:/init serve\n::ctrlaltdel:/bin/poweroff -f\n' >/etc/inittab
      exec /bin/busybox init
    fi
    echo "usage: /init [serve]" >&2; exit 2 ;;
esac
