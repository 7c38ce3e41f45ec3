#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# An allocation slotd made durable and was SIGKILLed before it handed the event to the local
# proxy. The proxy outlives slotd (SPEC §11), so its client keeps its connection and will not
# resubscribe (Unity's Go SDK never does successfully); the next slotd attaches to the proxy,
# which asks it for the newest event of every subscribed server (ws_resync) and passes it to
# the subscribers that have not had it. gdb stops slotd in proxy_send_event(), after the
# commit and the D-Bus reply, and kills it there. The client is the npm centrifuge 2.x (the
# protocol v1 that Unity's Go SDK speaks), in the slot's cgroup as its server would be.
. "$(dirname "$0")/lib.sh"
command -v gdb >/dev/null || skip "gdb is not installed (tests/deps.sh installs it)"
need_npm_clients

PORT=$(free_port)
LOCALPROXY_LISTEN="127.0.0.1:$PORT" write_config
write_fleet game "servers = 1" "[ports]" "game_base = 36600" "query_base = 36650"
start_slotd
wait_prop 0 ProcessState running
wait_until 20 "the local proxy" curl -s --max-time 2 -o /dev/null "http://127.0.0.1:$PORT/token"

cg=$(sprop 0 Cgroup)
bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec setpriv --reuid=65534 --regid=65534 \
         --clear-groups "$@"' client "$cg" \
        node "$NODE_DIR/centrifuge-client.mjs" --client 2 --url "ws://127.0.0.1:$PORT/v1/connection/websocket" \
        --channel "server#0" --timeout-ms $((60000 * TIME_SCALE)) >"$T/v1" 2>"$T/v1.err" &
bg_track $!
count() { grep -c -- "$1" "$T/v1" 2>/dev/null || true; }
has() { [ "$(count "$1")" -ge 1 ]; }
wait_until $((20 * TIME_SCALE)) "the client subscribed" has '"event":"subscribed"'

# gdb on slotd: stopped where an event would leave for the proxy, and killed there.
gdb_arm proxy_send_event
proxy=$(proxy_pids)
# The reply may or may not leave before the breakpoint: the allocation is durable either way
# by then (events go after the commit), which the state file shows below.
timeout 10 busctl --address="$BUS" call org.slotd.Supervisor1 /org/slotd/Supervisor1/slot/0 \
        org.slotd.Supervisor1.Slot Allocate ss alloc-r "" >/dev/null 2>&1 || true
gdb_fired proxy_send_event
assert_ok "the allocation is durable (state file)" \
        bash -c 'grep "^slot id=0 " "$1" | tail -n 1 | grep -q " uuid=alloc-r "' sh "$T/state/state"
assert_eq "$(count alloc-r)" 0 "the client has not heard of alloc-r before slotd's restart"

start_slotd
# slotd takes its bus name before it attaches to the proxy: wait for the line.
wait_until $((10 * TIME_SCALE)) "log: attached to the proxy $proxy" \
        grep -q "Attached to the local proxy $proxy an earlier slotd left running" "$T/slotd.log"
wait_until $((20 * TIME_SCALE)) "alloc-r reaches the client after the restart" has '"AllocationID":"alloc-r"'
assert_eq "$(count '"event":"subscribed"')" 1 "the client kept its one subscription"
# Another event after it: alloc-r is not told twice on the way.
mcall Deallocate s alloc-r >/dev/null
wait_until $((20 * TIME_SCALE)) "the deallocation reaches the client" has '"DeallocateEventType"'
assert_eq "$(grep -c '"AllocateEventType".*"alloc-r"' "$T/v1")" 1 "alloc-r announced once"
finish
