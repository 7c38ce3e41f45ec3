#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Writes whose outcome is in doubt (issue 15, SPEC §13 "Guarantees"): etcd applies a write,
# and its answer is lost with the connection, as when the member a client sent it to dies
# right after. A relay in front of etcd (answer-drop-proxy.py) does exactly that, once, on
# demand, so that the case is met every run rather than by luck in test-fleet-faults.
# slotd-allocator has the relay as its first etcd endpoint and etcd itself as its second.
#  1. A POST whose claim etcd applied but whose answer was lost: 200 all the same (the same
#     guarded transaction, sent again to the next member, finds its own record), counted
#     as claimed, the record written once, the allocation fulfilled on its host.
#  2. A DELETE whose transaction etcd applied but whose answer was lost: 204 (the record
#     read again is gone), and the host deallocates the slot.
#  3. Every answer lost (the relay is etcd's only endpoint): the POST is sent again at most
#     twice and then answered 503. A 503 is never an allocation (SPEC §13): behind it the
#     allocator fences the slot (allocator-fence.c), finds that the first send was applied,
#     and deletes it again; the host deallocates it. A retry of the same allocationId then
#     claims anew (200, counted as claimed), on another slot than the fenced one.
#  4. The registry's confirmation applied, its answer lost: the registry does the work again
#     from its claim, which is gone: the record is written once by it, and nothing is left.
#  5. A claim applied, its answer lost, and the member then gone (its relay stops listening):
#     the claim sent again is refused before it leaves, which says nothing of the first send.
#     503, and the fence behind it finds the first send applied and deletes it, as in 3.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"
FLEET_PORT_BASE=44000 # not test-allocator's (41000-42999) or test-etcd-tls's (43000-)
FLEET_SLOTS=4 # parts 3 and 5 leave one fenced each for a minute
. "$(dirname "$0")/fleet-lib.sh"
: "${SLOTD_REGISTRY:?SLOTD_REGISTRY must name the slotd-registry binary}"
: "${SLOTD_ALLOCATOR:?SLOTD_ALLOCATOR must name the slotd-allocator binary}"
command -v etcdctl >/dev/null || skip "etcdctl is not installed (Debian's etcd-client)"
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH

etcd_cluster_start 1
ETCD_REAL=$ETCD_ENDPOINTS
fleet_host_start 0
fleet_wait_running 0
fleet_wait_registered 0

PROXY_PORT=$(free_port)
python3 "$(dirname "$0")/answer-drop-proxy.py" --listen "$PROXY_PORT" \
        --upstream "${ETCD_CLIENT_PORT[1]}" --arm "$T/drop" --log "$T/proxy.log" &
bg_track $!
wait_until $((10 * TIME_SCALE)) "the relay listening" grep -q "^listening" "$T/proxy.log"
PROXY=http://127.0.0.1:$PROXY_PORT

# start_allocator R ENDPOINTS: replica R of the allocator with those etcd endpoints.
start_allocator() {
        ETCD_ENDPOINTS=$2
        fleet_allocator_start "$1"
        ETCD_ENDPOINTS=$ETCD_REAL
}
metric() { curl -s "$(fleet_url "$1" /metrics)" | awk -v m="$2" '$1 == m { print $2 }'; }
dropped() { grep -c "^dropped $1 " "$T/proxy.log" || true; }
COLL=$(fleet_allocations)
body() { printf '{"allocationId":"%s","buildConfigurationId":%s}' "$1" "$FLEET_BUILD_CONFIGURATION"; }
status_of() { fleet_get "$1" "$COLL/$2" | cut -d' ' -f2- | json status; }
status_is() { [ "$(status_of "$1" "$2")" = "$3" ]; }
record_version() {
        fleet_etcdctl get -w json "$FLEET_PREFIX/allocations/$FLEET_NAME/$1" | jq -r '.kvs[0].version // 0'
}

# ---- 1. a claim applied, its answer lost ----
start_allocator 0 "$PROXY,$ETCD_REAL"
A=$(cat /proc/sys/kernel/random/uuid)
# The relay knows a request by bytes only it holds: a claim puts the slot's claim key
# (…/hosts/M/claims/S), a DELETE puts a deallocation key, a confirmation deletes the claim key.
printf /claims/ > "$T/drop"
out=$(fleet_post 0 "$COLL" "$(body "$A")")
assert_eq "$(dropped /claims/)" 1 "claims whose answer the relay lost ($(cat "$T/proxy.log"))"
assert_eq "${out%% *}" 200 "POST whose claim's answer was lost ($out)"
assert_eq "$(json allocationId <<<"${out#* }")" "$A" "the allocationId answered"
assert_eq "$(metric 0 slotd_allocator_etcd_in_doubt_total)" 1 "writes the allocator found in doubt"
assert_eq "$(metric 0 'slotd_allocator_allocations_total{result="claimed"}')" 1 \
        "the POST counted as claimed (its own claim found), not as an existing allocation"
assert_eq "$(metric 0 'slotd_allocator_allocations_total{result="unavailable"}')" 0 "POSTs answered 503"
assert_ok "the allocator said it sent the claim again" \
        grep -q "Allocation $A: etcd's answer to its claim of slot .* was lost" "$T/allocator-0.log"
wait_until $((20 * TIME_SCALE)) "allocation $A fulfilled" status_is 0 "$A" fulfilled
slot=$(fleet_get 0 "$COLL/$A" | cut -d' ' -f2- | json serverId)
assert_eq "$(on_host 0 sprop "$slot" AllocationUUID)" "$A" "slot $slot of the host holds $A"
# Written by the claim, then by the registry's confirmation: twice; a claim applied twice
# would be three.
assert_eq "$(record_version "$A")" 2 "versions of $A's record (claim, confirmation)"
assert_eq "$(fleet_slots 0 | awk '$5 != "-"' | wc -l)" 1 "allocated slots on the host"

# ---- 2. a deletion applied, its answer lost ----
# A new replica: the first now sends to etcd itself (a request that broke moves a client to
# the next endpoint).
start_allocator 1 "$PROXY,$ETCD_REAL"
printf /deallocations/ > "$T/drop"
out=$(fleet_delete 1 "$COLL/$A")
assert_eq "$(dropped /deallocations/)" 1 "deletions whose answer the relay lost"
assert_eq "${out%% *}" 204 "DELETE whose answer was lost ($out)"
assert_eq "$(metric 1 slotd_allocator_etcd_in_doubt_total)" 1 "writes replica 1 found in doubt"
assert_eq "$(metric 1 slotd_allocator_deallocations_total)" 1 "deallocations counted"
assert_eq "$(record_version "$A")" 0 "versions of $A's record (gone)"
deallocated() { [ -z "$(on_host 0 sprop "$slot" AllocationUUID)" ]; }
wait_until $((20 * TIME_SCALE)) "the host deallocated slot $slot" deallocated
assert_eq "$(fleet_get 1 "$COLL/$A" | cut -d' ' -f1)" 404 "GET of the deleted allocation"

# ---- 3. every answer lost ----
# The relay alone: the claim and both of its repeats reach etcd, every answer is lost.
start_allocator 2 "$PROXY"
B=$(cat /proc/sys/kernel/random/uuid)
before=$(dropped /claims/)
printf '/claims/ 3\n' > "$T/drop"
out=$(fleet_post 2 "$COLL" "$(body "$B")")
assert_eq "${out%% *}" 503 "POST when every answer is lost ($out)"
assert_ok "the relay is disarmed (3 answers lost)" test ! -e "$T/drop"
assert_eq "$(( $(dropped /claims/) - before ))" 3 "claims sent: the first and its 2 repeats"
assert_eq "$(metric 2 slotd_allocator_etcd_in_doubt_total)" 2 "repeats of the claim"
assert_eq "$(metric 2 slotd_allocator_fences_total)" 1 "claims in doubt fenced"
# The first send was applied: the fence finds it, the allocator deletes it again.
undone() { [ "$(metric 2 slotd_allocator_fence_undone_total)" = 1 ]; }
wait_until $((20 * TIME_SCALE)) "the applied claim of $B undone" undone
assert_ok "the allocator said it deleted it ($(grep "$B" "$T/allocator-2.log" | tail -n 3))" \
        grep -q "Allocation $B: its claim of slot .* was applied after its POST was answered 503" \
        "$T/allocator-2.log"
fenced() { [ "$(fleet_etcd_count fences/)" = 1 ]; }
wait_until $((20 * TIME_SCALE)) "the slot's fence in etcd" fenced
fence_slot=$(fleet_etcdctl get --prefix "$FLEET_PREFIX/fences/" --keys-only | grep . | head -n 1)
fence_slot=${fence_slot##*/}
assert_eq "$(fleet_etcdctl get --prefix "$FLEET_PREFIX/fences/" --print-value-only | json allocationId)" \
        "$B" "the fence names the allocation"
assert_eq "$(record_version "$B")" 0 "versions of $B's record (deleted again)"
assert_eq "$(fleet_etcd_count "allocation-ids/$B")" 0 "$B's index (deleted with its record)"
no_allocated() { [ "$(fleet_slots 0 | awk '$5 != "-"' | wc -l)" = 0 ]; }
wait_until $((20 * TIME_SCALE)) "no slot of the host allocated" no_allocated
assert_eq "$(fleet_get 2 "$COLL/$B" | cut -d' ' -f1)" 404 "GET of $B after its 503"
# Nobody reads fences but the claims: the registry's view and the allocators' are untouched.
assert_eq "$(metric 0 slotd_allocator_cache_claims)" 0 "claims in replica 0's view"
out=$(fleet_post 0 "$COLL" "$(body "$B")")
assert_eq "${out%% *}" 200 "the client's retry of $B (through etcd itself)"
assert_eq "$(metric 0 'slotd_allocator_allocations_total{result="claimed"}')" 2 \
        "the retry claimed anew (the 503 made no allocation to find)"
wait_until $((20 * TIME_SCALE)) "allocation $B fulfilled" status_is 0 "$B" fulfilled
slot=$(fleet_get 0 "$COLL/$B" | cut -d' ' -f2- | json serverId)
assert_ok "the retry's slot $slot is not the fenced slot $fence_slot" test "$slot" != "$fence_slot"
assert_eq "$(record_version "$B")" 2 "versions of $B's record (the new claim, its confirmation)"
assert_eq "$(fleet_slots 0 | awk '$5 != "-"' | wc -l)" 1 "allocated slots on the host"

# ---- 4. a confirmation applied, its answer lost ----
# The host's registry restarted with the relay first, etcd second.
sed -i "s|^etcd_endpoints = .*|etcd_endpoints = $PROXY,$ETCD_REAL|" "$(fleet_dir 0)/etc/slotd.ini"
fleet_registry_kill 0
REG_LOG=$(fleet_dir 0)/registry.log
registrations() { grep -c "registered under lease" "$REG_LOG" || true; }
registered_since() { [ "$(registrations)" -gt "$1" ]; }
n=$(registrations)
fleet_registry_start 0
wait_until $((10 * TIME_SCALE)) "the registry registered again" registered_since "$n"
C=$(cat /proc/sys/kernel/random/uuid)
# Its confirmation is a transaction that deletes the claim.
before=$(dropped /claims/)
printf '/claims/ 1\n' > "$T/drop"
out=$(fleet_post 0 "$COLL" "$(body "$C")")
assert_eq "${out%% *}" 200 "POST of $C"
wait_until $((20 * TIME_SCALE)) "allocation $C fulfilled" status_is 0 "$C" fulfilled
assert_eq "$(( $(dropped /claims/) - before ))" 1 "confirmations whose answer was lost"
assert_ok "the registry said the confirmation failed ($(tail -n 5 "$REG_LOG"))" \
        grep -q "confirming allocation $C failed" "$REG_LOG"
no_claims() { [ "$(fleet_etcd_count hosts/)" = 0 ]; }
wait_until $((20 * TIME_SCALE)) "no claim or deallocation left in etcd" no_claims
assert_eq "$(record_version "$C")" 2 "versions of $C's record (the claim, one confirmation)"
slot=$(fleet_get 0 "$COLL/$C" | cut -d' ' -f2- | json serverId)
assert_eq "$(on_host 0 sprop "$slot" AllocationUUID)" "$C" "slot $slot of the host holds $C"
assert_eq "$(fleet_slots 0 | awk '$5 != "-"' | wc -l)" 2 "allocated slots on the host ($B, $C)"

# ---- 5. an answer lost, then the member gone ----
# A second relay, replica 3's only endpoint, loses the claim's answer and stops listening: the
# claim sent again is refused (nothing sent), and the outcome of the first is unknown still.
# A relay started again on its port then stands for the member back, for the fence.
relay2() {
        python3 "$(dirname "$0")/answer-drop-proxy.py" --listen "$PROXY2_PORT" \
                --upstream "${ETCD_CLIENT_PORT[1]}" --arm "$T/drop2" --log "$T/proxy2.log" &
        bg_track $!
        RELAY2=$!
}
# 3.'s fence has done its work; deleted by hand, so that the fresh replica 3 (which does not
# know it) does not send its claim to that slot, where the fence's compare would refuse it.
fleet_etcdctl del --prefix "$FLEET_PREFIX/fences/" >/dev/null
PROXY2_PORT=$(free_port)
relay2
wait_until $((10 * TIME_SCALE)) "the second relay listening" grep -q "^listening" "$T/proxy2.log"
start_allocator 3 "http://127.0.0.1:$PROXY2_PORT"
D=$(cat /proc/sys/kernel/random/uuid)
printf '/claims/ 1 close\n' > "$T/drop2"
out=$(fleet_post 3 "$COLL" "$(body "$D")")
assert_ok "the second relay lost the claim's answer and closed ($(cat "$T/proxy2.log"))" \
        grep -q "^closed" "$T/proxy2.log"
assert_eq "${out%% *}" 503 "POST whose claim's answer was lost, sent again and refused ($out)"
assert_eq "$(metric 3 slotd_allocator_etcd_in_doubt_total)" 1 "repeats of the claim (refused)"
assert_eq "$(metric 3 slotd_allocator_fences_total)" 1 \
        "claims in doubt fenced (the first send's outcome unknown, the second refused)"
kill "$RELAY2"
wait "$RELAY2" || true
bg_untrack "$RELAY2"
relay2
relay2_back() { [ "$(grep -c "^listening" "$T/proxy2.log")" = 2 ]; }
wait_until $((10 * TIME_SCALE)) "the second relay listening again" relay2_back
undone3() { [ "$(metric 3 slotd_allocator_fence_undone_total)" = 1 ]; }
wait_until $((20 * TIME_SCALE)) "the applied claim of $D undone" undone3
assert_eq "$(record_version "$D")" 0 "versions of $D's record (deleted again)"
assert_eq "$(fleet_etcd_count "allocation-ids/$D")" 0 "$D's index (deleted with its record)"
two_allocated() { [ "$(fleet_slots 0 | awk '$5 != "-"' | wc -l)" = 2 ]; }
wait_until $((20 * TIME_SCALE)) "the host's slots: $B's and $C's alone allocated" two_allocated
assert_eq "$(fleet_get 0 "$COLL/$D" | cut -d' ' -f1)" 404 "GET of $D after its 503"

finish
