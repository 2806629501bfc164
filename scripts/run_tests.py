#!/usr/bin/env python3
"""Builds every test target once and runs the test binaries a few at a time.

`cargo test` runs its binaries one after another. Most of joiner's end-to-end binaries spend their
time waiting on real clocks (pods' grace periods, lease durations, the collector's interval, the
four-minute operator soak) rather than on the CPU, so one after another they take about 13 minutes
where three at a time take about 6. Each binary runs as cargo would run it: from the
package root, with its own test threads and `CARGO_MANIFEST_DIR` set. Its output is kept and
printed whole when it finishes, so the lines of binaries running side by side never interleave.

The longest binaries start first, by the durations of the previous run, which are kept beside the
build in `$CARGO_TARGET_DIR/joiner-test-seconds.json`; a binary not seen before starts before all
of them. Every binary runs even when one fails (cargo's `--no-fail-fast`), and the exit status is
1 if any failed. `JOINER_TEST_JOBS` sets how many run at once (3).
"""

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build():
    """Builds all targets in the test profile; returns (label, executable) for each test binary."""
    cmd = [
        "cargo", "test", "--release", "--all-targets", "--no-run",
        "--message-format=json-render-diagnostics",
    ]
    out = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False)
    if out.returncode != 0:
        sys.exit(out.returncode)
    tests = []
    for line in out.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg["profile"]["test"]:
            continue
        if msg.get("executable"):
            target = msg["target"]
            tests.append((f"{target['kind'][0]} {target['name']}", msg["executable"]))
    return tests


def run(label, exe, env):
    started = time.monotonic()
    out = subprocess.run([exe], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, errors="replace", check=False)
    return label, out.returncode, time.monotonic() - started, out.stdout


def main():
    target_dir = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    if not target_dir.is_absolute():
        target_dir = ROOT / target_dir
    history_file = target_dir / "joiner-test-seconds.json"
    try:
        history = json.loads(history_file.read_text())
    except (OSError, ValueError):
        history = {}
    jobs = int(os.environ.get("JOINER_TEST_JOBS", "3"))
    if jobs < 1:
        sys.exit("JOINER_TEST_JOBS must be at least 1")
    tests = build()
    tests.sort(key=lambda t: -history.get(t[0], float("inf")))
    env = dict(os.environ, CARGO_MANIFEST_DIR=str(ROOT))
    print(f"running {len(tests)} test binaries, {jobs} at a time", flush=True)
    started = time.monotonic()
    seconds, failed = {}, []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        running = [pool.submit(run, label, exe, env) for label, exe in tests]
        for done in as_completed(running):
            label, code, took, output = done.result()
            seconds[label] = round(took, 1)
            verdict = "ok" if code == 0 else f"FAILED (exit {code})"
            print(f"\n===== {label}: {verdict} in {took:.1f} s", flush=True)
            print(output, end="", flush=True)
            if code != 0:
                failed.append(label)
    history.update(seconds)
    try:
        history_file.write_text(json.dumps(history, indent=1, sort_keys=True))
    except OSError as e:
        print(f"durations not kept: {e}", file=sys.stderr)
    print(f"\n{len(tests)} test binaries in {time.monotonic() - started:.0f} s; the longest:")
    for label, took in sorted(seconds.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {took:7.1f} s  {label}")
    if failed:
        print(f"FAILED: {', '.join(sorted(failed))}")
        sys.exit(1)
    print("all passed")


if __name__ == "__main__":
    main()
