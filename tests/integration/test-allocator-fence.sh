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
# Then a replica (2) whose only endpoint is a relay of its own, so that each hold keeps every
# later byte of it from etcd: its claim held 4 s and applied late, before its fence; the
# fence's transaction held in turn until the test releases it; and in that window a retry of
# the same allocationId (SPEC §13: a POST that finds its record marks it answered, compared
# on the record as read, before it answers 200; the resolution deletes only a record it read
# unmarked, compared alike):
#  3. retry first (through replica 1): 200, then the resolution keeps the allocation
#     (fence_kept_total 1, fence_undone_total 0), which its host allocates;
#  4. resolution first: the retry (through replica 3, behind a third relay that holds its mark
#     until the resolution has deleted the record) finds its mark's compare failed and the
#     record gone, and claims anew: 200 for a fresh allocation that etcd holds and its host
#     allocates, never a 200 for the record deleted.
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

# ---- 3. and 4.: a retry of the same allocationId in the resolution's window ----
# Room: B's slot freed, and a second host (the fence of 1. may last yet).
out=$(fleet_delete 0 "$COLL/$B")
assert_eq "${out%% *}" 204 "DELETE of $B ($out)"
free_slots() { [ "$(fleet_slots "$1" | awk '$5 == "-"' | wc -l)" -ge "$2" ]; }
wait_until $((20 * TIME_SCALE)) "$B deallocated on host 0" free_slots 0 2
fleet_host_start 1
fleet_wait_running 1
fleet_wait_registered 1
# 1.'s fence has done its work; deleted by hand, so that the fresh replica 2 (which does not
# know it) does not find it in its claim's compares instead of meeting the race below.
fleet_etcdctl del --prefix "$FLEET_PREFIX/fences/" >/dev/null

# relay_start N: a relay in front of etcd for one replica, armed by $T/hold-N, logged in
# $T/proxy-N.log.
relay_start() {
        local port
        port=$(free_port)
        python3 "$(dirname "$0")/claim-hold-proxy.py" --listen "$port" \
                --upstream "${ETCD_CLIENT_PORT[1]}" --arm "$T/hold-$1" --hold-ms "$HOLD_MS" \
                --log "$T/proxy-$1.log" &
        bg_track $!
        wait_until $((10 * TIME_SCALE)) "relay $1 listening" grep -q "^listening" "$T/proxy-$1.log"
        RELAY_PORT[$1]=$port
}
relay_logged() { grep -q "$2" "$T/proxy-$1.log"; }
relay_held_stream() { awk -v m="$2" '$1 == "held" && $2 == m { gsub(/\)/, ""); s = $NF } END { print s }' "$T/proxy-$1.log"; }
relay_count() { grep -c "$2" "$T/proxy-$1.log" || true; }
relay_count_is() { [ "$(relay_count "$1" "$2")" = "$3" ]; }
metric_is() { [ "$(metric "$1" "$2")" = "$3" ]; }
status_is() { [ "$(fleet_get "$1" "$COLL/$2" | cut -d' ' -f2- | json status)" = "$3" ]; }
declare -A RELAY_PORT
relay_start 2
relay_start 3
ETCD_ENDPOINTS=http://127.0.0.1:${RELAY_PORT[2]}
fleet_allocator_start 2
# Replica 3's requests wait as long as the test holds them (its door's deadline is twice it):
# 30 s, scaled, within etcd.timeout's most (60 s).
FLEET_ALLOCATOR_EXTRA="timeout = $((30 * TIME_SCALE > 60 ? 60 : 30 * TIME_SCALE))s"
ETCD_ENDPOINTS=http://127.0.0.1:${RELAY_PORT[3]}
fleet_allocator_start 3
ETCD_ENDPOINTS=$ETCD_REAL
record() { fleet_etcd_get "allocations/$FLEET_NAME/$1" | json "$2"; }
fleet_slots_show() { fleet_slots 0; fleet_slots 1; }
allocated_on_host() { fleet_slots_show | awk -v a="$1" '$5 == a' | grep -q .; }

# late_claim ID: ID POSTed through replica 2, its claim held 4 s (503) and applied late; its
# fence's transaction then held by relay 2 until $T/hold-2.release exists.
late_claim() {
        local out s
        printf /claims/ > "$T/hold-2"
        out=$(fleet_post 2 "$COLL" "$(body "$1")")
        assert_eq "${out%% *}" 503 "POST of $1 whose claim relay 2 held ($out)"
        printf '/fences/ release' > "$T/hold-2"
        s=$(relay_held_stream 2 /claims/)
        assert_ok "relay 2 held the claim of $1" test -n "$s"
        wait_until $((15 * TIME_SCALE)) "etcd answered $1's held claim" relay_logged 2 "^answered stream $s: succeeded="
        assert_ok "$1's late claim applied (no fence yet): $(grep "^answered stream $s:" "$T/proxy-2.log")" \
                relay_logged 2 "^answered stream $s: succeeded=true"
        wait_until $((15 * TIME_SCALE)) "the fence of $1 held by relay 2" \
                relay_count_is 2 '^held /fences/' "$2"
        assert_eq "$(fleet_etcd_count "allocations/$FLEET_NAME/$1")" 1 "records of $1 (its late claim)"
        assert_eq "$(record "$1" answeredRequestId)" "" "$1's record not marked answered yet"
}

# ---- 3. the retry first: 200, and the resolution keeps it ----
A2=$(cat /proc/sys/kernel/random/uuid)
late_claim "$A2" 1
released=$(relay_count 2 '^released')
out=$(fleet_post 1 "$COLL" "$(body "$A2")")
assert_eq "${out%% *}" 200 "the retry of $A2 through replica 1 ($out)"
assert_eq "$(relay_count 2 '^released')" "$released" "the fence's transaction still held when the retry was answered"
marked=$(record "$A2" answeredRequestId)
assert_ok "$A2's record marked answered by the retry ($marked)" test -n "$marked"
assert_ok "the mark is not the record's own requestId" test "$marked" != "$(record "$A2" requestId)"
touch "$T/hold-2.release"
wait_until $((20 * TIME_SCALE)) "the fence of $A2 resolved" metric_is 2 slotd_allocator_fence_kept_total 1
assert_eq "$(metric 2 slotd_allocator_fences_total)" 1 "claims in doubt fenced by replica 2"
assert_eq "$(metric 2 slotd_allocator_fence_undone_total)" 0 "allocations the resolution deleted"
assert_eq "$(fleet_etcd_count "allocations/$FLEET_NAME/$A2")" 1 "records of $A2 after the resolution"
assert_eq "$(fleet_etcd_count "allocation-ids/$A2")" 1 "index of $A2 after the resolution"
out=$(fleet_get 1 "$COLL/$A2")
assert_eq "${out%% *}" 200 "GET of $A2 ($out)"
wait_until $((20 * TIME_SCALE)) "$A2 allocated by its host" allocated_on_host "$A2"
wait_until $((10 * TIME_SCALE)) "$A2 fulfilled" status_is 1 "$A2" fulfilled
assert_ok "replica 2 logged the allocation kept" grep -q "Allocation $A2: .*before the fence's resolution; kept" "$T/allocator-2.log"
# Its claim gone (confirmed), the fence goes in all the same: no late copy of the claim may
# apply after a DELETE of the allocation.
fence_of() { fleet_etcdctl get --prefix "$FLEET_PREFIX/fences/" --print-value-only | grep -q "\"allocationId\":\"$1\""; }
wait_until $((20 * TIME_SCALE)) "the fence of $A2's slot in etcd" fence_of "$A2"
assert_eq "$(metric 2 slotd_allocator_fence_kept_total)" 1 "allocations kept (counted once)"

# ---- 4. the resolution first: the retry's mark fails, and it claims anew ----
A3=$(cat /proc/sys/kernel/random/uuid)
late_claim "$A3" 2
first_slot=$(record "$A3" slotID)/$(record "$A3" machineID)
first_request=$(record "$A3" requestId)
printf '"answered":"2 release' > "$T/hold-3"
FLEET_HTTP_TIMEOUT=$((90 * TIME_SCALE)) fleet_post 3 "$COLL" "$(body "$A3")" > "$T/retry-A3" &
retry=$!
wait_until $((15 * TIME_SCALE)) "relay 3 holding the retry's mark of $A3" relay_logged 3 '^held "answered":"2'
touch "$T/hold-2.release"
wait_until $((20 * TIME_SCALE)) "the resolution deleted $A3" metric_is 2 slotd_allocator_fence_undone_total 1
assert_eq "$(fleet_etcd_count "allocations/$FLEET_NAME/$A3")" 0 "records of $A3 after the resolution"
assert_eq "$(metric 2 slotd_allocator_fence_kept_total)" 1 "allocations kept (3.'s only)"
touch "$T/hold-3.release"
wait "$retry"
out=$(cat "$T/retry-A3")
assert_eq "${out%% *}" 200 "the retry of $A3 through replica 3, after the resolution ($out)"
s=$(relay_held_stream 3 '"answered":"2')
wait_until $((10 * TIME_SCALE)) "etcd answered the held mark" relay_logged 3 "^answered stream $s: succeeded="
assert_ok "the mark's compare failed (the record it read was deleted): $(grep "^answered stream $s:" "$T/proxy-3.log")" \
        relay_logged 3 "^answered stream $s: succeeded=false"
assert_ok "replica 3 claimed anew" grep -q "Allocation $A3: its record, found by a POST of it again, was deleted" "$T/allocator-3.log"
assert_eq "$(fleet_etcd_count "allocations/$FLEET_NAME/$A3")" 1 "records of $A3: the retry's own"
assert_ok "$A3's record is the retry's, not the one deleted ($(record "$A3" requestId))" \
        test "$(record "$A3" requestId)" != "$first_request"
assert_ok "$A3's record is placed ($(record "$A3" slotID)/$(record "$A3" machineID), first $first_slot)" \
        test -n "$(record "$A3" machineID)"
out=$(fleet_get 3 "$COLL/$A3")
assert_eq "${out%% *}" 200 "GET of $A3 ($out)"
wait_until $((20 * TIME_SCALE)) "$A3 allocated by its host" allocated_on_host "$A3"
wait_until $((10 * TIME_SCALE)) "$A3 fulfilled" status_is 3 "$A3" fulfilled

# ---- 5. a stop while a claim is on its way ----
# Replica 4's only endpoint is relay 4, which holds its claim until the test lets it go. A
# SIGTERM then answers the POST 503 (stopping) and leaves its claim in doubt; the allocator
# stays until the claim's fence is settled (allocator-stop.c): released, the claim applies,
# the fence finds it and deletes it again, and only then does the allocator exit. Before, it
# left at once, and the claim applied after it stood as an allocation no client was answered.
# The fences of 3. and 4. have done their work; deleted by hand, so that the fresh replica 4
# (which does not know them) does not claim a fenced slot, whose fence would refuse it.
fleet_etcdctl del --prefix "$FLEET_PREFIX/fences/" >/dev/null
relay_start 4
FLEET_ALLOCATOR_EXTRA="timeout = $((2 * TIME_SCALE))s"
ETCD_ENDPOINTS=http://127.0.0.1:${RELAY_PORT[4]}
fleet_allocator_start 4
ETCD_ENDPOINTS=$ETCD_REAL
A5=$(cat /proc/sys/kernel/random/uuid)
printf '/claims/ release' > "$T/hold-4"
FLEET_HTTP_TIMEOUT=$((60 * TIME_SCALE)) fleet_post 4 "$COLL" "$(body "$A5")" > "$T/post-A5" &
post=$!
wait_until $((10 * TIME_SCALE)) "relay 4 holding the claim of $A5" relay_logged 4 '^held /claims/'
kill -TERM "${FA_PID[4]}"
wait "$post"
out=$(cat "$T/post-A5")
assert_eq "${out%% *}" 503 "POST of $A5 when its replica stops ($out)"
assert_ok "answered: stopping ($out)" grep -q "slotd-allocator is stopping" <<<"$out"
wait_until $((10 * TIME_SCALE)) "replica 4 waiting for its claim in doubt" \
        grep -q "Stopping once 1 claim(s) in doubt are fenced" "$T/allocator-4.log"
assert_ok "replica 4 still runs, its claim in doubt not settled" kill -0 "${FA_PID[4]}"
touch "$T/hold-4.release"
s=$(relay_held_stream 4 /claims/)
wait_until $((15 * TIME_SCALE)) "etcd answered the held claim of $A5" relay_logged 4 "^answered stream $s: succeeded="
assert_ok "$A5's claim applied after its 503: $(grep "^answered stream $s:" "$T/proxy-4.log")" \
        relay_logged 4 "^answered stream $s: succeeded=true"
exited() { ! kill -0 "${FA_PID[4]}" 2>/dev/null; }
wait_until $((20 * TIME_SCALE)) "replica 4 exited, its claim in doubt settled" exited
wait "${FA_PID[4]}" 2>/dev/null || true
FA_PID[4]=
assert_ok "replica 4 deleted the claim applied late ($(tail -n 4 "$T/allocator-4.log"))" \
        grep -q "Allocation $A5: its claim of slot .* was applied after its POST was answered 503; deleted again" \
        "$T/allocator-4.log"
assert_eq "$(fleet_etcd_count "allocations/$FLEET_NAME/$A5")" 0 "records of $A5"
assert_eq "$(fleet_etcd_count "allocation-ids/$A5")" 0 "index of $A5"
not_allocated() { ! allocated_on_host "$1"; }
wait_until $((20 * TIME_SCALE)) "$A5 allocated on no host" not_allocated "$A5"

finish
