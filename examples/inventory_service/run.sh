#!/usr/bin/env bash
# Built and run by the test suite (ctest -R example_inventory_service): installs the built
# lockstep into a scratch prefix, builds this example against it with find_package(lockstep),
# and runs it (it starts its own private servers).
set -euo pipefail
build_dir="$1"
work="$2"
src="$(cd "$(dirname "$0")" && pwd)"
rm -rf "$work"
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$src" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/inventory_service"
rm -rf "$work"
