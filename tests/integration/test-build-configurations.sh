#!/usr/bin/env bash
# Build configurations as Multiplay has them (issue 13): a fleet with [build_configuration ID]
# sections runs each with its own arguments and query type, writes its variables into
# server.json, restarts an idle server into another configuration on Allocate, and refuses an
# ID it does not define; AllocateWithOptions' restart restarts even into the configuration it
# runs. The region keys reach server.json too.
. "$(dirname "$0")/lib.sh"

MACHINE_CPUS=4 write_config
write_fleet mp "servers = 2" "[ports]" "game_base = 25800" "query_base = 25850" \
        "[build_configuration 7]" "args = --server-id \${SERVER_ID} --port \${PORT} --query-port \${QUERY_PORT} --map seven" \
        "query = a2s" "variables.maxPlayers = 16" "variables.map = seven" \
        "variables.gameType = duel"
fleet_key mp "region_id = eu-west-1"
fleet_key mp "region_name = Europe West"
fleet_key mp "build_configuration = default"
start_slotd
set -- $(list_slots | awk '$2 == "mp" { print $1 }')
A=$1 B=$2
for id in $A $B; do wait_prop $id ProcessState running; done

# 1. The default configuration: no variables, the region.
assert_eq "$(sprop $A BuildConfiguration)" default "BuildConfiguration at start"
assert_eq "$(sprop $A BuildConfigurations)" '2 "default" "7"' \
        "BuildConfigurations: the fleet's, the default's first"
assert_eq "$(server_json $A regionID)" eu-west-1 "regionID"
assert_eq "$(server_json $A regionName)" "Europe West" "regionName"
assert_eq "$(server_json $A queryType)" "" "queryType of the default"
assert_ok "no variables in the default's server.json" \
        bash -c "! grep -q maxPlayers '$(sprop $A Home)/server.json'"

# 2. Allocate into configuration 7: the idle server restarts into it, with its arguments,
# its query type and its variables, as strings after the fixed keys.
pid=$(sprop $A MainPID)
scall $A Allocate ss match-7 7 >/dev/null
wait_new_pid $A "$pid"
wait_prop $A ProcessState running
assert_eq "$(sprop $A BuildConfiguration)" 7 "BuildConfiguration after Allocate"
assert_ok "the server runs configuration 7's arguments" \
        grep -qzx -- seven /proc/$(sprop $A MainPID)/cmdline
assert_eq "$(server_json $A maxPlayers)" 16 "variable maxPlayers"
assert_eq "$(server_json $A gameType)" duel "variable gameType"
assert_eq "$(server_json $A queryType)" a2s "queryType of configuration 7"
assert_eq "$(server_json $A allocatedUUID)" match-7 "allocatedUUID"
python3 - "$(sprop $A Home)/server.json" <<'PY' || fail "server.json key order"
import json, sys
keys = list(json.load(open(sys.argv[1])))
assert keys[:14] == ["serverID", "allocatedUUID", "machineID", "fleetID", "ip", "ipv6", "port",
                     "queryPort", "queryType", "serverLogDir", "serverFilesDir", "regionID",
                     "regionName", "maxPlayers"], keys
PY
PASSED=$((PASSED + 1))

# 3. An ID the fleet does not define is refused, by the Manager and by a slot.
expect_merr InvalidArgument Allocate string:mp string:match-8 string:8
expect_serr InvalidArgument $B Allocate string:match-8 string:8
assert_eq "$(sprop $B AllocationUUID)" "" "a refused allocation changed nothing"

# 4. The Manager's Allocate finds the ready server of the requested configuration first.
mcall Deallocate s match-7 >/dev/null
assert_eq "$(allocate mp match-7b 7)" "$A" "the server already running configuration 7"

# 5. AllocateWithOptions' restart (issue 25): a server that runs the configuration asked
# restarts into it before it is allocated; without the option it keeps running.
wait_prop $B ProcessState running
pid=$(sprop $B MainPID)
scall $B AllocateWithOptions 'ssa{sv}' match-keep default 0 >/dev/null
assert_eq "$(sprop $B MainPID)" "$pid" "without restart, the server of the same configuration runs on"
scall $B Deallocate >/dev/null
wait_prop $B ProcessState running
pid=$(sprop $B MainPID)
scall $B AllocateWithOptions 'ssa{sv}' match-r default 1 restart b true >/dev/null
wait_new_pid $B "$pid"
wait_prop $B ProcessState running
assert_eq "$(sprop $B AllocationUUID)" match-r "the allocation holds after its restart"
assert_eq "$(sprop $B BuildConfiguration)" default "in the configuration asked"
assert_eq "$(server_json $B allocatedUUID)" match-r "server.json names it"
out=$(scall $A AllocateWithOptions 'ssa{sv}' match-x 7 1 restart s yes 2>&1) &&
        fail "restart of another type accepted"
assert_ok "restart of another type: InvalidArgument ($out)" grep -q "'restart' is a boolean" <<<"$out"

# 6. --check lists the configurations.
out=$("$SLOTD" --check --config "$T/etc/slotd.ini" 2>&1)
assert_ok "--check shows configuration 7 ($out)" grep -q "build configuration 7: .*query a2s, 3 variables" <<<"$out"
finish
