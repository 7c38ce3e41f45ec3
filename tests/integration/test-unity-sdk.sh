#!/usr/bin/env bash
# Unity's own game server (unity-sgs: simple-game-server-go on the Go SDK v0.5.4) and the SDK's
# own SQP and A2S responders (unity-peer) under the real slotd, configured as a new user would
# (issue 23): a test double of the SDK agrees with whatever slotd does, the real SDK does not.
# The binaries are ../shared/peers beside the checkout (unity-lib.sh); without them: skipped.
#
# The parts, in order (each runs in a subshell: a failed part ends only itself, and the parts
# that need it are reported as not run; the test fails if any part did):
#   1. the configuration: slotd's defaults but for what a fleet must say (no machine.id), one
#      fleet of 2 unity-sgs slots with SQP checks every second, the local proxy on a free port;
#   2. both servers start ("started": server.json read, subscribed to the proxy), then 60 s of
#      checks: no restart, no strike, no error in the servers' logs, no fault of the host;
#   3. Allocate reaches a server ("allocated" with its UUID), its game port opens, and about
#      20 s later it is ReadyForPlayers through the proxy;
#   4. slotd's SQP probe reads the allocated server's answer (QueryMaxPlayers 4, its name);
#   5. Deallocate reaches it ("deallocated"), the server runs on;
#   6. holds and the token through the local proxy: root on the host may, nobody may not (403),
#      an unknown server id is 404;
#   7. slotd SIGKILLed and started again: the servers adopted, their queries read afresh, no
#      strike or error for a while, an allocation and a deallocation reach each server within
#      a second or two, and no event is told twice;
#   8. the same after Reexecute;
#   9. unity-peer sqp and unity-peer a2s as the builds of two 1-slot fleets (there from the
#      start): slotd's probes read their answers, no strike, no error in their logs;
#   w. the local proxy ended none of the servers' WebSockets in the whole run (a Go SDK whose
#      WebSocket ends reconnects, and then hears no event: where it began is named here).
# The fleet's allocation through slotd-allocator is test-unity-sdk-fleet.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/unity-lib.sh"
command -v ss >/dev/null || skip "ss (iproute2) is not installed"

# How long part 2 watches for nothing going wrong: 60 checks of every slot on a host (the
# interval is 1 s), 20 in the VM (3 s). A reused SQP challenge shows at the second probe, a
# server that cannot keep its proxy connection or its query port within seconds; 60 rounds
# are also 20 times checks.strikes, so a probe that fails one time in 20 shows too.
# UNITY_QUIET_S shortens it for a run by hand.
QUIET_S=${UNITY_QUIET_S:-60}
# After a restart of slotd: 10 rounds (the probe socket and slotd's state of each slot are
# new: what breaks there breaks at the first or second probe).
RESTART_QUIET_S=$((10 * INTERVAL_S))

# ---- 1. The configuration ----
# lib.sh's slotd.ini (its own bus, cgroup, state and slots directories) without machine.id:
# a user's slotd.ini has none, and MachineID comes from /etc/machine-id. machine.cpus and
# machine.memory stay as lib.sh sets them (4 cores, 4G): the density then fits the 4 slots
# below on any machine, the VM's 2 vCPUs included. machine.ip stays (the VM has no global
# address to detect).
LP_PORT=$(free_port)
LOCALPROXY_LISTEN="127.0.0.1:$LP_PORT" write_config
sed -i '/^id = /d' "$T/etc/slotd.ini"
grep -q '^id' "$T/etc/slotd.ini" && fail "machine.id still in slotd.ini"
# fleet_ini NAME BUILD ARGS QUERY SERVERS GAME_BASE: a fleet file with only what a fleet must
# say, and the checks of issue 23 (the defaults otherwise: fleet.user nobody, readiness by
# the first query answer, 3 strikes within 30 min, ...). Ports below 32768: no free_port or
# client port can take them.
fleet_ini() {
        cat > "$T/etc/fleets.d/$1.ini" <<EOC
[fleet]
build = $2
args = $3
[usage]
cpu = 0.5
memory = 256M
servers = $5
[ports]
game_base = $6
query_base = $(($6 + 50))
[checks]
query = $4
interval = ${INTERVAL_S}s
query_timeout = ${QUERY_TIMEOUT_MS}ms
EOC
}
fleet_ini game "$UNITY_SGS" '-port ${PORT} -queryport ${QUERY_PORT} -log ${SERVER_LOG_DIR}' sqp 2 31600
fleet_ini sqp-peer "$UNITY_PEER" sqp sqp 1 31610
fleet_ini a2s-peer "$UNITY_PEER" a2s a2s 1 31620
"$SLOTD" --config "$T/etc/slotd.ini" --check > "$T/check.out" 2>&1 ||
        fail "slotd --check refused the configuration: $(cat "$T/check.out")"
start_slotd
t_slotd=$(ms)
read -r A B <<<"$(list_slots | awk '$2 == "game" { print $1 }' | tr '\n' ' ')"
PSQP=$(list_slots | awk '$2 == "sqp-peer" { print $1 }')
PA2S=$(list_slots | awk '$2 == "a2s-peer" { print $1 }')
[ -n "$A" ] && [ -n "$B" ] && [ -n "$PSQP" ] && [ -n "$PA2S" ] || fail "slots: $(list_slots)"
SGS=("$A" "$B")
declare -A LOG=() PID=() FROM=()
for id in "$A" "$B" "$PSQP" "$PA2S"; do
        LOG[$id]=$(unity_log "$id")
        FROM[$id]=1 # the logs' lines that game_quiet reads: from the start until mark_from
done
SLOTD_FROM=1
assert_eq "$(server_json "$A" localProxyUrl)" "http://127.0.0.1:$LP_PORT" "server.json's localProxyUrl"
note "slots: game $A $B, sqp-peer $PSQP, a2s-peer $PA2S; MachineID $(mprop MachineID);" \
        "server.json's machineID '$(server_json "$A" machineID)'; interval ${INTERVAL_S}s"

# ---- the parts ----
FAILED=()
NOT_RUN=()
# keep NAME VALUE: sets NAME (an array element too) for the later parts; a part runs in a
# subshell, so what it learns reaches the others only so.
keep() {
        printf '%s=%q\n' "$1" "$2" >> "$T/kept"
        eval "$1=\$2"
}
# part N "NEEDED PARTS" TITLE FUNCTION [ARGS...]: runs FUNCTION in a subshell under set -e; a
# failure (its FAIL line says why) ends that part only. A part whose needed part failed (or was
# not run) is not run.
part() {
        local n=$1 needs=$2 title=$3 fn=$4 rc need
        shift 4
        for need in $needs; do
                if [[ " ${FAILED[*]} ${NOT_RUN[*]} " == *" $need "* ]]; then
                        echo "FAIL: part $n ($title) not run: it needs part $need" >&3
                        NOT_RUN+=("$n")
                        return 0
                fi
        done
        note "---- part $n: $title"
        : > "$T/kept"
        set +e
        (
                set -e
                "$fn" "$@"
                echo "$PASSED" > "$T/passed"
        )
        rc=$?
        set -e
        . "$T/kept"
        if [ $rc -eq 0 ]; then
                PASSED=$(cat "$T/passed")
                note "part $n: ok"
        else
                FAILED+=("$n")
                echo "FAIL: part $n ($title) failed (see the FAIL line above)" >&3
        fi
}
# soft COMMAND...: COMMAND in a subshell under set -e; its failure (told by its FAIL line) is
# counted (SOFT_RC is its status), and the part goes on; soft_done then fails the part if any
# did.
SOFT_FAILED=0
soft() {
        local rc
        set +e
        (
                set -e
                "$@"
                echo "$PASSED" > "$T/passed.soft"
        )
        rc=$?
        set -e
        SOFT_RC=$rc
        if [ $rc -eq 0 ]; then PASSED=$(cat "$T/passed.soft"); else SOFT_FAILED=$((SOFT_FAILED + 1)); fi
}
soft_done() { [ "$SOFT_FAILED" = 0 ] || fail "$SOFT_FAILED check(s) of this part failed (their FAIL lines above)"; }
# lines FILE: how many lines FILE has now (a log's offset: what comes later is new).
lines() { wc -l < "$1" 2>/dev/null || echo 0; }

# game_quiet ID...: each slot runs the server it ran (PID), not restarted, not struck; its log
# has no error since line FROM; slotd logged no strike since SLOTD_FROM and the Manager shows
# no fault of the host. Fails naming what went wrong (for stays_true, whose own message would
# only say "no longer true").
game_quiet() {
        local id v pid restarts strikes ps faults s
        for id in "$@"; do
                v=$(sprops "$id" MainPID Restarts Strikes ProcessState)
                IFS='|' read -r pid restarts strikes ps <<<"$v"
                [ "$pid" = "${PID[$id]}" ] ||
                        fail "slot $id's server was replaced: MainPID $pid, was ${PID[$id]} ($(sprops "$id" LastExitCode LastExitSignal FailureReason | tr '|' ' ')); its log: $(unity_errors "${LOG[$id]}" | tail -n 2)"
                [ "$restarts" = 0 ] || fail "slot $id restarted its server $restarts time(s)"
                [ "$ps" = running ] || fail "slot $id is $ps, not running"
                [ "$strikes" = 0 ] ||
                        fail "slot $id struck: Strikes $(sprop "$id" Strikes); slotd: $(tail -n +"$SLOTD_FROM" "$T/slotd.log" | grep -E "slot $id \([^)]*\): Check [a-z]+ failed" | tail -n 1)"
                unity_no_errors "$id" "${LOG[$id]}" "${FROM[$id]}"
        done
        s=$(tail -n +"$SLOTD_FROM" "$T/slotd.log" | grep -E "Check [a-z]+ failed|Host fault" | head -n 1) || true
        [ -z "$s" ] || fail "slotd logged: $s"
        ws_kept "$SLOTD_FROM"
        faults=$(mprop Faults)
        [ "$faults" = 0 ] || fail "the Manager's Faults: $faults"
}
# ws_kept FROM_LINE: the local proxy ended no WebSocket since line FROM_LINE of slotd's log: the
# servers' subscriptions (they never end theirs) live as long as the servers (an SDK whose
# connection was ended reconnects, and may then hear nothing: named here, where it begins).
ws_kept() {
        local s
        s=$(tail -n +"$1" "$T/slotd.log" | grep -E "WebSocket of connection [0-9]+ ends" | head -n 1) || true
        [ -z "$s" ] || fail "the local proxy ended a game server's WebSocket: $s"
}
# mark_from: the logs' offsets from which game_quiet looks.
mark_from() {
        local id
        for id in "${SGS[@]}" "$PSQP" "$PA2S"; do keep "FROM[$id]" $(($(lines "${LOG[$id]}") + 1)); done
        keep SLOTD_FROM $(($(lines "$T/slotd.log") + 1))
}

# event_reaches ID UUID MSG SECONDS [WHY]: slot ID's unity-sgs logs MSG ("allocated",
# "deallocated") for UUID within SECONDS, else fails saying what the server saw (WHY: the
# defect that a failure at this point shows).
event_reaches() {
        local id=$1 u=$2 msg=$3 secs=$4 t0
        t0=$(ms)
        poll "$secs" unity_logged "${LOG[$id]}" "$msg" "$u" ||
                fail "${5:+$5: }$(unity_no_event "$id" "$u" "$msg" "$secs" "$LP_PORT")"
        note "slot $id: \"$msg\" $u logged $(($(ms) - t0)) ms after the call returned"
        PASSED=$((PASSED + 1))
}
# told_once UUID...: unity-sgs logged "allocated" and "deallocated" exactly once for each
# UUID, in all the servers' logs together: no event told twice (a replay after a restart).
told_once() {
        local u msg n
        for u in "$@"; do
                for msg in allocated deallocated; do
                        n=$(($(unity_count "${LOG[$A]}" "$msg" "$u") + $(unity_count "${LOG[$B]}" "$msg" "$u")))
                        assert_eq "$n" 1 "\"$msg\" lines for $u (an event told twice, or never)"
                done
        done
}
# answers_read ID...: after a restart of slotd (its query results are in memory: 0 and "" at
# its start), each slot's query answer is read again: what unity-sgs answers once allocated,
# max players 4 and a name "simple-game-server-go - <the allocation it read in server.json>",
# for a server that was (ALLOCATED[ID]), a name ("go-sdk-server - <id>") for one that never was.
declare -A ALLOCATED=()
answers_read() {
        local id v
        for id in "$@"; do
                v=$(sprops "$id" QueryMaxPlayers QueryName)
                if [ -n "${ALLOCATED[$id]:-}" ]; then
                        [[ $v == "4|simple-game-server-go - "* ]] || return 1
                else
                        [ -n "${v#*|}" ] || return 1
                fi
        done
}
answers_expected() {
        local id
        for id in "$@"; do
                echo "slot $id: QueryMaxPlayers|QueryName '$(sprops "$id" QueryMaxPlayers QueryName)', expected '${ALLOCATED[$id]:+4|simple-game-server-go - ...}';"
        done
}

# ---- 2. Started on provision, then quiet ----
part2_started() {
        local id
        for id in "${SGS[@]}"; do
                poll $((20 * TIME_SCALE)) unity_started "$id" ||
                        fail "unity-sgs of slot $id logged no \"started\" within $((20 * TIME_SCALE))s: $(tail -n 3 "${LOG[$id]}" | tr '\n' ' ')"
                PASSED=$((PASSED + 1))
                # checks.readiness is query (checks.query is set): running once an SQP probe
                # was answered.
                poll $((10 * TIME_SCALE)) prop_is "$id" ProcessState running ||
                        fail "slot $id is $(sprop "$id" ProcessState), not running: no valid SQP answer to slotd's readiness probe; its log: $(unity_errors "${LOG[$id]}" | tail -n 1)"
                keep "PID[$id]" "$(sprop "$id" MainPID)"
        done
        note "both servers started and running $(($(ms) - t_slotd)) ms after slotd"
}
part2_quiet() {
        # From the servers' start (FROM is 1): every probe they were sent counts. QUIET_S is
        # enough: see its definition above.
        stays_true $((QUIET_S * 1000)) "${SGS[*]} quiet" game_quiet "${SGS[@]}"
        note "$QUIET_S s of checks: no restart, no strike, no error, no fault"
}
part 2 "" "both unity-sgs start on provision (\"started\", running)" part2_started
part 2q 2 "$QUIET_S s of checks every ${INTERVAL_S}s: no restart, strike, error or fault" part2_quiet

# ---- 3. Allocate reaches it ----
U1=$(uuid) U2=$(uuid) U2B=$(uuid) U3=$(uuid) U3B=$(uuid)
part3() {
        local s t0 t port
        t0=$(ms)
        s=$(allocate game "$U1")
        keep S1 "$s"
        assert_eq "$(sprop "$s" ReadyForPlayers)" false "ReadyForPlayers of the new allocation"
        event_reaches "$s" "$U1" allocated "$EVENT_S"
        keep "ALLOCATED[$s]" 1
        port=$(sprop "$s" Port)
        poll $((5 * TIME_SCALE)) tcp_open "$port" ||
                fail "the game port $port of slot $s accepts no TCP connection after \"allocated\""
        PASSED=$((PASSED + 1))
        # unity-sgs reports itself ready readyTimeout (20 s) after the allocation, through the
        # local proxy (PATCH .../allocations/<uuid> {"ready":true}).
        poll "$READY_S" prop_is "$s" ReadyForPlayers true ||
                fail "slot $s not ReadyForPlayers $READY_S s after Allocate; the server logged: $(grep -F ready "${LOG[$s]}" | tail -n 2 | tr '\n' ' ')"
        t=$(($(ms) - t0))
        note "slot $s ReadyForPlayers $t ms after Allocate"
        # Not before the server's readyTimeout: it is the server's report, not slotd's own.
        [ "$t" -ge 15000 ] || fail "ReadyForPlayers after $t ms: before unity-sgs's 20 s readyTimeout"
        PASSED=$((PASSED + 1))
}
part 3 2 "Allocate reaches unity-sgs: \"allocated\", its game port, ReadyForPlayers" part3

# ---- 4. slotd's SQP probe reads the allocated server's answer ----
part4() {
        local s=$S1 name
        # unity-sgs answers max players 4 (its default, no maxPlayers variable) and the name
        # "simple-game-server-go - <allocation>" once allocated (before: 0 and "go-sdk-server -
        # <id>"): read within a few rounds. The allocation in the name is what the server had
        # read of server.json when the event came: its watch of the file may be later (in the
        # VM it is, at times), so the name is only checked to be the allocated server's.
        poll $((4 * INTERVAL_S + 2)) prop_is "$s" QueryMaxPlayers 4 ||
                fail "slot $s's QueryMaxPlayers is $(sprop "$s" QueryMaxPlayers), not 4 ($(unity_errors "${LOG[$s]}" | tail -n 1))"
        PASSED=$((PASSED + 1))
        name=$(sprop "$s" QueryName)
        [[ $name == "simple-game-server-go - "* ]] ||
                fail "slot $s's QueryName '$name' is not the allocated server's ('simple-game-server-go - ...')"
        PASSED=$((PASSED + 1))
}
part 4 "2 3" "slotd's SQP probe reads the allocated server (QueryMaxPlayers 4)" part4

# ---- 5. Deallocate reaches it; the server runs on ----
part5() {
        local s
        s=$(slot_of "$U1")
        [ -n "$s" ] || fail "no slot allocated to $U1"
        mcall Deallocate s "$U1" >/dev/null
        event_reaches "$s" "$U1" deallocated "$EVENT_S"
        assert_eq "$(sprop "$s" ReadyForPlayers)" false "ReadyForPlayers after Deallocate"
        # A server that ended its process on the event would do so within milliseconds of
        # it: two check intervals show it does not.
        stays_true $((2000 * INTERVAL_S)) "slot $s's server runs on after its deallocation" \
                prop_is "$s" MainPID "${PID[$s]}"
}
part 5 2 "Deallocate reaches unity-sgs, which runs on" part5

# Whatever a failed part left allocated is deallocated: the next parts allocate anew.
tidy() {
        local u
        for u in $(list_slots | awk '$2 == "game" && $5 != "-" { print $5 }'); do
                note "deallocating $u, left by a failed part"
                mcall Deallocate s "$u" >/dev/null || true
        done
}
tidy

# ---- 6. Holds and the token through the local proxy ----
URL="http://127.0.0.1:$LP_PORT"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
# http WHO METHOD PATH [BODY]: "STATUS BODY"; WHO is root (this test, on the host) or nobody.
http() {
        local who=$1 method=$2 path=$3 body=${4:-} run=()
        [ "$who" = nobody ] && run=(as_nobody)
        "${run[@]}" curl -s --max-time $((10 * TIME_SCALE)) -w ' %{http_code}' -X "$method" \
                ${body:+-H 'Content-Type: application/json' --data "$body"} "$URL$path" |
                awk '{ code = $NF; $NF = ""; sub(/ $/, ""); print code " " $0 }'
}
expect_http() { # expect_http WHO METHOD PATH BODY STATUS [BODY-PATTERN]
        local out
        out=$(http "$1" "$2" "$3" "$4")
        [ "${out%% *}" = "$5" ] || fail "$1 $2 $3: expected HTTP $5, got '$out'"
        [ -z "${6:-}" ] || grep -qE -- "$6" <<<"$out" || fail "$1 $2 $3: '$out' lacks /$6/"
        PASSED=$((PASSED + 1))
        echo "$out"
}
part6() {
        local h st out t0 t1
        # A game slot that may be held (online, or available should its server not run).
        for st in online available; do
                h=$(list_slots | awk -v s="$st" '$2 == "game" && $3 == s { print $1; exit }')
                [ -z "$h" ] || break
        done
        [ -n "$h" ] || fail "no game slot online or available to hold: $(list_slots | tr '\n' ';')"
        t0=$(date +%s)
        out=$(expect_http root POST "/v1/servers/$h/hold" '{"timeout":"1m"}' 200 '"held": ?true')
        t1=$(date +%s)
        assert_between "$(sed -E 's/.*"expiresAt": ?([0-9]+).*/\1/' <<<"$out")" $((t0 + 59)) $((t1 + 61)) \
                "expiresAt of a 1m hold ($out)"
        assert_eq "$(sprop "$h" State)" held "State after root's hold through the proxy"
        expect_http root GET "/v1/servers/$h/hold" "" 200 '"held": ?true' >/dev/null
        expect_http nobody POST "/v1/servers/$h/hold" '{"timeout":"1m"}' 403 '"error"' >/dev/null
        expect_http nobody GET "/v1/servers/$h/hold" "" 403 '"error"' >/dev/null
        expect_http nobody DELETE "/v1/servers/$h/hold" "" 403 '"error"' >/dev/null
        assert_eq "$(sprop "$h" State)" held "a refused release changed nothing"
        expect_http root DELETE "/v1/servers/$h/hold" "" 204 >/dev/null
        assert_eq "$(sprop "$h" State)" "$st" "State after root's release"
        out=$(expect_http root GET /token "" 200 '"token": ?"[^"]+\.[^"]+\.[^"]+"')
        expect_http nobody GET /token "" 403 '"error"' >/dev/null
        expect_http root POST /v1/servers/999/hold '{"timeout":"1m"}' 404 '"error"' >/dev/null
        expect_http root GET /v1/servers/999/hold "" 404 '"error"' >/dev/null
}
part 6 "" "holds and the token: root 200/204, nobody 403, unknown server 404" part6

# restart_checks HOW T_BACK U...: after slotd came back (HOW) at T_BACK (ms): the servers
# adopted, their answers read afresh within a round or so, RESTART_QUIET_S of checks with
# nothing wrong; then one allocation per server (U..., as many as servers: Allocate takes a free
# one each time) and their deallocations reach every server within EVENT_AFTER_RESTART_S.
restart_checks() {
        local how=$1 t_back=$2 id s u
        local -A heard=()
        local c="defect (c): after slotd's $how the Go SDK hears no event any more"
        shift 2
        for id in "${SGS[@]}" "$PSQP" "$PA2S"; do
                assert_eq "$(sprop "$id" MainPID)" "${PID[$id]}" "slot $id's server adopted after $how (MainPID)"
        done
        # The first check of an adopted slot comes within 1.5 intervals of slotd's start.
        poll $((2 * INTERVAL_S + 2 * TIME_SCALE)) answers_read "${SGS[@]}" ||
                fail "the servers' answers not read again within $((2 * INTERVAL_S + 2 * TIME_SCALE))s after $how: $(answers_expected "${SGS[@]}") $(unity_errors "${LOG[$A]}" "${FROM[$A]}" | tail -n 1)"
        note "answers read again $(($(ms) - t_back)) ms after slotd was back"
        # RESTART_QUIET_S is enough: see its definition. A failure here is told, and the
        # allocation round still made: it shows its own defect.
        soft stays_true $((RESTART_QUIET_S * 1000)) "quiet after $how" game_quiet "${SGS[@]}"
        # Each server is tried, whatever another one heard.
        for u in "$@"; do
                s=$(allocate game "$u")
                soft event_reaches "$s" "$u" allocated "$EVENT_AFTER_RESTART_S" "$c"
                if [ "$SOFT_RC" = 0 ]; then
                        keep "ALLOCATED[$s]" 1
                        heard[$u]=1
                fi
        done
        for u in "$@"; do
                s=$(slot_of "$u")
                mcall Deallocate s "$u" >/dev/null
                if [ -n "${heard[$u]:-}" ]; then
                        soft event_reaches "$s" "$u" deallocated "$EVENT_AFTER_RESTART_S" "$c"
                fi
                assert_eq "$(sprop "$s" MainPID)" "${PID[$s]}" "slot $s's server after the round"
        done
}
# passed N: part N passed (for what a later part checks of it).
passed() { [[ " ${FAILED[*]} ${NOT_RUN[*]} " != *" $1 "* ]]; }
# before_restart: what restart_checks compares with, taken just before slotd goes.
before_restart() {
        local id
        for id in "${SGS[@]}" "$PSQP" "$PA2S"; do PID[$id]=$(sprop "$id" MainPID); done
        mark_from
}

# ---- 7. slotd SIGKILLed and started again ----
if [[ " ${FAILED[*]} " == *" 2 "* ]]; then
        echo "FAIL: part 7 (slotd SIGKILLed) not run: it needs part 2" >&3
        NOT_RUN+=(7)
else
        before_restart
        kill -KILL "$SLOTD_PID"
        wait "$SLOTD_PID" 2>/dev/null || true
        SLOTD_PID=
        start_slotd
        t_back=$(ms)
        part7() {
                restart_checks "SIGKILL and start" "$t_back" "$U2" "$U2B"
                soft told_once "$U2" "$U2B"
                if passed 3 && passed 5; then soft told_once "$U1"; fi
                soft_done
        }
        part 7 2 "slotd SIGKILLed and started again: adopted, quiet, events once" part7
fi
tidy

# ---- 8. Reexecute ----
# started_lines: how many times slotd logged its start ("slotd VERSION running N slots in M
# fleets").
started_lines() { grep -cE "slotd[^ ]* .*running [0-9]+ slots in [0-9]+ fleets" "$T/slotd.log" || true; }
part8() {
        local n0
        before_restart
        n0=$(started_lines)
        mcall Reexecute >/dev/null
        # The re-executed slotd logs its start as any slotd does.
        wait_until $((20 * TIME_SCALE)) "slotd re-executed (its start logged)" \
                eval '[ "$(started_lines)" -gt "$n0" ]'
        wait_until $((20 * TIME_SCALE)) "slotd back on the bus after Reexecute" bus_name_owned
        restart_checks Reexecute "$(ms)" "$U3" "$U3B"
        soft told_once "$U3" "$U3B"
        if passed 7; then soft told_once "$U2" "$U2B"; fi
        if passed 3 && passed 5; then soft told_once "$U1"; fi
        soft_done
}
part 8 2 "Reexecute: adopted, quiet, events once" part8
tidy

# ---- 9. The SDK's own SQP and A2S responders ----
peer_read() { [ "$(sprops "$1" QueryMaxPlayers QueryPlayers QueryName QueryMap)" = "24|7|unity-peer|arena" ]; }
# part9 ID: the slot of a unity-peer fleet, running since slotd's first start.
part9() {
        local id=$1 fleet s
        fleet=$(sprop "$id" Fleet)
        poll $((4 * INTERVAL_S + 2)) peer_read "$id" ||
                fail "slot $id ($fleet): QueryMaxPlayers|QueryPlayers|QueryName|QueryMap '$(sprops "$id" QueryMaxPlayers QueryPlayers QueryName QueryMap)', not '24|7|unity-peer|arena' ($(unity_errors "${LOG[$id]}" | tail -n 1))"
        PASSED=$((PASSED + 1))
        assert_eq "$(sprops "$id" ProcessState Restarts Strikes)" "running|0|0" \
                "slot $id ($fleet): ProcessState|Restarts|Strikes"
        # From its start, through both restarts of slotd: no strike, no error.
        s=$(grep -E "slot $id \([^)]*\): Check [a-z]+ failed" "$T/slotd.log" | head -n 1) || true
        [ -z "$s" ] || fail "slotd struck slot $id ($fleet): $s"
        unity_no_errors "$id" "${LOG[$id]}" 1
}
part 9s "" "unity-peer sqp: slotd's probe reads its answers, no strike, no error" part9 "$PSQP"
part 9a "" "unity-peer a2s: slotd's probe reads its answers, no strike, no error" part9 "$PA2S"

# ---- w. The servers' WebSockets, over the whole run ----
partw() {
        ws_kept 1
        PASSED=$((PASSED + 1))
}
part w "" "the local proxy ended no server's WebSocket in the whole run" partw

if [ ${#FAILED[@]} -ne 0 ] || [ ${#NOT_RUN[@]} -ne 0 ]; then
        echo "FAIL: part(s) ${FAILED[*]:-none} failed; not run: ${NOT_RUN[*]:-none} (parts passed: $PASSED assertions)" >&3
        exit 1
fi
finish
