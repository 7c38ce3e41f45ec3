#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# config/demo always cleans up (issue 27 point 8): started from this script (so with SIGINT
# ignored, as a background job is), stopped with SIGINT as `timeout -s INT` does, and hit with
# SIGTERM and SIGINT again and again while it cleans up, it exits, prints "demo: cleaned up"
# and leaves nothing behind: no process (slotd, its keepers and servers, the local proxy,
# dbus-daemon), no cgroup, no run directory, no bus socket. It runs an INI fleet and a .gsh
# fleet side by side, and every server of both runs.
set -euo pipefail
: "${BUILD_ROOT:?}" "${SOURCE_ROOT:?}"
skip() { echo "skipped: $*"; exit 77; }
fail() {
        echo "FAIL: $*" >&2
        [ -f "${log:-}" ] && { echo "---- the demo's output ----" >&2; tail -n 30 "$log" >&2; }
        exit 1
}
[ "$(id -u)" -eq 0 ] || skip "needs root (cgroups, setuid to the fleet user)"
command -v dbus-daemon >/dev/null || skip "dbus-daemon is not installed"
env --default-signal=INT true 2>/dev/null || skip "env has no --default-signal (coreutils < 8.31)"
[ -n "$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)" ] || skip "no cgroup v2"

tmp=$(mktemp -d /tmp/slotd-test-demo.XXXXXX)
log=$tmp/demo.log
demo_pid=
finish() {
        # Only when the test itself failed midway: the demo is not left running.
        [ -z "$demo_pid" ] || kill -TERM "$demo_pid" 2>/dev/null || true
        rm -rf "$tmp"
}
trap finish EXIT
n=0
alive() { [ -e "/proc/$1" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f1)" != Z ]; }

SLOTD_BUILD_DIR=$BUILD_ROOT "$SOURCE_ROOT/config/demo" --no-build >"$log" 2>&1 &
demo_pid=$!

# Ready: every slot started (the INI fleet's 4, the .gsh fleet's 2) and the local proxy up
# (the last lines slotd logs at start).
deadline=$((SECONDS + 90))
until grep -q "Local proxy started as process" "$log" && [ "$(grep -c "Started .* under keeper" "$log")" -ge 6 ]; do
        alive "$demo_pid" || fail "the demo ended before it was ready"
        [ $SECONDS -lt $deadline ] || fail "the demo was not ready in 90 s"
        sleep 0.1
done
run=$(grep -o 'unix:path=/tmp/slotd-demo\.[A-Za-z0-9]*/bus' "$log" | head -n 1 | sed 's|unix:path=||; s|/bus$||')
cg=$(sed -n 's/^[^ ]* slotd\[info\]: Slot tree in //p' "$log" | head -n 1)
proxy=$(sed -n 's/.*Local proxy started as process \([0-9]*\).*/\1/p' "$log" | head -n 1)
[ -d "$run" ] || fail "no run directory found in the demo's output ($run)"
[ -d "$cg" ] || fail "no slot cgroup found in the demo's output ($cg)"
[ -S "$run/bus" ] || fail "no bus socket in $run"
n=$((n + 3))
# The two fleets side by side: the INI fleet demo and the Multiplay fleet of multiplay.gsh
# (Arena Fleet), each slot's server running; the .gsh server's argv has its launch parameters
# expanded and its server.json the configuration's variables, as the demo's lines show them.
slots() {
        busctl --address="unix:path=$run/bus" --json=short call org.slotd.Supervisor1 \
                /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager ListSlots |
                python3 -c 'import json, sys
for e in json.load(sys.stdin)["data"][0]:
    print(e[0], e[1], e[3])'
}
gsh_running() { [ "$(slots | awk '$2 == "Arena-Fleet" && $3 == "running"' | wc -l)" = 2 ]; }
until gsh_running; do
        [ $SECONDS -lt $deadline ] || fail "the .gsh fleet's 2 servers are not running: $(slots | paste -sd' ')"
        sleep 0.1
done
[ "$(slots | awk '$2 == "demo" && $3 == "running"' | wc -l)" = 4 ] ||
        fail "the INI fleet's 4 servers are not running: $(slots | paste -sd' ')"
grep -qF "cat $run/slots/Arena-Fleet/slot-4/server.json" "$log" ||
        fail "the demo does not print the .gsh slot's server.json line"
sj=$run/slots/Arena-Fleet/slot-4/server.json
python3 -c 'import json, sys; j = json.load(open(sys.argv[1]))
assert (j["fleetID"], j["regionID"], j["map"], j["maxPlayers"]) == ("Arena-Fleet", "Europe", "arena", "8"), j' "$sj" ||
        fail "slot 4's server.json: $(cat "$sj")"
pid4=$(busctl --address="unix:path=$run/bus" get-property org.slotd.Supervisor1 \
        /org/slotd/Supervisor1/slot/4 org.slotd.Supervisor1.Slot MainPID | cut -d' ' -f2)
argv4=$(tr '\0' ' ' </proc/"$pid4"/cmdline)
[ "$argv4" = "$BUILD_ROOT/tests/gameserver/slotd-test-server -port 27200 -queryport 27300 -map arena -logFile $run/slots/Arena-Fleet/slot-4/logs/arena.log " ] ||
        fail "slot 4's argv: $argv4"
n=$((n + 5))
# Every process the demo made, as it runs now.
# (grep exits 2 when a process ends between the glob and its read: that is no error here.)
named() { grep -lsF -- "$1" /proc/[0-9]*/cmdline | cut -d/ -f3 | sort -u || true; }
pids=$(named "$run")
pids+=" $proxy $(find "$cg" -name cgroup.procs -exec cat {} + | sort -u | tr '\n' ' ')"
pids=$(tr ' ' '\n' <<<"$pids" | grep -v "^$" | grep -vx "$demo_pid" | sort -u | tr '\n' ' ')
count=0
for p in $pids; do alive "$p" && count=$((count + 1)); done
# slotd, dbus-daemon and the proxy, and the keepers (with their servers) in the cgroup.
for what in "$run/etc/slotd.ini" "$run/bus.conf"; do
        [ -n "$(named "$what")" ] || fail "no process of the demo names $what"
done
alive "$proxy" || fail "the local proxy ($proxy) does not run"
in_cg=$(find "$cg" -name cgroup.procs -exec cat {} + | wc -l)
[ "$in_cg" -ge 6 ] || fail "only $in_cg processes in the demo's cgroup"
n=$((n + 4))
echo "# the demo runs $count processes, run directory $run, cgroup $cg"

# SIGINT, as `timeout -s INT` sends it; then, once its cleanup has begun, SIGTERM and SIGINT
# every 20 ms until it is over.
kill -INT "$demo_pid"
deadline=$((SECONDS + 30))
until grep -q "^demo: cleaning up" "$log"; do
        alive "$demo_pid" || fail "the demo ended without cleaning up"
        [ $SECONDS -lt $deadline ] || fail "SIGINT did not start the cleanup in 30 s"
        sleep 0.01
done
during=0
deadline=$((SECONDS + 60))
while alive "$demo_pid"; do
        grep -q "^demo: cleaned up" "$log" && break
        if kill -TERM "$demo_pid" 2>/dev/null && kill -INT "$demo_pid" 2>/dev/null; then
                during=$((during + 1))
        fi
        [ $SECONDS -lt $deadline ] || fail "the cleanup did not end in 60 s"
        sleep 0.02
done
rc=0
wait "$demo_pid" || rc=$?
demo_pid=
echo "# $during rounds of SIGTERM and SIGINT reached the demo during its cleanup; it exited $rc"
[ "$during" -ge 1 ] || fail "no signal reached the demo during its cleanup"
[ "$rc" -eq 130 ] || fail "the demo exited $rc, not 130 (SIGINT)"
grep -q "^demo: cleaned up" "$log" || fail "the demo did not print 'demo: cleaned up'"
n=$((n + 3))

# Nothing is left.
for p in $pids; do
        alive "$p" && fail "process $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)) is left"
        n=$((n + 1))
done
[ ! -e "$cg" ] || fail "the cgroup $cg is left"
[ ! -e "$run" ] || fail "the run directory $run is left"
left=$(named "$run" | grep -vx "$$" || true)
for p in $left; do alive "$p" && fail "process $p still names $run"; done
busctl --address="unix:path=$run/bus" list >/dev/null 2>&1 && fail "the demo's bus still answers"
n=$((n + 4))
echo "ok: $n assertions"
