#!/usr/bin/env bash
# The portable firedup (issue 25): one build whose binary runs on any x86_64 Linux from glibc 2.17
# (manylinux2014), as uv's and ruff's do. It is the pip wheel's build: maturin links with Zig
# (`--zig`, the `ziglang` package from PyPI: no toolchain from anywhere else) against glibc 2.17's
# symbols, and the wheel it makes carries the binary. It builds with Cargo.toml's `dist` profile
# (fat LTO, one codegen unit, size-optimized but for the per-line path: a smaller text is less
# resident memory, issue 28). `cargo build --release` stays the developer build (this machine's
# glibc).
#
#   bash scripts/build-portable.sh
#
# Leaves in TARGET/portable/ (TARGET: cargo's target directory, `target` unless CARGO_TARGET_DIR):
#   firedup              the stripped binary (what `run --host` should copy: FIREDUP_REMOTE_BIN)
#   firedup.debug        its debug info, split off (not shipped; gdb finds it by .gnu_debuglink)
#   firedup-*.whl        the wheel (tag manylinux2014_x86_64), carrying that stripped binary
# and fails unless the binary needs glibc <= 2.17, is at most 16 MiB and runs `--version`, and
# the wheel is tagged manylinux2014. Prints the wheel's path on its last line.
#
# maturin, ziglang and wheel are pinned and live in a virtualenv in the cache directory (the one
# .ci/run uses), made on first use. The cargo build goes to TARGET/x86_64-unknown-linux-gnu/dist,
# beside (not reusing) the developer build in TARGET/release.
set -euo pipefail
cd "$(dirname "$0")/.."
maturin_version=1.16.0 ziglang_version=0.17.1 wheel_version=0.45.1
max_glibc=2.17 max_bytes=$((16 * 1024 * 1024))
venv="${XDG_CACHE_HOME:-$HOME/.cache}/firedup-ci/maturinvenv"
if [ "$("$venv/bin/maturin" --version 2>/dev/null)" != "maturin $maturin_version" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" - "$ziglang_version" "$wheel_version" 2>/dev/null <<'EOF'; then
import sys
from importlib.metadata import version
sys.exit(version("ziglang") != sys.argv[1] or version("wheel") != sys.argv[2])
EOF
  "$venv/bin/pip" install --quiet --disable-pip-version-check "maturin==$maturin_version" \
    "ziglang==$ziglang_version" "wheel==$wheel_version"
fi
target=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
out="$target/portable"
rm -rf "$out"
mkdir -p "$out/built"
started=$(date +%s)
# maturin finds Zig as `python -m ziglang` with the venv's python first on PATH. Not --strip:
# the debug info is split off below instead of thrown away.
(cd python && PATH="$venv/bin:$PATH" maturin build --profile dist --quiet --zig \
  --compatibility manylinux2014 --out "$out/built")
built=$(date +%s)
wheel=$(ls "$out"/built/firedup-*.whl)
"$venv/bin/python" -m wheel unpack --dest "$out/unpacked" "$wheel" >/dev/null
bin=$(ls "$out"/unpacked/firedup-*/firedup-*.data/scripts/firedup)
objcopy --only-keep-debug "$bin" "$out/firedup.debug"
objcopy --strip-all --add-gnu-debuglink="$out/firedup.debug" "$bin"
cp "$bin" "$out/firedup"
"$venv/bin/python" -m wheel pack --dest-dir "$out" "$(dirname "$(dirname "$(dirname "$bin")")")" >/dev/null
rm -rf "$out/built" "$out/unpacked"
wheel=$(ls "$out"/firedup-*.whl)

fail() { echo "build-portable: $*" >&2; exit 1; }
needs=$(objdump -T "$out/firedup" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1)
[ "$(printf '%s\n%s\n' "$needs" "$max_glibc" | sort -V | tail -n 1)" = "$max_glibc" ] ||
  fail "$out/firedup needs glibc $needs, more than $max_glibc (objdump -T lists the symbols)"
size=$(stat -c %s "$out/firedup")
[ "$size" -le "$max_bytes" ] || fail "$out/firedup is $size bytes, more than 16 MiB"
case "$(basename "$wheel")" in
  *manylinux2014_x86_64*) ;;
  *) fail "the wheel $(basename "$wheel") is not tagged manylinux2014_x86_64" ;;
esac
"$venv/bin/python" - "$wheel" <<'EOF' || fail "the wheel's WHEEL file has no Tag: py3-none-manylinux2014_x86_64"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
wheel = next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))
sys.exit("Tag: py3-none-manylinux2014_x86_64" not in z.read(wheel).decode().splitlines())
EOF
"$out/firedup" --version >/dev/null || fail "$out/firedup does not run here"
echo "portable firedup built in $((built - started)) s: $out/firedup, $size bytes, needs glibc $needs; debug info in $out/firedup.debug" >&2
echo "$wheel"
