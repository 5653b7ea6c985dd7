#!/usr/bin/env bash
# Runs every fuzz target (or those named) for SECONDS each with libFuzzer and prints, per
# target, the executions, the executions per second, the coverage and the findings.
#
#   fuzz/run-all.sh SECONDS [TARGET...]
#
# New corpus entries go to a scratch directory (the committed corpus/<target>/ is only read);
# crashing inputs land in fuzz/artifacts/<target>/, which tests/replay.rs replays once
# committed. FUZZ_SANITIZER=address|none (default none: the crates have no unsafe code, and
# ASan roughly halves the rate; `cabi` calls the drop-in library's unsafe C ABI, where ASan is
# worth its cost). Needs cargo-fuzz; uses RUSTC_BOOTSTRAP=1 on a stable toolchain.
set -u
secs=${1:?usage: fuzz/run-all.sh SECONDS [TARGET...]}
shift
targets=${*:-decode pcap responder completer model cabi}
san=${FUZZ_SANITIZER:-none}
cd "$(dirname "$0")"
export RUSTC_BOOTSTRAP=1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
echo "building (sanitizer $san)..." >&2
cargo fuzz build --sanitizer "$san" --features libfuzzer >&2 || exit 1
printf '%-10s %12s %9s %6s %8s  %s\n' target executions exec/s cov findings "artifacts"
status=0
for t in $targets; do
    log=$scratch/$t.log
    mkdir -p "$scratch/$t" "artifacts/$t"
    before=$(ls "artifacts/$t" | wc -l)
    cargo fuzz run --sanitizer "$san" --features libfuzzer "$t" "$scratch/$t" "corpus/$t" -- \
        -max_total_time="$secs" -timeout=25 -print_final_stats=1 >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    after=$(ls "artifacts/$t" | wc -l)
    found=$((after - before))
    if [ "$rc" -ne 0 ] && [ "$found" -eq 0 ]; then found="rc=$rc"; fi
    [ "$rc" -ne 0 ] && status=1
    printf '%-10s %12s %9s %6s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$found" \
        "$(ls -t "artifacts/$t" | head -3 | tr '\n' ' ')"
    if [ "$rc" -ne 0 ]; then
        grep -m1 -A12 -E 'panicked|ERROR: libFuzzer|SUMMARY' "$log" | sed 's/^/    /' >&2
    fi
done
exit $status
