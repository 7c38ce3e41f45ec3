#!/usr/bin/env bash
# Multiplay config-as-code (issue 26, points 1 and 4): slotd runs a studio's .gsh file from
# fleets.d beside the INI fleets. A fleet takes this machine's region (machine.region); one in
# other regions gets no slots, as --check says. Each server runs its build configuration's
# binaryPath under supervisor.builds_dir with its commandLine as argv, and server.json carries
# the region and the build configuration's variables. Reload applies a changed file with the
# INI fleets' rules and refuses a bad one with FILE:LINE:COLUMN. The $$…$$ launch parameters
# are left to their expansion (config/expand.c, not this test's): only the words around them
# are checked.
. "$(dirname "$0")/lib.sh"

MACHINE_CPUS=4 MACHINE_MEMORY=4G write_config
config_key machine "region = Europe"
# Ports of their own: other tests run at the same time (the file has no ports).
config_key machine "game_port_base = 38100"
config_key machine "query_port_base = 38150"
config_key supervisor "builds_dir = $T/builds"
mkdir -p "$T/builds/Builds/Server"
ln -s "$TEST_SERVER" "$T/builds/Builds/Server/Game.x86_64"
# The test server sends READY=1; readiness false (exec) judges a start without it. It reads
# its ports from server.json.
gsh() {
        cat > "$T/etc/fleets.d/game.gsh" <<EOG
version: 1.0
builds:
  LinuxServer:
    executableName: Game.x86_64
    buildPath: Builds/Server
    excludePaths: []
buildConfigurations:
  ranked:
    build: LinuxServer
    queryType: sqp
    binaryPath: Game.x86_64
    commandLine: --server-id \${SERVER_ID} -logFile \$\$log_dir\$\$/server.log -batchmode -nographics
    variables:
      map: $1
      maxPlayers: 10
    readiness: false
    memoryMiB: 512
  casual:
    build: LinuxServer
    queryType: sqp
    commandLine: --server-id \${SERVER_ID} -mode casual
    variables: {mode: casual}
    readiness: false
    memoryMiB: 512
fleets:
  eu-fleet:
    buildConfigurations: [ranked, casual]
    regions:
      Europe: {minAvailable: 1, maxServers: 4}
      North America: {minAvailable: 1, maxServers: 2}
    usageSettings:
      - hardwareType: METAL
        speed: 1000
        memory: 512
  us-fleet:
    buildConfigurations: [casual]
    regions:
      North America: {minAvailable: 1, maxServers: 2}
EOG
}
gsh de_dust

# 1. --check: what the file becomes, and the fleet that runs elsewhere.
out=$("$SLOTD" --check --config "$T/etc/slotd.ini" 2>&1) || fail "--check failed: $out"
note "$out"
assert_ok "--check: eu-fleet from game.gsh" grep -q "^fleet eu-fleet ($T/etc/fleets.d/game.gsh): [0-9]* slots, 1 cpus and 512M memory each" <<<"$out"
assert_ok "--check: ranked is the default, with its binary" grep -qF "build configuration ranked (default): build $T/builds/Builds/Server/Game.x86_64, query sqp, 2 variables" <<<"$out"
assert_ok "--check: ranked's variables" grep -qx "    variable map = de_dust" <<<"$out"
assert_ok "--check: the usage settings" grep -q "usage settings: speed 1000 MHz" <<<"$out"
assert_ok "--check: this machine's region" grep -qx "  region Europe: minAvailable 1, maxServers 4 (this machine's)" <<<"$out"
assert_ok "--check: us-fleet runs elsewhere" grep -qF "game.gsh:35:3: fleets.us-fleet: gets no slots on this machine: its regions are North America, and machine.region is 'Europe'" <<<"$out"
planned=$(sed -n 's/^fleet eu-fleet .*: \([0-9]*\) slots,.*/\1/p' <<<"$out")
assert_ok "--check: the ports from machine.game_port_base and query_port_base" grep -q "^fleet eu-fleet .*, ports 38100-$((38100 + planned - 1)), query ports 38150-$((38150 + planned - 1)), " <<<"$out"

# 2. The slots: eu-fleet's as planned, none of us-fleet's.
start_slotd
set -- $(list_slots | awk '$2 == "eu-fleet" { print $1 }')
assert_eq "$#" "$planned" "eu-fleet's slots, as --check planned"
assert_eq "$(list_slots | awk '$2 != "eu-fleet"' | wc -l)" 0 "no slot of another fleet"
assert_ok "slotd says us-fleet gets no slots here" grep -qF "game.gsh:35:3: fleets.us-fleet: gets no slots on this machine" "$T/slotd.log"
A=$1
for id in "$@"; do wait_prop $id ProcessState running; done

# 3. A server of the default build configuration: its argv and server.json.
argv() { tr '\0' '\n' < /proc/$(sprop $1 MainPID)/cmdline; }
mapfile -t words < <(argv $A)
assert_eq "${words[0]}" "$T/builds/Builds/Server/Game.x86_64" "argv[0]: binaryPath under builds_dir"
assert_eq "${words[1]} ${words[2]} ${words[3]}" "--server-id $(server_json $A serverID) -logFile" "argv 1-3"
assert_ok "argv[4] is the log file (${words[4]})" test "${words[4]%/server.log}" != "${words[4]}"
assert_eq "${words[*]:5}" "-batchmode -nographics" "argv 5-6"
assert_eq "${#words[@]}" 7 "argc"
assert_eq "$(sprop $A BuildConfiguration)" ranked "BuildConfiguration"
assert_eq "$(server_json $A regionID)" Europe "regionID: the region's name"
assert_eq "$(server_json $A regionName)" Europe "regionName"
assert_eq "$(server_json $A queryType)" sqp "queryType"
assert_eq "$(server_json $A map)" de_dust "variable map"
assert_eq "$(server_json $A maxPlayers)" 10 "variable maxPlayers"

# 4. Allocate into the other build configuration: its own argv and variables.
pid=$(sprop $A MainPID)
scall $A Allocate ss match-1 casual >/dev/null
wait_new_pid $A "$pid"
wait_prop $A ProcessState running
assert_eq "$(argv $A | tail -n 2 | paste -sd' ')" "-mode casual" "casual's argv"
assert_eq "$(server_json $A mode)" casual "casual's variable"
assert_eq "$(server_json $A allocatedUUID)" match-1 "allocatedUUID"

# 5. Reload with a changed file: the idle servers of the default restart into it at once; the
# allocated one keeps running.
B=$2
[ -n "$B" ] || fail "eu-fleet needs two slots here"
pid_b=$(sprop $B MainPID)
pid_a=$(sprop $A MainPID)
gsh de_inferno
mcall Reload >/dev/null
wait_new_pid $B "$pid_b"
wait_prop $B ProcessState running
wait_until 20 "slot $B's server.json has the new map" server_json_is $B map de_inferno
assert_eq "$(sprop $A MainPID)" "$pid_a" "the allocated server runs on"

# 6. A bad file is refused with FILE:LINE:COLUMN, and the running config stays.
sed -i 's/hardwareType: METAL/hardwareType: CLOUD/' "$T/etc/fleets.d/game.gsh"
out=$(mcall Reload 2>&1) && fail "Reload of a CLOUD fleet succeeded"
assert_ok "Reload refused with the place ($out)" grep -qF "game.gsh:32:23: fleets.eu-fleet.usageSettings[0].hardwareType: CLOUD is not supported" <<<"$out"
assert_eq "$(list_slots | awk '$2 == "eu-fleet"' | wc -l)" "$planned" "the slots stay"
assert_eq "$(server_json $B map)" de_inferno "the running config stays"
finish
