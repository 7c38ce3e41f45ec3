#!/usr/bin/env bash
# Where the slot tree goes when supervisor.cgroup is not set, and fleet.start_on_provision.
. "$(dirname "$0")/lib.sh"

MACHINE_CPUS=2 write_config
sed -i '/^cgroup = /d' "$T/etc/slotd.ini"
write_fleet idle "[ports]" "game_base = 24000" "query_base = 24100"
sed -i 's/^\[fleet\]$/[fleet]\nstart_on_provision = no/' "$T/etc/fleets.d/idle.ini"

# slotd starts inside a group of its own (as in a group delegated to it, outside systemd): it must move
# itself into a "supervisor" leaf and grow "slots" beside it.
mkdir -p "$CG/unit"
SLOTD_LOG_LEVEL=debug bash -c 'echo $$ > "$1/unit/cgroup.procs" && shift && exec "$@"' _ "$CG" \
        "$SLOTD" --config "$T/etc/slotd.ini" >>"$T/slotd.log" 2>&1 &
SLOTD_PID=$!
wait_until 20 "slotd on the bus" bus_name_owned
rel=${CG#"$CG_MOUNT"}
assert_eq "$(sed -n 's/^0:://p' /proc/$SLOTD_PID/cgroup)" "$rel/unit/supervisor" "slotd's own cgroup"
assert_eq "$(sprop 0 Cgroup)" "$CG/unit/slots/idle/slot-0" "slot tree beside slotd's leaf"
assert_ok "the unit group holds no process itself" test -z "$(cat "$CG/unit/cgroup.procs")"

# start_on_provision = no: slots wait, available and stopped, with server.json written.
assert_eq "$(mprop SlotCount)" 2 "SlotCount"
for id in 0 1; do
        assert_eq "$(sprop $id State)" available "slot $id State"
        assert_eq "$(sprop $id ProcessState)" stopped "slot $id ProcessState"
        assert_eq "$(sprop $id MainPID)" 0 "slot $id MainPID"
        assert_ok "slot $id cgroup empty" cgroup_empty $id
done
# Start runs it; an exit 0 then leaves it available, not restarted.
scall 0 Start
wait_prop 0 ProcessState running
assert_eq "$(sprop 0 State)" online "State after Start"
control 0 "exit 0"
wait_prop 0 ProcessState stopped
assert_eq "$(sprop 0 State)" available "State after exit 0 without start_on_provision"
assert_eq "$(sprop 0 Restarts)" 0 "no restart after exit 0 without start_on_provision"
assert_eq "$(sprop 0 LastExitCode)" 0 "LastExitCode"

# A restarted slotd finds the tree where it left it (its own leaf is now "supervisor").
kill -TERM "$SLOTD_PID"
wait "$SLOTD_PID" || fail "slotd exited with $? on SIGTERM"
SLOTD_LOG_LEVEL=debug bash -c 'echo $$ > "$1/unit/supervisor/cgroup.procs" && shift && exec "$@"' _ \
        "$CG" "$SLOTD" --config "$T/etc/slotd.ini" >>"$T/slotd.log" 2>&1 &
SLOTD_PID=$!
wait_until 20 "slotd on the bus again" bus_name_owned
assert_eq "$(sprop 1 Cgroup)" "$CG/unit/slots/idle/slot-1" "same slot tree after restart"
assert_ok "no supervisor/supervisor" test ! -e "$CG/unit/supervisor/supervisor"
finish
