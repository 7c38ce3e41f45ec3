#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# slotd-proxy alone: proxy-fake-slotd.py plays slotd's side of the IPC (localproxy/ipc.h) and
# binds the listening sockets on a free port; curl drives every REST endpoint and its errors,
# node (tests/integration/node/'s ws package) the WebSocket and Centrifuge. Needs no root.
# Every wait polls with a deadline.
set -euo pipefail

: "${SLOTD_PROXY:?SLOTD_PROXY must name the slotd-proxy binary}"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

skip() {
        echo "skipped: $*"
        exit 77
}
exec 3>&2
fail() {
        echo "FAIL: $*" >&3
        if [ -n "${T:-}" ] && [ -f "$T/proxy.log" ]; then
                echo "---- last lines of slotd-proxy's log ----" >&3
                tail -n 30 "$T/proxy.log" >&3 || true
        fi
        exit 1
}
note() { echo "# $*"; }

command -v python3 >/dev/null || skip "python3 is not installed"
command -v curl >/dev/null || skip "curl is not installed"
[ -x "$SLOTD_PROXY" ] || skip "$SLOTD_PROXY is not built"

T=$(mktemp -d /tmp/slotd-proxy-it.XXXXXX)
HELPER_PID=
BG_PIDS=()
IDLE_FDS=()

cleanup() {
        local rc=$? pid fd
        trap - EXIT INT TERM
        for fd in "${IDLE_FDS[@]}"; do
                exec {fd}>&- 2>/dev/null || true
        done
        for pid in "${BG_PIDS[@]}"; do
                kill "$pid" 2>/dev/null || true
                wait "$pid" 2>/dev/null || true
        done
        if [ -n "$HELPER_PID" ] && kill -0 "$HELPER_PID" 2>/dev/null; then
                kill "$HELPER_PID" 2>/dev/null || true
                wait "$HELPER_PID" 2>/dev/null || true
        fi
        # The proxy exits on the IPC socket's EOF; make sure, by its own pid.
        if [ -f "$T/proxy.pid" ]; then
                kill "$(cat "$T/proxy.pid")" 2>/dev/null || true
        fi
        if [ -f "$T/proxy.log" ] &&
           grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T/proxy.log"; then
                echo "FAIL: sanitizer report in slotd-proxy's log:" >&3
                grep -E -A 30 "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T/proxy.log" |
                        head -n 60 >&3
                [ $rc -eq 0 ] && rc=1
        fi
        if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ -n "${KEEP_FAILED:-}" ]; then
                echo "keeping $T" >&2
        else
                rm -rf "$T"
        fi
        exit $rc
}
trap cleanup EXIT INT TERM

# wait_for DESCRIPTION SECONDS COMMAND...: polls COMMAND until it succeeds.
wait_for() {
        local what=$1 deadline=$((SECONDS + $2))
        shift 2
        until "$@"; do
                [ $SECONDS -lt $deadline ] || fail "timed out waiting for $what"
                sleep 0.05
        done
}

# http METHOD PATH [BODY]: sets CODE and BODY of the response.
http() {
        local out
        out=$(curl -sS -g -o "$T/body" -w '%{http_code}' -X "$1" ${3+--data-binary "$3"} \
                "$BASE$2") || fail "curl $1 $2 failed"
        CODE=$out
        BODY=$(cat "$T/body")
}
expect() {
        local want=$1 method=$2 path=$3
        shift 3
        http "$method" "$path" "$@"
        [ "$CODE" = "$want" ] || fail "$method $path: HTTP $CODE, expected $want ($BODY)"
}
expect_error() {
        local want=$1 text=$2
        shift 2
        expect "$want" "$@"
        grep -qF "\"error\":" <<<"$BODY" || fail "$2 $3: no JSON error body ($BODY)"
        grep -qF "$text" <<<"$BODY" || fail "$2 $3: error '$BODY' does not say '$text'"
}
# ctl COMMAND: one command to the fake slotd, returning once it is done.
ctl() {
        local n
        n=$(count_in "$T/ctl.done" .)
        echo "$*" > "$T/ctl"
        [ "$1" = quit ] && return 0
        wait_for "'$*' to be done" 30 ctl_done_more "$n"
}
# count_in FILE PATTERN: the lines of FILE that match, 0 when there is no FILE yet.
count_in() {
        if [ -f "$1" ]; then grep -c -- "$2" "$1" || true; else echo 0; fi
}
ctl_done_more() { [ "$(count_in "$T/ctl.done" .)" -gt "$1" ]; }
count_in_log() { count_in "$T/ipc.log" "$1"; }
# The connections of slot 1 (those to 127.0.0.1) open now, as slotd heard of them.
slot1_open() {
        python3 - "$T/ipc.log" <<'EOF'
import json, sys
slot1 = set()
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m["type"] == "conn" and m["local"] == "127.0.0.1":
        slot1.add(m["conn"])
    elif m["type"] == "close":
        slot1.discard(m["conn"])
print(len(slot1))
EOF
}
slot1_open_is() { [ "$(slot1_open)" -eq "$1" ]; }
subscribes_more() { [ "$(count_in_log '"op": "subscribe"')" -gt "$1" ]; }
curl_ok() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/token")" = 200 ]; }

# A setup error is fatal, not a hang.
rc=0; "$SLOTD_PROXY" 2>/dev/null || rc=$?
[ $rc -ne 0 ] || fail "slotd-proxy without arguments exited 0"
rc=0; "$SLOTD_PROXY" --ipc-fd 0 --listen-fd 0 </dev/null 2>/dev/null || rc=$?
[ $rc -ne 0 ] || fail "slotd-proxy on fds that are not sockets exited 0"

python3 "$HERE/proxy-fake-slotd.py" --proxy "$SLOTD_PROXY" --dir "$T" >"$T/helper.log" 2>&1 &
HELPER_PID=$!
wait_for "the proxy to start" 10 test -f "$T/port"
read -r PORT V6 < "$T/port"
BASE="http://127.0.0.1:$PORT"
note "slotd-proxy on port $PORT (IPv6: $V6)"

# The REST API, through slotd's answers.
expect 204 PATCH /v1/servers/1/allocations/alloc-1 '{"ready":true}'
expect 204 PATCH /v1/servers/1/allocations/alloc-1 '{"ready":false}'
expect 200 POST /v1/servers/1/hold '{"timeout":"2m"}'
python3 -c 'import json,sys,time; b=json.loads(sys.argv[1]); assert b["held"] is True and \
        abs(b["expiresAt"] - time.time() - 120) < 30, b' "$BODY" || fail "hold body: $BODY"
expect 200 GET /v1/servers/1/hold
grep -q '"held":true' <<<"$BODY" || fail "hold status: $BODY"
expect 204 DELETE /v1/servers/1/hold
expect 200 GET /v1/servers/1/hold
grep -q '"held":false' <<<"$BODY" || fail "hold status after release: $BODY"
expect_error 409 "invalid-state" DELETE /v1/servers/1/hold
expect 200 POST /v1/servers/1/reservations '{}'
python3 -c 'import json,sys; b=json.loads(sys.argv[1]); assert b["buildConfigurationId"] == 1234 \
        and b["gamePort"] == 9001 and b["ipv6"] == "::1" and len(b["reservationId"]) == 36, b' \
        "$BODY" || fail "reservation body: $BODY"
expect 200 POST /v1/servers/1/reservations
expect 204 DELETE /v1/servers/1/reservations
expect 204 DELETE /v1/servers/1/reservations/r-1
expect 200 GET /payload/alloc-1
[ "$BODY" = '{"matchId":"m1","players":["a","b"]}' ] || fail "payload: $BODY"
curl -sS -o /dev/null -D "$T/headers" "$BASE/payload/alloc-1"
grep -qi '^Content-Type: application/json' "$T/headers" || fail "payload Content-Type"
expect_error 404 "no-such-allocation" GET /payload/alloc-2
expect 200 GET /token
[ "$BODY" = '{"token":"aaa.bbb.ccc","error":""}' ] || fail "token: $BODY"
note "REST endpoints answered"

# Refusals: slotd's (the message is slotd's) and the proxy's own.
expect_error 403 "not the server of slot 2" POST /v1/servers/2/hold '{"timeout":"1m"}'
expect_error 503 "draining" GET /v1/servers/99/hold
expect_error 404 "no such endpoint" GET /v1/nothing
expect_error 404 "no such endpoint" GET /v1/servers/1/hold/
expect_error 405 "method not allowed" PUT /v1/servers/1/hold
curl -sS -o /dev/null -D "$T/headers" -X PUT "$BASE/v1/servers/1/hold"
grep -qi '^Allow: GET, POST, DELETE' "$T/headers" || fail "405 without Allow"
expect_error 400 "malformed server" GET /v1/servers/01/hold
expect_error 400 "malformed server" GET /v1/servers/1%32/hold
expect_error 400 "ready" PATCH /v1/servers/1/allocations/alloc-1 '{"ready":"yes"}'
expect_error 400 "timeout" POST /v1/servers/1/hold '{"timeout":"2 weeks"}'
expect_error 400 "timeout" POST /v1/servers/1/hold 'not json'
expect_error 400 "JSON object" POST /v1/servers/1/reservations '[1]'
head -c 9000 /dev/zero | tr '\0' a > "$T/big"
expect_error 413 "larger than 8192 bytes" POST /v1/servers/1/hold "@$T/big"
code=$(curl -sS -o "$T/body" -w '%{http_code}' -H 'Transfer-Encoding: chunked' \
        --data-binary "@$T/big" "$BASE/v1/servers/1/hold")
[ "$code" = 413 ] || fail "chunked 9000 bytes: HTTP $code"
code=$(curl -sS -o /dev/null -w '%{http_code}' -H "X-Big: $(head -c 40000 /dev/zero | tr '\0' b)" \
        "$BASE/token" || true)
[ "$code" = 431 ] || [ "$code" = 414 ] || [ "$code" = 000 ] || fail "40 kB header: HTTP $code"
if [ "$V6" = 1 ]; then
        BASE6="http://[::1]:$PORT"
        code=$(curl -sS -g -o "$T/body" -w '%{http_code}' "$BASE6/v1/servers/1/hold")
        [ "$code" = 403 ] || fail "a caller outside any slot: HTTP $code"
        code=$(curl -sS -g -o /dev/null -w '%{http_code}' "$BASE6/token")
        [ "$code" = 200 ] || fail "token over IPv6: HTTP $code"
        note "IPv6 listener served, caller outside any slot refused by slotd"
fi
note "refusals carry their rule"

# slotd silent: 503 after the proxy's 5 s deadline (in the background, checked later).
curl -sS -o "$T/silent.body" -w '%{http_code}' "$BASE/v1/servers/98/hold" >"$T/silent.code" &
BG_PIDS+=($!)
SILENT_PID=$!

# WebSocket and Centrifuge.
NODE_MODULES="$HERE/node/node_modules"
if ! command -v node >/dev/null; then
        note "skipped: WebSocket checks: node is not installed"
elif [ ! -d "$NODE_MODULES/ws" ]; then
        note "skipped: WebSocket checks: $NODE_MODULES has no ws package"
else
        W="$HERE/proxy-ws-check.mjs"
        # The unanswered ping takes 35 s: it runs while the rest goes on.
        timeout 90 node "$W" ping "$PORT" >"$T/ping.out" 2>&1 &
        PING_PID=$!
        BG_PIDS+=($PING_PID)

        ctl event 1 AllocateEventType alloc-1
        ctl event 1 DeallocateEventType alloc-1
        ctl event 1 AllocateEventType alloc-2
        # Real clients: centrifuge-js 5.x (v2) and 2.x (v1).
        CLIENT_PIDS=()
        for c in 5 2; do
                node "$HERE/node/centrifuge-client.mjs" --client $c \
                        --url "ws://127.0.0.1:$PORT/v1/connection/websocket" \
                        --channel 'server#1' >"$T/client$c.out" 2>&1 &
                CLIENT_PIDS+=($!)
                BG_PIDS+=($!)
        done
        has_pub() { [ "$(grep -c "\"publication\".*\"$2\"" "$T/client$1.out")" -ge 1 ]; }
        # Subscribed after the allocation: the allocation is pushed all the same.
        wait_for "v2 client's first publication" 10 has_pub 5 alloc-2
        wait_for "v1 client's first publication" 10 has_pub 2 alloc-2
        ctl event 1 DeallocateEventType alloc-2
        wait_for "v2 client's deallocation" 10 has_pub 5 DeallocateEventType
        wait_for "v1 client's deallocation" 10 has_pub 2 DeallocateEventType
        grep -q '"data":{"EventType":"DeallocateEventType","EventID":"[^"]*","ServerID":1,"AllocationID":"alloc-2"},"offset":4' \
                "$T/client5.out" || fail "v2 publication: $(tail -n 1 "$T/client5.out")"
        timeout 20 node "$HERE/node/centrifuge-client.mjs" --client 5 --timeout-ms 2000 \
                --url "ws://127.0.0.1:$PORT/v1/connection/websocket" \
                --channel 'server#2' >"$T/denied.out" 2>&1 || true
        grep -q '"code":103' "$T/denied.out" || fail "server#2: $(cat "$T/denied.out")"
        note "real clients: connect, subscribe, publications (v1 and v2), 103 for another slot"

        ctl event 1 AllocateEventType alloc-3
        timeout 60 node "$W" bad "$PORT" || fail "hostile frames"
        timeout 60 node "$W" recover "$PORT" 5 || fail "recovery"
        ctl event 1 DeallocateEventType alloc-3
        subs=$(count_in_log '"op": "subscribe"')
        ctl hold-subscribes
        timeout 60 node "$W" held "$PORT" 6 >"$T/held.out" 2>&1 &
        HELD_PID=$!
        BG_PIDS+=($HELD_PID)
        wait_for "the held subscribe" 10 subscribes_more "$subs"
        ctl event 1 AllocateEventType alloc-4
        ctl release-subscribes
        wait $HELD_PID || fail "events during a subscribe: $(cat "$T/held.out")"
        note "hostile frames, recovery, events held during a subscribe"

        node "$W" stall "$PORT" >"$T/stall.out" 2>&1 &
        CLIENT_PIDS+=($!)
        BG_PIDS+=($!)
        wait_for "the stalled client" 10 grep -q port "$T/stall.out"
        cid=$(python3 - "$T/ipc.log" "$T/stall.out" <<'EOF'
import json, sys
port = json.load(open(sys.argv[2]))["port"]
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m["type"] == "conn" and m["peer_port"] == port:
        print(m["conn"])
EOF
)
        [ -n "$cid" ] || fail "no conn for the stalled client"
        # 5,000 publications of ~200 bytes: four times the 256 KiB a connection may queue.
        ctl burst 1 5000
        wait_for "the stalled client's close" 60 grep -q "\"type\": \"close\", \"conn\": $cid}" \
                "$T/ipc.log"
        expect 200 GET /token
        note "a client that does not read is closed at 256 KiB queued; the proxy goes on"
        for pid in "${CLIENT_PIDS[@]}"; do
                kill "$pid" 2>/dev/null || true
                wait "$pid" 2>/dev/null || true
        done
        wait "$PING_PID" || fail "unanswered v2 ping: $(cat "$T/ping.out")"
        note "v2: pinged after 25 s, closed without a pong"
fi

# At most 16 connections per slot: the 17th is refused, and an idle one beyond is closed.
wait_for "slot 1's connections to close" 10 slot1_open_is 0
for i in $(seq 16); do
        exec {fd}<>"/dev/tcp/127.0.0.1/$PORT"
        IDLE_FDS+=("$fd")
done
wait_for "16 idle connections announced" 10 slot1_open_is 16
http GET /token
[ "$CODE" = 429 ] || fail "17th connection of a slot: HTTP $CODE"
grep -qF "connection limit" <<<"$BODY" || fail "17th connection: $BODY"
exec {extra}<>"/dev/tcp/127.0.0.1/$PORT"
rc=0; read -r -t 10 -u "$extra" _ || rc=$?
[ $rc -eq 1 ] || fail "an idle connection over the limit was not closed (read: $rc)"
exec {extra}>&-
note "connection limit: 17th request refused, 17th idle connection closed"
for fd in "${IDLE_FDS[@]}"; do
        exec {fd}>&-
done
IDLE_FDS=()
wait_for "a connection again" 10 curl_ok

# 50 requests a second, bursts of 100: a fast run of 400 meets 429.
urls=()
for i in $(seq 400); do
        urls+=(-o /dev/null "$BASE/token")
done
curl -sS -w '%{http_code}\n' "${urls[@]}" >"$T/codes"
n200=$(grep -c '^200$' "$T/codes" || true)
n429=$(grep -c '^429$' "$T/codes" || true)
[ $((n200 + n429)) -eq 400 ] || fail "rate run: $(sort "$T/codes" | uniq -c | tr '\n' ' ')"
[ "$n429" -gt 0 ] || fail "400 requests at once met no rate limit"
http GET /token
[ "$CODE" = 429 ] || [ "$CODE" = 200 ] || fail "after the rate run: HTTP $CODE"
wait_for "the bucket to refill" 10 curl_ok
note "rate limit: $n200 of 400 requests passed, $n429 answered 429"

wait "$SILENT_PID" || true
[ "$(cat "$T/silent.code")" = 503 ] || fail "slotd silent: HTTP $(cat "$T/silent.code")"
grep -qF "did not answer" "$T/silent.body" || fail "slotd silent: $(cat "$T/silent.body")"
note "slotd silent: 503 after the deadline"

# slotd does not say who the caller is: 503 after the deadline, nothing asked of slotd.
ctl ignore-conns
requests=$(count_in_log '"type": "request"')
expect_error 503 "did not identify the caller" GET /token
[ "$(count_in_log '"type": "request"')" -eq "$requests" ] || fail "a request of an unknown caller"
note "caller never identified: 503 after the deadline"

# Every request and close came after its connection's "conn"; EOF ends the proxy with 0.
[ ! -s "$T/violations" ] || fail "IPC order: $(cat "$T/violations")"
ctl quit
wait_for "the proxy to exit" 15 test -f "$T/proxy.rc"
[ "$(cat "$T/proxy.rc")" = 0 ] || fail "slotd-proxy exit status: $(cat "$T/proxy.rc")"
wait "$HELPER_PID" || true
HELPER_PID=
note "slotd-proxy exits 0 when slotd goes"
echo "ok"
