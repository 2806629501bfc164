#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default 15): CI's smoke run, and longer
# runs by hand (`scripts/fuzz.sh 600`). Each run starts from the committed corpus, fuzz/corpus/<target>;
# what it finds goes to a scratch directory, so the clone stays clean. A crash stops the script and
# leaves the input under fuzz/artifacts/<target>/ (fuzz/README.md says how to turn it into a test).
#
# Sanitizers need a nightly compiler, which this project cannot assume, so the targets are built with
# `-s none`: coverage-guided, catching panics, aborts, timeouts and runaway memory, not silent memory
# corruption inside HiGHS's C++ (which the Rust side never sees as a crash).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-15}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --version 0.13.2
# its own target directory: instrumented builds share nothing with the test profile
export CARGO_TARGET_DIR="${JOINER_FUZZ_TARGET_DIR:-/var/tmp/joiner-fuzz-target}"
cargo fuzz build -s none --release
log="$(mktemp)"
for target in $(cargo fuzz list); do
    scratch="$(mktemp -d)"
    echo "fuzz $target: ${seconds}s from $(ls "fuzz/corpus/$target" | wc -l) corpus inputs"
    status=0
    cargo fuzz run -s none --release "$target" "$scratch" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 >"$log" 2>&1 || status=$?
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|Done )' "$log" || true
    rm -rf "$scratch"
    if [ "$status" -ne 0 ]; then
        tail -n 40 "$log" >&2
        echo "fuzz $target failed (exit $status); the input is in fuzz/artifacts/$target/" >&2
        exit "$status"
    fi
done
rm -f "$log"
