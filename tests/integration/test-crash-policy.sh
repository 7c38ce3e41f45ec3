#!/usr/bin/env bash
# The crash policy (SPEC §6, §10): a crash is restarted until the slot has crashed more than
# crash.restarts times within crash.window, then it is failed (crash-backoff) until Start,
# ResetFailed or a new allocation; an allocated server that crashes stays down with its
# allocation when crash.pre_recovery is on, and is restarted into it when it is off.
. "$(dirname "$0")/lib.sh"
SIGS="$T/signals.json"

MACHINE_CPUS=4 write_config
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet game "servers = 2" \
        "[ports]" "game_base = 32300" "query_base = 32350" "[checks]" "interval = 0" \
        "[crash]" "restarts = 2" "window = 10m"
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet norecover "servers = 1" \
        "[ports]" "game_base = 32310" "query_base = 32360" "[checks]" "interval = 0" \
        "[crash]" "restarts = 2" "window = 10m" "pre_recovery = no"
start_slotd
start_monitor "$SIGS"
# Slots in file-name order: game 0 and 1, norecover 2.
for id in 0 1 2; do
        wait_prop $id ProcessState running
        wait_server $id
done

# Properties are read several at a time (sprops): a busctl call is slow in the TCG VM.
# crash_restarted ID: the server of slot ID exits 3 (a crash) and is restarted.
crash_restarted() {
        local pid
        pid=$(sprop "$1" MainPID)
        control "$1" "exit 3"
        wait_new_pid "$1" "$pid"
        wait_prop "$1" ProcessState running
        wait_server "$1"
        assert_eq "$(sprops "$1" LastExitCode FailureReason)" "3|" \
                "slot $1 LastExitCode|FailureReason after a crash"
}
# crash_fails ID: the server of slot ID crashes once more and the slot is failed.
crash_fails() {
        control "$1" "crash segv"
        wait_prop "$1" ProcessState failed
        assert_eq "$(sprops "$1" FailureReason LastExitSignal MainPID State)" \
                "crash-backoff|11|0|available" "slot $1 FailureReason|LastExitSignal|MainPID|State"
        assert_ok "cgroup of failed slot $1 empty" cgroup_empty "$1"
}
# three_crashes ID: two crashes restarted (crash.restarts = 2), the third fails the slot.
three_crashes() {
        local restarts
        restarts=$(sprop "$1" Restarts)
        crash_restarted "$1"
        crash_restarted "$1"
        assert_eq "$(sprop "$1" Restarts)" $((restarts + 2)) "slot $1 Restarts after two crashes"
        crash_fails "$1"
}

# ---- 6a. Back-off: the third crash within crash.window fails the slot ----
three_crashes 0
wait_until 10 "three Crashed signals of slot 0" sig_count_ge "$SIGS" Crashed 0 3
assert_eq "$(sig_args "$SIGS" Crashed | grep '^0 ' | paste -sd,)" "0 3 0 ,0 3 0 ,0 0 11 " \
        "Crashed signals (no reason for a plain crash)"
assert_ok "log: back-off" grep -q "slot 0 (game): Crashed 3 times within crash.window, not restarting until Start or ResetFailed" "$T/slotd.log"
# The two restarts were certain whatever the exit, so the keeper made them itself (docs/slots.md,
# Restarts by the keeper); the third crash, past crash.restarts, was slotd's to decide.
assert_eq "$(grep -c "slot 0 (game): Server crashed: exit code 3; restarted by its keeper" "$T/slotd.log")" 2 \
        "crashes restarted by the keeper"
assert_ok "SlotChanged announced failed" has_sig "$SIGS" SlotChanged "0 available failed"

# ---- 6b. ResetFailed clears the failure without starting; the count starts over ----
scall 0 ResetFailed
wait_prop 0 ProcessState stopped
assert_eq "$(sprops 0 FailureReason State MainPID)" "|available|0" \
        "FailureReason|State|MainPID after ResetFailed"
scall 0 Start
wait_prop 0 ProcessState running
wait_server 0
# Had the three crashes above still counted, the next one would fail the slot at once.
three_crashes 0

# ---- 6c. Start on a failed slot: running again, the failure and the count cleared ----
scall 0 Start
wait_prop 0 ProcessState running
wait_server 0
assert_eq "$(sprop 0 FailureReason)" "" "FailureReason after Start"
three_crashes 0

# ---- 6d. A new allocation: Manager.Allocate passes a failed slot by; Slot.Allocate starts it ----
assert_eq "$(allocate game u-one)" 1 "Manager.Allocate picks the online slot 1"
expect_merr NoCapacity Allocate string:game string:u-two string:
assert_eq "$(sprop 0 ProcessState)" failed "slot 0 still failed after a refused Allocate"
scall 0 Allocate ss u-two ""
wait_prop 0 ProcessState running
wait_server 0
assert_eq "$(sprops 0 State AllocationUUID FailureReason)" "allocated|u-two|" \
        "State|AllocationUUID|FailureReason after Slot.Allocate on a failed slot"
assert_eq "$(server_state 0 allocatedUUID)" u-two "the new server read its allocation"

# ---- 6e. pre_recovery = yes: an allocated server that crashes stays down, allocated ----
restarts=$(sprop 0 Restarts)
control 0 "exit 3"
wait_prop 0 FailureReason pre-recovery
assert_eq "$(sprops 0 ProcessState State AllocationUUID MainPID LastExitCode)" \
        "stopped|allocated|u-two|0|3" \
        "ProcessState|State|AllocationUUID|MainPID|LastExitCode after a crash in pre-recovery"
assert_eq "$(server_json 0 allocatedUUID)" u-two "server.json keeps the allocation"
assert_ok "log: not restarting, pre-recovery" grep -q "slot 0 (game): Server crashed: exit code 3; not restarting: pre-recovery" "$T/slotd.log"

# ---- 6f. pre_recovery = no: restarted into the same allocation ----
assert_eq "$(allocate norecover u-three)" 2 "Manager.Allocate of norecover"
wait_until 10 "server of slot 2 sees u-three" server_state_is 2 allocatedUUID u-three
crash_restarted 2
assert_eq "$(sprops 2 State AllocationUUID)" "allocated|u-three" \
        "State|AllocationUUID after a crash without pre-recovery"
# Allocated: slotd took the keeper's restart back at the allocation, and restarted it itself.
assert_ok "log: slot 2 restarted by slotd" grep -q "slot 2 (norecover): Server crashed: exit code 3; restarting" "$T/slotd.log"
assert_ok "log: not by its keeper" bash -c "! grep -q 'slot 2 (norecover): .*restarted by its keeper' '$T/slotd.log'"
assert_eq "$(server_json 2 allocatedUUID)" u-three "server.json after the restart"
assert_eq "$(server_state 2 allocatedUUID)" u-three "the restarted server is in the allocation"
# Slot 0 stayed down meanwhile: slot 2's crash went through the same restart path and its
# server is up again, so a restart of slot 0 would have happened by now.
assert_eq "$(sprops 0 ProcessState Restarts FailureReason)" "stopped|$restarts|pre-recovery" \
        "slot 0 still stopped, not restarted: ProcessState|Restarts|FailureReason"
# Deallocating ends the pre-recovery: the slot starts again, online, no longer failed.
mcall Deallocate s u-two
wait_prop 0 ProcessState running
assert_eq "$(sprops 0 State FailureReason)" "online|" "State|FailureReason after Deallocate"
wait_until 10 "server.json of slot 0 cleared" server_json_is 0 allocatedUUID ""
finish
