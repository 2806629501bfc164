#!/usr/bin/env bash
# Runs every test (unit, integration, plan-check on the bundled scenarios) in the release profile that
# benches also use, so one warm target directory serves both.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export JOINER_PYTHON="${JOINER_PYTHON:-$PWD/.venv/bin/python}"
export JOINER_MOTO="${JOINER_MOTO:-$PWD/.venv/bin/moto_server}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/joiner-target}"
cargo test --release --all-targets "$@"
