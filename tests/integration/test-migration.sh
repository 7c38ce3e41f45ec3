#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A studio leaving Multiplay (issue 26 point 5, part a): its config-as-code file, typed out
# in migration-lib.sh as a studio has it (two builds, two build configurations with variables
# and $$…$$ launch parameters, two fleets in two regions, METAL usage settings, names with
# spaces), runs unchanged on a machine of region Europe. Checked against what Multiplay would have given each
# server, from Unity's documented meanings:
#   launch parameters: https://docs.unity.com/ugs/en-us/manual/game-server-hosting/manual/concepts/launch-parameters
#     ($$port$$ and $$query_port$$ the ports the server binds, $$log_dir$$ the directory for
#     its logs, $$serverid$$ the server's ID, a build configuration's variables as $$name$$)
#   configuration variables: https://docs.unity.com/ugs/en-us/manual/game-server-hosting/manual/concepts/configuration-variables
#   server.json: https://docs.unity.com/en-us/multiplay-hosting/concepts/server-json
#     (every value a string: serverID, allocatedUUID "" until allocated, machineID, fleetID,
#     ip, port, queryPort, queryType, serverLogDir, serverFilesDir, regionID, regionName, and the build
#     configuration's variables beside them)
#   usage settings (density): FleetUsageSetting, SPEC §2 "Density"
# The slot counts are computed here from the file's numbers and the machine's, not read from
# slotd. Part b (the same file on several hosts of both regions, allocations through
# slotd-allocator) is test-migration-fleet.sh's.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/migration-lib.sh"

# The machine: 8 cores of 2000 MHz, 6G, region Europe.
CPUS=8 MHZ=2000 MEM_MIB=6144
MACHINE_CPUS=$CPUS MACHINE_MEMORY=${MEM_MIB}M write_config
config_key machine "cpu_mhz = $MHZ"
config_key machine "region = Europe"
GAME_BASE=38400 QUERY_BASE=38450
config_key machine "game_port_base = $GAME_BASE"
config_key machine "query_port_base = $QUERY_BASE"
config_key supervisor "builds_dir = $T/builds"
# The builds as the studio's build pipeline lays them out, under supervisor.builds_dir.
migration_builds "$T/builds"

migration_gsh "$T/etc/fleets.d/studio.gsh"

# The density, from the file's numbers and the machine's (migration-lib.sh): EU Fleet is
# alone here (NA Fleet is in another region), so it gets all it can take.
EU_SLOTS=$(migration_slots EU $CPUS $MHZ $MEM_MIB)
eu_by_speed=$((CPUS * MHZ / EU_SPEED))

# 1. --check: what the file becomes here.
out=$("$SLOTD" --check --config "$T/etc/slotd.ini" 2>&1) || fail "--check failed: $out"
note "$out"
assert_ok "--check: EU Fleet as EU-Fleet, $EU_SLOTS slots" \
        grep -q "^fleet EU-Fleet ($T/etc/fleets.d/studio.gsh): $EU_SLOTS slots," <<<"$out"
assert_ok "--check: the speed bound" grep -qF \
        "speed floor($((CPUS * MHZ)) MHz / $EU_SPEED MHz) = $eu_by_speed" <<<"$out"
assert_ok "--check: NA Fleet gets no slots in Europe" grep -q \
        "studio.gsh:[0-9]*:[0-9]*: fleets.NA Fleet: gets no slots on this machine: its regions are North America, and machine.region is 'Europe'" <<<"$out"
assert_ok "--check: the ports from machine.game_port_base" grep -q \
        "^fleet EU-Fleet .*, ports $GAME_BASE-$((GAME_BASE + EU_SLOTS - 1)), query ports $QUERY_BASE-$((QUERY_BASE + EU_SLOTS - 1)), " <<<"$out"

# 2. The slots: EU Fleet's, as many as the arithmetic says, and none of NA Fleet's.
start_slotd
mapfile -t ids < <(list_slots | awk '$2 == "EU-Fleet" { print $1 }')
assert_eq "${#ids[@]}" "$EU_SLOTS" "EU-Fleet's slots, by the density arithmetic"
assert_eq "$(list_slots | awk '$2 != "EU-Fleet"' | wc -l)" 0 "no slot of NA Fleet on a machine in Europe"
for id in "${ids[@]}"; do wait_prop "$id" ProcessState running 60; done

# 3. Each server: argv word by word, environment, server.json, against what Multiplay gives
# (migration-lib.sh).
MIG_FLEET=EU-Fleet MIG_REGION=Europe MIG_IP=192.0.2.1 MIG_MACHINE=$TEST_MACHINE_NUMBER
MIG_SLOTS=$EU_SLOTS
RANKED_EXE=$T/builds/Builds/Server/Game.x86_64
CASUAL_EXE=$T/builds/Builds/Legacy/GameLegacy.x86_64
for id in "${ids[@]}"; do
        assert_eq "$(sprop "$id" BuildConfiguration)" Ranked "slot $id runs the default, Ranked"
        migration_check_server "$id" "$RANKED_EXE" de_dust2 ranked 10 sqp ""
done
ports=$(for id in "${ids[@]}"; do sprop "$id" Port; done | sort -u | wc -l)
assert_eq "$ports" "$EU_SLOTS" "every slot its own port"

# 4. An allocation into the other build configuration ("Casual Weekend", as slotd spells its
# ID): the server restarts into it, with its build, launch parameters and variables, and
# server.json names the allocation.
A=${ids[0]}
pid=$(sprop "$A" MainPID)
uuid=3f2b8c1e-5d4a-4e6f-9a0b-1c2d3e4f5a6b
scall "$A" Allocate ss "$uuid" Casual-Weekend >/dev/null
wait_new_pid "$A" "$pid"
wait_prop "$A" ProcessState running 60
assert_eq "$(sprop "$A" BuildConfiguration)" Casual-Weekend "slot $A runs Casual Weekend"
migration_check_server "$A" "$CASUAL_EXE" cs_office casual 16 a2s "$uuid"
# The others run on untouched.
for id in "${ids[@]:1}"; do migration_check_server "$id" "$RANKED_EXE" de_dust2 ranked 10 sqp ""; done
finish
