#!/usr/bin/env bash
# Runs every test (unit, integration, the feasibility checks on the bundled scenarios) in the release
# profile, the one `cargo run --release` and `cargo bench` use, so the README's two commands and the
# benches share one build in one target directory (`target/`, or `$CARGO_TARGET_DIR`).
#
# Without arguments the test binaries run three at a time (scripts/run_tests.py says why and how).
# Arguments go to `cargo test --release --all-targets`, which runs the binaries one after another:
# `scripts/test.sh -- --skip soak` passes a filter to every binary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
venv="$(cd "${JOINER_VENV:-.venv}" && pwd)"
export JOINER_PYTHON="${JOINER_PYTHON:-$venv/bin/python}"
export JOINER_MOTO="${JOINER_MOTO:-$venv/bin/moto_server}"
if [ $# -gt 0 ]; then
    exec cargo test --release --all-targets "$@"
fi
exec python3 scripts/run_tests.py
