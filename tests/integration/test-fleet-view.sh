#!/usr/bin/env bash
# The fleet view against etcd through etcd member kills (issue 25, point 3; SPEC §13,
# docs/fleet.md "The fleet view"): 3 slotd-allocator replicas, each on another member first,
# share a simulated fleet of 4 machines x 3 slots (fleet_sim.py's documents: no host) under
# 8 concurrent clients, each POSTing an allocation through one replica and DELETEing it
# through the next, so that claims are made and deleted across replicas all the time, and
# packed placement makes them contend for the same slot (failure branches that read the
# claim). Meanwhile each etcd member is SIGKILLed and started again in turn (a watch lost, its
# kind read anew; answers lost or late). Once the clients have stopped and every allocation
# is deleted, each replica's view must be etcd's: as many claims (none), as many slots and
# machines as a fresh range shows; and every replica must then grant as many POSTs as etcd
# has free slots ("no capacity" only when etcd has no free slot). Before the fix, a replica
# kept claims that etcd had deleted (an answer applied after the watch's DELETE, or while its
# range was read) and refused the last slots with 503.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"
# As test-fleet-faults: a 3-member etcd, 3 replicas and 8 clients take the TCG VM 6 minutes,
# and its claims pass their 10 s deadline before the clients delete them (placed again until
# no slot is left), which is not the race this test is for. It runs on the host (the
# sanitizer build in tests/run).
[ -z "${SLOTD_VM:-}" ] || skip "3 etcd members, 3 replicas and 8 clients do not run in the" \
        "TCG VM in reasonable time (claims pass their deadline); this test runs on the host"
FLEET_PROJECT=p-view
FLEET_ENVIRONMENT=e-view
# Long enough that no claim of the final checks passes its deadline (placed again, or
# dropped), short enough that a claim left behind goes soon (SPEC §13 step 3). A DELETE
# through a replica whose view has not seen the claim yet reads the claim from etcd and deletes
# it with the record (test-allocator-delete.sh).
FLEET_CLAIM_TIMEOUT=${FLEET_CLAIM_TIMEOUT:-10}
. "$(dirname "$0")/fleet-lib.sh"
: "${SLOTD_ALLOCATOR:?SLOTD_ALLOCATOR must name the slotd-allocator binary}"
command -v etcdctl >/dev/null || skip "etcdctl is not installed (Debian's etcd-client)"
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH

REPLICAS=3 MACHINES=4 SLOTS=3 CLIENTS=${VIEW_CLIENTS:-8}
# Requests the clients make between two steps of the faults (a member killed, started again).
STEP=${VIEW_STEP:-60}
P=/t/view
SIM="python3 $(dirname "$0")/fleet_sim.py"
sim() { $SIM "$ETCD_ENDPOINTS" "$@"; }
uuid() { cat /proc/sys/kernel/random/uuid; }
COLL=$(fleet_allocations)

etcd_cluster_start 3
fleet_token
for m in $(seq 1 $MACHINES); do
        echo "machine m$m"
        for i in $(seq 0 $((SLOTS - 1))); do echo "slot $FLEET_NAME m$m $i online running true 1001 eu"; done
done | sim $P -

# alloc_start R: replica R, its etcd endpoints starting at member R (so that a member's
# death breaks one replica's watches, not all of them).
alloc_start() {
        local r=$1 eps=() i
        for i in $(seq 0 2); do eps+=("$(etcd_url "${ETCD_CLIENT_PORT[$(((r - 1 + i) % 3 + 1))]}")"); done
        FA_PORT[$r]=$(free_port)
        cat > "$T/allocator-$r.ini" <<EOC
[allocator]
listen = 127.0.0.1:${FA_PORT[$r]}
token_file = $T/fleet-token
claim_timeout = ${FLEET_CLAIM_TIMEOUT}s
strategy = packed
environments = $FLEET_PROJECT/$FLEET_ENVIRONMENT

[etcd]
endpoints = $(IFS=,; echo "${eps[*]}")
prefix = $P
timeout = $((2 * TIME_SCALE))s
EOC
        SLOTD_LOG_LEVEL=${FLEET_LOG_LEVEL:-debug} in_cgroup "$CG/alloc-$r" \
                setpriv --reuid=nobody --regid=nogroup --clear-groups \
                "$SLOTD_ALLOCATOR" --config "$T/allocator-$r.ini" >>"$T/allocator-$r.log" 2>&1 &
        FA_PID[$r]=$!
        wait_until $((10 * TIME_SCALE)) "allocator $r answers" fleet_allocator_up "$r"
        wait_until $((10 * TIME_SCALE)) "allocator $r has read the fleet view" \
                fleet_allocator_ready "$r"
}
metric() { curl -s "$(fleet_url "$1" /metrics)" | awk -v m="$2" '$1 == m { print $2 }'; }
count_keys() { ectl get --prefix "$P/$1" --keys-only | grep -c . || true; }
etcd_claims() { ectl get --prefix "$P/hosts/" --keys-only | grep -c '/claims/' || true; }
body() { printf '{"allocationId":"%s","buildConfigurationId":"1001"}' "$1"; }

for r in $(seq 1 $REPLICAS); do alloc_start "$r"; done

# ---- the churn, through the faults ----

# client C: until $T/stop exists, POST through one replica and DELETE through the next; each
# request's status a line of $T/client-C (a DELETE "D status id").
client() {
        local c=$1 n=0 id a out
        while [ ! -e "$T/stop" ]; do
                id=$(uuid)
                a=$(((c + n) % REPLICAS + 1))
                out=$(fleet_post "$a" "$COLL" "$(body "$id")")
                echo "P ${out%% *} $id" >> "$T/client-$c"
                out=$(fleet_delete $((a % REPLICAS + 1)) "$COLL/$id")
                echo "D ${out%% *} $id" >> "$T/client-$c"
                n=$((n + 1))
        done
}
requests() { cat "$T"/client-* 2>/dev/null | wc -l; }
progressed() { [ "$(requests)" -ge "$1" ]; }
# after_requests N: waits until the clients have made N more requests.
after_requests() {
        local want=$(($(requests) + $1))
        wait_until $((60 * TIME_SCALE)) "$1 more requests from the clients" progressed "$want"
}

CLIENT_PIDS=()
for c in $(seq 1 $CLIENTS); do
        client "$c" &
        CLIENT_PIDS+=($!)
done
stop_clients() { touch "$T/stop"; local p; for p in "${CLIENT_PIDS[@]}"; do wait "$p" || true; done; }
CLEANUP_HOOKS+=(stop_clients)
t0=$SECONDS
after_requests "$STEP"
# Each member paused (SIGSTOP) a while, in turn, twice: a replica's requests time out on it
# and go to the next member while its watches stay, so that its answers and its watch come
# from two members, the one ahead of the other either way.
for round in 1 2; do
        for i in 1 2 3; do
                etcd_kill "$i" STOP
                after_requests $((STEP / 3))
                etcd_kill "$i" CONT
                after_requests $((STEP / 3))
        done
done
# Each member killed and started again: a follower, then the leader, then the last one.
leader=$(etcd_leader)
order=()
for i in 1 2 3; do [ "$i" = "$leader" ] || order+=("$i"); done
order=("${order[0]}" "$leader" "${order[1]}")
for i in "${order[@]}"; do
        note "etcd member $i killed ($( [ "$i" = "$leader" ] && echo leader || echo follower))"
        etcd_kill "$i"
        after_requests "$STEP"
        etcd_start_member "$i"
        etcd_wait_healthy "$i"
        after_requests "$STEP"
done
stop_clients
note "churn: $(requests) requests in $((SECONDS - t0)) s; statuses: $(cat "$T"/client-* |
        awk '{ n[$1 $2]++ } END { for (k in n) printf "%s=%d ", k, n[k] }')"
resyncs=0
for r in $(seq 1 $REPLICAS); do resyncs=$((resyncs + $(metric "$r" slotd_allocator_watch_resyncs_total))); done
note "watches read anew: $resyncs"
[ "$resyncs" -gt 0 ] || fail "no replica lost a watch: the member kills did not reach the views"

# ---- every allocation deleted; the views against a fresh range ----

# Those whose last DELETE did not answer 204 or 404 (etcd was down, or the answer was lost).
cat "$T"/client-* | awk '$1 == "P" { id[$3] = 1 } $1 == "D" && ($2 == 204 || $2 == 404) { delete id[$3] }
        END { for (i in id) print i }' > "$T/left"
note "$(wc -l < "$T/left") allocations to delete again"
deleted() { local out; out=$(fleet_delete 1 "$COLL/$1"); [[ ${out%% *} == 204 || ${out%% *} == 404 ]]; }
while read -r id; do
        wait_until $((10 * TIME_SCALE)) "allocation $id deleted" deleted "$id"
done < "$T/left"
etcd_empty() { [ "$(etcd_claims)" = 0 ] && [ "$(count_keys allocations/)" = 0 ]; }
etcd_left() {
        ectl get --prefix "$P/hosts/"
        ectl get --prefix "$P/allocations/"
        ectl get --prefix "$P/allocation-ids/" --keys-only
}
CLEANUP_HOOKS=(etcd_left_log "${CLEANUP_HOOKS[@]}")
etcd_left_log() { [ -z "${EMPTY_WANTED:-}" ] || { note "left in etcd:"; etcd_left | sed 's/^/#   /'; }; }
EMPTY_WANTED=1
wait_until $((FLEET_CLAIM_TIMEOUT + 10 * TIME_SCALE)) "no claim and no record left in etcd" etcd_empty
EMPTY_WANTED=

# view_is R CLAIMS: replica R's view holds CLAIMS claims and every slot and machine etcd has.
view_is() {
        [ "$(metric "$1" slotd_allocator_cache_claims)" = "$2" ] &&
                [ "$(metric "$1" slotd_allocator_cache_slots)" = "$(count_keys slots/)" ] &&
                [ "$(metric "$1" slotd_allocator_cache_machines)" = "$(count_keys machines/)" ]
}
check_views() {
        local r want
        want=$(etcd_claims)
        for r in $(seq 1 $REPLICAS); do
                view_is "$r" "$want" >/dev/null 2>&1 || wait_until $((10 * TIME_SCALE)) \
                        "replica $r's view to hold etcd's $want claims (it holds $(metric "$r" \
                        slotd_allocator_cache_claims)), $(count_keys slots/) slots, $(count_keys \
                        machines/) machines" view_is "$r" "$want"
                PASSED=$((PASSED + 1))
        done
}
check_views

# A claim whose outcome etcd left unknown (answered 503) fenced its slot (allocator-fence.c):
# free in etcd, but refused until the fence's lease (60 s) ends. Its fence must be resolved
# (no fence transaction still asked), and the slot given back, before the fleet is filled.
fences=0 undone=0 kept=0
for r in $(seq 1 $REPLICAS); do
        fences=$((fences + $(metric "$r" slotd_allocator_fences_total)))
        undone=$((undone + $(metric "$r" slotd_allocator_fence_undone_total)))
        kept=$((kept + $(metric "$r" slotd_allocator_fence_kept_total)))
done
note "claims in doubt fenced: $fences, of which applied and deleted again: $undone, applied and kept (a retry answered 200 first): $kept; fences in etcd: $(count_keys fences/)"
unfenced() {
        local r
        [ "$(count_keys fences/)" = 0 ] || return 1
        for r in $(seq 1 $REPLICAS); do [ "$(metric "$r" slotd_allocator_fenced_slots)" = 0 ] || return 1; done
}
wait_until $(((60 + 10) * TIME_SCALE)) "no fence in etcd and no slot fenced in a replica" unfenced

# Every replica grants every free slot, then each view holds them all as claims.
for r in $(seq 1 $REPLICAS); do
        ids=()
        for n in $(seq 1 $((MACHINES * SLOTS))); do
                id=$(uuid)
                rev=$(ectl get "$P/none" -w json | jq -r .header.revision)
                out=$(fleet_post "$r" "$COLL" "$(body "$id")")
                [ "${out%% *}" = 200 ] || fail "replica $r: POST $n of $((MACHINES * SLOTS)) answered" \
                        "$out; etcd had $((MACHINES * SLOTS - $(etcd_claims))) free slots at" \
                        "revision $rev (claims: $(etcd_claims))"
                PASSED=$((PASSED + 1))
                ids+=("$id")
        done
        assert_eq "$(etcd_claims)" $((MACHINES * SLOTS)) "claims in etcd after replica $r filled the fleet"
        check_views
        for id in "${ids[@]}"; do
                out=$(fleet_delete "$r" "$COLL/$id")
                assert_eq "${out%% *}" 204 "DELETE $id through replica $r"
        done
        check_views
done
finish
