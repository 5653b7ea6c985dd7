#!/usr/bin/env bash
# Builds the drop-in library and makes target/<profile>/libibverbs.so.1 and librdmacm.so.1
# (symlinks to the cdylib cargo writes, deps/libroce_ibverbs.so: one library answers to both). Prints the directory to put in LD_LIBRARY_PATH.
# Also builds deps/libroce_netlink.so, which `roce run` preloads for rdma dev / rdma link.
#
#   provider/libibverbs/scripts/build-so.sh [--release]
#   LD_LIBRARY_PATH=$(provider/libibverbs/scripts/build-so.sh --release) ibv_devinfo -v
set -euo pipefail
cd "$(dirname "$0")/../../.."
profile=debug
args=()
if [ "${1:-}" = "--release" ]; then profile=release; args+=(--release); fi
cargo build -q -p roce-ibverbs -p roce-netlink "${args[@]}" >&2
dir="${CARGO_TARGET_DIR:-$(pwd)/target}/$profile"
ln -sfn deps/libroce_ibverbs.so "$dir/libibverbs.so.1"
ln -sfn deps/libroce_ibverbs.so "$dir/librdmacm.so.1"
echo "$dir"
