#!/usr/bin/env bash
# Makes a virtualenv under CACHE_DIR that runs llama-cpp-python's server (`python -m
# llama_cpp.server`) on the llama.cpp that build_llama_server.sh built, and prints that venv's
# python on its last line.
#
#   bash tests/live_servers/install_llama_cpp_python.sh CACHE_DIR LLAMA_DIR
#
# LLAMA_DIR is build_llama_server.sh's llama.cpp-VERSION-shared directory (the parent of the
# llama-server binary's bin/). Its python/llama_cpp is the sdist's pure-Python package, whose
# ctypes bindings load libllama.so and libggml.so from llama_cpp/lib, a link to that build's bin/:
# llama-cpp-python is not compiled a second time (pip install llama-cpp-python builds the same
# llama.cpp again, ~10 minutes on 2 cores). A .pth file puts python/ on the venv's path; the
# server's dependencies come from PyPI, every one pinned in llama-cpp-python.lock, with
# --no-deps. Reused while the lock and LLAMA_DIR are the ones it was made with and it imports.
# Measured on a 2-core machine shared with a cargo build: ~15 s, 110 MB.
set -euo pipefail
cache=${1:?usage: install_llama_cpp_python.sh CACHE_DIR LLAMA_DIR}
llama=$(cd "${2:?usage: install_llama_cpp_python.sh CACHE_DIR LLAMA_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
venv="$cache/llamacpppythonvenv"
made_with="$(cat "$here/llama-cpp-python.lock")
$llama"
if [ "$(cat "$venv/made-with" 2>/dev/null)" = "$made_with" ] &&
    "$venv/bin/python" -c 'import llama_cpp.server.app' 2>/dev/null; then
  echo "llama-cpp-python: reused $venv" >&2
else
  rm -rf "$venv"
  started=$(date +%s)
  python3 -m venv "$venv"
  PIP_NO_CACHE_DIR=1 "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps \
    -r "$here/llama-cpp-python.lock" >&2
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$llama/python" >"$site/llama_cpp_python.pth"
  # The install must import (libllama.so included): a broken one fails here, in Python's words.
  "$venv/bin/python" -c 'import llama_cpp.server.app' >&2 ||
    { echo "llama-cpp-python does not import (above)" >&2; exit 1; }
  printf '%s' "$made_with" >"$venv/made-with"
  echo "llama-cpp-python installed in $(($(date +%s) - started)) s ($(du -sh "$venv" | cut -f1))" >&2
fi
echo "$venv/bin/python"
