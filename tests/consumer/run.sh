#!/usr/bin/env bash
# Installs the already-built lockstep into a scratch prefix, then configures, builds and runs the
# consumer project against it with find_package(lockstep).
set -euo pipefail
build_dir="$1"
work="$2"
src="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work"
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$src" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
# Test support (LocalServers & co.) is its own component, not in the installed core library.
lib="$(find "$work/prefix" -name liblockstep.a -o -name liblockstep.so | sed -n 1p)"
if nm -C "$lib" | grep "LocalServers::" >/dev/null; then
  echo "find_package_consumer: $lib carries LocalServers (test support belongs in lockstep::testing)" >&2
  exit 1
fi
rm -rf "$work"
