# Sourced by scripts/sanitize and scripts/fuzz: configure and build one clang sanitizer tree.
#
#   clang_configure <build dir> <sanitizers> [extra cmake args...]
#   clang_build <build dir> <targets...>
#
# Every clang build also runs the thread-safety analysis as an error (-Wthread-safety
# -Werror=thread-safety, see core/include/lockstep/core/thread_annotations.h), and a sanitizer
# report stops the process (-fno-sanitize-recover=all: UBSan would otherwise print and go on).

clang_configure() {
  local dir="$1" sanitize="$2"
  shift 2
  local launcher=()
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" \
    -DLOCKSTEP_DEV_LAYERS= -DLOCKSTEP_DEV_TEST_DIRS= -DLOCKSTEP_BUILD_BENCH=OFF \
    -DLOCKSTEP_SANITIZE="$sanitize" \
    "-DCMAKE_CXX_FLAGS=-fno-sanitize-recover=all -Wthread-safety -Werror=thread-safety" \
    "$@" >/dev/null
}

clang_build() {
  local dir="$1"
  shift
  cmake --build "$dir" -j "$(nproc 2>/dev/null || echo 2)" --target "$@"
}
