#!/usr/bin/env bash
# Live restore (issue 5): slotd killed with SIGKILL and started again, and slotd re-executed
# in place, lose no game server, allocation, hold or reservation, start nothing twice, and
# classify the servers that ended while slotd was away.
. "$(dirname "$0")/lib.sh"

MACHINE_CPUS=5 write_config
write_fleet game "[ports]" "game_base = 36000" "query_base = 36100"
start_slotd
for id in 0 1 2 3 4; do wait_prop $id ProcessState running; done

# 1. Some of everything: an allocation, a hold, a reservation.
mcall Allocate sss game u-alloc "" >/dev/null
a=$(mcall ListSlots | grep -o '[0-9]* "game" "allocated"' | cut -d' ' -f1)
for id in 0 1 2 3 4; do [ "$(sprop $id State)" = online ] && { h=$id; break; }; done
scall $h Hold t 600000000 >/dev/null
mcall Reserve sst game r-claim 600000000 >/dev/null
for id in 0 1 2 3 4; do [ "$(sprop $id State)" = reserved ] && r=$id; done
others=(); for id in 0 1 2 3 4; do [ $id != $a ] && [ $id != $h ] && [ $id != $r ] && others+=($id); done
e=${others[0]} c=${others[1]}
note "allocated $a, held $h, reserved $r, exits $e, crashes $c"
declare -A pid
for id in 0 1 2 3 4; do pid[$id]=$(sprop $id MainPID); done
hold_until=$(sprop $h HoldUntilUSec)
restarts_e=$(sprop $e Restarts)

# 2. SIGKILL: slotd gets no chance to save anything more.
kill -KILL "$SLOTD_PID"
wait "$SLOTD_PID" 2>/dev/null || true
SLOTD_PID=
# The held slot's READY=1 as if heard just before the SIGKILL, its commit not made: the state
# file says not ready, and the datagram was taken. The keeper's status file still tells.
assert_ok "held slot's server marked ready in its status file" \
        grep -qa "ready 0" "$T/state/exit/$h"
sed -i -E "s/^(slot id=$h .*)ready=1/\1ready=0/" "$T/state/state"
assert_ok "state file says slot $h is not ready" grep -qE "^slot id=$h .*ready=0" "$T/state/state"
# Slot $r's server.json written for an allocation the state never got (slotd killed before
# its commit): the state is the truth, and the server adopted reads it.
sed -i 's/"allocatedUUID": ""/"allocatedUUID": "u-never-durable"/' "$T/slots/game/slot-$r/server.json"
assert_ok "slot $r's server.json says the undurable UUID" \
        grep -q u-never-durable "$T/slots/game/slot-$r/server.json"
# While it is away, one server exits 0 and the allocated one crashes.
echo "exit 0" >> "$T/slots/game/slot-$e/test-server.control"
echo "crash" >> "$T/slots/game/slot-$a/test-server.control"
wait_until 10 "server of slot $e ended" gone "${pid[$e]}"
wait_until 10 "server of slot $a ended" gone "${pid[$a]}"

# 3. The new slotd adopts the rest as they are and classifies the two that ended.
start_slotd
for id in $h $r $c; do
        assert_eq "$(sprop $id MainPID)" "${pid[$id]}" "slot $id: the same server"
        assert_ok "slot $id: one server" one_server $id
done
assert_eq "$(sprop $h State)" held "held slot"
assert_eq "$(sprop $h ProcessState)" running "held slot: ready, from its status file's mark"
assert_ok "log says the mark was used" grep -q "slot $h .*READY=1, as marked before slotd went away" "$T/slotd.log"
assert_eq "$(sprop $h HoldUntilUSec)" "$hold_until" "hold deadline"
assert_eq "$(sprop $r State)" reserved "reserved slot"
assert_ok "slot $r's server.json rewritten from the state" \
        grep -q '"allocatedUUID": "",' "$T/slots/game/slot-$r/server.json"
assert_ok "log says server.json was rewritten" \
        grep -q "slot $r .*server.json did not say what the state says (allocation none): rewritten" "$T/slotd.log"
# exit 0 while away: the session is over, the slot restarted (start_on_provision).
wait_new_pid $e "${pid[$e]}"
wait_prop $e ProcessState running
assert_eq "$(sprop $e LastExitCode)" 0 "exit code seen across the restart"
assert_eq "$(sprop $e Restarts)" $((restarts_e + 1)) "one restart"
# A crash while allocated: pre-recovery, its session kept, not restarted.
wait_prop $a ProcessState stopped
assert_eq "$(sprop $a State)" allocated "crashed allocated slot keeps its session"
assert_eq "$(sprop $a AllocationUUID)" u-alloc "allocation UUID"
assert_eq "$(sprop $a FailureReason)" pre-recovery "FailureReason"
assert_eq "$(sprop $a LastExitSignal)" 6 "SIGABRT seen across the restart"
assert_ok "log says it adopted" grep -q "Adopted the running server" "$T/slotd.log"
# An allocation after the restart reaches the server it goes to, one the new slotd adopted.
# With SDK servers (test-restore-sdk) it comes through the local proxy, over a connection that
# must have outlived slotd's SIGKILL: an SDK server that had to subscribe again hears nothing
# more, as one on Unity's Go SDK v0.5.4 (tests/gameserver/README.md).
mcall Allocate sss game r-claim "" >/dev/null
assert_eq "$(sprop $r State)" allocated "the reserved slot, allocated after the restart"
if [ -n "${SDK_MODE:-}" ]; then
        r_log="$(sprop $r Home)/logs/server.log"
        heard() { grep -q "sdk: allocated r-claim" "$r_log"; }
        heard_or_deaf() { heard || grep -q "sdk: resubscribed: deaf" "$r_log"; }
        wait_until 20 "slot $r's server to hear of r-claim" heard_or_deaf
        heard || fail "slot $r's server never heard of r-claim: it lost the local proxy with" \
                "slotd's SIGKILL and subscribed again, deaf from then on"
        PASSED=$((PASSED + 1))
fi

# 4. A server adopted after SIGKILL is not slotd's child: its end is still seen.
control $c "exit 7"
wait_new_pid $c "${pid[$c]}"
assert_eq "$(sprop $c LastExitCode)" 7 "exit of an adopted (non-child) server"
pid[$c]=$(sprop $c MainPID)
wait_prop $c ProcessState running

# 5. Reexecute: the same slotd process runs the binary anew; nothing restarts.
old_slotd=$SLOTD_PID
mcall Reexecute
wait_until 20 "slotd back on the bus after Reexecute" bus_name_owned
assert_eq "$SLOTD_PID" "$old_slotd" "same slotd process"
wait_until 20 "re-executed slotd answering" prop_is $h State held
for id in $h $r $c; do
        assert_eq "$(sprop $id MainPID)" "${pid[$id]}" "slot $id: the same server after Reexecute"
done
assert_eq "$(sprop $a AllocationUUID)" u-alloc "allocation after Reexecute"
# The keepers are still our children: an exit is reaped and acted on.
control $c "crash"
wait_new_pid $c "${pid[$c]}"
assert_eq "$(sprop $c LastExitSignal)" 6 "crash seen after Reexecute"
finish
