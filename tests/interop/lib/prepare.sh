# shellcheck shell=bash
# `lab.sh prepare`: host packages, guest downloads, kernel extraction, initramfs.
#
# Cache layout ($CACHE_DIR):
#   debs/                    .deb files from `apt-get download`
#   kernel-<kver>/vmlinux    uncompressed ELF kernel (PVH entry, fast under TCG)
#   kernel-<kver>/modules/   the .ko files the guest loads, plus modules.load (load order)
#   rootfs/                  extracted guest userland (busybox, rdma-core, perftest, iproute2)
#   initramfs-<key>.cpio     uncompressed newc archive = rootfs + modules + guest-init.sh
#   current.env              KVER, VMLINUX, INITRAMFS of the last successful prepare

APT_OPTS=(-q -o APT::Sandbox::User=root)

ensure_host_packages() {
  local missing=() p
  declare -A probe=([qemu-system-x86]=qemu-system-x86_64 [iproute2]=ip [nftables]=nft
    [tcpdump]=tcpdump [cpio]=cpio [kmod]=depmod [xz-utils]=xz [busybox-static]=busybox
    [binutils]=objdump [ethtool]=ethtool)
  for p in "${HOST_PKGS[@]}"; do
    command -v "${probe[$p]}" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing host packages: ${missing[*]}"
  apt-get "${APT_OPTS[@]}" update >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
}

# The concrete kernel image package behind the linux-image-amd64 metapackage.
kernel_package() {
  local k
  k=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  if [ -z "$k" ]; then
    apt-get "${APT_OPTS[@]}" update >/dev/null
    k=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  fi
  [ -n "$k" ] || die "cannot resolve linux-image-amd64 to a kernel package"
  echo "$k"
}

# Download the given packages into debs/, skipping files already there.
download_debs() {
  local dir=$CACHE_DIR/debs file want=()
  mkdir -p "$dir"
  # --print-uris lists "'URI' FILE SIZE HASH"; FILE starts with "PACKAGE_".
  while read -r _ file _; do
    [ -f "$dir/$file" ] || want+=("${file%%_*}")
  done < <(apt-get "${APT_OPTS[@]}" download --print-uris "$@" 2>/dev/null)
  if [ ${#want[@]} -gt 0 ]; then
    log "apt-get download: ${want[*]}"
    # Stale package lists point at files the archive no longer has: update once and retry.
    (cd "$dir" && apt-get "${APT_OPTS[@]}" download "${want[@]}" >/dev/null) ||
      { apt-get "${APT_OPTS[@]}" update >/dev/null &&
        (cd "$dir" && apt-get "${APT_OPTS[@]}" download "${want[@]}" >/dev/null); } ||
      die "apt-get download failed"
  fi
  # Print the file of each package (newest version if several are cached).
  local p
  for p in "$@"; do
    file=$(find "$dir" -maxdepth 1 -name "${p}_*.deb" | sort -V | tail -1)
    [ -n "$file" ] || die "package $p was not downloaded"
    echo "$file"
  done
}

# Decompress the payload of a bzImage into an ELF vmlinux (like scripts/extract-vmlinux).
extract_vmlinux() {
  local bz=$1 out=$2 magic off
  for magic in 'xz:\xfd7zXZ\x00' 'gz:\x1f\x8b\x08' 'zstd:\x28\xb5\x2f\xfd'; do
    for off in $(LC_ALL=C grep -obUaP "${magic#*:}" "$bz" | cut -d: -f1); do
      case ${magic%%:*} in
        xz)   tail -c +$((off + 1)) "$bz" | xz -dc 2>/dev/null >"$out.tmp" || true ;;
        gz)   tail -c +$((off + 1)) "$bz" | gzip -dc 2>/dev/null >"$out.tmp" || true ;;
        zstd) tail -c +$((off + 1)) "$bz" | zstd -dc 2>/dev/null >"$out.tmp" || true ;;
      esac
      if [ "$(head -c 4 "$out.tmp" | od -An -c | tr -d ' ')" = '177ELF' ]; then
        mv "$out.tmp" "$out"; return 0
      fi
    done
  done
  rm -f "$out.tmp"
  die "could not find a compressed ELF kernel inside $bz"
}

prepare_kernel() {
  local deb=$1 kver=$2 kdir=$CACHE_DIR/kernel-$2 tmp m
  [ -f "$kdir/done" ] && return 0
  log "extracting kernel $kver"
  rm -rf "$CACHE_DIR"/kx.* "$CACHE_DIR"/initrd.*
  tmp=$(mktemp -d "$CACHE_DIR/kx.XXXXXX")
  dpkg-deb -x "$deb" "$tmp"
  rm -rf "$kdir"; mkdir -p "$kdir/modules"
  extract_vmlinux "$tmp/boot/vmlinuz-$kver" "$kdir/vmlinux"
  depmod -b "$tmp" "$kver"
  # modprobe --show-depends prints "insmod PATH" lines in load order (dependencies first).
  : >"$kdir/modules/modules.load"
  for m in "${GUEST_MODULES[@]}"; do
    modprobe -d "$tmp" -S "$kver" --show-depends "$m" | awk '$1=="insmod"{print $2}'
  done | awk '!seen[$0]++' | while read -r m; do
    cp "$m" "$kdir/modules/"
    basename "$m" >>"$kdir/modules/modules.load"
  done
  rm -rf "$tmp"
  touch "$kdir/done"
}

# Guest userland: extract every package into one tree, drop docs, check shared libraries.
prepare_rootfs() {
  local root=$CACHE_DIR/rootfs key=$1; shift
  [ -f "$root.key" ] && [ "$(cat "$root.key")" = "$key" ] && return 0
  log "extracting guest userland (${#GUEST_PKGS[@]} packages)"
  rm -rf "$root"; mkdir -p "$root"
  local deb
  for deb in "$@"; do dpkg-deb -x "$deb" "$root"; done
  rm -rf "$root"/usr/share/{doc,man,info,locale,lintian,bug,zsh,bash-completion} \
         "$root"/usr/lib/x86_64-linux-gnu/gconv "$root"/etc/init.d "$root"/lib/systemd \
         "$root"/usr/sbin/arpd "$root"/usr/lib/x86_64-linux-gnu/tc/q_atm.so
  check_shared_libs "$root"
  echo "$key" >"$root.key"
}

# Every ELF in the rootfs must find its NEEDED libraries inside the rootfs.
check_shared_libs() {
  local root=$1 f lib absent=""
  while read -r f; do
    for lib in $(objdump -p "$f" 2>/dev/null | awk '/NEEDED/{print $2}'); do
      [ -e "$root/lib/x86_64-linux-gnu/$lib" ] || [ -e "$root/usr/lib/x86_64-linux-gnu/$lib" ] ||
        absent+=" ${f#"$root"}:$lib"
    done
  done < <(find "$root" -type f \( -path '*/bin/*' -o -path '*/sbin/*' -o -name '*.so*' \) \
             -exec sh -c 'head -c4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
  [ -z "$absent" ] || die "guest libraries absent (add their packages to GUEST_PKGS):$absent"
}

build_initramfs() {
  local kver=$1 out=$2 stage
  log "building initramfs $(basename "$out")"
  stage=$(mktemp -d "$CACHE_DIR/initrd.XXXXXX")
  cp -a "$CACHE_DIR/rootfs/." "$stage/"
  mkdir -p "$stage"/{proc,sys,dev,tmp,run,share,root,etc,lib/modules,usr/sbin}
  cp "$CACHE_DIR/kernel-$kver/modules/"* "$stage/lib/modules/"
  install -m 0755 "$INTEROP_DIR/guest-init.sh" "$stage/init"
  install -D -m 0755 "$INTEROP_DIR/guest-rxe-drops.sh" "$stage/usr/local/bin/rxe-drops"
  # busybox applets for everything the packages do not provide (real ip/rdma win).
  local a
  for a in $("$stage/bin/busybox" --list-full); do
    [ -e "$stage/$a" ] || [ -L "$stage/$a" ] || { mkdir -p "$stage/$(dirname "$a")"; ln -s /bin/busybox "$stage/$a"; }
  done
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$stage/etc/passwd"
  printf 'root:x:0:\n' >"$stage/etc/group"
  printf '127.0.0.1 localhost\n' >"$stage/etc/hosts"
  (cd "$stage" && find . -print0 | cpio --null -o -H newc --quiet) >"$out.tmp"
  mv "$out.tmp" "$out"
  rm -rf "$stage"
}

cmd_prepare() {
  need_root
  local t0 kpkg kver debs kdeb key initrd
  t0=$(now_ms)
  mkdir -p "$CACHE_DIR"
  ensure_host_packages
  kpkg=$(kernel_package)
  kver=${kpkg#linux-image-}
  mapfile -t debs < <(download_debs "$kpkg" "${GUEST_PKGS[@]}")
  kdeb=${debs[0]}
  prepare_kernel "$kdeb" "$kver"
  # The rootfs and initramfs are rebuilt when a package file or the guest init changes.
  key=$(printf '%s\n' "${debs[@]:1}" | xargs -n1 basename | sha256sum | cut -c1-16)
  prepare_rootfs "$key" "${debs[@]:1}"
  key=$( (echo "$kver $key"; cat "$INTEROP_DIR"/guest-*.sh "$INTEROP_DIR/lib/prepare.sh") | sha256sum | cut -c1-16)
  initrd=$CACHE_DIR/initramfs-$key.cpio
  if [ ! -f "$initrd" ]; then
    rm -f "$CACHE_DIR"/initramfs-*.cpio
    build_initramfs "$kver" "$initrd"
  fi
  cat >"$CACHE_DIR/current.env" <<EOT
KVER=$kver
VMLINUX=$CACHE_DIR/kernel-$kver/vmlinux
INITRAMFS=$initrd
EOT
  probe_accel >/dev/null
  log "prepare done in $(secs_since "$t0") s: kernel $kver, initramfs $(du -h "$initrd" | cut -f1), accel $(probe_accel)"
}

# KVM if it can really boot this kernel (on kvm_pvm hosts it cannot), else TCG. Cached.
probe_accel() {
  local f=$CACHE_DIR/accel
  if [ ! -f "$f" ]; then
    local acc=tcg
    if [ -w /dev/kvm ] && [ -f "$CACHE_DIR/current.env" ]; then
      # shellcheck disable=SC1091
      . "$CACHE_DIR/current.env"
      # No initrd: a working KVM reaches "Kernel panic ... VFS" within seconds.
      if timeout 20 qemu-system-x86_64 -accel kvm -cpu host -m 256 -nodefaults -no-user-config \
           -display none -serial stdio -no-reboot -kernel "$VMLINUX" \
           -append 'console=ttyS0 panic=-1' 2>/dev/null </dev/null | grep -q 'Kernel panic'; then
        acc=kvm
      fi
    fi
    echo "$acc" >"$f"
  fi
  cat "$f"
}
