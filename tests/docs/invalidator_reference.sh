#!/usr/bin/env bash
# docs/invalidator.md against the program (ctest invalidator_reference): every option
# `lockstep-invalidator --help` prints has a row in the page's command-line table and every
# option the table lists is one --help prints; every config key the program reads
# (invalidation/tools/lockstep_invalidator.cpp: j.at("k"), .value("k", ...), .contains("k"))
# appears in the page as `k`.
set -euo pipefail
binary="$1"
src="$(cd "$(dirname "$0")/../.." && pwd)"
page="$src/docs/invalidator.md"
tool_source="$src/invalidation/tools/lockstep_invalidator.cpp"
fail=0

help_options="$("$binary" --help | sed -n '/^Options:/,/^[^ O]/p' | grep -oE '^ +(-[a-z],)?--[a-z][a-z-]*' \
  | grep -oE -- '--[a-z][a-z-]*' | sort -u)"
# The first cell of each row of the table under "## Command line".
page_options="$(sed -n '/^## Command line/,/^## /p' "$page" | grep -E '^\| `-' | cut -d'|' -f2 \
  | grep -oE -- '--[a-z][a-z-]*' | sort -u)"
[ -n "$help_options" ] || { echo "invalidator_reference: no options parsed from --help" >&2; exit 1; }
while read -r option; do
  grep -qx -- "$option" <<<"$page_options" || { echo "docs/invalidator.md has no row for $option (in --help)" >&2; fail=1; }
done <<<"$help_options"
while read -r option; do
  grep -qx -- "$option" <<<"$help_options" || { echo "docs/invalidator.md lists $option, which --help does not print" >&2; fail=1; }
done <<<"$page_options"

keys="$(grep -oE '(\.at|\.value|\.contains)\("[a-z_]+"' "$tool_source" | sed -E 's/.*\("//; s/"$//' | sort -u)"
[ -n "$keys" ] || { echo "invalidator_reference: no config keys found in $tool_source" >&2; exit 1; }
while read -r key; do
  grep -qF -- "\`$key\`" "$page" || { echo "docs/invalidator.md does not document the config key \`$key\`" >&2; fail=1; }
done <<<"$keys"

[ "$fail" -eq 0 ] && echo "invalidator_reference: $(wc -l <<<"$help_options") options and $(wc -l <<<"$keys") config keys documented"
exit "$fail"
