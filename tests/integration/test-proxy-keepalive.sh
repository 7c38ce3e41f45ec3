#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A WebSocket client that sends nothing stays connected as long as it is alive. Unity's Go SDK
# (centrifuge-go 0.8) pings only after 25 s without a message from the proxy, so a server that
# hears events sends nothing at all; the proxy closed it as idle after 60 s, and the SDK that
# reconnected heard nothing more. The proxy now sends a WebSocket ping after 20 s without a
# byte from the client, which the client's library answers by itself. The client here is the
# npm centrifuge 2.x (protocol v1) with its own pings 10 minutes apart: it sends nothing but
# those pongs.
. "$(dirname "$0")/lib.sh"
need_npm_clients

PORT=$(free_port)
LOCALPROXY_LISTEN="127.0.0.1:$PORT" write_config
write_fleet game "servers = 1" "[ports]" "game_base = 36700" "query_base = 36750"
start_slotd
wait_prop 0 ProcessState running
wait_until 20 "the local proxy" curl -s --max-time 2 -o /dev/null "http://127.0.0.1:$PORT/token"

in_slot 0 node "$NODE_DIR/centrifuge-client.mjs" --client 2 \
        --url "ws://127.0.0.1:$PORT/v1/connection/websocket" --channel "server#0" \
        --ping-interval-ms 600000 --timeout-ms $((20000 * TIME_SCALE)) >"$T/v1" 2>"$T/v1.err" &
bg_track $!
count() { grep -c -- "$1" "$T/v1" 2>/dev/null || true; }
has() { [ "$(count "$1")" -ge 1 ]; }
wait_until $((20 * TIME_SCALE)) "the client subscribed" has '"event":"subscribed"'

# 70 s: past the proxy's 60 s without a byte from the client, with a ping due after 20 s.
no_websocket_ended() { ! grep -q "WebSocket of connection [0-9]* ends" "$T/slotd.log"; }
stays_true 70000 "the client's WebSocket stays open (see slotd-proxy's 'ends:' line in the log)" \
        no_websocket_ended
assert_eq "$(count '"event":"disconnected"')" 0 "the client was never disconnected"
scall 0 Allocate ss alloc-k "" >/dev/null
wait_until $((10 * TIME_SCALE)) "the allocation reaches the quiet client" has '"AllocationID":"alloc-k"'
assert_eq "$(count '"event":"subscribed"')" 1 "the client kept its one subscription"
finish
