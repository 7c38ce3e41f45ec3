#!/usr/bin/env bash
# Allocate (SPEC §7, §8): the order in which a fleet's slots are picked, the same UUID twice,
# NoCapacity, argument checks, and the errors of a slot's own Allocate and Deallocate.
. "$(dirname "$0")/lib.sh"

# game: 8 slots; a crash of an unallocated slot fails it at once (crash.restarts = 0).
# aux: 1 slot.
MACHINE_CPUS=9 MACHINE_MEMORY=8G write_config
write_fleet game "servers = 8" "[ports]" "game_base = 25000" "query_base = 25050" \
        "[crash]" "restarts = 0" "window = 10m"
write_fleet aux "servers = 1" "[ports]" "game_base = 25020" "query_base = 25070"
start_slotd
assert_eq "$(mprop SlotCount)" 9 "SlotCount"
AUX=$(list_slots | awk '$2 == "aux" { print $1 }')
GAME=$(list_slots | awk '$2 == "game" { print $1 }')
assert_eq "$(wc -w <<<"$GAME")" 8 "game slots"
for id in $GAME $AUX; do wait_prop $id ProcessState running; done

# 1. Arguments are checked first (InvalidArgument), while there is capacity to hide nothing.
long=$(printf 'x%.0s' $(seq 129))
expect_merr InvalidArgument Allocate string:no-such-fleet string:u-1 string:
expect_merr InvalidArgument Allocate string:game string: string:
expect_merr InvalidArgument Allocate string:game "string:has space" string:
expect_merr InvalidArgument Allocate string:game string:a/b string:
expect_merr InvalidArgument Allocate string:game "string:$long" string:
expect_merr InvalidArgument Allocate string:game string:u-1 "string:bad config"
expect_merr InvalidArgument Allocate string:game string:u-1 "string:$long"
expect_merr InvalidArgument Reserve string:no-such-fleet string:u-1 uint64:0
expect_merr InvalidArgument Reserve string:game string:a/b uint64:0
expect_serr InvalidArgument "$AUX" Allocate "string:x y" string:
for id in $GAME $AUX; do assert_eq "$(sprop $id State)" online "slot $id untouched by bad calls"; done
# The longest valid UUID (128 characters, every allowed kind) is accepted.
max="$(printf 'A%.0s' $(seq 122))z9._:-"
assert_eq "${#max}" 128 "length of the longest UUID"
assert_eq "$(allocate aux "$max")" "$AUX" "Allocate with a 128-character UUID"
assert_eq "$(sprop $AUX AllocationUUID)" "$max" "AllocationUUID of the long UUID"
mcall Deallocate s "$max"
wait_prop $AUX State online

# 2. Slots outside the order: one reserved for another UUID, one allocated, one failed.
R=$(reserve game r-other 120000000)
assert_eq "$(sprop $R State)" reserved "State of the reserved slot"
A=$(allocate game a-other)
assert_ok "allocated slot $A differs from reserved slot $R" test "$A" != "$R"
assert_eq "$(sprop $A State)" allocated "State of slot $A"
# The six others, lowest id first: one failed, then the five classes of the order with the
# most wanted (class 1) on the highest id, so that a lowest-id-first pick would go wrong.
set -- $(for id in $GAME; do [ $id = $R ] || [ $id = $A ] || echo $id; done)
assert_eq "$#" 6 "slots left to arrange"
F=$1 C5=$2 C4=$3 C3=$4 C2=$5 C1=$6
note "failed=$F class5(other config)=$C5 class4(available)=$C4 class3(starting)=$C3 class2(held)=$C2 class1(ready)=$C1 reserved=$R allocated=$A"
# failed: a crash with crash.restarts = 0.
control $F crash
wait_prop $F ProcessState failed
# class 5: online running another build configuration. A slot's own Allocate with a build
# configuration restarts it into that one; after Deallocate it keeps running it.
pid=$(sprop $C5 MainPID)
scall $C5 Allocate ss setup-other other
assert_eq "$(sprop $C5 State)" allocated "State after the slot's own Allocate"
wait_prop $C5 BuildConfiguration other
wait_new_pid $C5 "$pid"
wait_prop $C5 ProcessState running
scall $C5 Deallocate
wait_prop $C5 State online
# class 4: available (stopped).
scall $C4 Stop
wait_prop $C4 ProcessState stopped
assert_eq "$(sprop $C4 State)" available "State of stopped slot $C4"
# class 3: online but not ready: its server is told at every start not to send READY=1.
echo "ready 0" > "$(sprop $C3 Home)/test-server.at-start"
pid=$(sprop $C3 MainPID)
scall $C3 Restart
wait_new_pid $C3 "$pid"
wait_until 10 "slot $C3 new server state" server_state_is $C3 pid "$(sprop $C3 MainPID)"
assert_eq "$(server_state $C3 ready)" 0 "server of slot $C3 not ready"
assert_eq "$(sprop $C3 ProcessState)" starting "ProcessState of the not-ready slot"
assert_eq "$(sprop $C3 Ready)" false "Ready of the not-ready slot"
assert_eq "$(sprop $C3 State)" online "State of the not-ready slot"
# class 2: held.
hold $C2 120000000 >/dev/null
assert_eq "$(sprop $C2 State)" held "State of slot $C2"
# class 1: slot C1 as it is, online and ready with the default configuration.
assert_eq "$(sprop $C1 Ready)" true "Ready of slot $C1"
assert_eq "$(sprop $C1 BuildConfiguration)" default "BuildConfiguration of slot $C1"

# 3. Asking for "other": the slot ready with it (class 1 for that request) wins over the
# held and the available ones, and the ready ones running "default".
pid5=$(sprop $C5 MainPID)
assert_eq "$(allocate game o-1 other)" "$C5" "Allocate(other) picks the slot running other"
assert_eq "$(sprop $C5 MainPID)" "$pid5" "no restart when the configuration matches"
mcall Deallocate s o-1
wait_prop $C5 State online
assert_eq "$(sprop $C5 MainPID)" "$pid5" "still the same process after Deallocate"

# 4. The default configuration, step by step through the order.
pid1=$(sprop $C1 MainPID)
assert_eq "$(allocate game s-1)" "$C1" "class 1: online and ready"
assert_eq "$(sprop $C1 MainPID)" "$pid1" "class 1 keeps its process"
assert_eq "$(allocate game s-2)" "$C2" "class 2: held"
assert_eq "$(sprop $C2 State)" allocated "held slot now allocated"
assert_eq "$(sprop $C2 HoldUntilUSec)" 0 "HoldUntilUSec once the hold is ended by allocation"
pid3=$(sprop $C3 MainPID)
assert_eq "$(allocate game s-3)" "$C3" "class 3: online, starting"
assert_eq "$(sprop $C3 MainPID)" "$pid3" "class 3 keeps its process"
assert_eq "$(allocate game s-4)" "$C4" "class 4: available, started"
wait_prop $C4 ProcessState running
assert_eq "$(sprop $C4 State)" allocated "class 4 allocated and running"
assert_eq "$(sprop $C4 AllocationUUID)" s-4 "AllocationUUID of slot $C4"
assert_eq "$(allocate game s-5)" "$C5" "class 5: online with another configuration"
wait_prop $C5 BuildConfiguration default
wait_new_pid $C5 "$pid5"
wait_prop $C5 ProcessState running
assert_eq "$(sprop $C5 State)" allocated "class 5 allocated after its restart"
for id in $C1 $C2 $C3 $C4 $C5; do
        assert_eq "$(sprop $id BuildConfiguration)" default "slot $id BuildConfiguration"
done

# 5. Nothing eligible is left: failed, reserved for another UUID and allocated slots are
# never picked.
expect_merr NoCapacity Allocate string:game string:s-6 string:
expect_merr NoCapacity Allocate string:game string:s-6 string:other
expect_merr NoCapacity Reserve string:game string:s-6 uint64:0
assert_eq "$(sprop $F ProcessState)" failed "failed slot untouched"
assert_eq "$(sprop $R State)" reserved "reserved slot untouched"
assert_eq "$(sprop $A AllocationUUID)" a-other "allocated slot untouched"
# ...but the UUID holding the reservation gets its slot.
assert_eq "$(allocate game r-other)" "$R" "Allocate of the reserving UUID"
assert_eq "$(sprop $R State)" allocated "reserved slot now allocated"
assert_eq "$(sprop $R ReservedUntilUSec)" 0 "ReservedUntilUSec after the reservation is used"

# 6. The same UUID twice is the same slot, even named with another fleet.
assert_eq "$(allocate game s-1)" "$C1" "s-1 again"
assert_eq "$(allocate aux s-1)" "$C1" "s-1 again, asked of fleet aux"
assert_eq "$(sprop $AUX State)" online "aux slot untouched by the repeated UUID"
assert_eq "$(list_slots | awk '$5 == "s-1"' | wc -l)" 1 "s-1 on one slot only"
assert_eq "$(sprop $C1 MainPID)" "$pid1" "repeat did not restart slot $C1"

# 7. A slot's own Allocate and Deallocate. Refused for a slot allocated to another UUID or
# reserved for another UUID; a failed slot can be allocated explicitly: a new allocation
# ends crash-backoff (SPEC §6) and starts it.
expect_serr InvalidState "$C1" Allocate string:x-1 string:
expect_serr InvalidState "$C1" Allocate string:s-2 string:
scall $F Allocate ss f-1 ""
assert_eq "$(sprop $F State)" allocated "failed slot allocated explicitly"
wait_prop $F ProcessState running
assert_eq "$(sprop $F FailureReason)" "" "FailureReason after the new allocation"
R2=$(reserve aux r-aux 120000000)
assert_eq "$R2" "$AUX" "aux slot reserved"
expect_serr InvalidState "$AUX" Allocate string:x-1 string:
expect_serr InvalidState "$AUX" Deallocate
scall $AUX Allocate ss r-aux ""
assert_eq "$(sprop $AUX State)" allocated "the slot's own Allocate with the reserving UUID"
assert_eq "$(sprop $AUX AllocationUUID)" r-aux "AllocationUUID r-aux"
scall $AUX Deallocate
wait_prop $AUX State online
assert_eq "$(sprop $AUX AllocationUUID)" "" "AllocationUUID after the slot's Deallocate"
expect_serr InvalidState "$AUX" Deallocate
expect_merr NoSuchAllocation Deallocate string:r-aux
expect_merr NoSuchAllocation Deallocate string:never-allocated
# Deallocate through the Manager frees a slot for the next Allocate.
mcall Deallocate s s-4
wait_prop $C4 State online
assert_eq "$(allocate game s-7)" "$C4" "the freed slot is picked"
assert_ok "slotd still running" kill -0 "$SLOTD_PID"
finish
