# shellcheck shell=bash
# Shared settings and helpers for the interop lab. Sourced by lab.sh and selftest.sh.

INTEROP_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_DIR=$(cd "$INTEROP_DIR/../.." && pwd)

# Everything downloaded or built lives here (git-ignored).
LAB_HOME=${ROCE_LAB_HOME:-$REPO_DIR/.lab}
CACHE_DIR=$LAB_HOME/cache        # debs, extracted trees, vmlinux, initramfs
RUN_DIR=$LAB_HOME/run            # one directory per live lab: state, shares, logs

# Guest userland, all fetched with `apt-get download` from the Debian archive.
GUEST_PKGS=(
  busybox-static
  libibverbs1 ibverbs-providers librdmacm1 ibverbs-utils rdmacm-utils perftest
  libnl-3-200 libnl-route-3-200 iproute2
  # shared libraries the above link against (checked at build time, see lib/prepare.sh)
  libc6 libgcc-s1 libmnl0 libbsd0 libmd0 libcap2 libbpf1 libelf1 zlib1g libzstd1
  liblzma5 libpci3 libudev1 libxtables12 libtirpc3 libgssapi-krb5-2 libkrb5-3
  libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1 libssl3 libibumad3 libselinux1
  libpcre2-8-0
)

# Kernel modules wanted in the guest; their dependencies are added from modules.dep.
GUEST_MODULES=(
  virtio_pci virtio_net 9pnet_virtio 9p crc32_generic crc32-pclmul
  rdma_rxe ib_uverbs ib_umad rdma_ucm
)

# Host tools needed by the harness itself (apt package names).
HOST_PKGS=(qemu-system-x86 iproute2 nftables tcpdump cpio kmod xz-utils busybox-static binutils ethtool)

log()  { printf '[lab %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die()  { log "error: $*"; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root"; }

# Epoch time with milliseconds, and a duration printer.
now_ms() { date +%s%3N; }
secs_since() { local t0=$1; awk -v a="$t0" -v b="$(now_ms)" 'BEGIN{printf "%.1f", (b-a)/1000}'; }

# Name of the lab to operate on: $ROCE_LAB, else the one `up` recorded last.
current_lab() {
  if [ -n "${ROCE_LAB:-}" ]; then echo "$ROCE_LAB"; return 0; fi
  [ -f "$RUN_DIR/current" ] || die "no lab is up (set ROCE_LAB or run: lab.sh up)"
  cat "$RUN_DIR/current"
}

# Load a lab's state file (NS, HOSTNS, MTU, GUESTS, ...) into the environment.
load_lab() {
  LAB=$(current_lab)
  LAB_DIR=$RUN_DIR/$LAB
  [ -f "$LAB_DIR/lab.env" ] || die "lab $LAB has no state in $LAB_DIR"
  # shellcheck disable=SC1091
  . "$LAB_DIR/lab.env"
}

guest_dir() { echo "$LAB_DIR/guests/$1"; }
