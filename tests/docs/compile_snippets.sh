#!/usr/bin/env bash
# Compiles every ```cpp block of README.md and docs/*.md as its own translation unit against the
# library's headers (-fsyntax-only), so that a reader can paste any of them. The conventions a
# block follows are in docs/testing.md, "Snippets in the docs":
#   ```cpp                   a whole translation unit, compiled as written
#   ```cpp fragment          statements: compiled inside a function body, after
#                            tests/docs/snippet_prelude.h (every public header, std::chrono literals);
#                            its #include lines are moved to the top of the file
#   ```cpp declarations      namespace-scope code (types, functions), after the same prelude
#   requires=<part>          (after the kind) compiled only when <part> was built (e.g. prometheus)
# An HTML comment right above the fence gives a fragment what the page leaves out:
#   <!-- snippet-params: lockstep::RedisClient& redis, lockstep::MysqlPool& pool -->
#   <!-- snippet-prelude: struct Product { std::int64_t id; }; -->   (may span lines)
# Errors point at the Markdown file and line (#line directives).
#
# usage: compile_snippets.sh --root SRC --out DIR --cxx COMPILER --includes "a;b" \
#          [--defines "X=1;Y"] [--have "prometheus;zookeeper"] [--warnings "-Wall;-Wextra"]
#          [--skip-file docs/x.md]...
set -uo pipefail
root="" out="" cxx="" includes="" defines="" have="" warnings="-Wall;-Wextra" skip_files=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --root) root="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --cxx) cxx="$2"; shift 2 ;;
    --includes) includes="$2"; shift 2 ;;
    --defines) defines="$2"; shift 2 ;;
    --have) have="$2"; shift 2 ;;
    --warnings) warnings="$2"; shift 2 ;;
    --skip-file) skip_files+=("$2"); shift 2 ;;
    *) echo "compile_snippets: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "$root" && -n "$out" && -n "$cxx" ]] || { echo "compile_snippets: --root, --out and --cxx are required" >&2; exit 2; }
cd "$root" || exit 2
rm -rf "$out" && mkdir -p "$out"

flags=(-std=c++20 -fsyntax-only -Werror -I "$root/tests/docs")
IFS=';' read -r -a warn_list <<<"$warnings"
for w in "${warn_list[@]}"; do [[ -n "$w" ]] && flags+=("$w"); done
IFS=';' read -r -a inc_list <<<"$includes"
# The compiler's own system dirs stay out: -I /usr/include would break libstdc++'s #include_next.
for d in "${inc_list[@]}"; do
  [[ -z "$d" || "$d" == /usr/include || "$d" == /usr/local/include || " ${flags[*]} " == *" $d "* ]] || flags+=(-I "$d")
done
IFS=';' read -r -a def_list <<<"$defines"
for d in "${def_list[@]}"; do [[ -n "$d" ]] && flags+=("-D$d"); done

# Extract: one .cpp per block, plus a .kind file naming its kind and requirement.
for md in README.md docs/*.md; do
  skip=0
  for s in "${skip_files[@]+"${skip_files[@]}"}"; do [[ "$md" == "$s" ]] && skip=1; done
  if [[ $skip == 1 ]]; then echo "compile_snippets: $md not checked (--skip-file)"; continue; fi
  awk -v md="$md" -v out="$out" '
    function flush_ctx() { params = ""; prelude = ""; prelude_line = 0 }
    BEGIN { inblock = 0; inprelude = 0; flush_ctx() }
    inblock {
      if ($0 ~ /^```[ \t]*$/) {
        base = out "/" name
        if (kind == "whole") {
          printf "#line %d \"%s\"\n%s", start + 1, md, body > (base ".cpp")
        } else {
          printf "#include \"snippet_prelude.h\"\n%s", hoisted > (base ".cpp")
          if (prelude != "") printf "#line %d \"%s\"\n%s\n", prelude_line, md, prelude > (base ".cpp")
          if (kind == "fragment") {
            printf "void lockstep_doc_snippet(%s) {\n#line %d \"%s\"\n%s}\n", params, start + 1, md, body > (base ".cpp")
          } else {
            printf "#line %d \"%s\"\n%s", start + 1, md, body > (base ".cpp")
          }
        }
        close(base ".cpp")
        print kind " " requires " " md ":" start > (base ".kind"); close(base ".kind")
        inblock = 0; flush_ctx(); next
      }
      if (kind != "whole" && $0 ~ /^[ \t]*#include/) { hoisted = hoisted $0 "\n"; body = body "\n" }
      else body = body $0 "\n"
      next
    }
    inprelude {
      line = $0
      if (sub(/-->[ \t]*$/, "", line)) inprelude = 0
      prelude = prelude line "\n"; next
    }
    /^<!-- snippet-params:.*-->[ \t]*$/ {
      params = $0; sub(/^<!-- snippet-params:[ \t]*/, "", params); sub(/[ \t]*-->[ \t]*$/, "", params); next
    }
    /^<!-- snippet-prelude:/ {
      line = $0; sub(/^<!-- snippet-prelude:[ \t]*/, "", line); prelude_line = NR
      if (sub(/-->[ \t]*$/, "", line)) inprelude = 0; else inprelude = 1
      prelude = prelude line "\n"; next
    }
    /^```cpp/ {
      n = split($0, words, /[ \t]+/)
      kind = "whole"; requires = "-"
      for (i = 2; i <= n; ++i) {
        if (words[i] == "fragment" || words[i] == "declarations") kind = words[i]
        else if (words[i] ~ /^requires=/) { requires = words[i]; sub(/^requires=/, "", requires) }
        else if (words[i] != "") { printf "%s:%d: unknown snippet word \"%s\"\n", md, NR, words[i] > "/dev/stderr"; bad = 1 }
      }
      md_name = md; gsub(/[^A-Za-z0-9]/, "_", md_name)
      name = md_name "_" NR; start = NR; body = ""; hoisted = ""; inblock = 1; next
    }
    { if ($0 !~ /^[ \t]*$/) flush_ctx() }
    END { exit bad }
  ' "$md" || { echo "compile_snippets: $md has a malformed snippet marker" >&2; exit 1; }
done

# The prelude (every public header) is most of each fragment's compile time: build it once as a
# precompiled header next to the generated sources, where their #include "snippet_prelude.h"
# looks first (without -Werror: GCC warns of "#pragma once in main file" there). If it cannot be
# built, each snippet compiles the prelude itself (same result, slower).
if grep -qlE '^(fragment|declarations) ' "$out"/*.kind 2>/dev/null; then
  pch_flags=()
  for f in "${flags[@]}"; do [[ "$f" != -fsyntax-only && "$f" != -Werror ]] && pch_flags+=("$f"); done
  "$cxx" "${pch_flags[@]}" -x c++-header "$root/tests/docs/snippet_prelude.h" \
    -o "$out/snippet_prelude.h.gch" 2>"$out/prelude.err" || rm -f "$out/snippet_prelude.h.gch"
fi
# One compile per snippet, as many at once as there are CPUs; each writes its verdict to .status.
compile_one() {
  local src="$1" kind requires where
  read -r kind requires where <"${src%.cpp}.kind"
  if [[ "$requires" != "-" && ";$have;" != *";$requires;"* ]]; then
    echo "skipped $where ($requires not built)" >"${src%.cpp}.status"; return
  fi
  if "$cxx" "${flags[@]}" "$src" 2>"${src%.cpp}.err"; then
    echo "ok $where" >"${src%.cpp}.status"
  else
    echo "failed $where ($kind; generated source $src)" >"${src%.cpp}.status"
  fi
}
export -f compile_one
export cxx have
export flags_joined
flags_joined="$(printf '%s\n' "${flags[@]}")"
find "$out" -maxdepth 1 -name '*.cpp' -print0 | sort -z |
  xargs -0 -r -n 1 -P "$(nproc 2>/dev/null || echo 2)" bash -c \
    'mapfile -t flags <<<"$flags_joined"; compile_one "$1"' _
total=0 failed=0 skipped=0
for src in "$out"/*.cpp; do
  [[ -e "$src" ]] || continue
  read -r verdict where <"${src%.cpp}.status" || { verdict=failed; where="$src (no verdict)"; }
  case "$verdict" in
    skipped) echo "compile_snippets: $where"; skipped=$((skipped + 1)) ;;
    ok) total=$((total + 1)) ;;
    *) total=$((total + 1)); failed=$((failed + 1))
       echo "compile_snippets: FAILED $where"
       head -n 30 "${src%.cpp}.err" ;;
  esac
done
echo "compile_snippets: $((total - failed)) of $total snippets compile ($skipped skipped)"
[[ $total -gt 0 && $failed -eq 0 ]]
