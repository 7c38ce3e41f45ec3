#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A studio leaving Multiplay, on the fleet (issue 26 point 5, part b; part a, one host, is
# test-migration.sh): the same config-as-code file (migration-lib.sh) on 8 simulated hosts
# (fleet-lib.sh: each its own bus, slotd and slotd-registry; a 3-member etcd; one
# slotd-allocator), hosts 0-3 in region Europe and 4-7 in North America by machine.region.
# Each host runs the fleet of its region only, as many slots as the density arithmetic gives
# (computed here from the file's numbers). An allocation through slotd-allocator for each
# fleet, in its region, lands on a host of that region, and the server's argv, environment
# and server.json show it; EU Fleet has no capacity in North America.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"
. "$(dirname "$0")/migration-lib.sh"

[ -n "${SLOTD_REGISTRY:-}" ] && [ -x "$SLOTD_REGISTRY" ] || skip "slotd-registry is not built"
[ -n "${SLOTD_ALLOCATOR:-}" ] && [ -x "$SLOTD_ALLOCATOR" ] || skip "slotd-allocator is not built"
# As test-fleet-faults: 8 slotd, 8 registries and 3 etcd members took 404 s only to start in
# the TCG VM of tests/vm, and etcd's requests timed out there. Part a (test-migration) runs in
# the VM.
[ -z "${SLOTD_VM:-}" ] || skip "8 hosts and 3 etcd members do not run in the TCG VM in" \
        "reasonable time (404 s to start them, etcd requests timing out); this test runs on the host"
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH

HOSTS=8
# fleet-lib.sh's machine: FLEET_SLOTS cores and 8G; the .gsh sets the slot counts.
FLEET_SLOTS=4 MEM_MIB=8192 MHZ=2000
FLEET_NAME=EU-Fleet
FLEET_REGION_OF() { if [ "$1" -ge 4 ]; then echo "North America"; else echo Europe; fi; }
. "$(dirname "$0")/fleet-lib.sh"

EU_SLOTS=$(migration_slots EU $FLEET_SLOTS $MHZ $MEM_MIB)
NA_SLOTS=$(migration_slots NA $FLEET_SLOTS $MHZ $MEM_MIB)
# fleet_of K, slots_of K: the fleet host K runs (slotd's name) and its slot count there.
fleet_of() { if [ "$1" -ge 4 ]; then echo NA-Fleet; else echo EU-Fleet; fi; }
slots_of() { if [ "$1" -ge 4 ]; then echo "$NA_SLOTS"; else echo "$EU_SLOTS"; fi; }

# Host K's configuration: fleet-lib.sh's, its INI fleet replaced by the studio's .gsh, with
# the machine's MHz, region, port bases (fleet-lib.sh's ranges of host K) and builds_dir.
write_host() {
        local k=$1 d
        d=$(fleet_dir "$k")
        fleet_write_config "$k"
        rm "$d/etc/fleets.d/$FLEET_NAME.ini"
        sed -i "s|^\[machine\]\$|[machine]\ncpu_mhz = $MHZ\nregion = $(FLEET_REGION_OF "$k")\ngame_port_base = $(fleet_game_port "$k" 0)\nquery_port_base = $(($(fleet_game_port "$k" 0) + 20))|" \
                "$d/etc/slotd.ini"
        sed -i "s|^\[supervisor\]\$|[supervisor]\nbuilds_dir = $d/builds|" "$d/etc/slotd.ini"
        migration_builds "$d/builds"
        migration_gsh "$d/etc/fleets.d/studio.gsh"
}
host_running() { [ "$(fleet_slots "$1" | awk '$4 == "running"' | wc -l)" = "$(slots_of "$1")" ]; }
host_registered() {
        fleet_machine_registered "$1" &&
                [ "$(fleet_etcd_count "slots/$(fleet_of "$1")/$(fleet_machine_id "$1")/")" = "$(slots_of "$1")" ]
}

etcd_cluster_start 3
for k in $(seq 0 $((HOSTS - 1))); do write_host "$k"; fleet_host_start "$k"; done
fleet_allocator_start 0

# 1. Each host: the fleet of its region, as many slots as the arithmetic says, all running and
# in etcd.
for k in $(seq 0 $((HOSTS - 1))); do
        assert_eq "$(on_host "$k" list_slots | awk '{ print $2 }' | sort -u | paste -sd' ')" \
                "$(fleet_of "$k")" "host $k ($(FLEET_REGION_OF "$k")) runs $(fleet_of "$k") only"
        assert_eq "$(on_host "$k" list_slots | wc -l)" "$(slots_of "$k")" \
                "host $k: $(fleet_of "$k")'s slots by the density arithmetic"
        wait_until $((30 * TIME_SCALE)) "every slot of host $k running" host_running "$k"
        wait_until $((20 * TIME_SCALE)) "host $k registered in etcd" host_registered "$k"
done

# 2. An allocation for each fleet lands on a host of its region; the server shows it. EU
# Fleet's names its region and asks for its second build configuration with restart (Unity's
# AllocateWithOptions' restart): its server starts again for the allocation. NA Fleet's names
# its region as the .gsh file does, "North America": a regionId is any text without control
# characters (SPEC §13).
# allocate_in FLEET UUID REGION BUILD_CONFIGURATION RESTART: POST, then waits until fulfilled;
# sets F_HOST and F_SLOT from the API's answer (machineId, serverId).
allocate_in() {
        local coll out m
        coll=$(fleet_allocations "$1")
        out=$(fleet_post 0 "$coll" "$(printf '{"allocationId":"%s","buildConfigurationId":"%s","regionId":"%s","payload":"migrated","restart":%s}' "$2" "$4" "$3" "$5")")
        assert_eq "${out%% *}" 200 "POST $2 to $1 in $3 ($out)"
        wait_until $((10 * TIME_SCALE + FLEET_CLAIM_TIMEOUT)) "allocation $2 fulfilled" \
                alloc_status_is "$coll/$2" fulfilled
        out=$(fleet_get 0 "$coll/$2")
        m=$(api_machine_id <<<"${out#* }") || fail "GET $2: $out"
        F_SLOT=$(json serverId <<<"${out#* }")
        F_HOST=$(fleet_host_of_machine "$m") || fail "allocation $2 on unknown machine '$m': $out"
}
alloc_status_is() {
        local out
        out=$(fleet_get 0 "$1")
        [ "${out%% *}" = 200 ] && [ "$(json status <<<"${out#* }")" = "$2" ]
}
# check_on HOST SLOT ARGS...: migration_check_server on host HOST's slotd.
check_on() {
        local k=$1
        shift
        MIG_FLEET=$(fleet_of "$k") MIG_REGION=$(FLEET_REGION_OF "$k") MIG_IP=$(fleet_ip "$k") \
                MIG_MACHINE=$(fleet_machine_number "$k") MIG_SLOTS=$(slots_of "$k") \
                GAME_BASE=$(fleet_game_port "$k" 0) QUERY_BASE=$(($(fleet_game_port "$k" 0) + 20)) \
                on_host "$k" migration_check_server "$@"
}

EU=6a1f1b0e-7e57-4000-8000-00000000e001
allocate_in EU-Fleet $EU Europe Casual-Weekend true
assert_ok "EU Fleet's allocation on a host in Europe (host $F_HOST)" [ "$F_HOST" -lt 4 ]
assert_eq "$(on_host "$F_HOST" sprop "$F_SLOT" AllocationUUID)" $EU "host $F_HOST's slot $F_SLOT holds it"
on_host "$F_HOST" wait_prop "$F_SLOT" ProcessState running $((20 * TIME_SCALE))
assert_eq "$(on_host "$F_HOST" sprop "$F_SLOT" BuildConfiguration)" Casual-Weekend \
        "restarted into Casual Weekend"
check_on "$F_HOST" "$F_SLOT" "$(fleet_dir "$F_HOST")/builds/Builds/Legacy/GameLegacy.x86_64" \
        cs_office casual 16 a2s $EU

NA=6a1f1b0e-7e57-4000-8000-00000000a001
allocate_in NA-Fleet $NA "North America" Casual-Weekend false
assert_ok "NA Fleet's allocation on a host in North America (host $F_HOST)" [ "$F_HOST" -ge 4 ]
assert_eq "$(on_host "$F_HOST" sprop "$F_SLOT" AllocationUUID)" $NA "host $F_HOST's slot $F_SLOT holds it"
# Allocated while it ran: server.json names the allocation, the environment of its start none.
check_on "$F_HOST" "$F_SLOT" "$(fleet_dir "$F_HOST")/builds/Builds/Legacy/GameLegacy.x86_64" \
        cs_office casual 16 a2s $NA ""

# 3. The fleet view by region: EU Fleet's slots are all in Europe, NA Fleet's in North
# America, as many as the hosts of the region times the density's count.
capacity_regions() {
        local out
        out=$(fleet_get 0 "/v1/fleets/$1/capacity")
        [ "${out%% *}" = 200 ] || fail "capacity of $1: $out"
        jq -r '.regions | to_entries[] | "\(.key)=\(.value.slots)"' <<<"${out#* }" | paste -sd,
}
assert_eq "$(capacity_regions EU-Fleet)" "Europe=$((4 * EU_SLOTS))" "EU Fleet's capacity: Europe only"
assert_eq "$(capacity_regions NA-Fleet)" "North America=$((4 * NA_SLOTS))" \
        "NA Fleet's capacity: North America only"
finish
