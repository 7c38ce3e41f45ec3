#!/usr/bin/env bash
# The scaler's commands (issue 25, point 4; SPEC §13 "The scaler"): two real hosts of
# fleet-lib.sh (slotd, slotd-registry) whose slots start stopped (fleet.start_on_provision =
# no), etcd. First the registry alone: a command <prefix>/hosts/<machineID>/scale/<slotID>
# written by hand is carried out through slotd's Start()/Stop() and deleted; a stop of an
# allocated slot and a document that is no command are refused (deleted, logged, the slot
# untouched), and slotd's StopIfFree(), which the registry stops with, refuses an allocated
# slot itself. Then the scaler: an allocator replica with [scaler] targets = game buffer=2
# leads, and its commands keep 2 free servers running across the 4 slots: 2 run (and no more
# start); an allocation makes a third start within SCALE_WITHIN seconds; its deletion makes
# the surplus one stop, back to 2. The capacity view shows the region's buffer, floor and
# ceiling, its busy and free servers and the servers it wants.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"
[ -n "${SLOTD_REGISTRY:-}" ] && [ -x "$SLOTD_REGISTRY" ] || skip "slotd-registry is not built"
command -v etcdctl >/dev/null || skip "etcdctl is not installed (Debian's etcd-client)"
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH

FLEET_SLOTS=2
FLEET_ALLOCATOR_EXTRA="[scaler]
targets = game buffer=2
interval = 200ms"
# The scaler's bound on acting: a plan at most every interval, the command's write and its
# watch, the registry's Start() and slotd's spawn (a start is counted once slotd runs it).
SCALE_WITHIN=$((10 * TIME_SCALE))
. "$(dirname "$0")/fleet-lib.sh"

etcd_cluster_start 1
for k in 1 2; do
        fleet_write_config "$k"
        sed -i '/^\[fleet\]$/a start_on_provision = no' "$(fleet_dir "$k")/etc/fleets.d/$FLEET_NAME.ini"
        fleet_host_start "$k"
done
fleet_wait_registered 1 2

# slot_proc K ID: host K's slot ID's ProcessState; slot_state K ID: its State.
slot_proc() { fleet_slots "$1" | awk -v i="$2" '$2 == i { print $4 }'; }
slot_state() { fleet_slots "$1" | awk -v i="$2" '$2 == i { print $3 }'; }
proc_is() { [ "$(slot_proc "$1" "$2")" = "$3" ]; }
scale_key() { echo "hosts/$(fleet_machine_id "$1")/scale/$2"; }
scale_put() { fleet_etcdctl put "$FLEET_PREFIX/$(scale_key "$1" "$2")" "$3" >/dev/null; }
scale_gone() { [ "$(fleet_etcd_count "$(scale_key "$1" "$2")")" = 0 ]; }
running_count() { fleet_slots "$1" | awk '$4 == "running"' | wc -l; }

for k in 1 2; do
        for i in 0 1; do
                assert_eq "$(slot_proc "$k" "$i")" stopped "host $k slot $i at start"
                assert_eq "$(slot_state "$k" "$i")" available "host $k slot $i's State at start"
        done
done

# ---- the registry carries commands out ----
scale_put 1 0 "{\"action\":\"start\",\"fleetId\":\"$FLEET_NAME\"}"
wait_until $((10 * TIME_SCALE)) "host 1 slot 0 running after a start command" proc_is 1 0 running
wait_until $((10 * TIME_SCALE)) "the start command deleted" scale_gone 1 0
assert_eq "$(slot_proc 1 1)" stopped "host 1 slot 1 untouched"
scale_put 1 0 "{\"action\":\"stop\",\"fleetId\":\"$FLEET_NAME\"}"
wait_until $((10 * TIME_SCALE)) "host 1 slot 0 stopped after a stop command" proc_is 1 0 stopped
wait_until $((10 * TIME_SCALE)) "the stop command deleted" scale_gone 1 0

# A stop of an allocated slot: refused, the key deleted, the server left running.
scale_put 2 1 "{\"action\":\"start\",\"fleetId\":\"$FLEET_NAME\"}"
wait_until $((10 * TIME_SCALE)) "host 2 slot 1 running" proc_is 2 1 running
wait_until $((10 * TIME_SCALE)) "its start command deleted" scale_gone 2 1
U=$(cat /proc/sys/kernel/random/uuid)
busctl --address="$(fleet_bus 2)" call org.slotd.Supervisor1 /org/slotd/Supervisor1/slot/1 \
        org.slotd.Supervisor1.Slot Allocate ss "$U" "" >/dev/null
wait_until $((10 * TIME_SCALE)) "host 2 slot 1 allocated" test "$(slot_state 2 1)" = allocated
pid=$(busctl --address="$(fleet_bus 2)" get-property org.slotd.Supervisor1 \
        /org/slotd/Supervisor1/slot/1 org.slotd.Supervisor1.Slot MainPID | cut -d' ' -f2)
# slotd's own rule, which the registry's stop goes through (its copy may be behind): StopIfFree
# on an allocated slot is refused, InvalidState, saying why; the server runs on.
out=$(dbus-send --bus="$(fleet_bus 2)" --print-reply --dest=org.slotd.Supervisor1 \
        /org/slotd/Supervisor1/slot/1 org.slotd.Supervisor1.Slot.StopIfFree 2>&1) &&
        fail "StopIfFree of an allocated slot answered: $out"
assert_eq "$out" "Error org.slotd.Supervisor1.Error.InvalidState: Slot 1 is allocated: StopIfFree stops a free slot only" \
        "StopIfFree of an allocated slot refused"
assert_eq "$(slot_proc 2 1)" running "host 2 slot 1 running after a refused StopIfFree"
refused() { grep -q "Refusing the scaler's command $FLEET_PREFIX/$(scale_key 2 1): the slot is allocated" \
        "$(fleet_dir 2)/registry.log"; }
wait_until $((10 * TIME_SCALE)) "the registry's state shows the allocation" \
        test "$(fleet_etcd_get "slots/$FLEET_NAME/$(fleet_machine_id 2)/1" | jq -r .allocationId)" = "$U"
scale_put 2 1 "{\"action\":\"stop\",\"fleetId\":\"$FLEET_NAME\"}"
wait_until $((10 * TIME_SCALE)) "the stop of an allocated slot refused and logged" refused
wait_until $((10 * TIME_SCALE)) "the refused command deleted" scale_gone 2 1
assert_eq "$(slot_proc 2 1)" running "host 2 slot 1 still running"
assert_eq "$(slot_state 2 1)" allocated "host 2 slot 1 still allocated"
assert_eq "$(busctl --address="$(fleet_bus 2)" get-property org.slotd.Supervisor1 \
        /org/slotd/Supervisor1/slot/1 org.slotd.Supervisor1.Slot MainPID | cut -d' ' -f2)" "$pid" \
        "host 2 slot 1's server the same process"
busctl --address="$(fleet_bus 2)" call org.slotd.Supervisor1 /org/slotd/Supervisor1/slot/1 \
        org.slotd.Supervisor1.Slot Deallocate >/dev/null
# Deallocated, the server runs on (SPEC §7); free again, a stop is carried out.
wait_until $((10 * TIME_SCALE)) "host 2 slot 1 free again" test "$(slot_state 2 1)" = online
wait_until $((10 * TIME_SCALE)) "the registry's state shows it free" \
        test "$(fleet_etcd_get "slots/$FLEET_NAME/$(fleet_machine_id 2)/1" | jq -r .state)" = online
scale_put 2 1 "{\"action\":\"stop\",\"fleetId\":\"$FLEET_NAME\"}"
wait_until $((10 * TIME_SCALE)) "host 2 slot 1 stopped once free" proc_is 2 1 stopped
wait_until $((10 * TIME_SCALE)) "that stop command deleted" scale_gone 2 1

# Not a command (another action): deleted, nothing done.
scale_put 1 0 "{\"action\":\"restart\",\"fleetId\":\"$FLEET_NAME\"}"
wait_until $((10 * TIME_SCALE)) "a document that is no command deleted" scale_gone 1 0
assert_ok "the registry logged it" grep -q "Refusing the scaler's command $FLEET_PREFIX/$(scale_key 1 0): not a command document" \
        "$(fleet_dir 1)/registry.log"
assert_eq "$(slot_proc 1 0)" stopped "host 1 slot 0 untouched by it"
# A command of another fleet: refused alike.
scale_put 1 1 '{"action":"start","fleetId":"other"}'
wait_until $((10 * TIME_SCALE)) "a command of another fleet deleted" scale_gone 1 1
assert_eq "$(slot_proc 1 1)" stopped "host 1 slot 1 untouched by it"

# ---- the scaler ----
[ -n "${SLOTD_ALLOCATOR:-}" ] && [ -x "$SLOTD_ALLOCATOR" ] || skip "slotd-allocator is not built"
total_running() { echo $(($(running_count 1) + $(running_count 2))); }
total_is() { [ "$(total_running)" = "$1" ]; }
# wrote ACTION: the commands the leader wrote (etcd took them) of that action so far.
wrote() { grep -c "Scaler: wrote .* ($1)" "$T/allocator-1.log" || true; }
no_commands() { ! fleet_etcdctl get --prefix "$FLEET_PREFIX/hosts/" --keys-only | grep -q /scale/; }
# settled N: N servers running and no command left.
settled() { total_is "$1" && no_commands; }

assert_eq "$(total_running)" 0 "no server running before the scaler"
fleet_allocator_start 1
wait_until $((10 * TIME_SCALE)) "allocator 1 leads the scaler" \
        grep -q "Scaler: leading" "$T/allocator-1.log"
wait_until "$SCALE_WITHIN" "2 servers running (buffer=2)" settled 2
assert_eq "$(wrote start)" 2 "the leader's start commands"
assert_eq "$(wrote stop)" 0 "the leader's stop commands"
# The capacity view shows the region's target and its servers as the scaler counts them.
REGION=$(FLEET_REGION_OF 1)
scaler_view() {
        local out
        out=$(fleet_get 1 "/v1/fleets/$FLEET_NAME/capacity")
        [ "${out%% *}" = 200 ] || { echo "status ${out%% *}"; return; }
        cut -d' ' -f2- <<<"$out" | jq -c --arg r "$REGION" '.regions[$r].scaler'
}
scaler_view_is() { [ "$(scaler_view)" = "$1" ]; }
wait_until $((10 * TIME_SCALE)) "the capacity view's scaler with 2 free" scaler_view_is \
        '{"buffer":2,"floor":0,"ceiling":null,"busy":0,"free":2,"wanted":2}'
COLL=$(fleet_allocations)
U=$(cat /proc/sys/kernel/random/uuid)
t0=$(date +%s%N)
out=$(fleet_post 1 "$COLL" "{\"allocationId\":\"$U\",\"buildConfigurationId\":$FLEET_BUILD_CONFIGURATION}")
assert_eq "${out%% *}" 200 "POST of an allocation ($out)"
fulfilled() { [ "$(fleet_get 1 "$COLL/$U" | cut -d' ' -f2- | json status)" = fulfilled ]; }
wait_until $((10 * TIME_SCALE)) "allocation $U fulfilled" fulfilled
wait_until "$SCALE_WITHIN" "a third server running (1 busy + 2 free)" settled 3
echo "# a third server ran $((($(date +%s%N) - t0) / 1000000)) ms after the POST"
# The slot documents' states reach the view through the registries: wait for them.
wait_until $((10 * TIME_SCALE)) "the capacity view's scaler with 1 busy, 2 free" scaler_view_is \
        '{"buffer":2,"floor":0,"ceiling":null,"busy":1,"free":2,"wanted":3}'
busy=$( (fleet_slots 1; fleet_slots 2) | awk -v u="$U" '$5 == u' | wc -l)
assert_eq "$busy" 1 "one slot holds the allocation"
# Placement takes a running slot (§7's order): the third is the scaler's start.
assert_eq "$(wrote start)" 3 "the leader's start commands after the allocation"

out=$(fleet_delete 1 "$COLL/$U")
assert_eq "${out%% *}" 204 "DELETE of the allocation ($out)"
t0=$(date +%s%N)
wait_until $((10 * TIME_SCALE)) "no slot holds the allocation" \
        test "$( (fleet_slots 1; fleet_slots 2) | awk -v u="$U" '$5 == u' | wc -l)" = 0
wait_until "$SCALE_WITHIN" "the surplus server stopped, back to 2 running" settled 2
echo "# back to 2 running $((($(date +%s%N) - t0) / 1000000)) ms after the DELETE"
assert_eq "$(wrote stop)" 1 "the leader's stop commands after the deletion"
assert_eq "$(wrote start)" 3 "no start after the deletion"

finish
