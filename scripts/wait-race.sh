#!/usr/bin/env bash
# Shows bash's `wait` losing a child that exits while a USR1 trap runs: the pattern the job
# templates used before runjob_core/templates/_command.sh.j2 (a wrapper traps USR1 and waits; the
# signal reaches the wrapper and the job at once, as slurmstepd sends it to a whole step).
#   scripts/wait-race.sh [TRIES]    prints how often each exit code came back (all should be 75)
# bash 5.2.15 on the 2-core VM under load: 1 in 800 came back 255 (wait answered -1).
set -u
tries=${1:-400}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/wrapper.sh" <<'WRAPPER'
bash -c 'trap "" USR1; python3 -c "
import signal, sys, time
got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append(1))
open(sys.argv[1], \"w\").close()
while not got: time.sleep(0.01)
sys.exit(75)" "$0"' "$1" &
child=$!
trap ':' USR1
while true; do
  wait "$child"
  rc=$?
  kill -0 "$child" 2>/dev/null || break
done
wait "$child" 2>/dev/null; again=$?; [ "$again" -ne 127 ] && rc=$again
exit "$rc"
WRAPPER
for _ in $(seq 1 "$tries"); do
  rm -f "$dir/ready"
  setsid bash "$dir/wrapper.sh" "$dir/ready" & wrapper=$!
  while [ ! -e "$dir/ready" ]; do sleep 0.005; done
  for pid in $(pgrep -g "$wrapper" | shuf); do kill -USR1 "$pid" 2>/dev/null; done
  wait "$wrapper"; echo "exit $?"
done | sort | uniq -c
