# shellcheck shell=bash
# Guests: `up` boots them, `run`/`wait` execute commands through their 9p share, `down`
# removes everything the lab created (recorded in $LAB_DIR/lab.env as it is created).

# True if PID is alive and its command line mentions WORD (guards against PID reuse).
is_our_process() {
  local c
  c=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) && [[ $c == *"$2"* ]]
}

# `lab.sh up [--mtu M] [--mem MiB] [--boot-timeout S] [NAME=IP ...]`
cmd_up() {
  need_root
  [ -f "$CACHE_DIR/current.env" ] || die "run: lab.sh prepare"
  # shellcheck disable=SC1091
  . "$CACHE_DIR/current.env"
  local mtu=1500 mem=512 boot_timeout=300 specs=() spec
  while [ $# -gt 0 ]; do
    case $1 in
      --mtu) mtu=$2; shift 2 ;;
      --mem) mem=$2; shift 2 ;;
      --boot-timeout) boot_timeout=$2; shift 2 ;;
      *=*) specs+=("$1"); shift ;;
      *) die "up: unknown argument $1" ;;
    esac
  done
  [ ${#specs[@]} -gt 0 ] || specs=(a=198.18.0.2 b=198.18.0.3)
  [ ${#specs[@]} -le 2 ] || log "warning: ${#specs[@]} guests on a 2-core machine will be slow"
  for spec in "${specs[@]}"; do
    [[ ${spec%%=*} =~ ^[a-z0-9]{1,8}$ ]] || die "guest name ${spec%%=*}: use 1-8 of [a-z0-9]"
    check_lab_ip "${spec#*=}"
  done

  LAB=${ROCE_LAB:-roce-lab-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')}
  NS=$LAB MTU=$mtu
  LAB_DIR=$RUN_DIR/$LAB
  [ -e "$LAB_DIR" ] && die "lab $LAB already exists"
  mkdir -p "$LAB_DIR/guests"
  ACCEL=$(probe_accel)
  cat >"$LAB_DIR/lab.env" <<EOT
LAB=$LAB
NS=$NS
MTU=$MTU
ACCEL=$ACCEL
VMLINUX=$VMLINUX
INITRAMFS=$INITRAMFS
EOT
  echo "$LAB" >"$RUN_DIR/current"
  # A failed `up` removes what it created so far.
  trap 'log "up failed; cleaning up"; ROCE_LAB=$LAB cmd_down' EXIT
  trap 'exit 130' INT TERM
  net_create
  local t0 name
  t0=$(now_ms)
  for spec in "${specs[@]}"; do
    add_guest "${spec%%=*}" "${spec#*=}" "$mem"
    start_qemu "${spec%%=*}"
  done
  for spec in "${specs[@]}"; do
    wait_ready "${spec%%=*}" "$boot_timeout"
  done
  trap - EXIT INT TERM
  log "lab $LAB up: ${#specs[@]} guest(s), mtu $MTU, accel $ACCEL, boot $(secs_since "$t0") s"
  echo "$LAB"
}

# A guest's state directory and its tap on the bridge (kept across restarts).
add_guest() {
  local name=$1 gd
  gd=$(guest_dir "$name")
  mkdir -p "$gd"
  echo "$2" >"$gd/ip"
  echo "$3" >"$gd/mem"
  net_add_tap "tap-$name"
  echo "GUESTS=\"\${GUESTS:-} $name\"" >>"$LAB_DIR/lab.env"
}

start_qemu() {
  local name=$1 gd ip mem cpu=max
  gd=$(guest_dir "$name")
  ip=$(cat "$gd/ip"); mem=$(cat "$gd/mem")
  rm -rf "$gd/share"
  mkdir -p "$gd/share/cmd" "$gd/share/out"
  [ "$ACCEL" = kvm ] && cpu=host
  date +%s%3N >"$gd/boot.start"
  # qemu runs inside the lab namespace so it can open its tap there. PVH boot of the plain
  # vmlinux; cryptomgr.notests etc. only shave TCG boot time. -daemonize returns once running.
  ip netns exec "$NS" nice -n 10 qemu-system-x86_64 \
    -name "$LAB-$name" -accel "$ACCEL" -cpu "$cpu" -smp 1 -m "$mem" \
    -machine pc -nodefaults -no-user-config -display none -no-reboot \
    -kernel "$VMLINUX" -initrd "$INITRAMFS" \
    -append "console=ttyS0 quiet panic=-1 cryptomgr.notests mitigations=off tsc=reliable no_timer_check lab.name=$name lab.ip=$ip/24 lab.mtu=$MTU" \
    -chardev "file,id=con,path=$gd/console.log" -serial chardev:con \
    -netdev "tap,id=n0,ifname=tap-$name,script=no,downscript=no" \
    -device "virtio-net-pci,netdev=n0,mac=$(lab_mac "$ip")" \
    -fsdev "local,id=fs0,path=$gd/share,security_model=none" \
    -device virtio-9p-pci,fsdev=fs0,mount_tag=lab \
    -daemonize -pidfile "$gd/qemu.pid" 2>"$gd/qemu.err" ||
    die "qemu for $name failed: $(cat "$gd/qemu.err")"
  log "booting $name ($ip) pid $(cat "$gd/qemu.pid")"
}

wait_ready() {
  local name=$1 timeout=$2 gd pid start
  gd=$(guest_dir "$name")
  pid=$(cat "$gd/qemu.pid")
  start=$(cat "$gd/boot.start")
  while [ ! -f "$gd/share/ready" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$gd/console.log" >&2; die "guest $name exited during boot"
    fi
    if [ $(( ($(now_ms) - start) / 1000 )) -ge "$timeout" ]; then
      tail -n 30 "$gd/console.log" >&2; die "guest $name not ready after $timeout s"
    fi
    sleep 0.2
  done
  grep -q '^status=ok' "$gd/share/ready" || { cat "$gd/share/ready" >&2; die "guest $name: rxe0 not ready"; }
  log "$name ready after $(secs_since "$start") s wall ($(sed -n 's/^uptime=//p' "$gd/share/ready") s guest uptime)"
}

# `lab.sh run [--timeout S] [--bg] GUEST CMD...` — one argument is a shell script line
# (pipes allowed); several are quoted word by word. Prints the guest's stdout/stderr and
# exits with its status. --bg prints an ID for `lab.sh wait GUEST ID` instead.
cmd_run() {
  load_lab
  local timeout=600 bg=0
  while [ $# -gt 0 ]; do
    case $1 in
      --timeout) timeout=$2; shift 2 ;;
      --bg) bg=1; shift ;;
      *) break ;;
    esac
  done
  [ $# -ge 2 ] || die "usage: lab.sh run [--timeout S] [--bg] GUEST CMD..."
  local name=$1; shift
  local gd; gd=$(guest_dir "$name")
  [ -f "$gd/share/ready" ] || die "no ready guest $name in $LAB"
  local id script
  id=$(date +%s%N)-$$-$RANDOM
  if [ $# -eq 1 ]; then script=$1; else script=$(printf '%q ' "$@"); fi
  printf '# timeout=%s\n%s\n' "$timeout" "$script" >"$gd/share/cmd/.$id.tmp"
  mv "$gd/share/cmd/.$id.tmp" "$gd/share/cmd/$id.sh"
  if [ "$bg" = 1 ]; then echo "$id"; return 0; fi
  cmd_wait "$name" "$id" "$((timeout + 30))"
}

# `lab.sh wait GUEST ID [TIMEOUT]`: exit status 124 if the command has not finished by then.
cmd_wait() {
  load_lab
  local name=$1 id=$2 timeout=${3:-630} gd pid t0
  gd=$(guest_dir "$name"); pid=$(cat "$gd/qemu.pid"); t0=$(now_ms)
  local out=$gd/share/out/$id
  while [ ! -f "$out.rc" ]; do
    kill -0 "$pid" 2>/dev/null || die "guest $name is gone"
    [ $(( ($(now_ms) - t0) / 1000 )) -lt "$timeout" ] || { log "no result from $name for $id"; exit 124; }
    sleep 0.2
  done
  cat "$out.stdout"
  cat "$out.stderr" >&2
  return "$(cat "$out.rc")"
}

# Stop a guest's qemu: ask the guest to power off, then TERM, then KILL.
stop_qemu() {
  local name=$1 gd pid i
  gd=$(guest_dir "$name")
  pid=$(cat "$gd/qemu.pid" 2>/dev/null) || return 0
  [ -f "$gd/share/ready" ] && touch "$gd/share/poweroff"
  for i in $(seq 20); do is_our_process "$pid" "$LAB-$name" || break; sleep 0.1; done
  if is_our_process "$pid" "$LAB-$name"; then
    kill "$pid"; sleep 0.5
    if is_our_process "$pid" "$LAB-$name"; then kill -9 "$pid"; fi
  fi
  rm -f "$gd/qemu.pid"
}

# `lab.sh restart GUEST [--boot-timeout S]`: reboot one guest (same address, tap, images), e.g.
# after a tool left a process the kernel cannot kill. Its rxe counters start from zero.
cmd_restart() {
  need_root; load_lab
  local name=${1:?usage: lab.sh restart GUEST} timeout=300
  [ "${2:-}" = --boot-timeout ] && timeout=$3
  [ -d "$(guest_dir "$name")" ] || die "no guest $name in $LAB"
  stop_qemu "$name"
  start_qemu "$name"
  wait_ready "$name" "$timeout"
}

# `lab.sh down [--keep]`: stop qemu and tcpdump, delete namespaces, drop state (unless --keep).
cmd_down() {
  need_root
  local keep=0
  [ "${1:-}" = --keep ] && keep=1
  load_lab
  local name gd pid hns
  for name in ${GUESTS:-}; do
    gd=$(guest_dir "$name")
    [ -f "$gd/share/ready" ] && touch "$gd/share/poweroff"
  done
  for name in ${GUESTS:-}; do stop_qemu "$name"; done
  if [ -f "$LAB_DIR/capture.pid" ]; then
    pid=$(cat "$LAB_DIR/capture.pid")
    is_our_process "$pid" tcpdump && kill -INT "$pid"
    rm -f "$LAB_DIR/capture.pid"
  fi
  for hns in ${HOSTNS_LIST:-}; do ip netns del "$hns" 2>/dev/null || true; done
  [ "${NS_CREATED:-0}" = 1 ] && ip netns del "$NS" 2>/dev/null
  [ "$(cat "$RUN_DIR/current" 2>/dev/null)" = "$LAB" ] && rm -f "$RUN_DIR/current"
  if [ "$keep" = 1 ]; then log "lab $LAB down (state kept in $LAB_DIR)"
  else rm -rf "$LAB_DIR"; log "lab $LAB down"; fi
}

cmd_status() {
  load_lab
  echo "lab $LAB: netns $NS, mtu $MTU, accel $ACCEL, host peers:${HOSTNS_LIST:- none}"
  local name gd
  for name in ${GUESTS:-}; do
    gd=$(guest_dir "$name")
    echo "guest $name: ip $(cat "$gd/ip") qemu pid $(cat "$gd/qemu.pid" 2>/dev/null)"
    sed 's/^/  /' "$gd/share/ready" 2>/dev/null || echo "  (not ready)"
  done
}
