# SPDX-License-Identifier: MIT
# The Multiplay config-as-code file of test-migration.sh and test-migration-fleet.sh (issue 26
# point 5): what a studio leaving Multiplay has, typed out as it would be (two builds, two
# build configurations with variables and $$…$$ launch parameters, two fleets in two regions,
# METAL usage settings, names with spaces). Sourced after lib.sh.
#
# migration_gsh FILE: writes it. Its usage settings are the variables below, which the tests
# also compute the density from. The builds are under supervisor.builds_dir: migration_builds
# DIR lays them out there as a studio's build pipeline does (the test server as both).
# The usage settings of the file.
EU_SPEED=3000 EU_MEMORY=1024 EU_PER_CORE=1 EU_PER_MACHINE=10
NA_SPEED=1500 NA_MEMORY=512 NA_PER_MACHINE=16
migration_gsh() {
        cat > "$1" <<EOG
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
}
migration_builds() {
        mkdir -p "$1/Builds/Server" "$1/Builds/Legacy"
        ln -s "$TEST_SERVER" "$1/Builds/Server/Game.x86_64"
        ln -s "$TEST_SERVER" "$1/Builds/Legacy/GameLegacy.x86_64"
}
# min N...: the least of the integers.
min() { local m=$1 v; shift; for v in "$@"; do [ "$v" -lt "$m" ] && m=$v; done; echo "$m"; }
# migration_slots FLEET CPUS MHZ MEM_MIB: the slots fleet EU or NA gets alone on a machine of
# CPUS cores of MHZ and MEM_MIB MiB (SPEC §2 "Density", Unity's FleetUsageSetting): a server
# takes 1 core (the build configurations set no `cores`), the fleet's speed MHz and memory
# MiB, at most maxServersPerCore a core and maxServersPerMachine; each bound is noted on
# stderr.
migration_slots() {
        local f=$1 cpus=$2 mhz=$3 mem=$4 speed memory per_core per_machine
        if [ "$f" = EU ]; then
                speed=$EU_SPEED memory=$EU_MEMORY per_core=$EU_PER_CORE per_machine=$EU_PER_MACHINE
        else
                speed=$NA_SPEED memory=$NA_MEMORY per_core= per_machine=$NA_PER_MACHINE
        fi
        local by_cpu=$((cpus / 1)) by_mem=$((mem / memory)) by_speed=$((cpus * mhz / speed))
        local by_core=${per_core:+$((per_core * cpus))}
        local n
        n=$(min $by_cpu $by_mem $by_speed $by_core $per_machine)
        echo "# $f Fleet on $cpus × $mhz MHz, $mem MiB: min(cpu $by_cpu, memory $by_mem," \
                "speed $by_speed, per core ${by_core:-none}, per machine $per_machine) = $n" >&2
        echo "$n"
}
# migration_check_server ID EXE MAP MODE MAXPLAYERS QUERYTYPE UUID [ENV_UUID]: slot ID's server (of the
# slotd on $BUS) against what Multiplay would have given it: argv word by word (EXE and the
# build configuration's commandLine with its launch parameters expanded), the environment
# slotd promises (SPEC §3; Multiplay documents none: its servers read server.json), and
# server.json (Unity's "server.json" and "Configuration variables" pages: every value a
# string, the built-in keys, then the variables). The machine: MIG_FLEET (slotd's name of the
# fleet), MIG_REGION, MIG_IP, MIG_MACHINE (its number), GAME_BASE and QUERY_BASE (its port
# bases) and MIG_SLOTS (the fleet's slots on it). ENV_UUID (default UUID): ALLOCATION_UUID of
# the environment, the allocation the server was started for ("" when allocated while it ran).
migration_check_server() {
        local id=$1 pid home port qport
        pid=$(sprop "$id" MainPID)
        home=$(sprop "$id" Home)
        port=$(sprop "$id" Port)
        qport=$(sprop "$id" QueryPort)
        python3 - "$pid" "$id" "$home" "$port" "$qport" "$GAME_BASE" "$QUERY_BASE" "$MIG_SLOTS" \
                "$MIG_MACHINE" "$MIG_FLEET" "$MIG_REGION" "$MIG_IP" "$2" "$3" "$4" "$5" "$6" "$7" \
                "${8-$7}" <<'PY' || fail "server of slot $id"
import json, sys
(pid, sid, home, port, qport, gbase, qbase, nslots, machine, fleet, region, ip, exe, map_, mode,
 maxp, qtype, uuid, env_uuid) = sys.argv[1:]
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
        "ALLOCATION_UUID": env_uuid, "SERVER_LOG_DIR": f"{home}/logs"}
for k, v in want.items():
    assert env.get(k) == v, ("environment", k, env.get(k), v)
assert env.get("NOTIFY_SOCKET", "").startswith("/"), ("NOTIFY_SOCKET", env.get("NOTIFY_SOCKET"))
# server.json: every value a string, the built-in keys and the configuration's variables.
sj = json.load(open(f"{home}/server.json"))
want = {"serverID": sid, "allocatedUUID": uuid, "machineID": machine, "fleetID": fleet,
        "ip": ip, "ipv6": "", "port": port, "queryPort": qport, "queryType": qtype,
        "serverLogDir": f"{home}/logs", "serverFilesDir": home, "regionID": region,
        "regionName": region,
        "map": map_, "mode": mode, "maxPlayers": maxp}
for k, v in want.items():
    assert sj.get(k) == v, ("server.json", k, sj.get(k), v)
assert all(isinstance(v, str) for v in sj.values()), ("server.json strings", sj)
extra = set(sj) - set(want) - {"localProxyUrl"}
assert not extra, ("server.json keys Multiplay does not write", extra)
PY
        PASSED=$((PASSED + 1))
}
