#!/usr/bin/env bash
# A DELETE through a replica whose fleet view lags (SPEC §13 step 4): two allocator replicas on
# one etcd and simulated hosts that never confirm (fleet_sim.py's documents), so that every
# allocation stays a claim until it is deleted. Replica 2 reaches etcd through a relay
# (watch-delay-proxy.py) that holds what its watches tell for WATCH_DELAY ms: its view lags
# etcd's, the case of a replica whose watch is behind. Round after round, a POST on replica 1
# and, at once after its 200, a DELETE of it on replica 2 (delete_race.py): 204 each time, and
# no claim, record or index left in etcd right after it. Then without the delay, both ways;
# and at the end both views without a claim, and every slot free (a claim left behind would
# make a POST 503).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"
FLEET_CLAIM_TIMEOUT=600 # no claim ends by its deadline during the test
FLEET_PREFIX=/t/delete
. "$(dirname "$0")/fleet-lib.sh"
: "${SLOTD_ALLOCATOR:?SLOTD_ALLOCATOR must name the slotd-allocator binary}"
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH
DIR=$(dirname "$0")
ROUNDS=${DELETE_ROUNDS:-100}
WATCH_DELAY=$((300 * TIME_SCALE))

etcd_cluster_start 1
ETCD_REAL=$ETCD_ENDPOINTS
for m in m1 m2; do
        echo "machine $m"
        for i in 0 1; do echo "slot $FLEET_NAME $m $i online running true 1001 eu"; done
done | python3 "$DIR/fleet_sim.py" "$ETCD_ENDPOINTS" "$FLEET_PREFIX" -

PROXY_PORT=$(free_port)
python3 "$DIR/watch-delay-proxy.py" --listen "$PROXY_PORT" --upstream "${ETCD_CLIENT_PORT[1]}" \
        --arm "$T/watch-delay" > "$T/relay.log" 2>&1 &
bg_track $!
wait_until $((10 * TIME_SCALE)) "the relay listening" grep -q "^listening" "$T/relay.log"
fleet_allocator_start 1
ETCD_ENDPOINTS=http://127.0.0.1:$PROXY_PORT
fleet_allocator_start 2
ETCD_ENDPOINTS=$ETCD_REAL

race() { # FROM TO
        python3 "$DIR/delete_race.py" "$ETCD_ENDPOINTS" "$FLEET_PREFIX" "$FLEET_TOKEN" \
                "$(fleet_url "$1")" "$(fleet_url "$2")" "$(fleet_allocations)" "$ROUNDS"
}
# the DELETEs whose replica had no claim of the allocation in its view
lagged() { grep -c "not in the fleet view: its claim read from etcd" "$T/allocator-$1.log" || true; }
views_clear() {
        local r
        for r in 1 2; do
                curl -s "$(fleet_url "$r" /metrics)" | grep -qx 'slotd_allocator_cache_claims 0' || return 1
        done
}

echo "$WATCH_DELAY" > "$T/watch-delay"
out=$(race 1 2) || fail "POST on replica 1, DELETE on replica 2 (its watch $WATCH_DELAY ms behind): $out"
note "POST on replica 1, DELETE on replica 2 (its watch $WATCH_DELAY ms behind): $out;" \
        "$(lagged 2) DELETEs found the claim missing from the view"
# The lag was real: the DELETEs found their claim missing from replica 2's view (else this
# shows nothing about a lagging replica); at least half of them, the relay holding each watch
# message far longer than a round takes.
assert_ok "most DELETEs on replica 2 lacked the claim in its view ($(lagged 2) of $ROUNDS)" \
        test "$(lagged 2)" -ge $((ROUNDS / 2))
rm -f "$T/watch-delay"
wait_until $((10 * TIME_SCALE)) "both views without a claim" views_clear

for pair in "1 2" "2 1"; do
        set -- $pair
        out=$(race "$1" "$2") || fail "POST on replica $1, DELETE on replica $2: $out"
        note "POST on replica $1, DELETE on replica $2, no delay: $out"
done
assert_eq "$(ectl get --prefix "$FLEET_PREFIX/hosts/" --keys-only | grep -c . || true)" 0 "no claim left in etcd"
assert_eq "$(ectl get --prefix "$FLEET_PREFIX/allocations/" --keys-only | grep -c . || true)" 0 "no record left"
assert_eq "$(ectl get --prefix "$FLEET_PREFIX/allocation-ids/" --keys-only | grep -c . || true)" 0 "no index left"
wait_until $((10 * TIME_SCALE)) "both views without a claim" views_clear
for i in 1 2 3 4; do
        out=$(fleet_post 1 "$(fleet_allocations)" "{\"allocationId\":\"$(cat /proc/sys/kernel/random/uuid)\"}")
        assert_eq "${out%% *}" 200 "POST $i of 4: every slot free ($out)"
done
finish
