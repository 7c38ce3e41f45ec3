#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A studio leaving Multiplay (issue 26 point 5): its config-as-code file, typed out below as a
# studio has it (two builds, two build configurations with variables and $$…$$ launch
# parameters, two fleets in two regions, METAL usage settings, names with spaces), runs
# unchanged on a machine of region Europe. Checked against what Multiplay would have given each
# server, from Unity's documented meanings:
#   launch parameters: https://docs.unity.com/ugs/en-us/manual/game-server-hosting/manual/concepts/launch-parameters
#     ($$port$$ and $$query_port$$ the ports the server binds, $$log_dir$$ the directory for
#     its logs, $$serverid$$ the server's ID, a build configuration's variables as $$name$$)
#   configuration variables: https://docs.unity.com/ugs/en-us/manual/game-server-hosting/manual/concepts/configuration-variables
#   server.json: https://docs.unity.com/en-us/multiplay-hosting/concepts/server-json
#     (every value a string: serverID, allocatedUUID "" until allocated, machineID, fleetID,
#     ip, port, queryPort, queryType, serverLogDir, regionID, regionName, and the build
#     configuration's variables beside them)
#   usage settings (density): FleetUsageSetting, SPEC §2 "Density"
# The slot counts are computed here from the file's numbers and the machine's, not read from
# slotd. Part b (the same file on several hosts of both regions, allocations through
# slotd-allocator) is test-migration-fleet.sh's.
. "$(dirname "$0")/lib.sh"

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
mkdir -p "$T/builds/Builds/Server" "$T/builds/Builds/Legacy"
ln -s "$TEST_SERVER" "$T/builds/Builds/Server/Game.x86_64"
ln -s "$TEST_SERVER" "$T/builds/Builds/Legacy/GameLegacy.x86_64"

# The usage settings of the file, used both to write it and to compute the density.
EU_SPEED=3000 EU_MEMORY=1024 EU_PER_CORE=1 EU_PER_MACHINE=10
NA_SPEED=1500 NA_MEMORY=512 NA_PER_MACHINE=16
cat > "$T/etc/fleets.d/studio.gsh" <<EOG
# Multiplay config-as-code of the studio (Create > Services > Multiplay Config).
version: 1.0
builds:
  Game Server:
    executableName: Game.x86_64
    buildPath: Builds/Server
    excludePaths:
      - Builds/Server/*_BurstDebugInformation_DoNotShip/**
  Game Server Legacy:
    executableName: GameLegacy.x86_64
    buildPath: Builds/Legacy
    excludePaths: []
buildConfigurations:
  Ranked:
    build: Game Server
    queryType: sqp
    binaryPath: Game.x86_64
    commandLine: -port \$\$port\$\$ -queryport \$\$query_port\$\$ -log \$\$log_dir\$\$/server.log -serverid \$\$serverid\$\$ -map \$\$map\$\$ -mode \$\$mode\$\$ -batchmode -nographics
    variables:
      map: de_dust2
      mode: ranked
      maxPlayers: 10
    readiness: true
  Casual Weekend:
    build: Game Server Legacy
    queryType: a2s
    commandLine: -port \$\$port\$\$ -queryport \$\$query_port\$\$ -log \$\$log_dir\$\$/server.log -serverid \$\$serverid\$\$ -map \$\$map\$\$ -mode \$\$mode\$\$
    variables:
      map: cs_office
      mode: casual
      maxPlayers: 16
    readiness: true
fleets:
  EU Fleet:
    buildConfigurations:
      - Ranked
      - Casual Weekend
    regions:
      Europe:
        minAvailable: 2
        maxServers: 8
    usageSettings:
      - hardwareType: METAL
        speed: $EU_SPEED
        memory: $EU_MEMORY
        maxServersPerCore: $EU_PER_CORE
        maxServersPerMachine: $EU_PER_MACHINE
  NA Fleet:
    buildConfigurations:
      - Casual Weekend
    regions:
      North America:
        minAvailable: 1
        maxServers: 20
    usageSettings:
      - hardwareType: METAL
        speed: $NA_SPEED
        memory: $NA_MEMORY
        maxServersPerMachine: $NA_PER_MACHINE
EOG

# The density, from the numbers above (SPEC §2 "Density", FleetUsageSetting): a server of EU
# Fleet takes 1 core (its build configurations set no `cores`), EU_SPEED MHz and EU_MEMORY MiB;
# it is alone here (NA Fleet is in another region), so it gets all it can take.
min() { local m=$1; shift; for v in "$@"; do [ "$v" -lt "$m" ] && m=$v; done; echo "$m"; }
eu_by_cpu=$((CPUS / 1))
eu_by_mem=$((MEM_MIB / EU_MEMORY))
eu_by_speed=$((CPUS * MHZ / EU_SPEED))
eu_by_core=$((EU_PER_CORE * CPUS))
EU_SLOTS=$(min $eu_by_cpu $eu_by_mem $eu_by_speed $eu_by_core $EU_PER_MACHINE)
note "EU Fleet: min(cpu $eu_by_cpu, memory $eu_by_mem, speed $eu_by_speed, per core $eu_by_core, per machine $EU_PER_MACHINE) = $EU_SLOTS"

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

# 3. Each server: argv word by word, environment, server.json, against what Multiplay gives.
# check_server ID EXE MAP MODE MAXPLAYERS QUERYTYPE UUID
check_server() {
        local id=$1 pid home port qport
        pid=$(sprop "$id" MainPID)
        home=$(sprop "$id" Home)
        port=$(sprop "$id" Port)
        qport=$(sprop "$id" QueryPort)
        python3 - "$pid" "$id" "$home" "$port" "$qport" "$GAME_BASE" "$QUERY_BASE" "$EU_SLOTS" \
                "$TEST_MACHINE_NUMBER" "$2" "$3" "$4" "$5" "$6" "$7" <<'PY' || fail "server of slot $id"
import json, sys
(pid, sid, home, port, qport, gbase, qbase, nslots, machine, exe, map_, mode, maxp, qtype,
 uuid) = sys.argv[1:]
# Ports: from the machine's bases, one pair per slot, the same in argv and server.json.
assert int(gbase) <= int(port) < int(gbase) + int(nslots), port
assert int(qbase) <= int(qport) < int(qbase) + int(nslots), qport
assert int(qport) - int(qbase) == int(port) - int(gbase), (port, qport)
argv = [a.decode() for a in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[:-1]]
expect = [exe, "-port", port, "-queryport", qport, "-log", f"{home}/logs/server.log",
          "-serverid", sid, "-map", map_, "-mode", mode]
if exe.endswith("/Game.x86_64"):
    expect += ["-batchmode", "-nographics"]
assert argv == expect, ("argv", argv, expect)
# The environment slotd promises (SPEC §3); Multiplay documents none, its servers read
# server.json.
env = dict(e.decode().split("=", 1)
           for e in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") if e)
want = {"HOME": home, "SERVER_ID": sid, "PORT": port, "QUERY_PORT": qport,
        "ALLOCATION_UUID": uuid, "SERVER_LOG_DIR": f"{home}/logs"}
for k, v in want.items():
    assert env.get(k) == v, ("environment", k, env.get(k), v)
assert env.get("NOTIFY_SOCKET", "").startswith("/"), ("NOTIFY_SOCKET", env.get("NOTIFY_SOCKET"))
# server.json: every value a string, the built-in keys and the configuration's variables.
sj = json.load(open(f"{home}/server.json"))
want = {"serverID": sid, "allocatedUUID": uuid, "machineID": machine, "fleetID": "EU-Fleet",
        "ip": "192.0.2.1", "ipv6": "", "port": port, "queryPort": qport, "queryType": qtype,
        "serverLogDir": f"{home}/logs", "regionID": "Europe", "regionName": "Europe",
        "map": map_, "mode": mode, "maxPlayers": maxp}
for k, v in want.items():
    assert sj.get(k) == v, ("server.json", k, sj.get(k), v)
assert all(isinstance(v, str) for v in sj.values()), ("server.json strings", sj)
extra = set(sj) - set(want) - {"localProxyUrl"}
assert not extra, ("server.json keys Multiplay does not write", extra)
PY
        PASSED=$((PASSED + 1))
}
RANKED_EXE=$T/builds/Builds/Server/Game.x86_64
CASUAL_EXE=$T/builds/Builds/Legacy/GameLegacy.x86_64
for id in "${ids[@]}"; do
        assert_eq "$(sprop "$id" BuildConfiguration)" Ranked "slot $id runs the default, Ranked"
        check_server "$id" "$RANKED_EXE" de_dust2 ranked 10 sqp ""
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
check_server "$A" "$CASUAL_EXE" cs_office casual 16 a2s "$uuid"
# The others run on untouched.
for id in "${ids[@]:1}"; do check_server "$id" "$RANKED_EXE" de_dust2 ranked 10 sqp ""; done
finish
