#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default 15): CI's smoke run, and longer
# runs by hand (`scripts/fuzz.sh 600`). Each run starts from the committed corpus, fuzz/corpus/<target>;
# what it finds goes to a scratch directory, so the clone stays clean. A crash stops the script and
# leaves the input under fuzz/artifacts/<target>/ (fuzz/README.md says how to turn it into a test).
#
# Sanitizers need a nightly compiler, which this project cannot assume, so by default the targets are
# built with `-s none`: coverage-guided, catching panics, aborts, timeouts and runaway memory, not
# silent memory corruption. Where a nightly toolchain is installed, AddressSanitizer runs with
#   JOINER_FUZZ_TOOLCHAIN=+nightly JOINER_FUZZ_SANITIZER=address scripts/fuzz.sh 240
# (give it its own JOINER_FUZZ_TARGET_DIR: a cold instrumented build takes about 14 minutes here; if
# ASan stops at once with "ASan runtime does not come first", as it did on this machine with the
# runtime linked statically, add ASAN_OPTIONS=verify_asan_link_order=0). The targets are run as
# built, not through `cargo fuzz run`: under cargo, ASan's shadow memory collided with mappings
# made before it started ("Shadow memory range interleaves"), while the same binary ran alone.
# Only the Rust side is instrumented; HiGHS's C++ is built by its own cmake, without it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-15}"
toolchain=(${JOINER_FUZZ_TOOLCHAIN:-})
sanitizer="${JOINER_FUZZ_SANITIZER:-none}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --version 0.13.2
# its own target directory: instrumented builds share nothing with the test profile
export CARGO_TARGET_DIR="${JOINER_FUZZ_TARGET_DIR:-$PWD/fuzz/target}"
cargo "${toolchain[@]}" fuzz build -s "$sanitizer" --release
# cargo fuzz builds for the host; its binaries are run directly (see above)
host="$(rustc "${toolchain[@]}" -vV | sed -n 's/^host: //p')"
log="$(mktemp)"
for target in $(cargo "${toolchain[@]}" fuzz list); do
    scratch="$(mktemp -d)"
    echo "fuzz $target: ${seconds}s from $(ls "fuzz/corpus/$target" | wc -l) corpus inputs"
    status=0
    mkdir -p "fuzz/artifacts/$target"
    "$CARGO_TARGET_DIR/$host/release/$target" -artifact_prefix="fuzz/artifacts/$target/" \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        "$scratch" "fuzz/corpus/$target" >"$log" 2>&1 || status=$?
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|Done )' "$log" || true
    rm -rf "$scratch"
    if [ "$status" -ne 0 ]; then
        tail -n 40 "$log" >&2
        echo "fuzz $target failed (exit $status); the input is in fuzz/artifacts/$target/" >&2
        exit "$status"
    fi
done
rm -f "$log"
