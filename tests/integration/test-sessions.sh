#!/usr/bin/env bash
# Sessions (SPEC §6, §7): multi-session servers keep running across Deallocate; an exit 0
# ends the session (deallocated, then restarted or left available); a crash while allocated
# with and without crash.pre_recovery.
. "$(dirname "$0")/lib.sh"

# multi: 2 slots, start_on_provision = yes, crash.pre_recovery = yes (the defaults).
# norecover: 1 slot, crash.pre_recovery = no. single: 1 slot, start_on_provision = no.
MACHINE_CPUS=4 write_config
# multi allows 5 restarts, so that its repeated crashes below never meet crash-backoff.
write_fleet multi "servers = 2" "[ports]" "game_base = 25100" "query_base = 25150" \
        "[crash]" "restarts = 5"
write_fleet norecover "servers = 1" "[ports]" "game_base = 25110" "query_base = 25160" \
        "[crash]" "pre_recovery = no"
write_fleet single "servers = 1" "[ports]" "game_base = 25120" "query_base = 25170"
fleet_key single "start_on_provision = no"
start_slotd
start_monitor "$T/signals.log"
MULTI=$(list_slots | awk '$2 == "multi" { print $1 }')
NOREC=$(list_slots | awk '$2 == "norecover" { print $1 }')
SINGLE=$(list_slots | awk '$2 == "single" { print $1 }')
for id in $MULTI $NOREC; do wait_prop $id ProcessState running; done
assert_eq "$(sprop $SINGLE State)" available "single-session slot waits, available"
assert_eq "$(sprop $SINGLE ProcessState)" stopped "single-session slot not started"

# 1. Multi-session: Allocate binds the UUID to the running server, which sees it in
# server.json; Deallocate clears it and the same process goes on, online.
m=$(allocate multi m-1)
pid=$(sprop $m MainPID)
assert_eq "$(sprop $m State)" allocated "State after Allocate"
assert_eq "$(sprop $m AllocationUUID)" m-1 "AllocationUUID"
assert_eq "$(server_json $m allocatedUUID)" m-1 "server.json allocatedUUID"
wait_until 10 "server of slot $m reads m-1" server_state_is $m allocatedUUID m-1
assert_eq "$(list_slots | awk -v id=$m '$1 == id { print $3, $5 }')" "allocated m-1" "ListSlots row"
mcall Deallocate s m-1
assert_eq "$(sprop $m State)" online "State after Deallocate"
assert_eq "$(sprop $m AllocationUUID)" "" "AllocationUUID after Deallocate"
assert_eq "$(server_json $m allocatedUUID)" "" "server.json after Deallocate"
wait_until 10 "server of slot $m reads ''" server_state_is $m allocatedUUID ""
assert_eq "$(sprop $m MainPID)" "$pid" "same process across the session"
assert_eq "$(sprop $m ProcessState)" running "still running after Deallocate"
expect_merr NoSuchAllocation Deallocate string:m-1
# A second session on the same server.
scall $m Allocate ss m-2 ""
assert_eq "$(sprop $m AllocationUUID)" m-2 "the next session on the same server"
assert_eq "$(sprop $m MainPID)" "$pid" "same process for the second session"

# 2. Exit 0 ends the session: deallocated, and restarted since start_on_provision = yes.
restarts=$(sprop $m Restarts)
control $m "exit 0"
wait_new_pid $m "$pid"
wait_prop $m ProcessState running
assert_eq "$(sprop $m State)" online "State after exit 0"
assert_eq "$(sprop $m AllocationUUID)" "" "AllocationUUID after exit 0"
assert_eq "$(server_json $m allocatedUUID)" "" "server.json after exit 0"
wait_until 10 "new server of slot $m up" server_state_is $m pid "$(sprop $m MainPID)"
assert_eq "$(server_state $m allocatedUUID)" "" "the new server starts unallocated"
assert_eq "$(sprop $m Restarts)" $((restarts + 1)) "Restarts after exit 0"
expect_merr NoSuchAllocation Deallocate string:m-2

# 3. Single-session: Allocate starts the available slot with the UUID already in
# server.json and its environment; exit 0 ends the session and leaves it available.
assert_eq "$(allocate single s-1)" "$SINGLE" "Allocate on the single-session fleet"
assert_eq "$(sprop $SINGLE State)" allocated "State after Allocate"
wait_prop $SINGLE ProcessState running
wait_until 10 "single server state" server_state_is $SINGLE pid "$(sprop $SINGLE MainPID)"
assert_eq "$(server_state $SINGLE allocatedUUID)" s-1 "server read s-1 at its start"
assert_eq "$(server_state $SINGLE env.ALLOCATION_UUID)" s-1 "ALLOCATION_UUID in its environment"
control $SINGLE "exit 0"
wait_prop $SINGLE ProcessState stopped
assert_eq "$(sprop $SINGLE State)" available "State after exit 0 without start_on_provision"
assert_eq "$(sprop $SINGLE AllocationUUID)" "" "AllocationUUID after exit 0"
assert_eq "$(server_json $SINGLE allocatedUUID)" "" "server.json after exit 0"
assert_eq "$(sprop $SINGLE Restarts)" 0 "not restarted"
expect_merr NoSuchAllocation Deallocate string:s-1
# The next session starts it again.
assert_eq "$(allocate single s-2)" "$SINGLE" "second session on the single-session fleet"
wait_prop $SINGLE ProcessState running
mcall Deallocate s s-2
assert_eq "$(sprop $SINGLE State)" online "multi-session use of a started slot"

# 4. Crash while allocated, crash.pre_recovery = yes: not restarted, keeps its UUID.
c=$(allocate multi c-1)
pid=$(sprop $c MainPID)
starts=$(wc -l < "$(sprop $c Home)/test-server.starts")
control $c crash
wait_prop $c ProcessState stopped
assert_eq "$(sprop $c State)" allocated "State after a crash while allocated"
assert_eq "$(sprop $c AllocationUUID)" c-1 "AllocationUUID kept"
assert_eq "$(sprop $c FailureReason)" pre-recovery "FailureReason"
assert_eq "$(sprop $c MainPID)" 0 "MainPID of the crashed slot"
assert_eq "$(sprop $c LastExitSignal)" 6 "killed by SIGABRT"
assert_eq "$(server_json $c allocatedUUID)" c-1 "server.json keeps the UUID"
wait_until 10 "Crashed signal" grep -q '"member":"Crashed"' "$T/signals.log"
# A restart would follow the exit at once (it is a deferred event): 1 s without one shows
# there is none.
stays_true 1000 "slot $c not restarted" prop_is $c ProcessState stopped
assert_eq "$(wc -l < "$(sprop $c Home)/test-server.starts")" "$starts" "no new start of slot $c"
# It is not picked for another session...
other=$(allocate multi c-2)
assert_ok "c-2 not on the crashed slot" test "$other" != "$c"
mcall Deallocate s c-2
# Allocating c-1 again names the same slot; a new allocation of the slot replaces the stopped
# session and starts the server with the new UUID.
assert_eq "$(allocate multi c-1)" "$c" "Allocate c-1 again"
scall $c Allocate ss c-3 ""
wait_prop $c ProcessState running
assert_eq "$(sprop $c State)" allocated "State after the new allocation"
assert_eq "$(sprop $c AllocationUUID)" c-3 "AllocationUUID after the new allocation"
assert_eq "$(sprop $c FailureReason)" "" "FailureReason after the new allocation"
expect_merr NoSuchAllocation Deallocate string:c-1
wait_until 10 "new server state" server_state_is $c pid "$(sprop $c MainPID)"
assert_eq "$(server_state $c allocatedUUID)" c-3 "the new server reads c-3"
# A second crash, then Deallocate: the UUID is gone, and the slot returns to service.
control $c crash
wait_prop $c FailureReason pre-recovery
assert_eq "$(sprop $c AllocationUUID)" c-3 "c-3 kept after the second crash"
mcall Deallocate s c-3
assert_eq "$(sprop $c AllocationUUID)" "" "AllocationUUID after Deallocate of a crashed slot"
assert_eq "$(server_json $c allocatedUUID)" "" "server.json after Deallocate of a crashed slot"
wait_prop $c State online
wait_prop $c ProcessState running

# 5. crash.pre_recovery = no: restarted at once with the same UUID.
assert_eq "$(allocate norecover n-1)" "$NOREC" "Allocate on norecover"
pid=$(sprop $NOREC MainPID)
restarts=$(sprop $NOREC Restarts)
control $NOREC crash
wait_new_pid $NOREC "$pid"
wait_prop $NOREC ProcessState running
assert_eq "$(sprop $NOREC State)" allocated "State after the restart"
assert_eq "$(sprop $NOREC AllocationUUID)" n-1 "AllocationUUID after the restart"
assert_eq "$(sprop $NOREC FailureReason)" "" "FailureReason after the restart"
assert_eq "$(sprop $NOREC Restarts)" $((restarts + 1)) "Restarts after the crash"
assert_eq "$(server_json $NOREC allocatedUUID)" n-1 "server.json keeps n-1"
wait_until 10 "restarted server state" server_state_is $NOREC pid "$(sprop $NOREC MainPID)"
assert_eq "$(server_state $NOREC allocatedUUID)" n-1 "the restarted server reads n-1"
assert_eq "$(server_state $NOREC env.ALLOCATION_UUID)" n-1 "ALLOCATION_UUID of the restarted server"
finish
