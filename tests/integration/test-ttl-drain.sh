#!/usr/bin/env bash
# Machine TTL (SPEC §7): idle = no slot allocated or reserved; deprovisionable once idle for
# machine.idle_ttl with no hold reaching past now (the furthest hold counts); the
# Deprovisionable signal once per entry into that state. Draining: no new allocations or
# reservations, running sessions go on; AllocateWithOptions with `draining` true (a fleet
# allocator's last resort) is let through, on both doors, and counted as granted.
. "$(dirname "$0")/lib.sh"

# machine.idle_ttl: 1 s on a host; under TCG in the VM a few busctl calls take longer than
# that (three of them, Deallocate to the read of Deprovisionable, once took over 3 s), so it
# is 2 s × TIME_SCALE there, and the windows below scale with it.
TTL_SEC=$((TIME_SCALE > 1 ? 2 * TIME_SCALE : 1))
TTL=$((1000000 * TTL_SEC)) # in µs
MPORT=$(free_port)
METRICS_LISTEN=127.0.0.1:$MPORT MACHINE_CPUS=2 write_config
config_key machine "idle_ttl = ${TTL_SEC}s"
write_fleet game "servers = 2" "[ports]" "game_base = 25300" "query_base = 25350"
# The monitor is attached before slotd starts, so that the first signal is not missed.
start_monitor "$T/signals.log"
t_start=$(now_usec)
start_slotd
for id in 0 1; do wait_prop $id ProcessState running; done
deprov_count() { signal_count "$T/signals.log" Deprovisionable; }
deprov_count_is() { [ "$(deprov_count)" = "$1" ]; }

# 1. Idle from the start: deprovisionable machine.idle_ttl after IdleSinceUSec.
idle=$(mprop IdleSinceUSec)
assert_ok "IdleSinceUSec ($idle) set at start-up" test "$idle" -ge "$t_start" -a "$idle" -le "$(now_usec)"
wait_mprop Deprovisionable true $((10 + 2 * TTL_SEC))
assert_ok "deprovisionable only after idle_ttl" test "$(now_usec)" -ge $((idle + TTL - 100000))
wait_until 10 "Deprovisionable signal" deprov_count_is 1
# 2. The signal marks the entry into the state, not its duration: a re-emission per TTL or
# per timer tick would show within 2.5 TTLs.
stays_true $((TTL * 5 / 2 / 1000)) "exactly one Deprovisionable signal" deprov_count_is 1
assert_eq "$(mprop Deprovisionable)" true "still deprovisionable"

# 3. An allocation leaves the state at once; deallocation starts a new idle period.
a=$(allocate game a-1)
assert_eq "$(mprop Deprovisionable)" false "Deprovisionable while allocated"
assert_eq "$(mprop IdleSinceUSec)" 0 "IdleSinceUSec while allocated"
t1=$(now_usec)
mcall Deallocate s a-1
idle=$(mprop IdleSinceUSec)
assert_ok "IdleSinceUSec ($idle) set at Deallocate" test "$idle" -ge "$t1" -a "$idle" -le "$(now_usec)"
assert_eq "$(mprop Deprovisionable)" false "not deprovisionable right after Deallocate"
wait_mprop Deprovisionable true $((10 + 2 * TTL_SEC))
assert_ok "deprovisionable only after idle_ttl" test "$(now_usec)" -ge $((idle + TTL - 100000))
wait_until 10 "second Deprovisionable signal" deprov_count_is 2
# Properties announce the changes too.
assert_ok "PropertiesChanged for Deprovisionable" grep -q '"Deprovisionable":{"type":"b","data":false}' "$T/signals.log"

# 4. A reservation counts as in use; when it expires the machine is idle from then on.
# Long enough to outlast the reads below even under TCG in the VM.
r=$(reserve game r-1 $((2 * TTL)))
until=$(sprop $r ReservedUntilUSec)
assert_eq "$(mprop Deprovisionable)" false "Deprovisionable while reserved"
assert_eq "$(mprop IdleSinceUSec)" 0 "IdleSinceUSec while reserved"
wait_prop $r State online $((10 + 2 * TIME_SCALE))
idle=$(mprop IdleSinceUSec)
assert_ok "IdleSinceUSec ($idle) from the expiry ($until)" test "$idle" -ge $((until - 100000))
wait_mprop Deprovisionable true $((10 + 2 * TTL_SEC))
assert_ok "deprovisionable only after idle_ttl" test "$(now_usec)" -ge $((idle + TTL - 100000))
wait_until 10 "third Deprovisionable signal" deprov_count_is 3

# 5. Holds: a hold reaching past now keeps the machine, the furthest one counts; holds do not
# touch IdleSinceUSec.
idle=$(mprop IdleSinceUSec)
h0=$(hold 0 $((3 * TTL / 2)))
h1=$(hold 1 $((3 * TTL)))
assert_eq "$(mprop Deprovisionable)" false "Deprovisionable while held"
assert_eq "$(mprop HoldUntilUSec)" "$h1" "Manager HoldUntilUSec = the furthest hold"
assert_eq "$(mprop IdleSinceUSec)" "$idle" "IdleSinceUSec unchanged by holds"
wait_prop 0 State online 10
assert_eq "$(mprop Deprovisionable)" false "still held by the further hold"
assert_eq "$(mprop HoldUntilUSec)" "$h1" "Manager HoldUntilUSec after the first hold ended"
wait_mprop Deprovisionable true $((10 + 2 * TTL_SEC))
assert_ok "deprovisionable only after the furthest hold" test "$(now_usec)" -ge $((h1 - 100000))
assert_eq "$(mprop HoldUntilUSec)" 0 "Manager HoldUntilUSec after both holds"
wait_until 10 "fourth Deprovisionable signal" deprov_count_is 4

# 6. Draining: new allocations and reservations are refused, the running session goes on
# and can be deallocated.
assert_eq "$(mprop Draining)" false "Draining at start"
d=$(allocate game d-1)
pid=$(sprop $d MainPID)
mcall SetDraining b true
assert_eq "$(mprop Draining)" true "Draining after SetDraining(true)"
expect_merr Draining Allocate string:game string:d-2 string:
expect_merr Draining Reserve string:game string:d-2 uint64:0
other=$((1 - d))
expect_serr Draining $other Allocate string:d-2 string:
assert_eq "$(sprop $other State)" online "the other slot not allocated while draining"
assert_eq "$(sprop $d State)" allocated "the running session goes on"
assert_eq "$(sprop $d MainPID)" "$pid" "same process while draining"

# 7. A fleet allocator's last resort (SPEC §8, §13): AllocateWithOptions with `draining` true
# is let through; without it, or false, refused as before; not a boolean: InvalidArgument.
# gcall PATH METHOD ARGS...: gdbus (which, unlike busctl, takes an a{sv} and prints the error
# name); prints the reply, or "Error NAME: MESSAGE".
gcall() {
        local path=$1 method=$2 out
        shift 2
        if out=$(gdbus call --address "$BUS" --dest org.slotd.Supervisor1 --object-path "$path" \
                 --method "org.slotd.Supervisor1.$method" "$@" 2>&1); then
                echo "$out"
                return 0
        fi
        sed -nE 's/.*GDBus\.Error:([A-Za-z0-9_.]+): (.*)/Error \1: \2/p' <<<"$out" | grep . || echo "$out"
        return 1
}
expect_gerr() { # NAME PATH METHOD ARGS...
        local name=org.slotd.Supervisor1.Error.$1 out
        shift
        out=$(gcall "$@") && fail "expected $name from $*, got success: $out"
        grep -q "^Error ${name//./\\.}:" <<<"$out" || fail "expected $name from $*, got: $out"
        PASSED=$((PASSED + 1))
}
M=/org/slotd/Supervisor1
metric() { curl -s --max-time 10 "http://127.0.0.1:$MPORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
metric_is() { [ "$(metric "$1")" = "$2" ]; }
metric_set() { [ -n "$(metric "$1")" ]; }
ok_metric='slotd_allocations_total{fleet="game",result="ok"}'
drain_metric='slotd_allocations_total{fleet="game",result="Draining"}'
wait_until $((10 * TIME_SCALE)) "metrics served" metric_set "$drain_metric"
ok0=$(metric "$ok_metric")
drained0=$(metric "$drain_metric")
expect_gerr Draining $M Manager.AllocateWithOptions game d-4 "" "@a{sv} {}"
expect_gerr Draining $M Manager.AllocateWithOptions game d-4 "" "{'draining': <false>}"
expect_gerr Draining $M Manager.AllocateWithOptions game d-4 "" "{'payload': <b'map'>}"
expect_gerr InvalidArgument $M Manager.AllocateWithOptions game d-4 "" "{'draining': <'yes'>}"
expect_gerr Draining $M/slot/$other Slot.AllocateWithOptions d-4 "" "{'draining': <false>}"
assert_eq "$(sprop $other State)" online "nothing allocated by the refused calls"
out=$(gcall $M Manager.AllocateWithOptions game d-4 "" "{'draining': <true>, 'payload': <b'map'>}") ||
        fail "AllocateWithOptions with draining true while draining: $out"
assert_eq "$out" "(uint32 $other, objectpath '$M/slot/$other')" "the last resort's reply"
assert_eq "$(sprop $other AllocationUUID)" d-4 "allocated while draining, with draining true"
assert_eq "$(server_json $other allocatedUUID)" d-4 "server.json of the last resort's allocation"
# A retry of it needs no option: the allocation is in effect.
assert_eq "$(allocate game d-4)" "$other" "the same UUID again while draining"
mcall Deallocate s d-4
# The slot door (the registry's) lets it through as well.
out=$(gcall $M/slot/$other Slot.AllocateWithOptions d-5 "" "{'draining': <true>}") ||
        fail "Slot.AllocateWithOptions with draining true while draining: $out"
assert_eq "$(sprop $other AllocationUUID)" d-5 "allocated through the slot door while draining"
assert_eq "$(server_json $other allocatedUUID)" d-5 "server.json of the slot door's allocation"
mcall Deallocate s d-5
# Granted ones count as ok (the retry too, as every granted request), refused ones as Draining.
wait_until $((10 * TIME_SCALE)) "allocations counted ok" metric_is "$ok_metric" $((ok0 + 3))
assert_eq "$(metric "$drain_metric")" $((drained0 + 4)) "allocations counted Draining"
assert_eq "$(mprop Draining)" true "still draining"

mcall Deallocate s d-1
assert_eq "$(sprop $d State)" online "Deallocate works while draining"
assert_ok "PropertiesChanged for Draining" grep -q '"Draining":{"type":"b","data":true}' "$T/signals.log"
mcall SetDraining b false
assert_eq "$(mprop Draining)" false "Draining after SetDraining(false)"
d=$(allocate game d-3)
assert_eq "$(sprop $d State)" allocated "Allocate works again"
finish
