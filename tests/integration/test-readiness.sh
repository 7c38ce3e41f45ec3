#!/usr/bin/env bash
# checks.readiness (issue 13): servers that never heard of sd_notify. With 'exec' a server is
# running once exec'd; with 'query' (the default where checks.query is set) once it first
# answers its query protocol, and only then checked; the defaults follow checks.query; a
# server that never gets ready is ended by checks.start_timeout whatever the source.
. "$(dirname "$0")/lib.sh"

MACHINE_CPUS=4 write_config
# The test server with --no-ready never sends READY=1, as an SDK server.
READINESS=default write_fleet plain "servers = 1" "[ports]" "game_base = 25600" "query_base = 25650"
fleet_args plain "--no-ready"
READINESS=default write_fleet sqp "servers = 1" "[ports]" "game_base = 25610" "query_base = 25660" \
        "[checks]" "query = sqp" "interval = 1s" "query_timeout = 500ms"
fleet_args sqp "--no-ready --no-query"
READINESS=notify write_fleet slow "servers = 1" "[ports]" "game_base = 25620" "query_base = 25670" \
        "[checks]" "start_timeout = 1s"
fleet_args slow "--no-ready"
start_slotd
P=$(list_slots | awk '$2 == "plain" { print $1 }')
Q=$(list_slots | awk '$2 == "sqp" { print $1 }')
W=$(list_slots | awk '$2 == "slow" { print $1 }')

# 1. No query protocol: the default is exec, running without READY=1.
wait_prop $P ProcessState running
assert_eq "$(sprop $P Ready)" true "Ready of an exec'd server"
grep -q "slot $P (plain): exec'd (checks.readiness = exec)" "$T/slotd.log" ||
        fail "no log line for the exec readiness"

# 2. With SQP the default is query: starting while the server drops every query, with no
# strike (it is not running, so not checked), running at its first answer.
wait_server $Q
stays_true 2000 "slot $Q starting while silent" prop_is $Q ProcessState starting
assert_eq "$(sprop $Q Strikes)" "0" "strikes of a starting server"
control $Q "query on"
wait_prop $Q ProcessState running 10
grep -q "slot $Q (sqp): first valid query answer (checks.readiness = query)" "$T/slotd.log" ||
        fail "no log line for the query readiness"
# From now on it is checked: silence is a strike.
control $Q "query off"
wait_until 10 "a query strike of slot $Q" bash -c "busctl --address='$BUS' get-property \
        org.slotd.Supervisor1 /org/slotd/Supervisor1/slot/$Q org.slotd.Supervisor1.Slot \
        Strikes | grep -q query"

# 3. checks.start_timeout judges every source: notify with no READY=1 is a start-timeout.
wait_until 20 "slot $W ended by its start timeout" grep -q \
        "slot $W (slow): Not ready (checks.readiness = notify) within checks.start_timeout" \
        "$T/slotd.log"

# 4. The plan shows each fleet's source.
out=$("$SLOTD" --check --config "$T/etc/slotd.ini" 2>&1)
assert_ok "--check shows readiness exec" grep -q "readiness exec" <<<"$out"
assert_ok "--check shows readiness query" grep -q "readiness query" <<<"$out"
finish
