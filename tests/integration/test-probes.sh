#!/usr/bin/env bash
# Query-protocol probes (SPEC §6, checks.query): every checks.interval slotd asks the server
# on 127.0.0.1:QueryPort (SQP, or A2S_INFO with or without the challenge round); the answer
# fills QueryPlayers, QueryMaxPlayers, QueryMap, QueryName; no valid answer within
# query_timeout is a `query` strike, and three of them end the server as misbehaving.
. "$(dirname "$0")/lib.sh"
SIGS="$T/signals.json"

MACHINE_CPUS=4 write_config
# Generous timing for a loaded host (scaled for the TCG VM); the CPU check is out of the way.
probe_fleet() { # NAME QUERY GAME_BASE QUERY_BASE SERVER_ARGS
        USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet "$1" "servers = 1" \
                "[ports]" "game_base = $3" "query_base = $4" \
                "[checks]" "interval = $((1000 * TIME_SCALE))ms" "query = $2" \
                "query_timeout = $((500 * TIME_SCALE))ms" \
                "cpu_tolerance = 1000%" \
                "strikes = 3" "window = 10m" "[crash]" "restarts = 5" "window = 10m"
        fleet_args "$1" "$5"
}
# Slots in file-name order: a2s 0, a2sc 1, sqp 2.
probe_fleet a2s a2s 32100 32150 "--players 2 --max-players 10 --map de_dust --name a2s-plain"
probe_fleet a2sc a2s 32110 32160 "--a2s-challenge --players 7 --max-players 300 --map cs_office"
probe_fleet sqp sqp 32120 32170 "--players 3 --max-players 24 --map arena --name sqp-server"
start_slotd
start_monitor "$SIGS"
for id in 0 1 2; do
        wait_prop $id ProcessState running
        wait_server $id
done

# query_off ID PLAYERS: the server of slot ID stops answering: query strikes 1, 2, 3, then
# SIGSEGV, a crash with reason misbehaviour, a restart; the new server's answers (PLAYERS
# from its arguments again) fill the properties anew.
query_off() {
        local id=$1 players=$2 pid
        pid=$(sprop "$id" MainPID)
        # Answered until now: no query strike so far (the first one below counts 1).
        assert_eq "$(sprop "$id" Strikes)" 0 "slot $id Strikes while answering"
        control "$id" "query off"
        wait_sig "$SIGS" Misbehaved "$id query 1"
        wait_sig "$SIGS" Crashed "$id 0 11 misbehaviour"
        assert_eq "$(sig_args "$SIGS" Misbehaved | grep "^$id " | head -n 3 | paste -sd,)" \
                "$id query 1,$id query 2,$id query 3" "slot $id Misbehaved signals"
        assert_ok "slot $id: log names the timeout" grep -q \
                "slot $id ([a-z0-9]*): Check query failed: .* query on port $(sprop "$id" QueryPort): no valid answer in checks.query_timeout" "$T/slotd.log"
        wait_new_pid "$id" "$pid"
        wait_prop "$id" ProcessState running
        assert_eq "$(sprops "$id" FailureReason LastExitSignal Strikes)" "misbehaviour|11|0" \
                "slot $id FailureReason|LastExitSignal|Strikes of the new process"
        wait_prop "$id" QueryPlayers "$players"
}

# ---- 3a. SQP: the answers fill the properties; a silent server is struck out ----
wait_prop 2 QueryMap arena
assert_eq "$(sprops 2 QueryPlayers QueryMaxPlayers QueryName)" "3|24|sqp-server" \
        "SQP QueryPlayers|QueryMaxPlayers|QueryName"
# The properties follow the last answer.
control 2 "players 5"
control 2 "map harbour"
wait_prop 2 QueryPlayers 5
wait_prop 2 QueryMap harbour
answered() { [ "$(server_state "$1" queries_answered)" -ge 1 ]; }
wait_until 10 "the server counted its answers (written once a second)" answered 2
PASSED=$((PASSED + 1))
# Each probe asks for a challenge of its own: the test server keeps SQP's challenges as Unity's
# Go SDK does (proto/base.go: one per client address, taken by the query it allows), so a
# probe that reused one would get no answer, and "no challenge" in the server's log. Over
# several rounds (a challenge and a query each) it refused nothing.
rounds() { [ "$(server_state 2 queries_answered)" -ge 8 ]; }
wait_until $((10 * TIME_SCALE)) "4 rounds of SQP probes answered" rounds
assert_eq "$(grep -c 'query: error responding' "$(sprop 2 Home)/logs/server.log" || true)" 0 \
        "queries the SQP server refused (\"no challenge\": a challenge reused)"
query_off 2 3
assert_eq "$(sprop 2 QueryMap)" arena "SQP QueryMap of the new server"

# ---- 3b. A2S_INFO, plain ----
wait_prop 0 QueryMap de_dust
assert_eq "$(sprops 0 QueryPlayers QueryMaxPlayers QueryName)" "2|10|a2s-plain" \
        "A2S QueryPlayers|QueryMaxPlayers|QueryName"
control 0 "players 4"
wait_prop 0 QueryPlayers 4
query_off 0 2

# ---- 3c. A2S_INFO with the S2C_CHALLENGE round ----
wait_prop 1 QueryMap cs_office
# A2S carries the player counts in a byte: the server caps 300 at 255. The name is the
# server's default.
assert_eq "$(sprops 1 QueryPlayers QueryMaxPlayers QueryName)" "7|255|slotd-test-1" \
        "A2S (challenge) QueryPlayers|QueryMaxPlayers|QueryName"
assert_eq "$(server_state 1 a2s_challenge)" 1 "the server requires the challenge"
query_off 1 7

# No other check struck anyone, and nothing was struck twice over.
assert_eq "$(sig_args "$SIGS" Misbehaved | grep -vc ' query ')" 0 "Misbehaved signals of other checks"
for id in 0 1 2; do
        assert_eq "$(sig_count "$SIGS" Crashed $id)" 1 "Crashed signals of slot $id"
done
finish
