#!/usr/bin/env bash
# A build configuration no host runs, at the door and after it (issue 25.2): two real hosts
# of fleet-lib.sh (slotd, slotd-registry) and one allocator replica with
# allocator.failed_ttl short. The registries write each slot's buildConfigurations (slotd's
# BuildConfigurations); a POST of a build configuration none lists is 400, nothing written.
# Slot documents without the field (a registry before it) may run any: a POST of it then
# gets its 200, each host's slotd refuses the claim ("Fleet 'game' has no build
# configuration '9999'"), no other slot is left: GET answers 200 with status failed and the
# host's reason (not 404), the list shows it, and once failed_ttl passed it is gone (404),
# its allocationId's index too. A DELETE of a failed one removes it at once. A POST with
# restart: true restarts the free slot's server (running that configuration) before it is
# allocated.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"
[ -n "${SLOTD_REGISTRY:-}" ] && [ -x "$SLOTD_REGISTRY" ] || skip "slotd-registry is not built"
[ -n "${SLOTD_ALLOCATOR:-}" ] && [ -x "$SLOTD_ALLOCATOR" ] || skip "slotd-allocator is not built"
command -v etcdctl >/dev/null || skip "etcdctl is not installed (Debian's etcd-client)"
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH

FLEET_SLOTS=1
FLEET_FAILED_TTL=$((4 * TIME_SCALE))
. "$(dirname "$0")/fleet-lib.sh"

etcd_cluster_start 1
# Each host's fleet has a [build_configuration] section: slotd then refuses any other ID.
for k in 1 2; do
        fleet_write_config "$k"
        printf '[build_configuration %s]\nvariables.kind = test\n' "$FLEET_BUILD_CONFIGURATION" \
                >> "$(fleet_dir "$k")/etc/fleets.d/$FLEET_NAME.ini"
        fleet_host_start "$k"
done
fleet_wait_running 1 2
fleet_wait_registered 1 2
fleet_allocator_start 1

uuid() { cat /proc/sys/kernel/random/uuid; }
COLL=$(fleet_allocations)
body() { cut -d' ' -f2-; }
get_status() { fleet_get 1 "$COLL/$1" | body | json status; }
is_failed() { [ "$(get_status "$1")" = failed ]; }
gone() { [ "$(fleet_get 1 "$COLL/$1" | cut -d' ' -f1)" = 404 ]; }

# Each slot's document lists the build configurations its fleet runs.
for k in 1 2; do
        assert_eq "$(fleet_etcd_get "slots/$FLEET_NAME/$(fleet_machine_id "$k")/0" | jq -c .buildConfigurations)" \
                "[\"$FLEET_BUILD_CONFIGURATION\"]" "host $k's slot document: buildConfigurations"
done
U0=$(uuid)
out=$(fleet_post 1 "$COLL" "{\"allocationId\":\"$U0\",\"buildConfigurationId\":9999}")
assert_eq "${out%% *}" 400 "POST with a build configuration no slot lists ($out)"
assert_eq "$(body <<<"$out" | json error)" \
        "allocation $U0 in fleet $FLEET_NAME: no server of the fleet runs build configuration 9999" \
        "its error"
assert_eq "$(fleet_get 1 "$COLL/$U0" | cut -d' ' -f1)" 404 "no record of it"
assert_eq "$(fleet_etcd_get "allocation-ids/$U0")" "" "no index of it"

# Documents as a registry before buildConfigurations wrote them (kept on their lease): any
# build configuration may run there, as far as the view knows.
for k in 1 2; do
        key="$FLEET_PREFIX/slots/$FLEET_NAME/$(fleet_machine_id "$k")/0"
        fleet_etcdctl put --ignore-lease "$key" \
                "$(fleet_etcdctl get --print-value-only "$key" | jq -c 'del(.buildConfigurations)')" >/dev/null
done
U=
post_unlisted() {
        local u out
        u=$(uuid)
        out=$(fleet_post 1 "$COLL" "{\"allocationId\":\"$u\",\"buildConfigurationId\":9999}")
        [ "${out%% *}" = 200 ] || return 1
        U=$u
}
wait_until $((10 * TIME_SCALE)) "POST of 9999 answered 200 once the view has the old documents" \
        post_unlisted
wait_until $((20 * TIME_SCALE)) "allocation $U failed (refused by both hosts)" is_failed "$U"
out=$(fleet_get 1 "$COLL/$U")
assert_eq "${out%% *}" 200 "GET of the failed allocation ($out)"
assert_eq "$(body <<<"$out" | json error)" "Fleet '$FLEET_NAME' has no build configuration '9999'" \
        "its error: the host's reason"
assert_ok "its failed time ($(body <<<"$out" | json failed))" test -n "$(body <<<"$out" | json failed)"
assert_eq "$(body <<<"$out" | json serverId)" 0 "no slot holds it"
assert_eq "$(fleet_get 1 "$COLL?status=failed" | body | jq -r '[.allocations[].allocationId] | join(" ")')" \
        "$U" "the list of failed allocations"
assert_eq "$(fleet_etcdctl get --prefix "$FLEET_PREFIX/hosts/" --keys-only | grep -c /claims/ || true)" 0 \
        "no claim left in etcd"
# Both slots stay free: an allocation of the build they run is placed.
U2=$(uuid)
assert_eq "$(fleet_post 1 "$COLL" "{\"allocationId\":\"$U2\",\"buildConfigurationId\":$FLEET_BUILD_CONFIGURATION}" | cut -d' ' -f1)" \
        200 "POST of the build the hosts run"
wait_until $((20 * TIME_SCALE)) "allocation $U2 fulfilled" \
        eval '[ "$(get_status "$U2")" = fulfilled ]'
# Gone after allocator.failed_ttl (an etcd lease): the record and its index.
wait_until $((FLEET_FAILED_TTL + 10 * TIME_SCALE)) "the failed allocation gone after failed_ttl" gone "$U"
assert_eq "$(fleet_etcd_get "allocation-ids/$U")" "" "its allocationId's index gone with it"

# A DELETE of a failed allocation removes it before its time.
U3=$(uuid)
assert_eq "$(fleet_post 1 "$COLL" "{\"allocationId\":\"$U3\",\"buildConfigurationId\":9999}" | cut -d' ' -f1)" \
        200 "POST of another allocation no host runs"
wait_until $((20 * TIME_SCALE)) "allocation $U3 failed" is_failed "$U3"
assert_eq "$(fleet_delete 1 "$COLL/$U3" | cut -d' ' -f1)" 204 "DELETE of a failed allocation"
assert_eq "$(fleet_get 1 "$COLL/$U3" | cut -d' ' -f1)" 404 "GET after its DELETE"

# restart: true (Unity's MultiplayAllocationsAllocateRequest.restart): the free slot's server,
# running the build configuration asked, restarts into it before it is allocated.
free_host=
for k in 1 2; do
        [ "$(fleet_etcd_get "slots/$FLEET_NAME/$(fleet_machine_id "$k")/0" | jq -r .allocationId)" = "" ] &&
                free_host=$k
done
[ -n "$free_host" ] || fail "no free slot left for the restart"
main_pid() {
        busctl --address="$(fleet_bus "$free_host")" get-property org.slotd.Supervisor1 \
                /org/slotd/Supervisor1/slot/0 org.slotd.Supervisor1.Slot MainPID | cut -d' ' -f2
}
pid=$(main_pid)
U4=$(uuid)
assert_eq "$(fleet_post 1 "$COLL" "{\"allocationId\":\"$U4\",\"buildConfigurationId\":$FLEET_BUILD_CONFIGURATION,\"restart\":true}" | cut -d' ' -f1)" \
        200 "POST with restart"
wait_until $((20 * TIME_SCALE)) "allocation $U4 fulfilled" \
        eval '[ "$(get_status "$U4")" = fulfilled ]'
new_server() { local p; p=$(main_pid); [ "$p" -gt 0 ] && [ "$p" != "$pid" ]; }
wait_until $((20 * TIME_SCALE)) "the slot's server restarted (not $pid)" new_server
assert_eq "$(fleet_get 1 "$COLL/$U4" | body | json serverId)" 0 "on the free slot"
assert_eq "$(fleet_host_of_machine "$(fleet_get 1 "$COLL/$U4" | body | api_machine_id)")" "$free_host" \
        "on the free host"
assert_eq "$(fleet_post 1 "$COLL" "{\"allocationId\":\"$(uuid)\",\"restart\":1}" | cut -d' ' -f1)" \
        400 "restart not a boolean"
finish
