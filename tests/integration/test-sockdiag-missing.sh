#!/usr/bin/env bash
# sock_diag is checked, not assumed (issue 23, SPEC §11, §12). slotd runs where sock_diag
# fails, as on a kernel without it, while the file $T/off exists (sockdiag-off: first its
# NETLINK_SOCK_DIAG socket is refused, EPROTONOSUPPORT; then its requests are answered ENOENT,
# what a kernel without inet_diag and tcp_diag says, and what a gone client gets too). slotd
# starts all the same, raises the fault sock_diag (Faults, one error line naming the modules and
# the errno) and answers every caller 503 naming sock_diag, never 403: root outside any slot and
# a slot's own server alike. A Centrifuge client is refused with a temporary error and retries.
# Once sock_diag works again the fault clears by itself (its self-test retried with back-off)
# and the same callers are served. The fault on a normal start: test-localproxy.
. "$(dirname "$0")/lib.sh"
: "${SOCKDIAG_OFF:?SOCKDIAG_OFF must name the sockdiag-off helper}"
command -v curl >/dev/null || skip "curl is not installed"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
"$SOCKDIAG_OFF" socket "$T/off" true || skip "no seccomp user notification on this host"
NODE_DIR=$(cd "$(dirname "$0")/node" && pwd)
NODE=
command -v node >/dev/null && [ -d "$NODE_DIR/node_modules/centrifuge2" ] &&
        [ -d "$NODE_DIR/node_modules/centrifuge5" ] && NODE=1

PORT=$(free_port)
LOCALPROXY_LISTEN="127.0.0.1:$PORT" write_config
write_fleet game "servers = 1" "[ports]" "game_base = 29400" "query_base = 29450"
URL="http://127.0.0.1:$PORT"

# start_slotd_off MODE: start_slotd under sockdiag-off (which execs slotd: the same PID).
start_slotd_off() {
        SLOTD_LOG_LEVEL=debug "$SOCKDIAG_OFF" "$1" "$T/off" "$SLOTD" --config "$T/etc/slotd.ini" \
                >>"$T/slotd.log" 2>&1 &
        SLOTD_PID=$!
        wait_until 20 "slotd on the bus" bus_name_owned
}
# expect_http WHO PATH STATUS [PATTERN]: GET PATH as root on the host (WHO host) or from slot
# WHO; the status, and PATTERN in the headers and body.
expect_http() {
        local run=() out
        [ "$1" = host ] || run=(in_slot "$1")
        out=$("${run[@]}" curl -s -i --max-time 10 "$URL$2" | tr -d '\r') || true
        [ "$(head -n 1 <<<"$out" | awk '{ print $2 }')" = "$3" ] ||
                fail "$1 GET $2: expected HTTP $3, got: $out"
        [ -z "${4:-}" ] || grep -qiE -- "$4" <<<"$out" || fail "$1 GET $2: '$out' lacks /$4/"
        PASSED=$((PASSED + 1))
}
faults() {
        bctl get-property org.slotd.Supervisor1 /org/slotd/Supervisor1 \
                org.slotd.Supervisor1.Manager Faults
}
has_fault() { faults | grep -q '"sock_diag: '; }
fault_says() { faults | grep -q "\"sock_diag: .*($1).*inet_diag and tcp_diag"; }
no_fault() { ! has_fault; }
# log_count PATTERN: lines of slotd's log since this run of it began ($LOG_FROM).
log_count() { tail -n +"$LOG_FROM" "$T/slotd.log" | grep -cE -- "$1" || true; }
log_has() { [ "$(log_count "$1")" -ge "${2:-1}" ]; }

# client NAME VERSION: a real Centrifuge client in slot $A, its events in $T/NAME.
client() {
        local cg
        cg=$(sprop "$A" Cgroup)
        bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec setpriv --reuid=65534 \
                 --regid=65534 --clear-groups "$@"' client "$cg" \
                node "$NODE_DIR/centrifuge-client.mjs" --client "$2" \
                --url "ws://127.0.0.1:$PORT/v1/connection/websocket" --channel "server#$A" \
                --timeout-ms $((60000 * TIME_SCALE)) >"$T/$1" 2>"$T/$1.err" &
        bg_track $!
}
client_has() { [ "$(grep -c -- "$2" "$T/$1" 2>/dev/null || true)" -ge "${3:-1}" ]; }

# run_off MODE ERRNO_TEXT [CLIENTS]: the whole story in one mode; CLIENTS 1: with the
# Centrifuge clients too.
run_off() {
        local mode=$1 why=$2 clients=${3:+$NODE} p
        note "mode $mode: sock_diag answers '$why'"
        touch "$T/off"
        touch "$T/slotd.log"
        LOG_FROM=$(($(wc -l <"$T/slotd.log") + 1))
        start_slotd_off "$mode"
        A=$(list_slots | awk '$2 == "game" { print $1; exit }')
        wait_prop "$A" ProcessState running
        wait_until 20 "the local proxy answering" curl -s --max-time 2 -o /dev/null "$URL/token"

        # 1. The fault, its one error line, and slotd running.
        assert_ok "Faults names sock_diag ($(faults))" has_fault
        assert_ok "the fault names the errno and the modules" fault_says "$why"
        local line="slotd\[error\]: sock_diag cannot name the local proxy's callers: .*$why.*modprobe inet_diag tcp_diag"
        assert_eq "$(log_count "$line")" 1 "the error line in slotd's log"

        # 2. 503 naming sock_diag, never 403: root outside any slot, the slot's own server;
        # the connection is closed (its identity is asked once: a retry needs a new one).
        expect_http host /token 503 '"error": ?"slotd cannot tell which slot the caller is in: sock_diag is unavailable'
        expect_http host /token 503 "Connection: close"
        expect_http host "/v1/servers/$A/hold" 503 'inet_diag and tcp_diag'
        expect_http "$A" /token 503 'sock_diag is unavailable'
        expect_http "$A" "/v1/servers/$A/hold" 503 'sock_diag'

        # 3. Real clients of the slot's server: refused with a temporary error, they retry.
        if [ -n "$clients" ]; then
                client v1 2
                client v2 5
                # 5.x tells each refusal; 2.x its first disconnection only, then retries.
                wait_until $((30 * TIME_SCALE)) "v2 refused twice" client_has v2 \
                        '"type":"connect","code":100,"message":"slotd cannot tell.*sock_diag' 2
                wait_until $((30 * TIME_SCALE)) "v1 refused" client_has v1 \
                        '"reason":"connect error","reconnect":true'
                assert_ok "v2 took the error as temporary: no unsubscription" \
                        bash -c "! grep -q unsubscribed '$T/v2'"
                assert_ok "v1 retries: no subscription error" \
                        bash -c "! grep -q '\"channel\"' '$T/v1'"
        fi

        # 4. The self-test is retried, and the error is not logged again.
        wait_until 20 "a retry of the self-test" log_has "The sock_diag self-test failed again"
        assert_eq "$(log_count "$line")" 1 "the error line after a retry"
        assert_ok "still raised" has_fault

        # 5. sock_diag back: the fault clears by itself (the retry, at most 60 s apart, is a few
        # seconds away here) and the same callers are served.
        rm -f "$T/off"
        wait_until 40 "the sock_diag fault cleared" no_fault
        assert_ok "the clearing logged" log_has "Host fault sock_diag cleared after"
        assert_eq "$(mprop Faults)" 0 "Faults once sock_diag works"
        expect_http host /token 200 '"token"'
        expect_http "$A" /token 200 '"token"'
        expect_http "$A" "/v1/servers/$A/hold" 200 '"held": ?false'
        if [ -n "$clients" ]; then
                wait_until $((30 * TIME_SCALE)) "v1 subscribed" client_has v1 '"event":"subscribed"'
                wait_until $((30 * TIME_SCALE)) "v2 subscribed" client_has v2 '"event":"subscribed"'
                PASSED=$((PASSED + 2))
                for p in "${BG_PIDS[@]}"; do
                        kill "$p" 2>/dev/null || true
                        wait "$p" 2>/dev/null || true
                        bg_untrack "$p"
                done
        fi
        stop_slotd
}

run_off socket 'Protocol not supported' clients
run_off request 'No such file or directory'
[ -n "$NODE" ] || note "node or the npm clients missing: the Centrifuge clients were not run"
finish
