#!/usr/bin/env bash
# Durable state (SPEC §4, §7): every allocation change is in supervisor.state_dir before its
# reply is sent. A burst of Allocate and Deallocate calls, slotd SIGKILLed in the middle of it:
# after a restart every acknowledged allocation is there, each on a slot of its own, and no
# acknowledged deallocation has come back.
. "$(dirname "$0")/lib.sh"

# 40 slots of 0.1 core and 100M.
MACHINE_CPUS=4 write_config
USAGE_CPU=0.1 USAGE_MEMORY=100M write_fleet game "servers = 40" "[ports]" \
        "game_base = 25400" "query_base = 25450"
start_slotd
assert_eq "$(mprop SlotCount)" 40 "SlotCount"
# Started is enough: allocation takes starting slots too. (Waiting for all 40 to be running
# would test how READY=1 copes with a full notify socket queue, which is not this test's
# subject.)
for id in $(seq 0 39); do wait_until 60 "slot $id started" prop_is_not $id ProcessState stopped; done

# 1. Before the burst: p-1 and p-2 allocated, p-1 deallocated again; a reservation for r-1;
# d-1..d-10 allocated, to be deallocated during the burst.
allocate game p-1 >/dev/null
p2=$(allocate game p-2)
mcall Deallocate s p-1
r1=$(reserve game r-1 600000000)
r1_until=$(sprop $r1 ReservedUntilUSec)
for i in $(seq 1 10); do allocate game d-$i >/dev/null; done

# 2. The burst: three workers allocate 9 UUIDs each, one deallocates d-1..d-10. Each call is
# written down only once busctl has its successful reply.
: > "$T/acked"
: > "$T/deallocated"
worker_alloc() {
        local w=$1 i
        for i in $(seq 1 9); do
                if busctl --address="$BUS" call org.slotd.Supervisor1 /org/slotd/Supervisor1 \
                        org.slotd.Supervisor1.Manager Allocate sss game "b-$w-$i" "" >/dev/null 2>&1; then
                        echo "b-$w-$i" >> "$T/acked"
                fi
        done
}
worker_dealloc() {
        local i
        for i in $(seq 1 10); do
                if busctl --address="$BUS" call org.slotd.Supervisor1 /org/slotd/Supervisor1 \
                        org.slotd.Supervisor1.Manager Deallocate s "d-$i" >/dev/null 2>&1; then
                        echo "d-$i" >> "$T/deallocated"
                fi
        done
}
workers=()
for w in 1 2 3; do
        worker_alloc $w &
        workers+=($!)
        bg_track $!
done
worker_dealloc &
workers+=($!)
bg_track $!
acks_at_least() { [ "$(wc -l < "$T/acked")" -ge "$1" ]; }
wait_until 60 "9 acknowledged allocations" acks_at_least 9
kill -KILL "$SLOTD_PID"
wait "$SLOTD_PID" 2>/dev/null || true
SLOTD_PID=
for p in "${workers[@]}"; do
        wait "$p" || true
        bg_untrack "$p"
done
acked=$(wc -l < "$T/acked")
deallocated=$(wc -l < "$T/deallocated")
note "acknowledged before SIGKILL: $acked of 27 allocations, $deallocated of 10 deallocations"
assert_ok "the SIGKILL came in the middle of the burst ($acked of 27 acknowledged)" test "$acked" -lt 27
# What the new slotd reads is a snapshot and, after it, the lines each commit appended for
# the slots it changed (supervisor/state/state-file.h).
lines=$(grep -c '^slot ' "$T/state/state")
assert_ok "the state file holds a journal after its snapshot ($lines slot lines, 40 slots)" test "$lines" -gt 40

# 3. A new slotd: it kills the servers it finds (no live restore yet) and restarts them, but
# the allocations stay.
start_slotd
assert_eq "$(mprop SlotCount)" 40 "SlotCount after the restart"
list_slots > "$T/slots.after"
note "allocated after the restart: $(awk '$5 != "-"' "$T/slots.after" | wc -l)"
# No UUID on two slots (acknowledged or not).
assert_eq "$(awk '$5 != "-" { print $5 }' "$T/slots.after" | sort | uniq -d | tr '\n' ' ')" "" \
        "UUIDs allocated twice"
for u in $(cat "$T/acked") p-2; do
        id=$(awk -v u="$u" '$5 == u { print $1 }' "$T/slots.after")
        assert_ok "acknowledged $u allocated after the restart" test -n "$id"
        assert_eq "$(sprop $id State)" allocated "State of slot $id ($u)"
        assert_eq "$(sprop $id AllocationUUID)" "$u" "AllocationUUID of slot $id"
        echo "$id" >> "$T/ids"
done
assert_eq "$(sort "$T/ids" | uniq -d | tr '\n' ' ')" "" "slots holding two acknowledged UUIDs"
assert_eq "$(awk -v u=p-2 '$5 == u { print $1 }' "$T/slots.after")" "$p2" "p-2 on its slot"
assert_eq "$(awk '$5 == "p-1"' "$T/slots.after")" "" "deallocated p-1 not back"
for u in $(cat "$T/deallocated"); do
        assert_eq "$(awk -v u="$u" '$5 == u' "$T/slots.after")" "" "deallocated $u not back"
done
# server.json is rewritten from the state at every start.
for u in $(cat "$T/acked") p-2; do
        id=$(awk -v u="$u" '$5 == u { print $1 }' "$T/slots.after")
        wait_until 30 "server.json of slot $id says $u" server_json_is $id allocatedUUID "$u"
done
PASSED=$((PASSED + 1))
# The reservation is there, with its deadline, and still leads r-1 to its slot.
assert_eq "$(sprop $r1 State)" reserved "reserved slot after the restart"
# (slotd re-arms the deadline from what is left of it, so it may move by the few µs between
# two clock reads; never earlier.)
assert_between "$(sprop $r1 ReservedUntilUSec)" "$r1_until" $((r1_until + 1000000)) \
        "ReservedUntilUSec after the restart"
assert_eq "$(allocate game r-1)" "$r1" "Allocate r-1 after the restart"
# The same UUID again is the same slot, after the restart too.
u=$(head -n 1 "$T/acked")
id=$(awk -v u="$u" '$5 == u { print $1 }' "$T/slots.after")
assert_eq "$(allocate game "$u")" "$id" "Allocate $u again after the restart"
finish
