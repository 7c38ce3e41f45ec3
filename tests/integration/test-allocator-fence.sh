#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A 503 is never an allocation (issue 25 point 3; SPEC §13 "Guarantees and failure model"):
# a POST's claim sent to a member that holds it (paused, as test-fleet-view's SIGSTOP does)
# times out at the allocator, which answers 503; the member proposes it later all the same.
# A relay in front of etcd (claim-hold-proxy.py) holds the claim's call 4 s, then hands it on
# as a member waking up would, and reads etcd's answer to it, so that the race is met every
# run rather than once in four. slotd-allocator has the relay first, etcd itself second.
#  1. The POST is answered 503; behind it the allocator fences the slot on etcd itself
#     (<prefix>/fences/<machineID>/<slotID>); the late claim reaches etcd after the fence and
#     its compares fail (the relay reads succeeded=false): no record, no index, no claim, the
#     host allocates nothing, GET is 404. Before the fence, etcd applied it (succeeded=true)
#     and the allocation stood, its claim placed again and again.
#  2. The fenced slot is left out while the fence lasts: a POST through the same replica takes
#     the other slot; one through a fresh replica, whose view shows the fenced slot free,
#     finds the fence in its claim's failure branch and answers no capacity, not a slot.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"
FLEET_PORT_BASE=44500 # not test-etcd-in-doubt's (44000-)
FLEET_SLOTS=2
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

HOLD_MS=$((4000 * TIME_SCALE))
PROXY_PORT=$(free_port)
python3 "$(dirname "$0")/claim-hold-proxy.py" --listen "$PROXY_PORT" \
        --upstream "${ETCD_CLIENT_PORT[1]}" --arm "$T/hold" --hold-ms "$HOLD_MS" \
        --log "$T/proxy.log" &
bg_track $!
wait_until $((10 * TIME_SCALE)) "the relay listening" grep -q "^listening" "$T/proxy.log"

# A request etcd does not answer in 1 s is given up (the claim's 503 comes at once).
FLEET_ALLOCATOR_EXTRA="timeout = ${TIME_SCALE}s"
ETCD_ENDPOINTS=http://127.0.0.1:$PROXY_PORT,$ETCD_REAL
fleet_allocator_start 0
ETCD_ENDPOINTS=$ETCD_REAL
metric() { curl -s "$(fleet_url "$1" /metrics)" | awk -v m="$2" '$1 == m { print $2 }'; }
COLL=$(fleet_allocations)
body() { printf '{"allocationId":"%s","buildConfigurationId":%s}' "$1" "$FLEET_BUILD_CONFIGURATION"; }
logged() { grep -q "$1" "$T/proxy.log"; }

# ---- 1. the claim held, answered 503, applied late: refused by the fence ----
A=$(cat /proc/sys/kernel/random/uuid)
printf /claims/ > "$T/hold"
out=$(fleet_post 0 "$COLL" "$(body "$A")")
assert_eq "${out%% *}" 503 "POST whose claim the relay held ($out)"
assert_ok "the relay held the claim ($(cat "$T/proxy.log"))" logged "^held /claims/"
stream=$(awk '$1 == "held" { gsub(/\)/, ""); print $NF }' "$T/proxy.log")
wait_until $((10 * TIME_SCALE)) "etcd answered the held claim" logged "^answered stream $stream: succeeded="
assert_ok "the late claim's compares failed: $(grep "^answered" "$T/proxy.log"); records of $A: $(fleet_etcd_count "allocations/$FLEET_NAME/$A")" \
        logged "^answered stream $stream: succeeded=false"
assert_eq "$(metric 0 slotd_allocator_fences_total)" 1 "claims in doubt fenced"
assert_eq "$(fleet_etcd_count fences/)" 1 "fences in etcd"
assert_eq "$(fleet_etcdctl get --prefix "$FLEET_PREFIX/fences/" --print-value-only | json allocationId)" \
        "$A" "the fence names the allocation"
fence_slot=$(fleet_etcdctl get --prefix "$FLEET_PREFIX/fences/" --keys-only | grep . | head -n 1)
fence_slot=${fence_slot##*/}
assert_eq "$(fleet_etcd_count "allocations/$FLEET_NAME/$A")" 0 "records of $A"
assert_eq "$(fleet_etcd_count "allocation-ids/$A")" 0 "index of $A"
assert_eq "$(fleet_etcd_count hosts/)" 0 "claims in etcd"
assert_eq "$(fleet_get 0 "$COLL/$A" | cut -d' ' -f1)" 404 "GET of $A after its 503"
assert_eq "$(metric 0 slotd_allocator_fence_undone_total)" 0 "claims found applied (none: fenced first)"
assert_eq "$(metric 0 slotd_allocator_fenced_slots)" 1 "slots replica 0 leaves out"
assert_eq "$(fleet_slots 0 | awk '$5 != "-"' | wc -l)" 0 "allocated slots on the host"

# ---- 2. the fenced slot left out ----
B=$(cat /proc/sys/kernel/random/uuid)
out=$(fleet_post 0 "$COLL" "$(body "$B")")
assert_eq "${out%% *}" 200 "POST of $B through replica 0 ($out)"
slot=$(fleet_get 0 "$COLL/$B" | cut -d' ' -f2- | json serverId)
assert_ok "$B's slot $slot is not the fenced slot $fence_slot" test "$slot" != "$fence_slot"
fleet_allocator_start 1
C=$(cat /proc/sys/kernel/random/uuid)
out=$(fleet_post 1 "$COLL" "$(body "$C")")
assert_eq "${out%% *}" 503 "POST of $C through a fresh replica, the only other slot fenced ($out)"
assert_ok "answered no capacity ($out)" grep -q "no capacity" <<<"$out"
assert_eq "$(metric 1 slotd_allocator_fenced_slots)" 1 "slots replica 1 leaves out (the fence found)"
assert_eq "$(fleet_etcd_count "allocations/$FLEET_NAME/$C")" 0 "records of $C"

finish
