# SPDX-License-Identifier: MIT
# Unity's own game server and query responders under the real slotd (issue 23), sourced after
# lib.sh by test-unity-sdk.sh and test-unity-sdk-fleet.sh. The binaries are third-party, in
# ../shared/peers beside the checkout (see its README): CI has them, a user's clone does not,
# and then the tests say `skipped:`. Nothing of them is copied into the project.
#
#   unity-sgs   Unity's example game server (simple-game-server-go) on the Go SDK v0.5.4: reads
#               $HOME/server.json, subscribes to the local proxy's events, answers SQP, logs
#               JSON lines to ${SERVER_LOG_DIR}/server.log ("msg":"started" once subscribed,
#               "allocated" / "deallocated" with "allocation_uuid"), opens its game port (TCP)
#               once allocated and reports itself ready for players 20 s later. SIGTERM while
#               not allocated makes it panic (exit 2), a bug of Unity's example: the tests'
#               cleanup (lib.sh) stops slotd, which leaves the servers running, and ends them
#               with cgroup.kill, so it never shows.
#   unity-peer  the SDK's own SQP and A2S responders: `unity-peer sqp|a2s`, name unity-peer,
#               map arena, 24 max players, 7 players.

UNITY_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
UNITY_PEERS=$(dirname "$UNITY_TOP")/shared/peers
UNITY_SGS=$UNITY_PEERS/unity-sgs
UNITY_PEER=$UNITY_PEERS/unity-peer
[ -x "$UNITY_SGS" ] && [ -x "$UNITY_PEER" ] ||
        skip "Unity's peers are not at $UNITY_PEERS (../shared/peers beside the checkout: CI has them, a clone does not)"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
# The builds run as fleet.user, nobody: a directory of theirs it cannot search is this
# machine's setup, not slotd's doing.
setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$UNITY_SGS" ||
        skip "user nobody cannot execute $UNITY_SGS (the peers' directories must be searchable by fleet.user)"
command -v curl >/dev/null || skip "curl is not installed"

# The check interval and its probe's timeout. 1 s on a host; in the TCG VM (TIME_SCALE 3) a
# Go server's answer, emulated ~10x slower beside other tests on 2 vCPUs, can take longer than
# 500 ms, which would be a strike of the host's doing: the interval and the timeout stretch
# together, the timeout staying half the interval (shorter than it, as it must be).
INTERVAL_S=$TIME_SCALE
QUERY_TIMEOUT_MS=$((500 * TIME_SCALE))
# An event (slotd -> slotd-proxy -> WebSocket -> the SDK) is a matter of milliseconds; a few
# seconds when nothing was restarted, a second or two (scaled) after a restart of slotd.
EVENT_S=$((5 * TIME_SCALE))
EVENT_AFTER_RESTART_S=$((2 * TIME_SCALE))
# unity-sgs's readyTimeout (server.json's, default 20 s) plus room for the VM.
READY_S=$((20 + 10 * TIME_SCALE))

ms() { echo $((${EPOCHREALTIME/./} / 1000)); }
uuid() { cat /proc/sys/kernel/random/uuid; }

# poll SECONDS COMMAND...: COMMAND succeeds within SECONDS (every 20 ms, as wait_until), else
# returns 1, so that the caller can say why. COMMAND may fail the test itself (fail writes to
# fd 3) when it sees that waiting is pointless.
poll() {
        local NOW_NS deadline
        set_now_ns
        deadline=$((NOW_NS + $1 * 1000000000))
        shift
        until "$@" >/dev/null 2>&1; do
                set_now_ns
                [ "$NOW_NS" -lt "$deadline" ] || return 1
                nap 0.02
        done
}

# unity_log ID: slot ID's server.log: unity-sgs's JSON lines (-log ${SERVER_LOG_DIR}), with
# what slotd appends of the server's stdout and stderr (unity-peer's lines, Go's panics).
unity_log() { echo "$(sprop "$1" Home)/logs/server.log"; }

# unity_count LOG MSG [UUID]: lines of LOG with "msg":"MSG" (and "allocation_uuid":"UUID").
unity_count() {
        local n
        if [ -n "${3:-}" ]; then
                n=$(grep -F "\"msg\":\"$2\"" "$1" 2>/dev/null | grep -cF "\"allocation_uuid\":\"$3\"") || true
        else
                n=$(grep -cF "\"msg\":\"$2\"" "$1" 2>/dev/null) || true
        fi
        echo "${n:-0}"
}
unity_logged() { [ "$(unity_count "$@")" -ge 1 ]; }

# unity_errors LOG [FROM_LINE]: what the server logged as wrong from line FROM_LINE on:
# unity-sgs's "level" error, fatal or panic lines, Go's panics, unity-peer's complaints
# ("unity-peer: 127.0.0.1:41234: no challenge").
unity_errors() {
        tail -n +"${2:-1}" "$1" 2>/dev/null |
                grep -E '"level":"(error|fatal|panic)"|^panic:|^unity-peer: [^ ]+: ' || true
}
# unity_defect LINE: the known defect of slotd that a line of a server's log shows, if any.
unity_defect() {
        case $1 in
        *"no challenge"*)
                echo "defect (b): slotd reuses SQP challenges, which Unity's SDK refuses (it keeps one challenge per client for one query):" ;;
        *"challenge mismatch"*)
                echo "slotd's SQP probe sent a challenge the server did not give it:" ;;
        *) echo "the server logged an error:" ;;
        esac
}
# unity_no_errors ID LOG [FROM_LINE]: fails, naming the defect, on the first error line.
unity_no_errors() {
        local e n
        e=$(unity_errors "$2" "${3:-1}")
        [ -z "$e" ] && return 0
        n=$(wc -l <<<"$e")
        fail "$(unity_defect "$(head -n 1 <<<"$e")") slot $1's server logged $n error line(s) since the check began, the first: $(head -n 1 <<<"$e")"
}

# unity_started ID: slot ID's unity-sgs logged "started" (it read server.json and subscribed
# to the local proxy). One that ended at start fails the test at once with its fatal line and,
# where it is that, defect (a) named: server.json's machineID not a number (Unity's SDK decodes
# machineID as a JSON number or a numeric string, and exits 1 on anything else).
unity_started() {
        local id=$1 log fatal mid
        log=$(unity_log "$id")
        grep -qF '"msg":"started"' "$log" 2>/dev/null && return 0
        fatal=$(grep -m 1 -E '"level":"(fatal|panic)"|^panic:' "$log" 2>/dev/null) || return 1
        mid=$(server_json "$id" machineID 2>/dev/null) || mid="?"
        if ! [[ $mid =~ ^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$ ]]; then
                fail "defect (a): unity-sgs of slot $id exited at start ($(sprops "$id" ProcessState LastExitCode Restarts | tr '|' ' '): state, exit code, restarts): server.json's machineID '$mid' (slotd's MachineID '$(mprop MachineID)', machine.id unset) is not a number, which Unity's SDK cannot decode: $fatal"
        fi
        fail "unity-sgs of slot $id exited at start: $fatal"
}

# unity_no_event ID UUID MSG SECONDS PROXY_PORT: why slot ID's unity-sgs logged no MSG for UUID
# within SECONDS: what its server.json says (it watches the file), how many connections it holds
# to the local proxy, what the proxy logged of its WebSockets ending (slotd's log:
# UNITY_SLOTD_LOG, lib.sh's by default), what the server logged last.
unity_no_event() {
        local id=$1 uuid=$2 msg=$3 secs=$4 port=$5 log js conns ends pid
        log=$(unity_log "$id")
        pid=$(sprop "$id" MainPID)
        js=$(server_json "$id" allocatedUUID 2>/dev/null) || js="?"
        conns=$(ss -Htnp state established "( dport = :$port )" 2>/dev/null | grep -c "pid=$pid,") || true
        ends=$(grep -E "slotd-proxy.*WebSocket of connection [0-9]+ ends" "${UNITY_SLOTD_LOG:-$T/slotd.log}" 2>/dev/null |
                sort | uniq -c | sed -E 's/^ *//' | tr '\n' ';') || true
        echo "unity-sgs of slot $id (pid $pid) logged no \"$msg\" for $uuid within ${secs}s:" \
                "slotd's AllocationUUID '$(sprop "$id" AllocationUUID)', server.json's allocatedUUID '$js'" \
                "(the SDK saw the file change: $(grep -cF "\"allocatedUUID\":\"$uuid\"" "$log") line(s));" \
                "its connections to the local proxy's port $port: ${conns:-0}; the proxy logged WebSockets" \
                "ending: ${ends:-none}; the server's last lines: $(grep -vF 'no challenge' "$log" | tail -n 2 | cut -c 1-240 | tr '\n' ' ')"
}

# tcp_open PORT: something accepts a TCP connection on 127.0.0.1:PORT.
tcp_open() { timeout 2 bash -c 'exec 5<>"/dev/tcp/127.0.0.1/$1"' _ "$1"; }
