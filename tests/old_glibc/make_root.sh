#!/usr/bin/env bash
# An old-glibc host for tests/old_glibc.rs: a Debian 11 (bullseye, glibc 2.31) root made with
# debootstrap from Debian's own packages (no Docker), kept in CACHE_DIR/debian11-root so later
# runs reuse it. Prints the root's path on its last line.
#
#   bash tests/old_glibc/make_root.sh CACHE_DIR
#
# The root is built in a temporary directory beside it and moved into place once debootstrap has
# finished, so an interrupted run never leaves a half-made root that looks ready.
set -euo pipefail
cache=${1:?usage: make_root.sh CACHE_DIR}
root="$cache/debian11-root"
# python3-venv: tests/old_glibc.rs installs the wheel with pip there (ensurepip's pip, offline).
include=python3-venv
if [ -x "$root/bin/sh" ] && [ "$(cat "$root/.firedup-root-complete" 2>/dev/null)" = "$include" ]; then
  echo "$root"
  exit 0
fi
if ! command -v debootstrap >/dev/null; then
  echo "debootstrap is not installed (apt-get install debootstrap)" >&2
  exit 1
fi
mkdir -p "$cache"
# An interrupted debootstrap can leave its /proc and /sys mounted in the partial root.
for m in proc sys; do umount -R "$root.partial/$m" 2>/dev/null || true; done
rm -rf --one-file-system "$root" "$root.partial"
started=$(date +%s)
debootstrap --variant=minbase --include="$include" bullseye "$root.partial" http://deb.debian.org/debian >"$cache/debian11-root.log" 2>&1 || {
  tail -n 20 "$cache/debian11-root.log" >&2
  echo "debootstrap of Debian 11 failed (log above, whole log in $cache/debian11-root.log)" >&2
  exit 1
}
echo "$include" >"$root.partial/.firedup-root-complete"
mv "$root.partial" "$root"
echo "Debian 11 root made in $(($(date +%s) - started)) s ($(du -sh "$root" | cut -f1))" >&2
echo "$root"
