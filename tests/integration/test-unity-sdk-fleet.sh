#!/usr/bin/env bash
# Unity's own game server (unity-sgs, Go SDK v0.5.4; unity-lib.sh) allocated through the fleet
# (issue 23): a real etcd (etcd-lib.sh), one host of fleet-lib.sh (its own bus, slotd and
# slotd-registry) whose slotd.ini has no machine.id, as a user's has none, and a
# slotd-allocator replica. An allocation POSTed to the allocator's Allocations API with curl
# reaches the server ("allocated" with that allocationId in its log) and its DELETE too
# ("deallocated"). Skipped without ../shared/peers beside the checkout.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/unity-lib.sh"
. "$(dirname "$0")/etcd-lib.sh"
[ -n "${SLOTD_REGISTRY:-}" ] && [ -x "$SLOTD_REGISTRY" ] || skip "slotd-registry is not built"
[ -n "${SLOTD_ALLOCATOR:-}" ] && [ -x "$SLOTD_ALLOCATOR" ] || skip "slotd-allocator is not built"
command -v etcdctl >/dev/null || skip "etcdctl is not installed (Debian's etcd-client)"
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH

FLEET_NAME=game
FLEET_SLOTS=2
. "$(dirname "$0")/fleet-lib.sh"

etcd_cluster_start 1

# Host 1 as fleet-lib.sh writes it (etcd, registry, admin group, its cgroup subtree), then as a
# user would have it: no machine.id (MachineID from /etc/machine-id), the local proxy on, and a
# fleet of unity-sgs with SQP checks (ports below 32768: no free_port or client port takes them,
# nor another test's: 31700-31799 is this test's).
fleet_write_config 1
D=$(fleet_dir 1)
LP_PORT=$(free_port)
sed -i -e '/^id = /d' -e "/^\[localproxy\]/,/^\[/ s|^listen = off\$|listen = 127.0.0.1:$LP_PORT|" "$D/etc/slotd.ini"
grep -q "^listen = 127.0.0.1:$LP_PORT\$" "$D/etc/slotd.ini" || fail "localproxy.listen not set: $(cat "$D/etc/slotd.ini")"
cat > "$D/etc/fleets.d/$FLEET_NAME.ini" <<EOC
[fleet]
build = $UNITY_SGS
args = -port \${PORT} -queryport \${QUERY_PORT} -log \${SERVER_LOG_DIR}
build_configuration = $FLEET_BUILD_CONFIGURATION
region_id = $(FLEET_REGION_OF 1)
[usage]
cpu = 0.5
memory = 256M
servers = $FLEET_SLOTS
[ports]
game_base = 31700
query_base = 31750
[checks]
query = sqp
interval = ${INTERVAL_S}s
query_timeout = ${QUERY_TIMEOUT_MS}ms
EOC
fleet_host_start 1
# lib.sh's helpers (sprop, mprop, list_slots, server_json...) on host 1's slotd from here on.
BUS=$(fleet_bus 1)
UNITY_SLOTD_LOG=$D/slotd.log
MID=$(mprop MachineID)
note "host 1: MachineID $MID, server.json's machineID '$(server_json 0 machineID)'"

# The servers start (defect (a), a machineID they cannot decode, is named here) and run.
for id in $(list_slots | awk '{ print $1 }'); do
        poll $((20 * TIME_SCALE)) unity_started "$id" ||
                fail "unity-sgs of slot $id logged no \"started\" within $((20 * TIME_SCALE))s: $(tail -n 3 "$(unity_log "$id")" | tr '\n' ' ')"
        PASSED=$((PASSED + 1))
        wait_prop "$id" ProcessState running $((10 * TIME_SCALE))
done
# The host in the fleet view: its machine key and its slots' keys in etcd.
registered() {
        [ -n "$(fleet_etcd_get "machines/$MID")" ] &&
                [ "$(fleet_etcd_count "slots/$FLEET_NAME/$MID/")" = "$FLEET_SLOTS" ]
}
wait_until $((20 * TIME_SCALE)) "host 1 (machine $MID) registered in etcd" registered
fleet_allocator_start 1

COLL=$(fleet_allocations)
U=$(uuid)
out=$(fleet_post 1 "$COLL" "{\"allocationId\":\"$U\",\"buildConfigurationId\":$FLEET_BUILD_CONFIGURATION,\"payload\":\"unity\"}")
assert_eq "${out%% *}" 200 "POST $U ($out)"
status_of() { fleet_get 1 "$COLL/$U" | cut -d' ' -f2- | json status; }
fulfilled() { [ "$(status_of)" = fulfilled ]; }
wait_until $((20 * TIME_SCALE)) "allocation $U fulfilled by the host" fulfilled
out=$(fleet_get 1 "$COLL/$U")
S=$(json serverId <<<"${out#* }")
assert_eq "$(sprop "$S" AllocationUUID)" "$U" "slot $S's AllocationUUID (the API: ${out#* })"
LOG=$(unity_log "$S")
t0=$(ms)
poll "$EVENT_S" unity_logged "$LOG" allocated "$U" ||
        fail "the fleet's allocation did not reach the server: $(unity_no_event "$S" "$U" allocated "$EVENT_S" "$LP_PORT")"
PASSED=$((PASSED + 1))
note "slot $S: \"allocated\" $U logged $(($(ms) - t0)) ms after the API said fulfilled"
pid=$(sprop "$S" MainPID)

assert_eq "$(fleet_delete 1 "$COLL/$U" | cut -d' ' -f1)" 204 "DELETE $U"
# The registry deallocates through slotd (a deallocation key in etcd, then Deallocate).
t0=$(ms)
poll $((10 * TIME_SCALE)) unity_logged "$LOG" deallocated "$U" ||
        fail "the fleet's deallocation did not reach the server: $(unity_no_event "$S" "$U" deallocated $((10 * TIME_SCALE)) "$LP_PORT")"
PASSED=$((PASSED + 1))
note "slot $S: \"deallocated\" $U logged $(($(ms) - t0)) ms after the DELETE"
assert_eq "$(sprop "$S" AllocationUUID)" "" "slot $S's AllocationUUID after the DELETE"
assert_eq "$(sprop "$S" MainPID)" "$pid" "slot $S's server runs on after its deallocation"
assert_eq "$(unity_count "$LOG" allocated "$U")|$(unity_count "$LOG" deallocated "$U")" "1|1" \
        "\"allocated\"|\"deallocated\" lines for $U"
finish
