#!/usr/bin/env bash
# The local proxy (issue 13, SPEC §11) in front of the real slotd: every HTTP endpoint a
# Multiplay SDK calls, driven with curl from inside a slot's cgroup (the game server's place)
# and from the host; the wrong-slot and wrong-state cases; payloads that survive a SIGKILL of
# slotd; the proxy restarted when it dies.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || skip "curl is not installed"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"

PORT=$(free_port)
LOCALPROXY_LISTEN="127.0.0.1:$PORT" write_config
write_fleet game "servers = 2" "[ports]" "game_base = 25400" "query_base = 25450"
# supervisor.admin_group: the proxy knows a caller by its uid alone (sock_diag), so membership
# is the user's in the group database; group daemon is user daemon's own (base-passwd).
getent passwd daemon >/dev/null && getent group daemon >/dev/null ||
        skip "no user and group daemon to test supervisor.admin_group with"
config_key supervisor "admin_group = daemon"
start_slotd
set -- $(list_slots | awk '$2 == "game" { print $1 }')
A=$1 B=$2
for id in $A $B; do wait_prop $id ProcessState running; done
URL="http://127.0.0.1:$PORT"
wait_until 20 "the local proxy answering on $URL" curl -s --max-time 2 -o /dev/null "$URL/token"
# sock_diag works here: its self-test at the proxy's start raised no fault (a host without it:
# test-sockdiag-missing).
assert_eq "$(mprop Faults)" 0 "Faults on a normal start"
# The proxy links libmicrohttpd without TLS (localproxy/tls-off.c, docs/localproxy.md): no
# gnutls, nor any library gnutls loads, is mapped in it.
proxy=$(pgrep -P $SLOTD_PID -x slotd-proxy) || fail "no slotd-proxy child of slotd"
assert_eq "$(grep -oE '/[^ ]*lib(gnutls|nettle|hogweed|gmp|p11-kit|tasn1|idn2|unistring|ffi|microhttpd)[^ /]*$' \
        /proc/$proxy/maps | sort -u)" "" "gnutls and its libraries mapped in the proxy"
assert_ok "the proxy is running, with libmicrohttpd in its own executable" \
        grep -q "$(readlink -f "$(dirname "$SLOTD")/slotd-proxy")" /proc/$proxy/maps
# (That it refuses a daemon asked for TLS is tests/unit/test-tls-off.c's.)

as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
as_daemon() { setpriv --reuid=daemon --regid=daemon --clear-groups "$@"; }
# http WHO METHOD PATH [BODY]: prints "STATUS BODY"; WHO is a slot id, "host" (root) or
# "nobody" (an unprivileged process of the host) or "admin" (user daemon, of admin_group).
http() {
        local who=$1 method=$2 path=$3 body=${4:-} run=()
        case $who in
                host) run=() ;;
                nobody) run=(as_nobody) ;;
                admin) run=(as_daemon) ;;
                *) run=(in_slot "$who") ;;
        esac
        "${run[@]}" curl -s --max-time 10 -w ' %{http_code}' -X "$method" \
                ${body:+-H 'Content-Type: application/json' --data "$body"} "$URL$path" |
                awk '{ code = $NF; $NF = ""; sub(/ $/, ""); print code " " $0 }'
}
expect_http() { # expect_http WHO METHOD PATH BODY STATUS [BODY-PATTERN]
        local out
        out=$(http "$1" "$2" "$3" "$4" | tr -d '\000')
        [ "${out%% *}" = "$5" ] || fail "$1 $2 $3: expected HTTP $5, got '$out'"
        [ -z "${6:-}" ] || grep -qE -- "$6" <<<"$out" || fail "$1 $2 $3: '$out' lacks /$6/"
        PASSED=$((PASSED + 1))
        echo "$out"
}

# 1. Token: a slot's server gets one naming it; root on the host too; nobody else.
out=$(expect_http $A GET /token "" 200 '"error": ?""')
tok=$(sed -E 's/.*"token": ?"([^"]*)".*/\1/' <<<"$out")
assert_eq "$(tr -cd . <<<"$tok")" ".." "a JWT has three parts"
claims=$(cut -d. -f2 <<<"$tok" | tr '_-' '/+' | base64 -d 2>/dev/null || true)
assert_ok "the token names server $A ($claims)" grep -q "\"server_id\": \?$A" <<<"$claims"
expect_http host GET /token "" 200 >/dev/null
expect_http nobody GET /token "" 403 '"error"' >/dev/null

# 2. Hold: the slot's own server may; another slot's and a stranger may not.
t0=$(date +%s)
out=$(expect_http $A POST /v1/servers/$A/hold '{"timeout":"2m"}' 200 '"held": ?true')
t1=$(date +%s) # the request may take seconds in the VM on a busy host
exp=$(sed -E 's/.*"expiresAt": ?([0-9]+).*/\1/' <<<"$out")
assert_between "$exp" $((t0 + 119)) $((t1 + 121)) "expiresAt of a 2m hold"
assert_eq "$(sprop $A State)" held "State after the proxy's hold"
assert_near "$(sprop $A HoldUntilUSec)" $((exp * 1000000)) 1000000 "HoldUntilUSec"
expect_http $A GET /v1/servers/$A/hold "" 200 "\"expiresAt\": ?$exp" >/dev/null
expect_http $B POST /v1/servers/$A/hold '{"timeout":"1m"}' 403 'slot' >/dev/null
expect_http nobody POST /v1/servers/$A/hold '{"timeout":"1m"}' 403 >/dev/null
# A member of supervisor.admin_group outside any slot may, as root may.
expect_http admin GET /v1/servers/$A/hold "" 200 "\"expiresAt\": ?$exp" >/dev/null
expect_http admin GET /token "" 200 '"error": ?""' >/dev/null
# A server asking for a slot that is not its own learns nothing of it, not even whether it
# exists: 403 before 404. Root learns that there is no such slot.
expect_http $A POST /v1/servers/99/hold '{"timeout":"1m"}' 403 'own slot only.*not 99' >/dev/null
expect_http $A PATCH /v1/servers/99/allocations/x '{"ready":true}' 403 >/dev/null
expect_http host POST /v1/servers/99/hold '{"timeout":"1m"}' 404 'No slot 99' >/dev/null
expect_http $B DELETE /v1/servers/$A/hold "" 403 >/dev/null
assert_eq "$(sprop $A State)" held "a refused release changed nothing"
expect_http $A DELETE /v1/servers/$A/hold "" 204 >/dev/null
assert_eq "$(sprop $A State)" online "State after the proxy's release"
expect_http $A DELETE /v1/servers/$A/hold "" 409 'not held' >/dev/null
expect_http $A POST /v1/servers/$A/hold '{"timeout":"soon"}' 400 >/dev/null
expect_http $A POST /v1/servers/$A/hold 'not json' 400 >/dev/null
expect_http $A GET /v1/servers/$A/nothing "" 404 >/dev/null
expect_http $A PUT /v1/servers/$A/hold '{}' 405 >/dev/null

# 3. Readiness: PATCH with the slot's allocation sets ReadyForPlayers; a stale or unknown
# allocation is refused and changes nothing; a new allocation clears it.
printf 'map=arena\0players=3' > "$T/payload"
bctl call org.slotd.Supervisor1 /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager \
        AllocateWithOptions sssa{sv} game alloc-1 "" 1 payload ay \
        $(stat -c %s "$T/payload") $(od -An -v -tu1 "$T/payload") >/dev/null
s=$(slot_of alloc-1)
o=$([ "$s" = "$A" ] && echo $B || echo $A)
assert_eq "$(sprop $s ReadyForPlayers)" false "ReadyForPlayers of a new allocation"
expect_http $s PATCH /v1/servers/$s/allocations/alloc-0 '{"ready":true}' 404 'alloc-1' >/dev/null
assert_eq "$(sprop $s ReadyForPlayers)" false "a stale allocation changed nothing"
expect_http $o PATCH /v1/servers/$s/allocations/alloc-1 '{"ready":true}' 403 >/dev/null
expect_http $s PATCH /v1/servers/$s/allocations/alloc-1 '{"ready":"yes"}' 400 >/dev/null
expect_http $s PATCH /v1/servers/$s/allocations/alloc-1 '{"ready":true}' 204 >/dev/null
assert_eq "$(sprop $s ReadyForPlayers)" true "ReadyForPlayers after PATCH ready"
expect_http $s PATCH /v1/servers/$s/allocations/alloc-1 '{"ready":false}' 204 >/dev/null
assert_eq "$(sprop $s ReadyForPlayers)" false "ReadyForPlayers after PATCH unready"
expect_http $s PATCH /v1/servers/$s/allocations/alloc-1 '{"ready":true}' 204 >/dev/null

# 4. Payload: as given, to the allocation's own server only.
in_slot $s curl -sf --max-time 10 "$URL/payload/alloc-1" > "$T/got" || fail "GET /payload/alloc-1 from its slot"
assert_ok "the payload comes back byte for byte" cmp -s "$T/payload" "$T/got"
expect_http $o GET /payload/alloc-1 "" 403 >/dev/null
expect_http nobody GET /payload/alloc-1 "" 403 >/dev/null
expect_http host GET /payload/alloc-1 "" 200 >/dev/null

# 5. A payload and ReadyForPlayers are as durable as the allocation: SIGKILL slotd, start it
# again, both are there. The proxy outlives slotd and the new slotd attaches to it (SPEC §11):
# the same process serves on, its clients' connections untouched.
proxy_before=$(proxy_pids)
assert_eq "$(echo "$proxy_before" | wc -w)" 1 "one proxy, listening on $T/state/proxy.sock"
kill -KILL "$SLOTD_PID"
wait "$SLOTD_PID" 2>/dev/null || true
SLOTD_PID=
start_slotd
wait_until 20 "the local proxy after slotd's restart" curl -s --max-time 2 -o /dev/null "$URL/token"
assert_eq "$(proxy_pids)" "$proxy_before" "the proxy that served before slotd's SIGKILL"
# slotd takes its bus name before it attaches to the proxy: wait for the line.
wait_until $((10 * TIME_SCALE)) "log: attached to the running proxy" \
        grep -q "Attached to the local proxy $proxy_before an earlier slotd left running" "$T/slotd.log"
assert_eq "$(sprop $s AllocationUUID)" alloc-1 "allocation after SIGKILL"
assert_eq "$(sprop $s ReadyForPlayers)" true "ReadyForPlayers after SIGKILL"
in_slot $s curl -sf --max-time 10 "$URL/payload/alloc-1" > "$T/got2" || fail "GET payload after SIGKILL"
assert_ok "the payload survived slotd's SIGKILL" cmp -s "$T/payload" "$T/got2"

# 6. Deallocation ends both.
mcall Deallocate s alloc-1
assert_eq "$(sprop $s ReadyForPlayers)" false "ReadyForPlayers after Deallocate"
expect_http $s GET /payload/alloc-1 "" 404 >/dev/null
assert_ok "the payload file is gone" test ! -e "$T/state/payload/alloc-1"
expect_http $s PATCH /v1/servers/$s/allocations/alloc-1 '{"ready":true}' 404 >/dev/null

# 7. Reservation of a slot by its own server, and its end.
out=$(expect_http $A POST /v1/servers/$A/reservations '{}' 200 '"reservationId"')
assert_ok "gamePort ($out)" grep -qE '"gamePort": ?(25400|25401)[,}]' <<<"$out"
# The fleet's build configuration is "default", not a number: 0, never a string (Unity's SDKs
# decode an int64).
assert_ok "buildConfigurationId a number ($out)" grep -qE '"buildConfigurationId": ?0[,}]' <<<"$out"
grep -qE '"(requested|created|fulfilled)": ?"20[0-9]{2}-[0-9]{2}-[0-9]{2}T' <<<"$out" ||
        fail "RFC 3339 times in '$out'"
assert_eq "$(sprop $A State)" reserved "State after the proxy's reservation"
expect_http $B DELETE /v1/servers/$A/reservations "" 403 >/dev/null
expect_http $A DELETE /v1/servers/$A/reservations "" 204 >/dev/null
assert_eq "$(sprop $A State)" online "State after the reservation's end"

# 8. The proxy dies: slotd starts another, the game servers are untouched. This proxy was
# started by the slotd before the SIGKILL of step 5: the new slotd sees its end through its
# pidfd, and starts its own child.
old_proxy=$(proxy_pids)
[ -n "$old_proxy" ] || fail "no slotd-proxy on $T/state/proxy.sock"
assert_eq "$(ps -o user= -p "$old_proxy" | tr -d ' ')" nobody "the proxy's user"
pidA=$(sprop $A MainPID)
kill -KILL "$old_proxy"
wait_until 20 "a new slotd-proxy" bash -c "p=\$(pgrep -P $SLOTD_PID -x slotd-proxy) && [ \"\$p\" != $old_proxy ]"
wait_until 20 "the new proxy answering" curl -sf --max-time 2 -o /dev/null "$URL/token"
assert_eq "$(sprop $A MainPID)" "$pidA" "game server untouched by the proxy's death"
grep -q "Local proxy $old_proxy (started by an earlier slotd) has exited, restarting it" \
        "$T/slotd.log" || fail "no log line for the proxy's death"

# 9. A payload is served until localproxy.payload_ttl after it was given (Reload may change
# the TTL, not the addresses), then 404 while the allocation goes on.
# 1 s on a host; under TCG in the VM the allocation and the first GET may take longer.
config_key localproxy "payload_ttl = $((TIME_SCALE > 1 ? 3 * TIME_SCALE : 1))s"
mcall Reload >/dev/null
bctl call org.slotd.Supervisor1 /org/slotd/Supervisor1/slot/$B org.slotd.Supervisor1.Slot \
        AllocateWithOptions ssa{sv} alloc-ttl "" 1 payload ay 3 1 2 3 >/dev/null
expect_http $B GET /payload/alloc-ttl "" 200 >/dev/null
wait_until $((10 + 3 * TIME_SCALE)) "the payload's TTL" bash -c "[ \"\$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' \
        '$URL/payload/alloc-ttl')\" = 404 ]"
assert_eq "$(sprop $B AllocationUUID)" alloc-ttl "the allocation outlives its payload"

# 10. A payload is at most 30 KiB: one byte more is refused and allocates nothing; 30 KiB
# exactly is taken and served as given (the TTL back to an hour: no race with it).
sed -i "s|^payload_ttl = .*|payload_ttl = 1h|" "$T/etc/slotd.ini"
mcall Reload >/dev/null
big_allocate() { # big_allocate UUID FILE
        bctl call org.slotd.Supervisor1 /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager \
                AllocateWithOptions sssa{sv} game "$1" "" 1 payload ay \
                $(stat -c %s "$2") $(od -An -v -tu1 "$2") 2>&1
}
head -c 30721 /dev/urandom > "$T/big"
if out=$(big_allocate alloc-big "$T/big"); then fail "a payload of 30721 bytes was taken: $out"; fi
assert_ok "the refusal names the limit ($out)" grep -q "Payload of 30721 bytes: at most 30720" <<<"$out"
assert_eq "$(slot_of alloc-big)" "" "no slot allocated by the refused payload"
assert_ok "no payload file for it" test ! -e "$T/state/payload/alloc-big"
head -c 30720 /dev/urandom > "$T/big"
big_allocate alloc-big "$T/big" >/dev/null || fail "a payload of 30720 bytes was refused"
sb=$(slot_of alloc-big)
in_slot $sb curl -sf --max-time 10 "$URL/payload/alloc-big" > "$T/got-big" || fail "GET the 30 KiB payload"
assert_ok "the 30 KiB payload comes back byte for byte" cmp -s "$T/big" "$T/got-big"
sed -i "s|^listen = .*|listen = 127.0.0.1:$(free_port)|" "$T/etc/slotd.ini"
expect_merr InvalidArgument Reload

finish
