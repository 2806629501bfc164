#!/usr/bin/env bash
# Regenerates models/: runs `joiner solve-dump` on every scenario in fixtures/scenarios/ with the catalog its
# `# catalog: NAME` header names, writing models/<scenario>.{lp,mps,json}. Dumps of scenarios that no longer
# exist are removed. tests/models_golden.rs re-runs the same command and compares with what is committed.
#
# The arguments below make the dump reproducible: one HiGHS thread (HiGHS is seeded, so one thread gives the
# same answer every run), a time limit far above what any scenario needs (an answer cut short by the clock
# would depend on machine speed) and gap 0, so the integer program is solved to proven optimality and its
# value can be checked against HiGHS reading the .mps on its own. The only run-dependent value in the JSON
# is the wall-clock `plan.solver.seconds`, which the golden test ignores.
set -euo pipefail
# tests/models_golden.rs reads this DUMP_ARGS line; keep it on one line.
DUMP_ARGS=(--time-limit 120 --gap 0 --threads 1 --max-fallbacks 20)
cd "$(dirname "$0")/.."
cargo build --release
joiner="${CARGO_TARGET_DIR:-target}/release/joiner"
mkdir -p models
# the JOINER_* environment variables stand in for solve options; none may leak into a dump
unset JOINER_SNAPSHOT JOINER_CATALOG JOINER_REGION JOINER_TIME_LIMIT JOINER_GAP JOINER_THREADS
names=()
for scenario in fixtures/scenarios/*.yaml; do
  name="$(basename "$scenario" .yaml)"
  catalog="$(sed -n 's/^# catalog:[[:space:]]*//p' "$scenario" | head -n 1 | tr -d '[:space:]')"
  if [ -z "$catalog" ]; then
    echo "$scenario: no '# catalog: NAME' header line" >&2
    exit 1
  fi
  if [ ! -f "fixtures/catalogs/$catalog.json" ]; then
    echo "$scenario: catalog fixtures/catalogs/$catalog.json does not exist" >&2
    exit 1
  fi
  rm -f "models/$name.lp" "models/$name.mps" "models/$name.json"
  "$joiner" solve-dump --snapshot "$scenario" --catalog "fixtures/catalogs/$catalog.json" "${DUMP_ARGS[@]}" --out "models/$name"
  names+=("$name")
done
# dumps whose scenario is gone would otherwise go stale unnoticed
for f in models/*.json models/*.lp models/*.mps; do
  [ -e "$f" ] || continue
  stem="$(basename "${f%.*}")"
  if [ ! -f "fixtures/scenarios/$stem.yaml" ]; then
    echo "removing $f (no fixtures/scenarios/$stem.yaml)" >&2
    rm -f "$f"
  fi
done
echo "dumped ${#names[@]} scenarios into models/" >&2
