# Sourced by scripts/sanitize and scripts/fuzz: configure and build one clang sanitizer tree.
#
#   clang_configure <build dir> <sanitizers> [extra cmake args...]
#   clang_build <build dir> <targets...>
#
# Every clang build also runs the thread-safety analysis as an error (-Wthread-safety
# -Werror=thread-safety, see core/include/lockstep/core/thread_annotations.h), and a sanitizer
# report stops the process (-fno-sanitize-recover=all: UBSan would otherwise print and go on).
#
# Debug information: -gline-tables-only instead of RelWithDebInfo's -g. A report needs only line
# tables to print every frame as file:line:column (inlined frames included); full -g (variables,
# types) is for a debugger. Optimisation: -O1 (the level the sanitizers' documentation
# recommends, cheaper to compile) for the tsan tree; the asan tree stays at -O2 because it is also
# the fuzz tree, and a fuzzer at -O1 ran half as many inputs in its fixed time. Measured in
# docs/ci.md, "Timings".
# The test binaries also get a precompiled header with clang (tests/CMakeLists.txt,
# LOCKSTEP_TEST_PCH); ccache caches a compile that uses it only with the sloppiness below.

clang_configure() {
  local dir="$1" sanitize="$2"
  shift 2
  local launcher=() opt=-O2
  [ "$sanitize" = thread ] && opt=-O1
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" \
    -DLOCKSTEP_DEV_LAYERS= -DLOCKSTEP_DEV_TEST_DIRS= -DLOCKSTEP_BUILD_BENCH=OFF \
    -DLOCKSTEP_SANITIZE="$sanitize" \
    "-DCMAKE_CXX_FLAGS=-fno-sanitize-recover=all -Wthread-safety -Werror=thread-safety" \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$opt -gline-tables-only -DNDEBUG" \
    "$@" >/dev/null
}

clang_build() {
  local dir="$1"
  shift
  CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:+$CCACHE_SLOPPINESS,}pch_defines,time_macros,include_file_mtime,include_file_ctime" \
    cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" --target "$@"
}
