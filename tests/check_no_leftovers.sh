#!/usr/bin/env bash
# Runs after every other test (ctest fixture cleanup): fails if any process started by the tests
# is still running from or in their TMPDIR (a private redis-server or mariadbd, a reaper), or if
# any temp entry is left there. redis-server rewrites its command line, so look at each
# process's working directory as well as its command line.
set -u
tmp="$(cd "$1" 2>/dev/null && pwd || echo "$1")"
status=0
leftover=()
for proc in /proc/[0-9]*; do
  pid=${proc#/proc/}
  [ "$pid" = "$$" ] && continue
  cwd=$(readlink "$proc/cwd" 2>/dev/null) || continue
  cmd=$(tr '\0' ' ' < "$proc/cmdline" 2>/dev/null) || continue
  case "$cwd/ $cmd" in
    *"$tmp/lockstep-"*) leftover+=("$pid: $cmd (cwd $cwd)") ;;
  esac
done
if [ ${#leftover[@]} -gt 0 ]; then
  echo "leftover processes started by the tests:"; printf '  %s\n' "${leftover[@]}"
  status=1
fi
if [ -d "$tmp" ] && [ -n "$(ls -A "$tmp" 2>/dev/null)" ]; then
  echo "leftover temp entries in $tmp:"; ls -la "$tmp"
  status=1
fi
[ $status -eq 0 ] && echo "no leftover servers or temp dirs under $tmp"
exit $status
