#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The test double fails where Unity's Go SDK v0.5.4 fails (tests/gameserver/README.md, "What
# the SDK mode mimics"): slotd-test-server alone, no slotd, no root.
#  1. server.json at start: what the SDK's decoding refuses stops the double with the SDK's
#     message and exit status, what it takes the double takes;
#  2. server.json changed under a running server: refused, it keeps what it had; empty, it
#     says nothing; null, it panics;
#  3. the query port: one challenge per client address, good for one query; every refused
#     query logged; SQP in both modes, A2S as the SDK's responder in SDK mode.
# Where ../shared/peers is beside the checkout (CI), the same cases run against Unity's own
# code too (unity-sgs for server.json, unity-peer for the queries) and must come out alike;
# without it those comparisons are skipped and the fixed expectations below still hold.
set -euo pipefail

: "${TEST_SERVER:?TEST_SERVER must name the slotd-test-server binary}"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PEERS=${PEERS_DIR:-$HERE/../../../shared/peers}
QUERY="$HERE/test-double-query.py"

exec 3>&2
fail() {
        echo "FAIL: $*" >&3
        exit 1
}
note() { echo "# $*"; }
command -v python3 >/dev/null || { echo "skipped: python3 is not installed"; exit 77; }

T=$(mktemp -d /tmp/slotd-double.XXXXXX)
PIDS=()
cleanup() {
        local pid
        for pid in "${PIDS[@]}"; do
                kill -KILL "$pid" 2>/dev/null || true
                wait "$pid" 2>/dev/null || true
        done
        rm -rf "$T"
}
trap cleanup EXIT
PASSED=0
assert_eq() {
        [ "$1" = "$2" ] || fail "$3: got '$1', expected '$2'"
        PASSED=$((PASSED + 1))
}
wait_until() { # SECONDS WHAT COMMAND...
        local deadline=$((SECONDS + $1)) what=$2
        shift 2
        until "$@"; do
                [ $SECONDS -lt "$deadline" ] || fail "timed out waiting for $what"
                sleep 0.05
        done
}
# free_udp_port: a UDP port free now, from 10000-19999 as lib.sh's free_port picks (not the
# kernel's ephemeral range, where the other tests' sockets bound to port 0 land: a port seen
# free there was taken by one of them before unity-sgs bound it, seen in CI).
free_udp_port() {
        python3 -c 'import random, socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(1000):
    p = random.randrange(10000, 20000)
    try:
        s.bind(("0.0.0.0", p))
    except OSError:
        continue
    print(p)
    break'
}
HAVE_PEERS=
[ -x "$PEERS/unity-sgs" ] && [ -x "$PEERS/unity-peer" ] && HAVE_PEERS=1
[ -n "$HAVE_PEERS" ] || note "skipped: the comparisons with Unity's SDK ($PEERS is not there)"

# server.json's values, all strings as slotd writes them, with nobody at the proxy; the
# query port is free (unity-sgs binds it before it looks for the proxy).
QP=$(free_udp_port)
BASE='"serverID": "12", "allocatedUUID": "", "machineID": "34", "fleetID": "f", "ip": "127.0.0.1", "ipv6": "", "port": "9000", "queryPort": "'$QP'", "queryType": "sqp", "serverLogDir": "logs", "localProxyUrl": "http://127.0.0.1:1", "regionID": "r", "regionName": "n"'

# ---- 1. server.json at start ----

# double_start JSON: how the double's start ends, "runs" or "exit N: <its error line>".
double_start() {
        local home="$T/start" pid rc=0 end=$((SECONDS + 5))
        rm -rf "$home" && mkdir -p "$home"
        printf '%s' "$1" > "$home/server.json"
        : > "$home/log"
        "$TEST_SERVER" --sdk --home "$home" --query-port 0 >> "$home/log" 2>&1 &
        pid=$!
        while kill -0 "$pid" 2>/dev/null && ! grep -q 'sdk: serverID=' "$home/log" &&
              [ $SECONDS -lt $end ]; do
                sleep 0.02
        done
        if grep -q 'sdk: serverID=' "$home/log"; then
                kill -KILL "$pid"
                wait "$pid" 2>/dev/null || true
                echo runs
                return
        fi
        wait "$pid" || rc=$?
        echo "exit $rc: $(grep -o 'sdk: .*' "$home/log" | grep -v 'unable to start' | tail -n 1 |
                           sed 's/^sdk: //')"
}

# sdk_start JSON: the same for unity-sgs: it always ends (nobody at the proxy), "runs" when
# the end was the proxy's, after server.json had been taken.
sdk_start() {
        local home="$T/sgs" rc=0 error
        rm -rf "$home" && mkdir -p "$home/logs"
        # a query port free now: QP, picked at the test's start, may be taken since
        printf '%s' "${1//\"queryPort\": \"$QP\"/\"queryPort\": \"$(free_udp_port)\"}" > "$home/server.json"
        (cd "$home" && HOME=$home timeout 10 "$PEERS/unity-sgs" -port 9000 -queryport 0 \
                -log "$home/logs" > "$home/out" 2>&1) || rc=$?
        error=$(python3 -c 'import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d.get("level") == "fatal": print(d["error"])' "$home/logs/server.log" 2>/dev/null | tail -n 1)
        case $error in
        *"error dial:"*) echo runs ;;
        *) echo "exit $rc: ${error#error starting server: }" ;;
        esac
}

# start_case NAME JSON EXPECTED [exact|status]: the double's start comes out as EXPECTED (or
# its exit status as EXPECTED's, "status"); and as Unity's: the same message, the field in
# front taken off ("exact"), or the same status.
start_case() {
        local name=$1 json=$2 want=$3 how=${4:-exact} got sdk mine
        got=$(double_start "$json")
        if [ "$how" = exact ]; then
                assert_eq "$got" "$want" "server.json $name: the double"
        else
                assert_eq "${got%%:*}" "${want%%:*}" "server.json $name: the double's status"
        fi
        [ -n "$HAVE_PEERS" ] || return 0
        sdk=$(sdk_start "$json")
        sdk=${sdk/error configuring event watcher: /}
        mine=$(sed -E 's/^(exit [0-9]+: )server\.json: ([A-Za-z]+: )?/\1/' <<<"$got")
        [ "$how" = exact ] || { sdk=${sdk%%:*}; mine=${mine%%:*}; }
        assert_eq "$mine" "$sdk" "server.json $name: the double against unity-sgs"
}

NUM='error decoding json: json: cannot unmarshal number into Go value of type string'
start_case "as slotd writes it" "{$BASE}" runs
start_case "a 32-hex machineID" "{$BASE, \"machineID\": \"3d1219c7c4c5404aaa1f6d2a48adfda4\"}" \
        'exit 1: server.json: machineID: error decoding json: json: invalid number literal, trying to unmarshal "\"3d1219c7c4c5404aaa1f6d2a48adfda4\"" into Number'
start_case "an empty serverID" "{$BASE, \"serverID\": \"\"}" \
        'exit 1: server.json: serverID: error decoding json: json: invalid number literal, trying to unmarshal "\"\"" into Number'
start_case "a bool serverID" "{$BASE, \"serverID\": true}" \
        'exit 1: server.json: serverID: error decoding json: json: cannot unmarshal bool into Go struct field Config.serverID of type json.Number'
start_case "a numeric serverID" "{$BASE, \"serverID\": 12}" "exit 1: server.json: serverID: $NUM"
start_case "a bad literal after a bad kind" "{$BASE, \"serverID\": true, \"port\": \"x\"}" \
        'exit 1: server.json: port: error decoding json: json: invalid number literal, trying to unmarshal "\"x\"" into Number'
start_case "a key in capitals" "{$BASE, \"QUERYPORT\": \"x\"}" \
        'exit 1: server.json: QUERYPORT: error decoding json: json: invalid number literal, trying to unmarshal "\"x\"" into Number'
start_case "a numeric fleetID" "{$BASE, \"fleetID\": 7}" \
        'exit 1: server.json: fleetID: error decoding json: json: cannot unmarshal number into Go struct field Config.fleetID of type string'
start_case "a numeric variable" "{$BASE, \"maxPlayers\": 16}" "exit 1: server.json: maxPlayers: $NUM"
start_case "an object variable" "{$BASE, \"map\": {}}" \
        'exit 1: server.json: map: error decoding json: json: cannot unmarshal object into Go value of type string'
start_case "a null variable" "{$BASE, \"map\": null}" runs
start_case "an unknown queryType" "{$BASE, \"queryType\": \"tf2e\"}" \
        'exit 1: server.json: queryType: supplied query type is not supported'
start_case "a fractional serverID" "{$BASE, \"serverID\": \"1.5\"}" \
        'exit 1: server.json: serverID: error parsing server ID: strconv.ParseInt: parsing "1.5": invalid syntax'
start_case "a serverID past int64" "{$BASE, \"serverID\": \"9223372036854775808\"}" \
        'exit 1: server.json: serverID: error parsing server ID: strconv.ParseInt: parsing "9223372036854775808": value out of range'
start_case "serverID -0" "{$BASE, \"serverID\": \"-0\"}" runs
start_case "a 1e3 machineID" "{$BASE, \"machineID\": \"1e3\"}" runs
start_case "the old content's tail after it" "{$BASE} \"allocatedUUID\": \"u\"}" runs
start_case "an empty file" "" 'exit 1: server.json: error decoding json: EOF'
start_case "a file cut short" "{$BASE, \"map\":" 'exit 1: server.json: error decoding json: unexpected EOF'
start_case "an array" "[]" \
        'exit 1: server.json: error decoding json: json: cannot unmarshal array into Go value of type server.Config'
start_case "null" "null" \
        'exit 2: panic: runtime error: invalid memory address or nil pointer dereference' status
start_case "a byte-order mark" $'\xef\xbb\xbf'"{$BASE}" "exit 1: (jansson's words)" status
mkdir -p "$T/none"
rc=0
"$TEST_SERVER" --sdk --home "$T/none" --query-port 0 > "$T/none/log" 2>&1 || rc=$?
assert_eq "$rc:$(grep -o 'sdk: error opening file: .*' "$T/none/log")" \
        "1:sdk: error opening file: open $T/none/server.json: No such file or directory" \
        "no server.json at all"

# ---- 2. server.json changed under a running SDK server ----
H="$T/reread"
mkdir -p "$H"
rewrite() { printf '%s' "$1" > "$H/server.json"; } # in place, as slotd does
state_is() { grep -qx "$1=$2" "$H/test-server.state" 2>/dev/null; }
logged() { grep -c -- "$1" "$H/log" || true; }
rewrite "{$BASE}"
"$TEST_SERVER" --sdk --home "$H" --query-port 0 > "$H/log" 2>&1 &
RPID=$!
PIDS+=($RPID)
wait_until 10 "the server's start" grep -q 'sdk: serverID=' "$H/log"
rewrite "{$BASE, \"allocatedUUID\": \"u-bad\", \"machineID\": \"abc\"}"
wait_until 10 "the refusal in its log" grep -q 'error parsing new configuration' "$H/log"
assert_eq "$(grep -o 'sdk: server.json: error parsing new configuration: .*' "$H/log")" \
        'sdk: server.json: error parsing new configuration: machineID: error decoding json: json: invalid number literal, trying to unmarshal "\"abc\"" into Number; keeping the previous configuration, as Unity'"'"'s Go SDK v0.5.4' \
        "a refused re-read's log line"
assert_eq "$(sed -n 's/^allocatedUUID=//p' "$H/test-server.state")" "" \
        "allocatedUUID after a refused re-read"
rewrite ""
rewrite "{$BASE, \"allocatedUUID\": \"u-1\"}"
wait_until 10 "allocatedUUID u-1" state_is allocatedUUID u-1
assert_eq "$(logged 'error parsing new configuration')" 1 "log lines of refused re-reads (none for an empty file)"
kill -0 $RPID || fail "the server ended on a re-read"
rewrite "null"
rc=0
wait $RPID || rc=$?
assert_eq "$rc" 2 "the exit status after a re-read of null (the SDK's watcher panics)"

# ---- 3. Queries ----
# test-double-query.py's lines for WHAT (sqp, a2s), then "error: ..." per refused query.
query_run() { # WHAT PORT LOGFILE
        python3 "$QUERY" "$1" "$2"
        sleep 0.2
        sed -n 's/.*query: error responding: \(.*\) ([0-9.:]*)$/error: \1/p' "$3"
}
double_queries() { # WHAT MODE (plain|sdk)
        local what=$1 mode=$2 home="$T/q-$1-$2" port pid
        port=$(free_udp_port)
        mkdir -p "$home"
        printf '%s' "{$BASE, \"queryType\": \"$what\", \"queryPort\": \"$port\"}" > "$home/server.json"
        if [ "$mode" = sdk ]; then
                "$TEST_SERVER" --sdk --home "$home" --query-port "$port" > "$home/log" 2>&1 &
        else
                "$TEST_SERVER" --home "$home" --query-port "$port" > "$home/log" 2>&1 &
        fi
        pid=$!
        PIDS+=($pid)
        wait_until 10 "the double's query socket" grep -qs '^query_bound=1' "$home/test-server.state"
        query_run "$what" "$port" "$home/log"
        kill -KILL "$pid"
}
peer_queries() { # WHAT
        local what=$1 home="$T/peer-$1" port pid
        port=$(free_udp_port)
        mkdir -p "$home"
        printf '{"port": "9000", "queryPort": "%s"}' "$port" > "$home/server.json"
        SERVER_JSON="$home/server.json" "$PEERS/unity-peer" "$what" 2> "$home/err" &
        pid=$!
        PIDS+=($pid)
        wait_until 10 "unity-peer" grep -q 'on udp' "$home/err"
        python3 "$QUERY" "$what" "$port"
        sleep 0.2
        sed -n 's/^unity-peer: [0-9.:]*: \(.*\)$/error: \1/p' "$home/err"
        kill -KILL "$pid"
}

SQP_WANT='challenge: challenge
query: server info
the same query again: nothing
a lone 00: challenge
a wrong challenge: nothing
the right one after it: nothing
challenge: challenge
version 0: server info
challenge: challenge
version 2: server info
challenge: challenge
version 3: nothing
challenge: challenge
version 256: nothing
version 1 after a refused version: nothing
challenge: challenge
no chunk asked for: header only
challenge: challenge
another port'"'"'s query: nothing
the challenger'"'"'s own: server info
challenge: challenge
01 and the challenge, nothing more: header only
challenge: challenge
another challenge: challenge
the first of the two: nothing
an empty datagram: challenge
00000000 01: nothing
junk: nothing'
SQP_ERRORS='error: no challenge
error: challenge mismatch
error: no challenge
error: unsupported sqp version: 3
error: unsupported sqp version: 256
error: no challenge
error: no challenge
error: challenge mismatch
error: unsupported query
error: unsupported query'
A2S_WANT='request: challenge
with the challenge: info
with it again: nothing
with ffffffff: nothing
request: challenge
a wrong challenge: nothing
an empty payload: challenge
another payload, the challenge: info
a zero challenge: challenge
two bytes of challenge: nothing
A2S_PLAYER: nothing
an SQP challenge request: nothing
error: no challenge
error: no challenge
error: challenge mismatch
error: challenge mismatch
error: unsupported query: ffffffff56
error: unsupported query: 0000000000'

got=$(double_queries sqp sdk)
assert_eq "$got" "$SQP_WANT"$'\n'"$SQP_ERRORS" "SQP, SDK mode: answers and logged refusals"
# The plain mode keeps SQP's challenges as strictly, and drops what is neither protocol's.
got=$(double_queries sqp plain)
assert_eq "$got" "$SQP_WANT"$'\n'"$(head -n 9 <<<"$SQP_ERRORS")" "SQP, plain mode"
got=$(double_queries a2s sdk)
assert_eq "$got" "$A2S_WANT" "A2S, SDK mode: answers and logged refusals"
if [ -n "$HAVE_PEERS" ]; then
        assert_eq "$(peer_queries sqp)" "$SQP_WANT"$'\n'"$SQP_ERRORS" "SQP: unity-peer"
        assert_eq "$(peer_queries a2s)" "$A2S_WANT" "A2S: unity-peer"
fi
echo "ok: $PASSED assertions"
