#!/usr/bin/env bash
# The Debian packages, tested as a Dockerfile would use them (ctest -R '^debian_package$',
# label `package`; docs/operations.md):
#   1. cpack -G DEB in the build tree (packages what is built; nothing is compiled for it when
#      the tree is built);
#   2. each package's Depends covers what it links: every NEEDED library of lockstep-invalidator
#      and every -l of lockstep.pc belongs to a package the .deb depends on;
#   3. dpkg-deb -x into a scratch root; every public header of the source tree is there;
#   4. examples/inventory_service is built against that root twice: with CMake
#      (find_package(lockstep), CMAKE_PREFIX_PATH=<root>/usr) and with a plain compiler line from
#      pkg-config --cflags --libs (PKG_CONFIG_PATH=<root>/usr/lib/pkgconfig).
# A header or library missing from the package fails step 3 or 4.
# Under pipefail a reader that stops early (head -n 1, awk's exit) can kill its writer with
# SIGPIPE and fail the step at random; every reader here reads its input to the end.
set -euo pipefail
trap 'echo "debian_package: line $LINENO: \"$BASH_COMMAND\" failed (status $?)" >&2' ERR
build_dir="$(cd "$1" && pwd)"
work="$2"
src="$(cd "$(dirname "$0")/../.." && pwd)"
cxx="${3:-c++}"
fail() { echo "debian_package: $*" >&2; exit 1; }
for tool in cpack dpkg-deb dpkg readelf pkg-config; do
  command -v "$tool" >/dev/null || { echo "debian_package: skipped: $tool not found (Debian tools)"; exit 77; }
done
rm -rf "$work"
mkdir -p "$work"
for system_copy in /usr/include/lockstep /usr/local/include/lockstep; do
  [ ! -e "$system_copy" ] || fail "$system_copy exists: an installed lockstep would hide files missing from the package"
done

# 1. The packages.
(cd "$build_dir" && cpack -G DEB -B "$work/debs" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log" >&2; fail "cpack failed"; }
dev_deb="$(ls "$work"/debs/liblockstep-dev_*.deb)"
invalidator_deb="$(ls "$work"/debs/lockstep-invalidator_*.deb)"

# 2. Depends. `deb` is a package file, `package_of_lib` maps a library file to its Debian package.
depends_of() { dpkg-deb -f "$1" Depends | tr ',' '\n' | sed 's/^ *//; s/[ (].*//' | sed '/^$/d'; }
# dpkg knows a file by the path its package installed (/lib or /usr/lib: Debian 12 merges them).
package_of() {
  local path
  for path in "$1" "${1#/usr}" "/usr$1"; do
    dpkg -S "$path" 2>/dev/null | sed -n 1p | cut -d: -f1 && return 0
  done
}
check_covered() {  # <deb> <library path> <what links it>
  local package
  package="$(package_of "$2" || true)"
  [ -n "$package" ] || package="$(package_of "$(readlink -f "$2")" || true)"
  [ -n "$package" ] || fail "no Debian package owns $2 ($3)"
  depends_of "$1" | grep -x "$package" >/dev/null || fail "$(basename "$1") does not depend on $package ($2, $3)"
}
dpkg-deb -x "$invalidator_deb" "$work/root"
for needed in $(readelf -d "$work/root/usr/bin/lockstep-invalidator" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
  path="$(ldconfig -p | awk -v lib="$needed" '$1 == lib && /x86-64/ && !found {print $NF; found = 1}')"
  [ -n "$path" ] || fail "lockstep-invalidator needs $needed, which is not installed here"
  check_covered "$invalidator_deb" "$path" "NEEDED by lockstep-invalidator"
done
dpkg-deb -x "$dev_deb" "$work/root"
pc_dir="$work/root/usr/lib/pkgconfig"
[ -f "$pc_dir/lockstep.pc" ] || pc_dir="$(dirname "$(find "$work/root" -name lockstep.pc | sed -n 1p)")"
export PKG_CONFIG_PATH="$pc_dir"
for flag in $(pkg-config --libs-only-l --static lockstep-testing lockstep); do
  lib="lib${flag#-l}.so"
  case "$lib" in liblockstep*) continue ;; esac
  path="$(ldconfig -p | awk -v lib="$lib" '$1 == lib && !found {print $NF; found = 1}')"
  [ -n "$path" ] || path="/usr/lib/x86_64-linux-gnu/$lib"
  [ -e "$path" ] || fail "lockstep.pc links $flag: $lib is not installed here"
  check_covered "$dev_deb" "$path" "linked through lockstep.pc"
done

# 3. Every public header of the source tree is in the package.
(cd "$src" && find . -path ./build -prune -o -path '*/include/lockstep/*' -name '*.h' -print) \
  | sed 's|.*/include/lockstep/|lockstep/|' | sort >"$work/headers.source"
(cd "$work/root/usr/include" && find lockstep -name '*.h') | sort >"$work/headers.package"
missing="$(comm -23 "$work/headers.source" "$work/headers.package")"
[ -z "$missing" ] || fail "headers missing from $(basename "$dev_deb"):"$'\n'"$missing"
for lib in liblockstep.a liblockstep_testing.a; do
  [ -n "$(find "$work/root" -name "$lib")" ] || fail "$lib missing from $(basename "$dev_deb")"
done

# 4a. CMake: find_package(lockstep) from the unpacked root only.
cmake -S "$src/examples/inventory_service" -B "$work/cmake-build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$work/root/usr" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log" >&2; fail "configuring the example against the package failed"; }
found="$(sed -n 's/^lockstep_DIR:PATH=//p' "$work/cmake-build/CMakeCache.txt")"
case "$found" in "$work/root/"*) ;; *) fail "find_package(lockstep) found $found, not the package" ;; esac
cmake --build "$work/cmake-build" >"$work/cmake-build.log" 2>&1 \
  || { cat "$work/cmake-build.log" >&2; fail "building the example with find_package(lockstep) failed"; }
[ -x "$work/cmake-build/inventory_service" ] || fail "no inventory_service from the CMake build"

# 4b. pkg-config: a plain compiler line.
packaged_libdir="$(dirname "$(find "$work/root" -name liblockstep.a | sed -n 1p)")"
[ "$(pkg-config --variable=libdir lockstep | xargs readlink -f)" = "$(readlink -f "$packaged_libdir")" ] \
  || fail "lockstep.pc points at $(pkg-config --variable=libdir lockstep), not the package"
flags="$(pkg-config --cflags --libs lockstep-testing lockstep)"
# shellcheck disable=SC2086  # the flags are words
"$cxx" -std=c++20 -O1 "$src/examples/inventory_service/main.cpp" -o "$work/inventory_service.pc" $flags \
  >"$work/pc-build.log" 2>&1 || { echo "$cxx -std=c++20 main.cpp $flags" >&2; cat "$work/pc-build.log" >&2; fail "building the example from pkg-config failed"; }
[ -x "$work/inventory_service.pc" ] || fail "no inventory_service from the pkg-config build"

echo "debian_package: $(basename "$dev_deb") ($(du -k "$dev_deb" | cut -f1) KiB), $(basename "$invalidator_deb") ($(du -k "$invalidator_deb" | cut -f1) KiB): Depends cover what they link, every header present, the example builds with CMake and with pkg-config"
rm -rf "$work"
