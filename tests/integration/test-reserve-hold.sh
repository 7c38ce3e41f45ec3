#!/usr/bin/env bash
# Reservations and holds (SPEC §7): a reservation lasts until its UUID is allocated or its
# timeout; a hold ends by its timeout, an allocation, a reservation, Stop or Restart (a change
# of build configuration is in test-reload.sh), never by the process exiting, and is not
# restored after deallocation. The Manager's HoldUntilUSec is the furthest hold.
. "$(dirname "$0")/lib.sh"

# cold: 1 slot, start_on_provision = no. game: 3 slots.
MACHINE_CPUS=4 write_config
write_fleet cold "servers = 1" "[ports]" "game_base = 25200" "query_base = 25250"
fleet_key cold "start_on_provision = no"
write_fleet game "servers = 3" "[ports]" "game_base = 25210" "query_base = 25260"
start_slotd
COLD=$(list_slots | awk '$2 == "cold" { print $1 }')
set -- $(list_slots | awk '$2 == "game" { print $1 }')
G1=$1 G2=$2 G3=$3
for id in $G1 $G2 $G3; do wait_prop $id ProcessState running; done
S=1000000 # one second in µs

# 1. A reservation: reserved until its timeout, then online again, same process. 3 s on a
# host; under TCG in the VM a busctl call can take a second when the host is busy, so it
# scales, and the three properties are read in one busctl right after Reserve.
R1=$((3 * S * TIME_SCALE))
t0=$(now_usec)
r=$(reserve game r-1 $R1)
t1=$(now_usec)
{ read -r state; read -r until; read -r pid; } < <(bctl get-property org.slotd.Supervisor1 \
        "/org/slotd/Supervisor1/slot/$r" org.slotd.Supervisor1.Slot State ReservedUntilUSec \
        MainPID | strip_type)
assert_eq "$state" reserved "State after Reserve"
assert_between "$until" $((t0 + R1)) $((t1 + R1)) "ReservedUntilUSec of a $R1 µs reservation"
# Another UUID is never given the reserved slot.
x=$(allocate game x-1)
assert_ok "x-1 not on the reserved slot" test "$x" != "$r"
wait_prop $r State online 10
assert_ok "reservation did not end before its deadline" test "$(now_usec)" -ge $((until - 100000))
assert_eq "$(sprop $r ReservedUntilUSec)" 0 "ReservedUntilUSec after expiry"
assert_eq "$(sprop $r MainPID)" "$pid" "same process across the reservation"
mcall Deallocate s x-1

# 2. Allocate with the reserving UUID takes the reserved slot and ends the reservation.
r=$(reserve game r-2 $((30 * S)))
assert_eq "$(allocate game r-2)" "$r" "Allocate of the reserving UUID"
assert_eq "$(sprop $r State)" allocated "State"
assert_eq "$(sprop $r AllocationUUID)" r-2 "AllocationUUID"
assert_eq "$(sprop $r ReservedUntilUSec)" 0 "ReservedUntilUSec once used"
mcall Deallocate s r-2
assert_eq "$(sprop $r State)" online "not reserved again after Deallocate"

# 3. Timeout 0 is the default of 60 s.
t0=$(now_usec)
r=$(reserve game r-3 0)
t1=$(now_usec)
assert_between "$(sprop $r ReservedUntilUSec)" $((t0 + 60 * S)) $((t1 + 60 * S)) "default reservation of 60 s"
allocate game r-3 >/dev/null
mcall Deallocate s r-3

# 4. A reservation of an available slot ends back in the state its process is in; a second
# reservation finds no capacity; its Allocate starts the server.
r=$(reserve cold r-4 $S)
assert_eq "$r" "$COLD" "cold slot reserved"
assert_eq "$(sprop $r State)" reserved "State of the reserved cold slot"
wait_until 10 "cold reservation expired" prop_is_not $r State reserved
if [ "$(sprop $r ProcessState)" = stopped ]; then want=available; else want=online; fi
assert_eq "$(sprop $r State)" $want "cold slot after its reservation"
reserve cold r-5 $((30 * S)) >/dev/null
expect_merr NoCapacity Reserve string:cold string:r-6 uint64:0
expect_merr NoCapacity Allocate string:cold string:r-6 string:
assert_eq "$(allocate cold r-5)" "$COLD" "Allocate r-5"
wait_prop $COLD ProcessState running
mcall Deallocate s r-5
scall $COLD Stop
wait_prop $COLD State available

# 5. Hold, then Hold again to refresh it; the Manager shows the furthest hold.
assert_eq "$(mprop HoldUntilUSec)" 0 "Manager HoldUntilUSec with no hold"
t0=$(now_usec)
h1=$(hold $G1 $((60 * S)))
t1=$(now_usec)
assert_between "$h1" $((t0 + 60 * S)) $((t1 + 60 * S)) "until_usec of a 60 s hold"
assert_eq "$(sprop $G1 State)" held "State after Hold"
assert_eq "$(sprop $G1 HoldUntilUSec)" "$h1" "HoldUntilUSec"
assert_eq "$(mprop HoldUntilUSec)" "$h1" "Manager HoldUntilUSec"
t0=$(now_usec)
h1=$(hold $G1 $((120 * S)))
t1=$(now_usec)
assert_between "$h1" $((t0 + 120 * S)) $((t1 + 120 * S)) "until_usec of the refreshed hold"
assert_eq "$(sprop $G1 HoldUntilUSec)" "$h1" "HoldUntilUSec after refresh"
assert_eq "$(mprop HoldUntilUSec)" "$h1" "Manager HoldUntilUSec after refresh"
h2=$(hold $G2 $((30 * S)))
assert_eq "$(mprop HoldUntilUSec)" "$h1" "Manager HoldUntilUSec = the furthest of two"
scall $G1 ReleaseHold
assert_eq "$(sprop $G1 State)" online "State after ReleaseHold"
assert_eq "$(sprop $G1 HoldUntilUSec)" 0 "HoldUntilUSec after ReleaseHold"
assert_eq "$(mprop HoldUntilUSec)" "$h2" "Manager HoldUntilUSec after releasing the furthest"
scall $G2 ReleaseHold
assert_eq "$(mprop HoldUntilUSec)" 0 "Manager HoldUntilUSec after releasing both"

# 6. A hold ends by its timeout: online (running) or available (stopped).
pid=$(sprop $G1 MainPID)
h1=$(hold $G1 $S)
wait_prop $G1 State online 10
assert_ok "hold did not end before its deadline" test "$(now_usec)" -ge $((h1 - 100000))
assert_eq "$(sprop $G1 HoldUntilUSec)" 0 "HoldUntilUSec after the timeout"
assert_eq "$(sprop $G1 MainPID)" "$pid" "same process across the hold"
hc=$(hold $COLD $S)
assert_eq "$(sprop $COLD State)" held "an available slot can be held"
wait_prop $COLD State available $((10 + 4 * TIME_SCALE))
assert_eq "$(sprop $COLD ProcessState)" stopped "the held cold slot was not started"

# 7. Hold only from online or available.
a=$(allocate game a-1)
expect_serr InvalidState "$a" Hold uint64:$((60 * S))
r=$(reserve game r-7 $((60 * S)))
expect_serr InvalidState "$r" Hold uint64:$((60 * S))
mcall Deallocate s a-1
allocate game r-7 >/dev/null
mcall Deallocate s r-7

# 8. A hold ended by an allocation is not restored after deallocation.
hold $G3 $((60 * S)) >/dev/null
scall $G3 Allocate ss h-1 ""
assert_eq "$(sprop $G3 State)" allocated "held slot allocated"
assert_eq "$(sprop $G3 HoldUntilUSec)" 0 "HoldUntilUSec after allocation"
mcall Deallocate s h-1
assert_eq "$(sprop $G3 State)" online "not held again after Deallocate"
assert_eq "$(sprop $G3 HoldUntilUSec)" 0 "HoldUntilUSec after Deallocate"
assert_eq "$(mprop HoldUntilUSec)" 0 "Manager HoldUntilUSec after Deallocate"

# 9. A reservation ends a hold: with every game slot held, Reserve takes a held one.
for id in $G1 $G2 $G3; do hold $id $((60 * S)) >/dev/null; done
r=$(reserve game r-8 $((60 * S)))
assert_eq "$(sprop $r State)" reserved "held slot reserved"
assert_eq "$(sprop $r HoldUntilUSec)" 0 "HoldUntilUSec of the reserved slot"
for id in $G1 $G2 $G3; do
        [ $id = $r ] || assert_eq "$(sprop $id State)" held "slot $id still held"
done
assert_eq "$(allocate game r-8)" "$r" "Allocate of r-8"
mcall Deallocate s r-8
assert_eq "$(sprop $r State)" online "neither reserved nor held after Deallocate"

# 10. Stop ends a hold (available); Restart ends one (online, a new process).
for id in $G1 $G2 $G3; do [ $id = $r ] || scall $id ReleaseHold; done
hold $G1 $((60 * S)) >/dev/null
scall $G1 Stop
wait_prop $G1 ProcessState stopped
assert_eq "$(sprop $G1 State)" available "State after Stop of a held slot"
assert_eq "$(sprop $G1 HoldUntilUSec)" 0 "HoldUntilUSec after Stop"
scall $G1 Start
wait_prop $G1 ProcessState running
assert_eq "$(sprop $G1 State)" online "State after Start: the hold stays ended"
pid=$(sprop $G2 MainPID)
hold $G2 $((60 * S)) >/dev/null
scall $G2 Restart
wait_new_pid $G2 "$pid"
wait_prop $G2 ProcessState running
assert_eq "$(sprop $G2 State)" online "State after Restart of a held slot"
assert_eq "$(sprop $G2 HoldUntilUSec)" 0 "HoldUntilUSec after Restart"

# 11. The process exiting does not end a hold: exit 0 (restarted), a crash (restarted), and
# exit 0 of a slot that is not restarted.
pid=$(sprop $G3 MainPID)
h3=$(hold $G3 $((60 * S)))
control $G3 "exit 0"
wait_new_pid $G3 "$pid"
wait_prop $G3 ProcessState running
assert_eq "$(sprop $G3 State)" held "held after exit 0 and restart"
assert_eq "$(sprop $G3 HoldUntilUSec)" "$h3" "HoldUntilUSec unchanged by exit 0"
pid=$(sprop $G3 MainPID)
control $G3 crash
wait_new_pid $G3 "$pid"
wait_prop $G3 ProcessState running
assert_eq "$(sprop $G3 State)" held "held after a crash and restart"
assert_eq "$(sprop $G3 HoldUntilUSec)" "$h3" "HoldUntilUSec unchanged by a crash"
scall $COLD Start
wait_prop $COLD ProcessState running
# Long enough to outlast the exit and the reads below even under TCG in the VM.
hc=$(hold $COLD $((4 * S * TIME_SCALE)))
control $COLD "exit 0"
wait_prop $COLD ProcessState stopped
assert_eq "$(sprop $COLD State)" held "held after exit 0 without restart"
assert_eq "$(sprop $COLD HoldUntilUSec)" "$hc" "HoldUntilUSec unchanged"
wait_prop $COLD State available $((10 + 4 * TIME_SCALE))
assert_ok "cold hold lasted until its deadline" test "$(now_usec)" -ge $((hc - 100000))
scall $G3 ReleaseHold
assert_eq "$(mprop HoldUntilUSec)" 0 "no hold left"
finish
