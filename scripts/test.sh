#!/usr/bin/env bash
# Runs every test (unit, integration, the feasibility checks on the bundled scenarios) in the release
# profile, the one `cargo run --release` and `cargo bench` use, so the README's two commands and the
# benches share one build in one target directory (`target/`, or `$CARGO_TARGET_DIR`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export JOINER_PYTHON="${JOINER_PYTHON:-$PWD/.venv/bin/python}"
export JOINER_MOTO="${JOINER_MOTO:-$PWD/.venv/bin/moto_server}"
cargo test --release --all-targets "$@"
