#!/usr/bin/env bash
# ctest ops_alert_rules: promtool (Debian `prometheus`, scripts/install-deps --tests) checks the
# alert rules, and the PromQL of every dashboard query (each one as a recording rule, with
# Grafana's $__rate_interval and $instance replaced). Skipped, exit 77, without promtool.
set -euo pipefail
rules="$1"
dashboard="$2"
work="$3"
command -v promtool >/dev/null || { echo "ops_alert_rules: skipped: promtool not installed (scripts/install-deps --tests)"; exit 77; }
promtool check rules "$rules"
mkdir -p "$work"
queries="$work/dashboard-queries.yml"
{
  echo "groups:"
  echo "  - name: dashboard"
  echo "    rules:"
  n=0
  grep -oE '"expr": "([^"\\]|\\.)*"' "$dashboard" | sed -E 's/^"expr": "//; s/"$//; s/\\"/"/g' \
    | sed -E 's/\$__rate_interval/5m/g; s/\$instance/.*/g' | while IFS= read -r expr; do
      n=$((n + 1))
      echo "      - record: dashboard:query_$n"
      echo "        expr: '${expr//\'/\'\'}'"
    done
} >"$queries"
count="$(grep -c 'record:' "$queries")"
[ "$count" -ge 20 ] || { echo "ops_alert_rules: only $count queries found in $dashboard" >&2; exit 1; }
promtool check rules "$queries"
rm -rf "$work"
