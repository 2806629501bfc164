#!/usr/bin/env bash
# Installs what building and testing joiner needs on a fresh Debian machine that has only the Rust
# toolchain: cmake, a C++ compiler and libclang (HiGHS is built from source by highs-sys, bindgen needs
# libclang), readelf (tests/deploy.rs reads the binary's shared libraries), and a Python venv
# (scripts/requirements.txt) with PyYAML for the independent plan checker, moto, the EC2/SQS emulator
# the AWS provider is tested against, and helm-python-sdk and kubernetes-validate, which lint, render
# and validate the Helm chart. Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v c++ >/dev/null || need+=(g++)
# libclang.so itself: libclang-cpp (pulled in by other packages) does not satisfy bindgen
ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1 || need+=(libclang-dev)
command -v readelf >/dev/null || need+=(binutils)
# tests/top.rs drives `joiner top` in a tmux pane and reads its screen
command -v tmux >/dev/null || need+=(tmux)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# The venv is .venv in the clone unless JOINER_VENV names another directory (CI keeps one outside its
# clones); it keeps a copy of the requirements it was made from, so a changed pin reinstalls it.
venv="${JOINER_VENV:-.venv}"
if [ ! -x "$venv/bin/python" ] || ! cmp -s scripts/requirements.txt "$venv/requirements.txt" \
    || ! "$venv/bin/python" -c 'import yaml, moto, helm_python, kubernetes_validate' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r scripts/requirements.txt
  cp scripts/requirements.txt "$venv/requirements.txt"
fi
