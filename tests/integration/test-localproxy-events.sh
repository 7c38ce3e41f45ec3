#!/usr/bin/env bash
# Allocation events through the local proxy to unmodified Centrifuge clients (issue 13): the
# npm client 2.x (protocol v1, what Unity's Go SDK speaks) and 5.x (v2), run by node inside a
# slot's cgroup as its game server would, see the Allocate and Deallocate events of busctl
# calls, in order; a client of another slot is refused that channel; a client that subscribes
# after the allocation still learns it; after slotd is SIGKILLed and started again the clients
# keep their connections (the proxy outlives slotd) and nothing is announced twice; when the
# proxy itself is SIGKILLed, they reconnect and recover.
. "$(dirname "$0")/lib.sh"
need_npm_clients

PORT=$(free_port)
LOCALPROXY_LISTEN="127.0.0.1:$PORT" write_config
write_fleet game "servers = 3" "[ports]" "game_base = 25500" "query_base = 25550"
start_slotd
set -- $(list_slots | awk '$2 == "game" { print $1 }')
A=$1 B=$2 C=$3
for id in $A $B $C; do wait_prop $id ProcessState running; done
WS="ws://127.0.0.1:$PORT/v1/connection/websocket"
wait_until 20 "the local proxy" curl -s --max-time 2 -o /dev/null "http://127.0.0.1:$PORT/token"

# client NAME ID VERSION [CHANNEL]: a real client in slot ID's cgroup, its events in $T/NAME.
client() {
        local name=$1 id=$2 version=$3 channel=${4:-server#$2} cg
        cg=$(sprop "$id" Cgroup)
        bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec setpriv --reuid=65534 \
                 --regid=65534 --clear-groups "$@"' client "$cg" \
                node "$NODE_DIR/centrifuge-client.mjs" --client "$version" --url "$WS" \
                --channel "$channel" --timeout-ms $((10000 * TIME_SCALE)) >"$T/$name" 2>"$T/$name.err" &
        bg_track $!
}
count() { grep -c "$2" "$T/$1" 2>/dev/null || true; }
has() { [ "$(count "$1" "$2")" -ge "${3:-1}" ]; }
# node starts in seconds in the TCG VM, three at once: the waits scale with TIME_SCALE.
wait_event() { wait_until "${4:-$((20 * TIME_SCALE))}" "$1: $2" has "$1" "$2" "${3:-1}"; }

client v1 $A 2
client v2 $B 5
client late $C 5
wait_event v1 '"event":"subscribed"'
wait_event v2 '"event":"subscribed"'

# 1. Another slot's channel is refused, whoever asks.
client spy $C 2 "server#$A"
wait_event spy '"event":"error"'
assert_ok "the refusal says permission denied" grep -q '"code":103' "$T/spy"
assert_eq "$(count spy publication)" 0 "publications to a refused subscriber"

# 2. Allocate and Deallocate over D-Bus reach the slot's own subscriber, in order.
scall $A Allocate ss alloc-a "" >/dev/null
scall $B Allocate ss alloc-b "" >/dev/null
wait_event v1 '"AllocationID":"alloc-a"'
wait_event v2 '"AllocationID":"alloc-b"'
assert_ok "v1: an AllocateEventType for server $A" \
        grep -q "\"EventType\":\"AllocateEventType\".*\"ServerID\":$A" "$T/v1"
assert_eq "$(count v1 alloc-b)" 0 "v1 never hears of slot $B's allocation"
mcall Deallocate s alloc-a >/dev/null
wait_event v1 '"DeallocateEventType"'
assert_eq "$(grep -o '"EventType":"[A-Za-z]*"' "$T/v1" | paste -sd,)" \
        '"EventType":"AllocateEventType","EventType":"DeallocateEventType"' "v1 events in order"
ev_id=$(grep -o '"EventID":"[^"]*"' "$T/v2" | head -1)

# 3. A server that subscribes after its slot was allocated still learns the allocation.
wait_event late '"event":"subscribed"'
scall $C Allocate ss alloc-c "" >/dev/null
wait_event late '"AllocationID":"alloc-c"'
client late2 $C 2
wait_event late2 '"AllocationID":"alloc-c"'
assert_eq "$(count late2 AllocateEventType)" 1 "the late v1 subscriber hears the allocation once"

# 4. slotd SIGKILLed and started again: the proxy outlives it and the new slotd attaches to it
# (SPEC §11), so the clients keep their connections and subscriptions (Unity's Go SDK hears no
# event after a resubscription); nothing is announced twice, and what happens next arrives on
# the same connections.
subs_v1=$(count v1 '"event":"subscribed"')
subs_v2=$(count v2 '"event":"subscribed"')
proxy=$(proxy_pids)
kill -KILL "$SLOTD_PID"
wait "$SLOTD_PID" 2>/dev/null || true
SLOTD_PID=
before_v2=$(count v2 publication)
start_slotd
# slotd takes its bus name before it attaches to the proxy: wait for the line.
wait_until $((10 * TIME_SCALE)) "log: slotd attached to the proxy $proxy" \
        grep -q "Attached to the local proxy $proxy an earlier slotd left running" "$T/slotd.log"
assert_eq "$(count v2 publication)" "$before_v2" "v2 publications after the restart, before news"
assert_eq "$(count v2 alloc-b)" 1 "alloc-b announced once across slotd's restart"
assert_eq "$(grep -o '"EventID":"[^"]*"' "$T/v2" | head -1)" "$ev_id" "the EventID is stable"
mcall Deallocate s alloc-b >/dev/null
wait_event v2 '"DeallocateEventType"'
scall $A Allocate ss alloc-a2 "" >/dev/null
wait_event v1 '"AllocationID":"alloc-a2"'
assert_eq "$(count v1 alloc-a2)" 1 "v1 hears the next allocation once"
assert_eq "$(count v1 '"event":"subscribed"')" "$subs_v1" "v1 kept its subscription across slotd's restart"
assert_eq "$(count v2 '"event":"subscribed"')" "$subs_v2" "v2 kept its subscription across slotd's restart"
assert_eq "$(proxy_pids)" "$proxy" "the same proxy serves after slotd's restart"

# 5. The proxy SIGKILLed while both clients' slots are allocated: slotd starts another, the
# clients reconnect and recover, and neither allocation is announced again. The Deallocate
# events after it come through the same connections, in order, behind anything the new proxy
# could have sent on the resubscription: then each allocation's count is final.
scall $B Allocate ss alloc-b2 "" >/dev/null
wait_event v2 '"AllocationID":"alloc-b2"'
subs_v1=$(count v1 '"event":"subscribed"')
subs_v2=$(count v2 '"event":"subscribed"')
proxy=$(proxy_pids)
[ -n "$proxy" ] || fail "no slotd-proxy on $T/state/proxy.sock"
kill -KILL "$proxy"
wait_event v1 '"event":"subscribed"' $((subs_v1 + 1)) $((30 * TIME_SCALE))
wait_event v2 '"event":"subscribed"' $((subs_v2 + 1)) $((30 * TIME_SCALE))
assert_ok "a new proxy" test "$(pgrep -P "$SLOTD_PID" -x slotd-proxy)" != "$proxy"
mcall Deallocate s alloc-a2 >/dev/null
mcall Deallocate s alloc-b2 >/dev/null
wait_event v1 '"DeallocateEventType".*"alloc-a2"'
wait_event v2 '"DeallocateEventType".*"alloc-b2"'
assert_eq "$(grep -c '"AllocateEventType".*"alloc-a2"' "$T/v1")" 1 "v1: alloc-a2 announced once across the proxy's restart"
assert_eq "$(grep -c '"AllocateEventType".*"alloc-b2"' "$T/v2")" 1 "v2: alloc-b2 announced once across the proxy's restart"
assert_ok "log: the proxy's death" \
        grep -q "Local proxy $proxy (started by an earlier slotd) has exited" "$T/slotd.log"

finish
