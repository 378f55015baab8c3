#!/usr/bin/env bash
# Runs after every other test (ctest fixture cleanup): fails if any redis-server or mariadbd
# started by the tests is still running, or any of their temp dirs is left under the tests' TMPDIR.
set -u
tmp="$1"
status=0
# The private servers' command lines name their temp dir, which lives under $tmp.
if pids=$(pgrep -f -- "$tmp/lockstep-"); then
  echo "leftover server processes:"; ps -o pid,args -p "$(echo $pids | tr ' ' ',')"
  status=1
fi
if [ -d "$tmp" ] && [ -n "$(ls -A "$tmp" 2>/dev/null)" ]; then
  echo "leftover temp entries in $tmp:"; ls -la "$tmp"
  status=1
fi
[ $status -eq 0 ] && echo "no leftover servers or temp dirs under $tmp"
exit $status
