#!/usr/bin/env bash
# slotd-registry (issue 15, SPEC §13) between the real slotd and a real etcd: registration
# under a lease, every slotd change in etcd (timed; the 50 ms target is reported by
# tests/bench/fleet-bench), claims allocated and confirmed, refused and undone, deallocations;
# the registry killed and restarted, slotd SIGKILLed and restarted, etcd killed and restarted.
# The registry runs as nobody with supervisor.admin_group as a supplementary group (setpriv),
# as its unit would run it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"
: "${SLOTD_REGISTRY:?SLOTD_REGISTRY must name the slotd-registry binary}"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
command -v etcdctl >/dev/null || skip "etcdctl is not installed (Debian's etcd-client)"
admin_group=adm
getent group $admin_group >/dev/null || skip "no group '$admin_group' for supervisor.admin_group"
admin_gid=$(getent group $admin_group | cut -d: -f3)

MID=$TEST_MACHINE_ID
MNUM=$(machine_number_of "$MID") # slotd's MachineNumber: machine.number is not set
P=/slotd/v1
TTL=$((2 * TIME_SCALE))
REG_PID=

chmod 777 "$T/bus" # the registry connects as nobody
etcd_cluster_start 1
MACHINE_CPUS=3 write_config
config_key supervisor "admin_group = $admin_group"
cat >> "$T/etc/slotd.ini" <<EOC
[fleet]
etcd_endpoints = $ETCD_ENDPOINTS
prefix = $P
lease_ttl = ${TTL}s
etcd_timeout = $((1 * TIME_SCALE))s
EOC
write_fleet game "[ports]" "game_base = 36700" "query_base = 36800"
fleet_key game "region_id = eu-west"
start_slotd
for i in 0 1 2; do wait_prop $i ProcessState running; done

start_registry() {
        SLOTD_LOG_LEVEL=debug setpriv --reuid=nobody --regid=nogroup --groups="$admin_gid" \
                "$SLOTD_REGISTRY" --config "$T/etc/slotd.ini" >>"$T/registry.log" 2>&1 &
        REG_PID=$!
}
registry_cleanup() {
        if [ -n "$REG_PID" ]; then
                kill -KILL "$REG_PID" 2>/dev/null
                wait "$REG_PID" 2>/dev/null
        fi
        if [ "$1" -ne 0 ] && [ -f "$T/registry.log" ]; then
                echo "---- last lines of the registry's log ----" >&3
                tail -n 40 "$T/registry.log" >&3
        fi
        # In the sanitizer build a report from the registry fails the test, as one of slotd's.
        if grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T/registry.log" 2>/dev/null; then
                echo "FAIL: sanitizer report in the registry's log:" >&3
                grep -E -A 30 "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T/registry.log" | head -n 60 >&3
                return 1
        fi
        return 0
}
CLEANUP_HOOKS=(registry_cleanup "${CLEANUP_HOOKS[@]}")

# The distribution's python: a version manager's shim costs seconds per start on a busy host.
PY=$(command -v /usr/bin/python3 || command -v python3)
kv() { ectl get "$1" --print-value-only; }
# fields KEY NAME...: fields of the JSON document at KEY joined by '|' (strings unquoted, the
# rest as JSON); field KEY NAME: one.
fields() {
        kv "$1" | py_in 'import json, sys
d = json.load(sys.stdin)
print("|".join(v if isinstance(v, str) else json.dumps(v) for v in (d[k] for k in sys.argv[1:])))' "${@:2}"
}
field() { fields "$1" "$2"; }
field_is() { [ "$(field "$1" "$2" 2>/dev/null)" = "$3" ]; }
wait_field() { wait_until "${4:-$((10 * TIME_SCALE))}" "$1 $2 = $3" field_is "$1" "$2" "$3"; }
lease_of() { ectl get "$1" -w json | py_in 'import json, sys; print(json.load(sys.stdin)["kvs"][0].get("lease", 0))'; }
nkeys() { ectl get --prefix "$1" --keys-only | grep -c . || true; }
nkeys_is() { [ "$(nkeys "$1")" = "$2" ]; }
absent() { [ "$(nkeys "$1")" = 0 ]; }
MKEY=$P/machines/$MID
skey() { echo "$P/slots/game/$MID/$1"; }
in_log() { grep -q -- "$1" "$T/registry.log"; }
field_set() { [ -n "$(field "$1" "$2" 2>/dev/null)" ]; }
lease_changed() { [ "$(lease_of "$1")" != "$2" ]; }
registered_more() { [ "$(grep -c "registered under lease" "$T/registry.log")" -gt "$1" ]; }

# ---- 1. registration: the machine key and one key per slot, under one lease ----
start_registry
wait_until $((10 * TIME_SCALE)) "the machine and its 3 slots in etcd" nkeys_is "$P/slots/game/$MID/" 3
wait_until $((10 * TIME_SCALE)) "the machine key" nkeys_is "$MKEY" 1
assert_eq "$(fields "$MKEY" machineID machineNumber ipv4 ipv6 fleets regions slots draining \
        idleTtlSec slotd faults deprovisionable)" \
        "$MID|$MNUM|192.0.2.1||[\"game\"]|[\"eu-west\"]|3|false|1800|$(mprop Version)|[]|false" \
        "machine document (machineID machineNumber ipv4 ipv6 fleets regions slots draining idleTtlSec slotd faults deprovisionable)"
assert_ok "machineNumber is a JSON number, as slotd's MachineNumber" \
        [ "$(kv "$MKEY" | jq -r '.machineNumber | type')|$(mprop MachineNumber)" = "number|$MNUM" ]
assert_ok "machine document registeredAt" [ -n "$(field "$MKEY" registeredAt)" ]
for i in 0 1 2; do
        assert_eq "$(fields "$(skey $i)" machineID machineNumber slotID fleetId regionId state \
                processState ready readyForPlayers buildConfigurationId ipv4 ipv6 gamePort queryPort \
                allocationId draining holdUntil reservedUntil)" \
                "$MID|$MNUM|$i|game|eu-west|online|running|true|false|default|192.0.2.1||$((36700 + i))|$((36800 + i))||false||" \
                "slot $i's document (machineID machineNumber slotID fleetId regionId state processState ready readyForPlayers buildConfigurationId ipv4 ipv6 gamePort queryPort allocationId draining holdUntil reservedUntil)"
done
lease=$(lease_of "$MKEY")
[ "$lease" != 0 ] || fail "the machine key has no lease"
for i in 0 1 2; do assert_eq "$(lease_of "$(skey $i)")" "$lease" "slot $i's key under the machine's lease"; done
ttl=$(ectl lease timetolive "$(printf %x "$lease")" | sed -n 's/.*granted with TTL(\([0-9]*\)s).*/\1/p')
assert_eq "$ttl" "$TTL" "the lease's TTL (fleet.lease_ttl)"
assert_ok "the registry runs without root's uid" grep -q "^Uid:[[:space:]]*65534" "/proc/$REG_PID/status"
assert_ok "and without any capability" grep -q "^CapEff:[[:space:]]*0000000000000000" "/proc/$REG_PID/status"

# ---- 2. slotd's changes reach etcd ----
hold 1 $((600 * 1000000)) >/dev/null
wait_field "$(skey 1)" state held
assert_ok "slot 1's holdUntil" [ -n "$(field "$(skey 1)" holdUntil)" ]
wait_until $((10 * TIME_SCALE)) "the machine's holdUntil" field_set "$MKEY" holdUntil
scall 1 ReleaseHold >/dev/null
wait_field "$(skey 1)" state online
assert_eq "$(field "$(skey 1)" holdUntil)" "" "slot 1's holdUntil once released"
a0=$(allocate game bus-alloc-0)
wait_field "$(skey "$a0")" allocationId bus-alloc-0
assert_eq "$(field "$(skey "$a0")" state)" allocated "the allocated slot's state"
mcall SetDraining b true >/dev/null
for i in 0 1 2; do wait_field "$(skey $i)" draining true; done
wait_field "$MKEY" draining true
mcall SetDraining b false >/dev/null
wait_field "$MKEY" draining false

# ---- 3. every change reaches etcd: PropertiesChanged as a monitor receives it -> the watch event ----
# Each of the changes must arrive (within a generous deadline); the time it took is printed as
# a note. The 50 ms bound (SPEC §13) is a timing target: tests/bench/fleet-bench reports it.
# etcd's tuning guide has etcd run with a higher CPU and disk priority than the rest of the
# machine; so do the measured path's processes here (every thread: a nice value is per
# thread), on a test host that other tests keep busy. The measuring script raises its own.
prioritize() {
        local task
        for task in /proc/"$1"/task/*; do
                renice -n -10 -p "${task##*/}" >/dev/null 2>&1 || true
                ionice -c 2 -n 0 -p "${task##*/}" >/dev/null 2>&1 || true
        done
}
for p in "${ETCD_PID[1]}" "$REG_PID" "$SLOTD_PID" "$DBUS_PID"; do prioritize "$p"; done
online=$(list_slots | awk '$3 == "online" { print $1 }' | paste -sd,)
out=$("$PY" "$(dirname "$0")/registry-latency.py" "$BUS" "${ETCD_ENDPOINTS%%,*}" "$P" "$online" \
        $((200 / TIME_SCALE)) $((10 * TIME_SCALE))) || fail "a change did not reach etcd: $out"
while read -r line; do note "$line"; done <<<"$out"
PASSED=$((PASSED + 1))
ectl del "$P/latency-probe" >/dev/null
for i in 0 1 2; do wait_field "$(skey $i)" state "$(sprop $i State)"; done

# ---- 4. a claim: allocated through slotd (payload included), the record fulfilled ----
free_slot() {
        local s
        s=$(list_slots | awk '$3 == "online" { print $1; exit }')
        [ -n "$s" ] || fail "no online slot left: $(list_slots | tr '\n' ';')"
        echo "$s"
}
record() { # record UUID SLOT [FLEET]: an allocation record as an allocator writes it
        printf '{"allocationId":"%s","projectId":"p","environmentId":"e","fleetId":"%s",%s' "$1" "${3:-game}" \
                '"buildConfigurationId":"","regionId":"","payload":"map=arena players=3",'
        printf '"status":"claimed","machineID":"%s","slotID":%s,"attempts":1,"excluded":[]}' "$MID" "$2"
}
claim() { printf '{"allocationId":"%s","fleetId":"%s","buildConfigurationId":"","payload":"map=arena players=3","deadline":""}' "$1" "${2:-game}"; }
# txn_put KEY VALUE [KEY VALUE...]: one transaction of puts, through etcd's JSON gateway.
txn_put() {
        "$PY" - "$@" <<'PY' | curl -sf -X POST "${ETCD_ENDPOINTS%%,*}/v3/kv/txn" -d @- >/dev/null
import base64, json, sys
a = sys.argv[1:]
b = lambda s: base64.b64encode(s.encode()).decode()
print(json.dumps({"success": [{"requestPut": {"key": b(a[i]), "value": b(a[i + 1])}}
                              for i in range(0, len(a), 2)]}))
PY
}
put_claim() { # put_claim UUID SLOT [FLEET]: the record and the claim, as an allocator does
        txn_put "$P/allocations/${3:-game}/$1" "$(record "$1" "$2" "${3:-game}")" \
                "$P/hosts/$MID/claims/$2" "$(claim "$1" "${3:-game}")"
}
U1=6c1f8d2e-1111-4a55-9d3e-000000000001
s1=$(free_slot)
kv_at() { # kv_at KEY REV: "mod_revision version allocationId" of KEY at revision REV
        ectl get "$1" --rev="$2" -w json | jq -r '.kvs[0] | "\(.mod_revision) \(.version) \(.value | @base64d | fromjson | .allocationId)"'
}
rev0=$(ectl get / -w json | jq -r .header.revision)
put_claim $U1 "$s1"
wait_field "$P/allocations/game/$U1" status fulfilled
rev1=$(ectl get "$P/allocations/game/$U1" -w json | jq -r '.kvs[0].mod_revision')
read -r _ v0 _ <<<"$(kv_at "$(skey "$s1")" "$rev0")"
read -r _ v1 a1 <<<"$(kv_at "$(skey "$s1")" "$rev1")"
assert_eq "$a1" $U1 "at the revision the record reads fulfilled, the slot document shows the allocation"
# slotd's signals and the confirmation carry the same document: it is written once (SPEC §13)
assert_eq "$((v1 - v0))" 1 "the slot document written once for the allocation"
assert_eq "$(sprop "$s1" AllocationUUID)" $U1 "slotd allocated the claimed slot"
assert_eq "$(fields "$P/allocations/game/$U1" machineID machineNumber slotID gamePort ipv4 projectId \
        payload)" \
        "$MID|$MNUM|$s1|$((36700 + s1))|192.0.2.1|p|map=arena players=3" \
        "the fulfilled record (machineID machineNumber slotID gamePort ipv4, and projectId payload kept)"
assert_ok "record fulfilled time" [ -n "$(field "$P/allocations/game/$U1" fulfilled)" ]
assert_ok "the claim is gone" absent "$P/hosts/$MID/claims/$s1"
assert_eq "$(field "$(skey "$s1")" allocationId)" $U1 "the slot document shows it"
assert_ok "the payload is slotd's" grep -q "map=arena players=3" "$T/state/payload/$U1"

# ---- 5. a deallocation key deallocates ----
ectl put "$P/hosts/$MID/deallocations/$U1" "{\"allocationId\":\"$U1\",\"fleetId\":\"game\",\"slotID\":$s1}" >/dev/null
wait_prop "$s1" AllocationUUID ""
wait_until $((10 * TIME_SCALE)) "the deallocation key deleted" absent "$P/hosts/$MID/deallocations/"
wait_field "$(skey "$s1")" allocationId ""
# One for an allocation slotd does not have: the key goes all the same.
ectl put "$P/hosts/$MID/deallocations/$U1" "{\"allocationId\":\"$U1\",\"fleetId\":\"game\",\"slotID\":$s1}" >/dev/null
wait_until $((10 * TIME_SCALE)) "the deallocation key of an unknown allocation deleted" \
        absent "$P/hosts/$MID/deallocations/"
wait_until $((10 * TIME_SCALE)) "slotd had none" in_log "Allocation $U1 deallocated (slotd had none)"

# A record rewritten while slotd allocates (the registry reads it beside slotd's work, slotd
# stopped meanwhile): the confirmation's compare fails on the record alone; the record is read
# anew and the allocation confirmed on it.
U7=6c1f8d2e-7777-4a55-9d3e-000000000007
s7=$(free_slot)
txns() { # Txn calls etcd served (the gateway's and gRPC's; reads in a txn included)
        curl -s "${ETCD_ENDPOINTS%%,*}/metrics" |
                awk '/^grpc_server_handled_total\{.*grpc_method="Txn"/ { n += $2 } END { printf "%d\n", n }'
}
txns_above() { [ "$(txns)" -gt "$1" ]; }
t0=$(txns)
kill -STOP "$SLOTD_PID"
put_claim $U7 "$s7"
# the claim's transaction, then the registry's read of the record (one more)
wait_until $((10 * TIME_SCALE)) "the registry read the record" txns_above $((t0 + 1))
ectl put "$P/allocations/game/$U7" "$(record $U7 "$s7" | sed 's/"attempts":1/"attempts":2/')" >/dev/null
kill -CONT "$SLOTD_PID"
wait_field "$P/allocations/game/$U7" status fulfilled
assert_eq "$(fields "$P/allocations/game/$U7" attempts slotID)" "2|$s7" \
        "the record fulfilled is the one rewritten while slotd allocated"
assert_ok "the claim is gone" absent "$P/hosts/$MID/claims/$s7"
ectl put "$P/hosts/$MID/deallocations/$U7" "{\"allocationId\":\"$U7\",\"fleetId\":\"game\",\"slotID\":$s7}" >/dev/null
wait_prop "$s7" AllocationUUID ""

# A slot document the registry sent that etcd does not hold when a confirmation is made (as
# after a flush that failed with the confirmation queued behind it; here the key is
# overwritten): a confirmation leaves a document already sent out but compares etcd's value
# with it, so it fails, and is made again with the document. The record never reads
# fulfilled without its slot's document showing the allocation (SPEC §13).
U8=6c1f8d2e-8888-4a55-9d3e-000000000008
s8=$(free_slot)
put_claim $U8 "$s8"
wait_field "$P/allocations/game/$U8" status fulfilled
ectl put "$(skey "$s8")" '{"overwritten":true}' >/dev/null
# the same allocation claimed again on its slot: slotd's Allocate of it is answered unchanged
put_claim $U8 "$s8"
wait_field "$P/allocations/game/$U8" status fulfilled
rev8=$(ectl get "$P/allocations/game/$U8" -w json | jq -r '.kvs[0].mod_revision')
read -r _ _ a8 <<<"$(kv_at "$(skey "$s8")" "$rev8")"
assert_eq "$a8" $U8 "at the revision the record reads fulfilled again, the slot document shows the allocation"
assert_ok "the claim is gone" absent "$P/hosts/$MID/claims/$s8"
ectl put "$P/hosts/$MID/deallocations/$U8" "{\"allocationId\":\"$U8\",\"fleetId\":\"game\",\"slotID\":$s8}" >/dev/null
wait_prop "$s8" AllocationUUID ""

# ---- 6. refusals and undo ----
# A claim of another fleet for the slot: refused, the claim deleted, the machine
# excluded in the record.
U2=6c1f8d2e-2222-4a55-9d3e-000000000002
s2=$(free_slot)
put_claim $U2 "$s2" other
wait_until $((10 * TIME_SCALE)) "the refused claim deleted" absent "$P/hosts/$MID/claims/"
wait_field "$P/allocations/other/$U2" excluded "[\"$MID\"]"
assert_eq "$(field "$P/allocations/other/$U2" status)" claimed "a refused record stays claimed"
assert_eq "$(sprop "$s2" AllocationUUID)" "" "nothing allocated for a refused claim"
# slotd refuses it: the slot is allocated already.
U3=6c1f8d2e-3333-4a55-9d3e-000000000003
put_claim $U3 "$a0"
wait_field "$P/allocations/game/$U3" excluded "[\"$MID\"]"
wait_until $((10 * TIME_SCALE)) "the claim slotd refused deleted" absent "$P/hosts/$MID/claims/"
assert_eq "$(sprop "$a0" AllocationUUID)" bus-alloc-0 "the allocated slot untouched"
# A claim whose record is gone by the time slotd allocated it: undone, the claim deleted.
U4=6c1f8d2e-4444-4a55-9d3e-000000000004
s4=$(free_slot)
ectl put "$P/hosts/$MID/claims/$s4" "$(claim $U4)" >/dev/null
wait_until $((10 * TIME_SCALE)) "the claim without a record deleted" absent "$P/hosts/$MID/claims/"
wait_until $((10 * TIME_SCALE)) "the undo logged" in_log "allocation $U4 on slot $s4 changed or lost its record"
assert_eq "$(sprop "$s4" AllocationUUID)" "" "what the claim without a record made is undone"
ectl del "$P/allocations/other/$U2" >/dev/null
ectl del "$P/allocations/game/$U3" >/dev/null

# ---- 7. the registry killed: its keys go with the lease; started again: back ----
# When the keys went is read from an etcd watch, not from a poll (etcdctl's own start takes
# most of a second in the VM): the watch starts at the revision after the kill, so a late
# start only replays the events, and can make the measured time longer, never shorter.
rev=$(ectl get "$MKEY" -w json | py_in 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
set_now_ns; t0=$NOW_NS
kill -KILL "$REG_PID"
wait "$REG_PID" 2>/dev/null || true
REG_PID=
coproc GONE_WATCH { exec env ETCDCTL_API=3 etcdctl --endpoints="$ETCD_ENDPOINTS" "${ETCDCTL_TLS[@]}" \
        watch --rev=$((rev + 1)) --prefix "$P/slots/game/$MID/" 2>/dev/null; }
gone_ns=
deadline=$((t0 + (TTL + 2 * TIME_SCALE) * 1000000000))
while [ -z "$gone_ns" ]; do
        set_now_ns
        [ "$NOW_NS" -lt "$deadline" ] || break
        left=$(((deadline - NOW_NS) / 1000000))
        ms_to_s left "$left"
        read -r -t "$left" -u "${GONE_WATCH[0]}" line || break
        [ "$line" = DELETE ] && { set_now_ns; gone_ns=$NOW_NS; }
done
kill "$GONE_WATCH_PID" 2>/dev/null; wait "$GONE_WATCH_PID" 2>/dev/null || true
[ -n "$gone_ns" ] || fail "the machine's keys not gone with the lease within $((TTL + 2 * TIME_SCALE)) s"
gone_ms=$(((gone_ns - t0) / 1000000))
wait_until $((2 * TIME_SCALE)) "the machine's keys gone with the lease" absent "$P/slots/"
assert_ok "keys gone within the TTL (+1 s of etcd's expiry sweep): ${gone_ms} ms" \
        [ "$gone_ms" -le $(((TTL + 1) * 1000)) ]
assert_ok "and the machine key" absent "$MKEY"
note "registry SIGKILLed: its keys left etcd after ${gone_ms} ms (lease TTL ${TTL} s)"
# A claim its registry had allocated in slotd but not confirmed when it died: confirmed by the
# next one (AllocateWithOptions of the UUID a slot has returns that slot).
U6=6c1f8d2e-6666-4a55-9d3e-000000000006
s6=$(free_slot)
scall "$s6" Allocate ss $U6 "" >/dev/null
put_claim $U6 "$s6"
start_registry
wait_until $((10 * TIME_SCALE)) "3 slot keys again" nkeys_is "$P/slots/game/$MID/" 3
wait_field "$(skey "$a0")" allocationId bus-alloc-0
wait_field "$P/allocations/game/$U6" status fulfilled
assert_eq "$(field "$P/allocations/game/$U6" slotID)" "$s6" "confirmed on the slot slotd has it on"
assert_ok "its claim deleted" absent "$P/hosts/$MID/claims/"
mcall Deallocate s $U6 >/dev/null
ectl del "$P/allocations/game/$U6" >/dev/null

# ---- 8. slotd SIGKILLed and started again: read anew, nothing duplicated ----
pids=$(for i in 0 1 2; do sprop $i MainPID; done | tr '\n' ' ')
lease=$(lease_of "$MKEY")
kill -KILL "$SLOTD_PID"
wait "$SLOTD_PID" 2>/dev/null || true
SLOTD_PID=
wait_until $((10 * TIME_SCALE)) "the registry saw slotd go" in_log "slotd left the bus"
# A claim while slotd is away waits for it.
U5=6c1f8d2e-5555-4a55-9d3e-000000000005
s5=$((a0 == 0 ? 1 : 0))
put_claim $U5 "$s5"
start_slotd
wait_field "$P/allocations/game/$U5" status fulfilled
assert_eq "$(sprop "$s5" AllocationUUID)" $U5 "the claim made while slotd was away"
wait_until $((10 * TIME_SCALE)) "a new lease after slotd came back" lease_changed "$MKEY" "$lease"
assert_eq "$(nkeys "$P/slots/")" 3 "one key per slot, nothing duplicated"
assert_eq "$(nkeys "$P/machines/")" 1 "one machine key"
wait_field "$(skey "$a0")" allocationId bus-alloc-0
assert_eq "$(for i in 0 1 2; do sprop $i MainPID; done | tr '\n' ' ')" "$pids" "the servers survived"
for i in 0 1 2; do assert_eq "$(lease_of "$(skey $i)")" "$(lease_of "$MKEY")" "slot $i under the new lease"; done

# ---- 9. etcd killed and started again: registered again, sessions untouched ----
registrations=$(grep -c "registered under lease" "$T/registry.log")
etcd_kill 1
s9=$(free_slot)
hold "$s9" $((600 * 1000000)) >/dev/null # a change while etcd is away
wait_until $((10 * TIME_SCALE)) "the registry notices etcd's absence" in_log "etcd: .* failed"
sessions_kept() { [ "$(sprop "$a0" AllocationUUID)|$(sprop "$s5" AllocationUUID)" = "bus-alloc-0|$U5" ]; }
stays_true $((1000 * TIME_SCALE)) "sessions untouched while etcd is away" sessions_kept
etcd_start_member 1
etcd_wait_healthy 1
wait_field "$(skey "$s9")" state held $((20 * TIME_SCALE))
assert_eq "$(nkeys "$P/slots/")" 3 "one key per slot after etcd's return"
assert_eq "$(field "$(skey "$s5")" allocationId)" $U5 "the claimed allocation in etcd"
assert_eq "$(sprop "$a0" AllocationUUID)" bus-alloc-0 "slotd's allocations kept"
assert_eq "$(for i in 0 1 2; do sprop $i MainPID; done | tr '\n' ' ')" "$pids" "no server restarted"
wait_until $((20 * TIME_SCALE)) "registered again" registered_more "$registrations"
for i in 0 1 2; do assert_eq "$(lease_of "$(skey $i)")" "$(lease_of "$MKEY")" "slot $i under the machine's lease"; done

# ---- 10. the bus daemon killed and started again: the registry connects again, reads slotd ----
lease=$(lease_of "$MKEY")
kill -KILL "$DBUS_PID"
wait "$DBUS_PID" 2>/dev/null || true
DBUS_PID=
wait_until $((10 * TIME_SCALE)) "the registry lost the bus" in_log "Lost the connection to bus"
rm -f "$T/bus"
start_bus
chmod 777 "$T/bus"
wait_until $((20 * TIME_SCALE)) "slotd back on the new bus" bus_name_owned
wait_until $((20 * TIME_SCALE)) "the registry back on the new bus" in_log "Connected to bus"
wait_until $((10 * TIME_SCALE)) "a new lease once slotd was read again" lease_changed "$MKEY" "$lease"
scall "$s9" ReleaseHold >/dev/null
wait_field "$(skey "$s9")" state online
assert_eq "$(nkeys "$P/slots/")" 3 "one key per slot after the bus came back"

# ---- 11. slotd away for longer than the lease's TTL: the machine leaves the fleet view ----
kill -KILL "$SLOTD_PID"
wait "$SLOTD_PID" 2>/dev/null || true
SLOTD_PID=
wait_until $((TTL + 3 * TIME_SCALE)) "the machine out of the fleet view without slotd" absent "$P/slots/"
assert_ok "its machine key too" absent "$MKEY"
start_slotd
wait_until $((10 * TIME_SCALE)) "back with slotd" nkeys_is "$P/slots/game/$MID/" 3
wait_field "$(skey "$s5")" allocationId $U5
assert_eq "$(for i in 0 1 2; do sprop $i MainPID; done | tr '\n' ' ')" "$pids" "no server restarted"

# ---- 12. a clean stop revokes the lease: the machine leaves at once ----
kill -TERM "$REG_PID"
wait "$REG_PID" || fail "the registry exited with $? on SIGTERM"
REG_PID=
assert_ok "keys gone at once on SIGTERM" absent "$P/slots/"
assert_ok "machine key gone" absent "$MKEY"

# ---- 13. started as root, it becomes fleet.registry_user ----
config_key fleet "registry_user = nobody"
SLOTD_LOG_LEVEL=debug "$SLOTD_REGISTRY" --config "$T/etc/slotd.ini" >>"$T/registry.log" 2>&1 &
REG_PID=$!
wait_until $((10 * TIME_SCALE)) "registered by the registry started as root" nkeys_is "$P/slots/" 3
assert_ok "root dropped for nobody" grep -q "^Uid:[[:space:]]*65534[[:space:]]*65534[[:space:]]*65534" "/proc/$REG_PID/status"
assert_ok "no capability left" grep -q "^CapPrm:[[:space:]]*0000000000000000" "/proc/$REG_PID/status"
assert_ok "no_new_privs" grep -q "^NoNewPrivs:[[:space:]]*1" "/proc/$REG_PID/status"
finish
