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
rm -rf "$work"
