#!/usr/bin/env bash
# A keeper's restart whose fork is refused (issue 14's fault matrix, fork refused; SPEC §6,
# §12), in the order that once failed a slot in the VM: slotd accounts the keeper's restart
# from the record the keeper writes before its fork ("restart 1 ..."), and only then does the
# fork fail (pids.max) and the keeper end. That exit is the same crash, not a second one:
# the slot must not reach crash.restarts and fail for the host's fault. slotd starts the
# server itself, meets the host fault fork, waits, and starts it once the fault clears.
#
# gdb holds the keeper at keeper_clone(), after its record and before its fork, until slotd
# has accounted the restart. slotd runs in a group of its own below the test's cgroup, whose
# pids.max is the fault (as in test-fault-spawn; a v1 pids group where v2 has none).
. "$(dirname "$0")/lib.sh"
command -v gdb >/dev/null || skip "gdb is not installed (tests/deps.sh installs it)"
SIGS="$T/signals.json"

trap pids_limit_cleanup EXIT
pids_limit_init

MACHINE_CPUS=4 write_config
sed -i "s|^cgroup = .*|cgroup = $CG/slots|" "$T/etc/slotd.ini"
write_fleet game "servers = 1" "[ports]" "game_base = 27800" "query_base = 27850" \
        "[crash]" "restarts = 1" "window = 10m"
start_slotd_in_group
start_monitor "$SIGS"
trap pids_limit_cleanup EXIT # start_monitor set its own
wait_prop 0 ProcessState running
wait_server 0

# The keeper: the process of slot 0's cgroup that is PID 1 of its namespace.
keeper=
for p in $(cgroup_procs 0); do
        grep -qE '^NSpid:\s+[0-9]+\s+1$' "/proc/$p/status" 2>/dev/null && keeper=$p
done
[ -n "$keeper" ] || fail "no keeper in slot 0's cgroup"
gdb -p "$keeper" -batch -nx -ex 'set pagination off' -ex 'break keeper_clone' -ex 'continue' \
        -ex "shell i=0; while [ ! -e '$T/go' ] && [ \$i -lt 1200 ]; do sleep 0.05; i=\$((i+1)); done" \
        -ex 'detach' > "$T/gdb.log" 2>&1 &
gdb_pid=$!
bg_track $gdb_pid
trap pids_limit_cleanup EXIT # bg_track set its own
wait_until $((30 * TIME_SCALE)) "gdb attached to the keeper with its breakpoint" \
        grep -q "^Breakpoint 1 at" "$T/gdb.log"

echo 1 > "$LIMIT/pids.max"
control 0 "crash"
wait_until $((30 * TIME_SCALE)) "the keeper held at keeper_clone" grep -q "^Breakpoint 1," "$T/gdb.log"
wait_until $((20 * TIME_SCALE)) "slotd accounted the keeper's restart" \
        grep -q "slot 0 (game): Server crashed: .*; restarted by its keeper" "$T/slotd.log"
touch "$T/go"
wait_until $((30 * TIME_SCALE)) "gdb detached" gone "$gdb_pid"
wait "$gdb_pid" || true
bg_untrack $gdb_pid
wait_until $((20 * TIME_SCALE)) "log: the keeper's restart refused" grep -q \
        "slot 0 (game): Its keeper could not start the server again (its fork was refused); slotd starts it" \
        "$T/slotd.log"
wait_until $((20 * TIME_SCALE)) "log: the host fault fork, met by slotd's start" grep -q \
        "slot 0 (game): Host fault fork: cannot fork the keeper of" "$T/slotd.log"
assert_ok "no second crash counted" sh -c "! grep -q 'slot 0 (game): Crashed 2 times' '$T/slotd.log'"
assert_eq "$(sprops 0 ProcessState FailureReason)" "stopped|" "slot 0 while fork is refused: waiting, not failed"
assert_eq "$(sig_count "$SIGS" Crashed 0)" 1 "Crashed signals of slot 0 (its one crash)"
echo max > "$LIMIT/pids.max"
wait_prop 0 ProcessState running $((30 * TIME_SCALE))
assert_eq "$(sprops 0 Restarts FailureReason)" "1|" "slot 0 after the fault: one restart, no failure"
assert_eq "$(sig_count "$SIGS" Crashed 0)" 1 "Crashed signals of slot 0 at the end"
finish
