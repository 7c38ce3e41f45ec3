#!/usr/bin/env bash
# The Multiplay lifecycle with servers that behave like Unity SDK game servers
# (slotd-test-server --sdk: no sd_notify; token, Centrifuge v1 subscription, readiness,
# payload and hold through the local proxy). Nothing in such a build knows of slotd: it reads
# localProxyUrl from server.json, is running once it answers its queries (checks.readiness's
# default with checks.query), readies itself when allocated, and ends its session with exit 0,
# which deallocates the slot and starts a fresh server. A server that has to subscribe again
# (its proxy gone) hears no event after it, as one on Unity's Go SDK v0.5.4; one modelling a
# client that recovers (--sdk-recovering-client, as centrifuge-js) does.
. "$(dirname "$0")/lib.sh"

PORT=$(free_port)
LOCALPROXY_LISTEN="127.0.0.1:$PORT" write_config
READINESS=default write_fleet mp "servers = 2" "[ports]" "game_base = 25700" "query_base = 25750" \
        "[checks]" "query = sqp" "interval = 2s" "query_timeout = 1s"
fleet_args mp "--sdk --sdk-session 6"
READINESS=default write_fleet held "servers = 1" "[ports]" "game_base = 25710" "query_base = 25760" \
        "[checks]" "query = sqp"
fleet_args held "--sdk --sdk-hold 120"
READINESS=exec write_fleet js "servers = 1" "[ports]" "game_base = 25720" "query_base = 25770"
fleet_args js "--sdk --sdk-recovering-client"
start_slotd
set -- $(list_slots | awk '$2 == "mp" { print $1 }')
A=$1 B=$2
H=$(list_slots | awk '$2 == "held" { print $1 }')
J=$(list_slots | awk '$2 == "js" { print $1 }')
log_of() { cat "$(sprop "$1" Home)/logs/server.log" 2>/dev/null; }
logged() { log_of "$1" | grep -q -- "$2"; }
wait_log() { wait_until "${3:-20}" "slot $1 logs '$2'" logged "$1" "$2"; }

# 1. Start: server.json names the proxy; the servers never notify, yet run (first answer to
# their query protocol), and subscribe.
assert_eq "$(server_json $A localProxyUrl)" "http://127.0.0.1:$PORT" "localProxyUrl"
for id in $A $B $J; do
        wait_prop $id ProcessState running
        wait_log $id "sdk: subscribed server#$id"
done
grep -q "slot $A (mp): first valid query answer" "$T/slotd.log" || fail "not ready by query"
assert_eq "$(grep -c "slot $A (mp): READY=1" "$T/slotd.log" || true)" 0 "READY=1 from an SDK server"

# 2. A hold made by the server itself at start.
wait_log $H "sdk: hold 200 held=true"
wait_prop $H State held

# 3. Allocation with a payload: the event reaches the server, which readies itself and
# fetches the payload.
printf '{"map":"arena","mode":"ffa"}' > "$T/payload"
mcall AllocateWithOptions sssa{sv} mp match-1 "" 1 payload ay \
        $(stat -c %s "$T/payload") $(od -An -v -tu1 "$T/payload") >/dev/null
s=$(slot_of match-1)
pid=$(sprop $s MainPID) # the session's server, before its end (6 s) can replace it
wait_log $s "sdk: allocated match-1"
wait_prop $s ReadyForPlayers true
wait_log $s "sdk: payload 200"
assert_ok "the server got the payload as given" cmp -s "$T/payload" "$(sprop $s Home)/sdk-payload"

# 4. The session ends: unready, exit 0, deallocated, a fresh server starts and subscribes.
wait_log $s "sdk: unready 204" 20
wait_prop $s AllocationUUID "" 20
assert_eq "$(sprop $s ReadyForPlayers)" false "ReadyForPlayers after the session"
wait_new_pid $s "$pid"
wait_prop $s ProcessState running
wait_until 20 "the new server subscribed" bash -c \
        "[ \$(grep -c 'sdk: subscribed server#$s' '$(sprop $s Home)/logs/server.log') -ge 2 ]"
assert_eq "$(sprop $s LastExitCode)" 0 "exit code of the session's end"

# 5. A deallocation over D-Bus reaches the server as an event.
t=$(allocate mp match-2)
wait_log $t "sdk: allocated match-2"
mcall Deallocate s match-2 >/dev/null
wait_log $t "sdk: deallocated match-2"

# 6. The proxy killed: slotd starts another, and every server connects and subscribes again.
# An SDK server is deaf from then on: the next allocation's event reaches it, and it does not
# act on it. The one that recovers hears its allocation.
# (slotd holds the listening socket too: the proxy is the process of that name.)
proxy=$(ss -Hltnp "sport = :$PORT" | grep -o '"slotd-proxy",pid=[0-9]*' | cut -d= -f2 | sort -u)
[ -n "$proxy" ] || fail "no slotd-proxy listens on the local proxy's port $PORT"
kill -KILL $proxy
for id in $A $B $H; do wait_log $id "sdk: resubscribed: deaf to events from now on" 30; done
wait_until 30 "slot $J subscribed again" bash -c \
        "[ \$(grep -c 'sdk: subscribed server#$J' '$(sprop $J Home)/logs/server.log') -ge 2 ]"
assert_eq "$(log_of $J | grep -c 'deaf' || true)" 0 "deaf lines of the recovering server"
u=$(allocate mp match-3)
wait_log $u "sdk: deaf: a publication"
assert_eq "$(log_of $u | grep -c 'sdk: allocated match-3' || true)" 0 "the deaf server acted on match-3"
assert_eq "$(sprop $u ReadyForPlayers)" false "ReadyForPlayers of the deaf server's slot"
assert_eq "$(server_state $u sdk_deaf)" 1 "sdk_deaf in the deaf server's state file"
j=$(allocate js match-4)
wait_log $j "sdk: allocated match-4"
wait_prop $j ReadyForPlayers true
finish
