#!/usr/bin/env bash
# Builds llama.cpp's llama-server and its shared libraries, CPU only, for the real-server tests
# (tests/live_llamacpp.rs, and tests/live_llama_cpp_python.rs through the same libraries).
#
#     bash tests/live_servers/build_llama_server.sh CACHE_DIR
#
# The sources are the llama.cpp vendored in the PyPI sdist of llama-cpp-python (PyPI is the only
# registry CI reaches), pinned below. ggml and llama are shared libraries (BUILD_SHARED_LIBS=ON),
# next to the binary in bin/ and found through an RPATH of $ORIGIN, so the one build serves both
# llama-server and llama-cpp-python's ctypes bindings (which load libllama.so and libggml.so from
# the package's lib/ directory): no second compile. Built for the baseline x86-64
# (GGML_NATIVE=OFF: a build cached on one machine must not die of SIGILL on another), without
# curl, OpenSSL, the web UI, tests or examples, and only the llama-server target and the
# libraries it and llama-cpp-python load. cmake comes from PyPI, pinned, into a small venv.
#
# Idempotent: CACHE_DIR/llama.cpp-VERSION-shared/bin/llama-server is reused when it is there and
# runs (the -shared suffix: a cache of the older static build is not taken for this one);
# CACHE_DIR/llama.cpp-VERSION-shared/gguf-py is the same sources' gguf package
# (make_tiny_gguf.py uses it) and CACHE_DIR/llama.cpp-VERSION-shared/python/llama_cpp the same
# sdist's pure-Python llama_cpp package, its lib/ a link to bin/ (install_llama_cpp_python.sh puts
# it on a venv's path). Progress goes to stderr; the last line on stdout is the binary's path.
set -euo pipefail
version=0.3.36
cmake_version=4.4.4
cache=${1:?usage: build_llama_server.sh CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
dest="$cache/llama.cpp-$version-shared"
bin="$dest/bin/llama-server"
started=$(date +%s)
if [ -x "$bin" ] && [ -d "$dest/gguf-py/gguf" ] && [ -f "$dest/python/llama_cpp/lib/libllama.so" ] &&
    "$bin" --version >/dev/null 2>&1; then
  echo "llama-server (llama-cpp-python $version) reused from $dest in $(($(date +%s) - started)) s" >&2
  echo "$bin"
  exit 0
fi
rm -rf "$dest"
work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
# A small venv with pip and the pinned cmake (the system's python3 may have no pip, and a pinned
# cmake builds the same everywhere).
buildvenv="$cache/buildvenv-cmake$cmake_version"
if [ ! -x "$buildvenv/bin/cmake" ]; then
  rm -rf "$buildvenv"
  python3 -m venv "$buildvenv"
  "$buildvenv/bin/pip" install --quiet --disable-pip-version-check "cmake==$cmake_version" >&2
fi
cmake="$buildvenv/bin/cmake"
# The sdist alone (--no-binary for this package only: its build requirements, cmake and ninja,
# come as wheels for pip's metadata step instead of being compiled from source).
"$buildvenv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
  --no-binary llama-cpp-python "llama-cpp-python==$version" -d "$work" >&2
tar xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work" "llama_cpp_python-$version/vendor/llama.cpp" \
  "llama_cpp_python-$version/llama_cpp"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
fetched=$(date +%s)
echo "llama-server: sources and cmake in $((fetched - started)) s; building (CPU only, 2 jobs)" >&2
nice -n 10 "$cmake" -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN' \
  -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF >"$work/configure.log" 2>&1 ||
  { tail -n 40 "$work/configure.log" >&2; echo "llama-server: cmake configure failed" >&2; exit 1; }
nice -n 10 "$cmake" --build "$work/build" --target llama-server llama ggml ggml-base ggml-cpu -j "${FIREDUP_BUILD_JOBS:-2}" \
  >"$work/build.log" 2>&1 ||
  { tail -n 40 "$work/build.log" >&2; echo "llama-server: build failed" >&2; exit 1; }
mkdir -p "$dest/bin.tmp"
cp "$work/build/bin/llama-server" "$dest/bin.tmp/"
# The libraries with their version links (libllama.so -> libllama.so.0 -> libllama.so.0.0.N).
cp -a "$work/build/bin/"*.so* "$dest/bin.tmp/"
cp -r "$src/gguf-py" "$dest/gguf-py"
mkdir -p "$dest/python"
cp -r "$work/llama_cpp_python-$version/llama_cpp" "$dest/python/llama_cpp"
ln -s ../../bin "$dest/python/llama_cpp/lib"
"$dest/bin.tmp/llama-server" --version >&2
mv "$dest/bin.tmp" "$dest/bin"
echo "llama-server (llama-cpp-python $version) built in $(($(date +%s) - fetched)) s ($(($(date +%s) - started)) s with the download)" >&2
echo "$bin"
