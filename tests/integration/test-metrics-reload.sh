#!/usr/bin/env bash
# metrics.listen (SPEC §14) moved by Reload, without a restart of the local proxy: slotd binds
# the new address and passes it to the running proxy over its channel (SCM_RIGHTS, ipc.h
# "metrics_listen"); the old address refuses connections, the new one serves, and the game
# servers' connections to the local proxy (a Centrifuge subscription, an HTTP keep-alive
# connection) stay open through every change. An address in use refuses the Reload, naming
# it, and the old one keeps serving. on → off → on; a slotd restarted afterwards attaches to
# the proxy (its hello names the new address). With the local proxy off, the proxy process
# runs for metrics alone: Reload starts it (off → on) and stops it (on → off). The default
# (127.0.0.1:8087): --check names it, and in a network namespace of its own, where 8087 is
# taken, slotd warns and runs without metrics; once 8087 is free, a Reload serves it.
. "$(dirname "$0")/lib.sh"
need_npm_clients

PORT=$(free_port)
M1=$(free_port)
M2=$(free_port)
IN_USE=$(free_port)
metrics_status() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$1/metrics"; }
serves() { [ "$(metrics_status "$1")" = 200 ]; }
# curl's exit code 7: the connection was refused.
refuses() { curl -s -o /dev/null --max-time 5 "http://$1/metrics"; [ $? = 7 ]; }
set_metrics() { sed -i "/^\[metrics\]\$/,\$ s|^listen = .*|listen = $1|" "$T/etc/slotd.ini"; }
proxy_pid() { pgrep -P "$SLOTD_PID" -x slotd-proxy || true; }

# ---- The default: 127.0.0.1:8087, said by --check (no slotd started: tests run in parallel) ----
write_config
sed -i '/^\[metrics\]$/,$d' "$T/etc/slotd.ini"
write_fleet game "servers = 1" "[ports]" "game_base = 36800" "query_base = 36850"
"$SLOTD" --check --config "$T/etc/slotd.ini" > "$T/check.out" 2>&1 || fail "--check: $(cat "$T/check.out")"
assert_ok "--check shows the default metrics.listen" grep -qx "metrics: 127.0.0.1:8087" "$T/check.out"

# ---- The default taken (a network namespace of slotd's own, where 8087 is in use) ----
: > "$T/slotd.log"
SLOTD_NETNS=1 SLOTD_NETNS_SETUP="python3 -c 'import socket, time; s = socket.socket(); \
s.bind((\"127.0.0.1\", 8087)); s.listen(); time.sleep(3600)' & \
while ! ss -Htln | grep -q 127.0.0.1:8087; do sleep 0.05; done" start_slotd
wait_prop 0 ProcessState running
assert_ok "warning: the default cannot be bound" grep -q \
        "Not serving metrics: 127.0.0.1:8087 (metrics.listen's default) cannot be bound: Address already in use" \
        "$T/slotd.log"
assert_eq "$(proxy_pid)" "" "no proxy runs (the local proxy off, metrics skipped)"
# A Reload while 8087 is still taken: tried again, warned again, still no proxy.
out=$(mcall Reload 2>&1) || fail "Reload refused while the default is taken: $out"
assert_eq "$(grep -c "Not serving metrics: 127.0.0.1:8087 (metrics.listen's default) cannot be bound" \
        "$T/slotd.log")" 2 "warnings about the default"
assert_eq "$(proxy_pid)" "" "no proxy after the Reload (the default still taken)"
# 8087 freed, a Reload with the same configuration tries the default again.
ns_python=$(pgrep -f "8087.*time.sleep") || fail "the holder of 8087 is gone"
kill $ns_python
in_ns() { nsenter --net="/proc/$SLOTD_PID/ns/net" "$@"; }
freed() { ! in_ns ss -Htln | grep -q 127.0.0.1:8087; }
wait_until 10 "8087 freed" freed
out=$(mcall Reload 2>&1) || fail "Reload refused: $out"
ns_serves() { [ "$(in_ns curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:8087/metrics)" = 200 ]; }
wait_until 20 "metrics on the default 127.0.0.1:8087 (in slotd's namespace)" ns_serves
assert_ok "log: the proxy started for the default" grep -q \
        "Local proxy started as process [0-9]* on 0 addresses, metrics on 127.0.0.1:8087" "$T/slotd.log"
# The proxy outlives slotd; in slotd's namespace, where stop_proxies (ss) does not see it.
P=$(proxy_pid)
[ -n "$P" ] || fail "no slotd-proxy for the default"
stop_slotd
kill "$P"
gone() { ! kill -0 "$P" 2>/dev/null; }
wait_until 10 "the proxy $P gone" gone

# ---- 1. The local proxy on, metrics on M1; a Centrifuge client and a keep-alive connection ----
: > "$T/slotd.log"
LOCALPROXY_LISTEN="127.0.0.1:$PORT" METRICS_LISTEN="127.0.0.1:$M1" write_config
start_slotd
wait_prop 0 ProcessState running
wait_until 20 "the local proxy" curl -s --max-time 2 -o /dev/null "http://127.0.0.1:$PORT/token"
wait_until 20 "metrics on $M1" serves "127.0.0.1:$M1"
P=$(proxy_pid)
[ -n "$P" ] || fail "no slotd-proxy"

in_slot 0 node "$NODE_DIR/centrifuge-client.mjs" --client 2 \
        --url "ws://127.0.0.1:$PORT/v1/connection/websocket" --channel "server#0" \
        --timeout-ms $((20000 * TIME_SCALE)) >"$T/ws" 2>"$T/ws.err" &
bg_track $!
count() { grep -c -- "$1" "$T/ws" 2>/dev/null || true; }
has() { [ "$(count "$1")" -ge 1 ]; }
wait_until $((20 * TIME_SCALE)) "the client subscribed" has '"event":"subscribed"'

# (As nobody: $T is traversed, not read; the script and the files are in $KA; the system
# python, not a root-only one earlier in PATH.)
KA=$T/ka.d
mkdir -p "$KA"
chmod o+x "$T"
chmod 777 "$KA"
# One HTTP/1.1 connection, kept alive: GET /token now, and again on the same socket each time
# $KA/go-N appears; one status line per answer in $KA/ka. (Its idle limit is 60 s.)
cat > "$KA/keepalive.py" <<'EOF'
import os, socket, sys, time
port, t = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port))
f = s.makefile("rb")
def ask():
    s.sendall(b"GET /token HTTP/1.1\r\nHost: localhost\r\n\r\n")
    status = f.readline().decode().strip()
    length = 0
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        k, _, v = line.decode().partition(":")
        if k.lower() == "content-length":
            length = int(v)
    f.read(length)
    with open(t + "/ka", "a") as out:
        out.write(status + "\n")
ask()
for n in range(1, 10):
    deadline = time.monotonic() + 120
    while not os.path.exists("%s/go-%d" % (t, n)):
        if time.monotonic() > deadline:
            sys.exit(1)
        time.sleep(0.05)
    ask()
EOF
in_slot 0 /usr/bin/python3 "$KA/keepalive.py" "$PORT" "$KA" 2>"$T/ka.err" &
bg_track $!
ka_lines() { [ "$(grep -c '^HTTP/1.1 200' "$KA/ka" 2>/dev/null)" = "$1" ]; }
wait_until 20 "the keep-alive connection's first answer" ka_lines 1
# ss: the client's connection to the proxy, by its local port (one socket all along).
ka_port() { ss -Htn state established "( dport = :$PORT )" | awk '{ print $3 }' | sort; }
conns_before=$(ka_port)
note "connections to the local proxy: $(echo $conns_before)"

# ---- 2. Reload: M1 → M2 ----
set_metrics "127.0.0.1:$M2"
out=$(mcall Reload 2>&1) || fail "Reload to 127.0.0.1:$M2 refused: $out"
wait_until 20 "metrics on $M2" serves "127.0.0.1:$M2"
wait_until 20 "$M1 refuses connections" refuses "127.0.0.1:$M1"
assert_ok "log: the move" grep -q "metrics.listen: 127.0.0.1:$M1 → 127.0.0.1:$M2" "$T/slotd.log"
assert_ok "log: the proxy serves the new address" grep -q \
        "Serving metrics on 127.0.0.1 port $M2 (metrics.listen)" "$T/slotd.log"
assert_eq "$(proxy_pid)" "$P" "the same proxy process"
touch "$KA/go-1"
wait_until 20 "the keep-alive connection answered again" ka_lines 2

# ---- 3. An address in use refuses the Reload; the old one still serves ----
python3 -c "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', $IN_USE)); s.listen(); time.sleep(3600)" &
bg_track $!
taken() { ss -Htln | grep -q "127.0.0.1:$IN_USE "; }
wait_until 10 "$IN_USE taken" taken
set_metrics "127.0.0.1:$IN_USE"
out=$(mcall Reload 2>&1) && fail "Reload to an address in use succeeded"
assert_ok "Reload refused, naming the address: $out" grep -qF \
        "metrics.listen: cannot listen on 127.0.0.1:$IN_USE (Address already in use); 127.0.0.1:$M2 still serves" \
        <<<"$out"
assert_eq "$(metrics_status "127.0.0.1:$M2")" 200 "the old address still serves"

# ---- 4. on → off → on ----
set_metrics off
out=$(mcall Reload 2>&1) || fail "Reload to off refused: $out"
wait_until 20 "$M2 refuses connections" refuses "127.0.0.1:$M2"
assert_eq "$(proxy_pid)" "$P" "the same proxy process (metrics off)"
touch "$KA/go-2"
wait_until 20 "the keep-alive connection answered (metrics off)" ka_lines 3
set_metrics "127.0.0.1:$M1"
out=$(mcall Reload 2>&1) || fail "Reload to 127.0.0.1:$M1 refused: $out"
wait_until 20 "metrics on $M1 again" serves "127.0.0.1:$M1"
assert_eq "$(proxy_pid)" "$P" "the same proxy process (metrics on again)"
touch "$KA/go-3"
wait_until 20 "the keep-alive connection answered (metrics on again)" ka_lines 4

# The game servers' connections: never closed, the subscription kept and still hearing events.
assert_eq "$(ka_port | paste -sd' ')" "$(echo $conns_before)" "the connections to the local proxy"
assert_eq "$(count '"event":"disconnected"')" 0 "the Centrifuge client was never disconnected"
assert_ok "no WebSocket ended" bash -c "! grep -q 'WebSocket of connection [0-9]* ends' '$T/slotd.log'"
scall 0 Allocate ss alloc-m "" >/dev/null
wait_until $((10 * TIME_SCALE)) "the allocation reaches the client" has '"AllocationID":"alloc-m"'
assert_eq "$(count '"event":"subscribed"')" 1 "the client kept its one subscription"

# ---- 5. A slotd restarted now attaches to the proxy: its hello names M1 ----
stop_slotd
start_slotd
wait_until 20 "slotd attached to the proxy" grep -q \
        "Attached to the local proxy $P an earlier slotd left running" "$T/slotd.log"
assert_eq "$(metrics_status "127.0.0.1:$M1")" 200 "metrics after the restart"
touch "$KA/go-4"
wait_until 20 "the keep-alive connection answered (after slotd's restart)" ka_lines 5
stop_slotd
stop_proxies

# ---- 6. The local proxy off: the process runs for metrics alone ----
: > "$T/slotd.log"
METRICS_LISTEN=off write_config
start_slotd
wait_prop 0 ProcessState running
assert_eq "$(proxy_pid)" "" "no proxy (the local proxy and metrics off)"
set_metrics "127.0.0.1:$M2"
out=$(mcall Reload 2>&1) || fail "Reload to 127.0.0.1:$M2 refused (local proxy off): $out"
wait_until 20 "metrics on $M2 (the proxy for metrics alone)" serves "127.0.0.1:$M2"
has_proxy() { [ -n "$(proxy_pid)" ]; }
wait_until 20 "a proxy runs" has_proxy
P=$(proxy_pid)
assert_ok "log: the proxy started for metrics only" grep -q \
        "Local proxy started as process $P on 0 addresses, metrics on 127.0.0.1:$M2" "$T/slotd.log"
set_metrics off
out=$(mcall Reload 2>&1) || fail "Reload to off refused (local proxy off): $out"
wait_until 20 "the proxy $P exited (and was reaped)" gone
assert_eq "$(proxy_pid)" "" "no proxy after metrics off"
assert_ok "$M2 refuses connections" refuses "127.0.0.1:$M2"
assert_ok "log: stopped" grep -q "metrics.listen is off: stopping the local proxy $P" "$T/slotd.log"
assert_ok "log: reaped" grep -q "Local proxy $P has exited" "$T/slotd.log"
# slotd outlived its reaping of the proxy (it once aborted there, in sd-event) and answers.
out=$(mcall Reload 2>&1) || fail "Reload after the proxy was stopped: $out"
assert_ok "slotd still runs" kill -0 "$SLOTD_PID"
finish
