# shellcheck shell=bash
# Network plumbing: the lab namespace with its bridge, host peers, capture and loss.
# Every object lives inside namespaces this harness creates; nothing touches the host's
# own interfaces or routes. Addresses are restricted to 198.18.0.0/24.

check_lab_ip() {
  [[ $1 =~ ^198\.18\.0\.([0-9]{1,3})$ ]] && [ "${BASH_REMATCH[1]}" -ge 1 ] &&
    [ "${BASH_REMATCH[1]}" -le 254 ] || die "address $1 is outside 198.18.0.0/24"
}

# Deterministic MAC from the last octet: 52:54:00:18:00:XX.
lab_mac() { printf '52:54:00:18:00:%02x' "${1##*.}"; }

net_create() {
  ip netns add "$NS"
  echo "NS_CREATED=1" >>"$LAB_DIR/lab.env"
  ip netns exec "$NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "$NS" link set lo up
  ip -n "$NS" link add br0 mtu "$MTU" type bridge stp_state 0 forward_delay 0
  ip -n "$NS" link set br0 up
}

# A persistent tap per guest, already on the bridge; qemu (run inside $NS) attaches to it.
net_add_tap() {
  local tap=$1
  ip -n "$NS" tuntap add dev "$tap" mode tap vnet_hdr
  ip -n "$NS" link set "$tap" mtu "$MTU" master br0 up
}

# `lab.sh hostjoin [--name N] [--ip A]`: a namespace $LAB-N whose eth0 is a veth on br0.
# A host process run there (ip netns exec $LAB-N ...) is a peer of the guests on the wire.
cmd_hostjoin() {
  need_root; load_lab
  local name=host ip=198.18.0.10
  while [ $# -gt 0 ]; do
    case $1 in
      --name) name=$2; shift 2 ;;
      --ip) ip=$2; shift 2 ;;
      *) die "hostjoin: unknown argument $1" ;;
    esac
  done
  check_lab_ip "$ip"
  local hns=$LAB-$name veth=vh-$name
  [ -e "/run/netns/$hns" ] && die "$hns already exists"
  ip netns add "$hns"
  echo "HOSTNS_LIST=\"\${HOSTNS_LIST:-} $hns\"" >>"$LAB_DIR/lab.env"
  ip -n "$hns" link set lo up
  ip -n "$NS" link add "$veth" mtu "$MTU" type veth peer name eth0 netns "$hns"
  ip -n "$NS" link set "$veth" master br0 up
  ip -n "$hns" link set eth0 address "$(lab_mac "$ip")" mtu "$MTU" up
  ip -n "$hns" addr add "$ip/24" dev eth0
  # A UDP_SEGMENT (GSO) batch would cross veth and bridge as one oversized frame, so a capture
  # on br0 would show super-frames whose ICRC is the last segment's. Segment at the veth, like
  # a real NIC puts separate frames on the wire, and compute checksums in software.
  ip netns exec "$hns" ethtool -K eth0 tx-udp-segmentation off tx off >/dev/null
  log "host peer $hns: eth0 $ip/24 mtu $MTU (bridge port $veth)"
  echo "$hns"
}

# `lab.sh host [--name N] CMD...`: run CMD in the host-peer namespace.
cmd_host() {
  need_root; load_lab
  local name=host
  [ "${1:-}" = --name ] && { name=$2; shift 2; }
  [ -e "/run/netns/$LAB-$name" ] || die "no host peer $LAB-$name (run: lab.sh hostjoin)"
  exec ip netns exec "$LAB-$name" "$@"
}

# Map a guest name, "host"-peer name or interface name to a bridge port.
bridge_port() {
  if [ -d "$LAB_DIR/guests/$1" ]; then echo "tap-$1"
  elif [ -e "/run/netns/$LAB-$1" ]; then echo "vh-$1"
  else echo "$1"; fi
}

# `lab.sh capture start [--iface IF] [--filter EXPR]` / `lab.sh capture stop [DEST.pcap]`
cmd_capture() {
  need_root; load_lab
  local action=${1:-}; shift || true
  local pcap=$LAB_DIR/capture.pcap pidf=$LAB_DIR/capture.pid
  case $action in
    start)
      local iface=br0 filter="udp port 4791 or tcp port 18515 or arp"
      while [ $# -gt 0 ]; do
        case $1 in
          --iface) iface=$(bridge_port "$2"); shift 2 ;;
          --filter) filter=$2; shift 2 ;;
          *) die "capture start: unknown argument $1" ;;
        esac
      done
      [ -f "$pidf" ] && die "a capture is already running"
      rm -f "$pcap" "$LAB_DIR/capture.log"
      ip netns exec "$NS" tcpdump -i "$iface" --immediate-mode -B 32768 -n -s 0 -U -Z root -w "$pcap" "$filter" \
        >"$LAB_DIR/capture.log" 2>&1 </dev/null &
      echo $! >"$pidf"
      local i
      for i in $(seq 50); do grep -q 'listening on' "$LAB_DIR/capture.log" && break; sleep 0.1; done
      grep -q 'listening on' "$LAB_DIR/capture.log" || die "tcpdump did not start: $(cat "$LAB_DIR/capture.log")"
      log "capturing $iface into $pcap"
      ;;
    stop)
      [ -f "$pidf" ] || die "no capture is running"
      local pid; pid=$(cat "$pidf")
      if is_our_process "$pid" tcpdump; then
        kill -INT "$pid"
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
      fi
      rm -f "$pidf"
      grep -E 'packets (captured|dropped by kernel)' "$LAB_DIR/capture.log" >&2 || true
      if [ -n "${1:-}" ]; then cp "$pcap" "$1"; echo "$1"; else echo "$pcap"; fi
      ;;
    *) die "usage: lab.sh capture start [--iface IF] [--filter EXPR] | stop [DEST]" ;;
  esac
}

# `lab.sh loss TARGET PERCENT`: drop PERCENT% of RoCEv2 (UDP 4791) frames the bridge
# forwards toward TARGET (guest name, host-peer name or bridge port). 0 removes the rule.
# `lab.sh loss show` prints the rules with their packet counters.
cmd_loss() {
  need_root; load_lab
  mkdir -p "$LAB_DIR/loss"
  if [ "${1:-}" = show ]; then
    ip netns exec "$NS" nft list table bridge roce_lab 2>/dev/null || echo "no loss rules"
    return 0
  fi
  [ $# -eq 2 ] || die "usage: lab.sh loss TARGET PERCENT | loss show"
  local port; port=$(bridge_port "$1")
  ip -n "$NS" link show "$port" >/dev/null 2>&1 || die "no bridge port $port"
  local permyriad
  permyriad=$(awk -v p="$2" 'BEGIN{ if (p !~ /^[0-9.]+$/ || p > 100) exit 1; printf "%d", p*100 + 0.5 }') ||
    die "bad percentage $2"
  if [ "$permyriad" -eq 0 ]; then rm -f "$LAB_DIR/loss/$port"; else echo "$permyriad" >"$LAB_DIR/loss/$port"; fi
  # Rebuild the whole table from the per-port settings (atomic nft transaction).
  local f p rules=""
  for f in "$LAB_DIR"/loss/*; do
    [ -f "$f" ] || continue
    p=$(basename "$f")
    rules+="    oifname \"$p\" udp dport 4791 counter comment \"seen $p\"
    oifname \"$p\" udp dport 4791 numgen random mod 10000 < $(cat "$f") counter drop comment \"loss $p\"
"
  done
  ip netns exec "$NS" nft -f - <<EOT
table bridge roce_lab {}
delete table bridge roce_lab
table bridge roce_lab {
  chain forward {
    type filter hook forward priority 0; policy accept;
$rules  }
}
EOT
  log "loss toward $port: $2%"
}
