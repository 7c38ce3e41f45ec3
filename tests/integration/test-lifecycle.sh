#!/usr/bin/env bash
# Start, Stop, Restart, exits and crashes (SPEC §3, §6): nothing of a slot outlives it, an
# exit 0 restarts, a crash restarts until crash.restarts, then the slot is failed.
. "$(dirname "$0")/lib.sh"

MACHINE_CPUS=3 write_config
STOP_TIMEOUT=500ms write_fleet game "[crash]" "restarts = 1" "window = 10m"
start_slotd
assert_eq "$(mprop SlotCount)" 3 "SlotCount"
for id in 0 1 2; do wait_prop $id ProcessState running; done

# Every state change is announced: record SlotChanged for the whole test.
bctl monitor --match "type='signal',interface='org.slotd.Supervisor1.Manager'" \
        >"$T/signals.log" 2>&1 &
bg_track $!
wait_until 10 "monitor attached" grep -q "Monitoring bus" "$T/signals.log"

# Stop: SIGTERM, the server exits 0, nothing left in the group, the slot is available.
pid=$(sprop 0 MainPID)
scall 0 Stop
wait_prop 0 ProcessState stopped
assert_eq "$(sprop 0 State)" available "State after Stop"
assert_eq "$(sprop 0 MainPID)" 0 "MainPID after Stop"
assert_ok "cgroup of slot 0 empty" cgroup_empty 0
assert_ok "old process gone" gone "$pid"
assert_ok "server saw SIGTERM" grep -q "SIGTERM" "$(sprop 0 Home)/logs/server.log"

# Start again: a new process.
scall 0 Start
wait_prop 0 ProcessState running
new=$(sprop 0 MainPID)
assert_ok "new pid after Start" test "$new" != "$pid" -a "$new" -gt 0

# Restart: a new process, the slot online throughout from the allocator's view.
scall 0 Restart
wait_until 10 "restart of slot 0" bash -c "p=\$(busctl --address='$BUS' get-property org.slotd.Supervisor1 /org/slotd/Supervisor1/slot/0 org.slotd.Supervisor1.Slot MainPID | cut -d' ' -f2); [ \"\$p\" != 0 ] && [ \"\$p\" != $new ]"
wait_prop 0 ProcessState running

# A server that ignores SIGTERM and has forked children: after stop_timeout the whole
# cgroup is killed, children included. The server runs its control lines in order, so once
# the children are there it ignores SIGTERM too (the other order raced the Stop below).
control 1 "ignore-term on"
control 1 "fork 2"
wait_until 10 "slot 1 has its keeper, server and 2 children" bash -c "[ \$(wc -l < '$CG/game/slot-1/cgroup.procs') -ge 4 ]"
kids=$(cat "$CG/game/slot-1/cgroup.procs")
start=$(date +%s%N)
scall 1 Stop
wait_prop 1 ProcessState stopped
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
note "stop of a SIGTERM-ignoring server took ${elapsed_ms} ms (stop_timeout 500ms)"
assert_ok "stop waited for stop_timeout" test $elapsed_ms -ge 450
assert_ok "cgroup of slot 1 empty" cgroup_empty 1
for k in $kids; do
        assert_ok "process $k of slot 1 gone" gone "$k"
done
assert_ok "log says the stop timed out" grep -q "Still running fleet.stop_timeout after SIGTERM" "$T/slotd.log"
# A slot whose cgroup was emptied by cgroup.kill starts and stays up (some kernels kill
# every child cloned into such a group; slotd must notice and work around it).
control 1 "ignore-term off"
scall 1 Start
wait_prop 1 ProcessState running
pid=$(sprop 1 MainPID)
assert_eq "$(sprop 1 Restarts)" 0 "no restarts after Start of a killed slot"
assert_ok "server of slot 1 alive" kill -0 "$pid"
assert_ok "server of slot 1 in its cgroup" grep -qx "$pid" "$CG/game/slot-1/cgroup.procs"

# The main process exits 0 while its children live: the children are killed, and the slot
# restarts (start_on_provision), counting a restart, not a crash.
control 2 "fork 1"
wait_until 10 "slot 2 has its keeper, server and a child" bash -c "[ \$(wc -l < '$CG/game/slot-2/cgroup.procs') -ge 3 ]"
old=$(sprop 2 MainPID)
restarts=$(sprop 2 Restarts)
control 2 "exit 0"
wait_until 10 "slot 2 restarted after exit 0" bash -c "p=\$(busctl --address='$BUS' get-property org.slotd.Supervisor1 /org/slotd/Supervisor1/slot/2 org.slotd.Supervisor1.Slot MainPID | cut -d' ' -f2); [ \"\$p\" != 0 ] && [ \"\$p\" != $old ]"
wait_prop 2 ProcessState running
assert_eq "$(sprop 2 LastExitCode)" 0 "LastExitCode after exit 0"
assert_eq "$(sprop 2 Restarts)" $((restarts + 1)) "Restarts after exit 0"
assert_ok "only the new server (and its keeper) in slot 2" one_server 2

# A crash (exit 3) is restarted once (crash.restarts = 1)...
old=$(sprop 2 MainPID)
control 2 "exit 3"
wait_until 10 "slot 2 restarted after a crash" bash -c "p=\$(busctl --address='$BUS' get-property org.slotd.Supervisor1 /org/slotd/Supervisor1/slot/2 org.slotd.Supervisor1.Slot MainPID | cut -d' ' -f2); [ \"\$p\" != 0 ] && [ \"\$p\" != $old ]"
wait_prop 2 ProcessState running
assert_eq "$(sprop 2 LastExitCode)" 3 "LastExitCode after exit 3"
# ...and a second crash within the window fails the slot: killed by a signal this time.
control 2 "crash segv"
wait_prop 2 ProcessState failed
assert_eq "$(sprop 2 FailureReason)" crash-backoff "FailureReason"
assert_eq "$(sprop 2 LastExitSignal)" 11 "LastExitSignal"
assert_eq "$(sprop 2 State)" available "State of a failed slot"
assert_ok "cgroup of failed slot 2 empty" cgroup_empty 2
wait_until 10 "Crashed signals" bash -c "[ \$(grep -c 'Member=Crashed' '$T/signals.log') -ge 2 ]"
# ResetFailed clears the failure without starting; Start then starts.
scall 2 ResetFailed
wait_prop 2 ProcessState stopped
assert_eq "$(sprop 2 FailureReason)" "" "FailureReason after ResetFailed"
out=$(scall 2 ResetFailed 2>&1 || true)
assert_ok "ResetFailed on a stopped slot is InvalidState ($out)" grep -q "not failed" <<<"$out"
scall 2 Start
wait_prop 2 ProcessState running

# StopAll stops every slot.
mcall StopAll
for id in 0 1 2; do wait_prop $id ProcessState stopped; done
for id in 0 1 2; do assert_ok "slot $id empty after StopAll" cgroup_empty $id; done

# SlotChanged carried the transitions seen above.
wait_until 10 "SlotChanged for stopped" grep -q '"stopped"' "$T/signals.log"
assert_ok "SlotChanged signals seen" grep -q "Member=SlotChanged" "$T/signals.log"
assert_ok "SlotChanged failed seen" grep -q '"failed"' "$T/signals.log"
finish
