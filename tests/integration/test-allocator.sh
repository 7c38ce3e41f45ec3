#!/usr/bin/env bash
# slotd-allocator (issue 15, SPEC §13) against a real etcd, with curl as its client. Hosts are
# simulated (tests/integration/fleet_sim.py writes what a registry writes, and confirms or
# refuses claims as a registry does) so that every placement rule and every step of the
# protocol can be set up exactly; the last part runs real slotd hosts with their registries
# (fleet-lib.sh). Replicas run as nobody (setpriv), one is started as root and drops to
# allocator.user itself.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"
. "$(dirname "$0")/fleet-lib.sh"
: "${SLOTD_ALLOCATOR:?SLOTD_ALLOCATOR must name the slotd-allocator binary}"
command -v etcdctl >/dev/null || skip "etcdctl is not installed (Debian's etcd-client)"
# Debian's python3 first: a version manager's shim (pyenv's) costs seconds a start, and this
# test starts python often.
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH

SIM="python3 $(dirname "$0")/fleet_sim.py"
FLEET_UNITY_SCHEMA=1 # every 200 of the API checked against Unity's classes (fleet-lib.sh)
FLEET_PROJECT=p-test
FLEET_ENVIRONMENT=e-test
ETCD_TIMEOUT=$((2 * TIME_SCALE))

etcd_cluster_start 1
fleet_token
uuid() { cat /proc/sys/kernel/random/uuid; }
# count_keys PREFIX: how many keys etcd has under PREFIX.
count_keys() { ectl get --prefix "$1" --keys-only | grep -c . || true; }
sim() { $SIM "$ETCD_ENDPOINTS" "$@"; }

# alloc_start R PREFIX [INI LINES...]: replica R (as nobody) on its own port, with the token,
# on prefix PREFIX, allocator.claim_timeout CLAIM_TIMEOUT seconds (600: no claim of a test
# that is not about deadlines moves); returns once it has read the fleet view. alloc_stop
# R...: SIGTERM (a clean exit: the sanitizer build checks for leaks there) and reaped.
alloc_start() {
        local r=$1 prefix=$2 line
        shift 2
        FA_PORT[$r]=$(free_port)
        {
                echo "[allocator]"
                echo "listen = 127.0.0.1:${FA_PORT[$r]}"
                echo "token_file = $T/fleet-token"
                echo "claim_timeout = ${CLAIM_TIMEOUT:-600}s"
                echo "environments = $FLEET_PROJECT/$FLEET_ENVIRONMENT $FLEET_PROJECT/e-other"
                for line in "$@"; do echo "$line"; done
                echo "[etcd]"
                echo "endpoints = $ETCD_ENDPOINTS"
                echo "prefix = $prefix"
                echo "timeout = ${ETCD_TIMEOUT}s"
        } > "$T/allocator-$r.ini"
        SLOTD_LOG_LEVEL=debug in_cgroup "$CG/alloc-$r" setpriv --reuid=nobody --regid=nogroup \
                --clear-groups "$SLOTD_ALLOCATOR" --config "$T/allocator-$r.ini" \
                >>"$T/allocator-$r.log" 2>&1 &
        FA_PID[$r]=$!
        wait_until $((10 * TIME_SCALE)) "allocator $r answers" fleet_allocator_up "$r"
        wait_until $((10 * TIME_SCALE)) "allocator $r has read the fleet view" metric_is "$r" \
                slotd_allocator_fleet_view_ready 1
}
alloc_stop() {
        local r
        for r in "$@"; do
                kill -TERM "${FA_PID[$r]}"
                reap "${FA_PID[$r]}"
                FA_PID[$r]=
        done
}
metric() { curl -s "$(fleet_url "$1" /metrics)" | awk -v m="$2" '$1 == m { print $2 }'; }
metric_is() { [ "$(metric "$1" "$2")" = "$3" ]; }

# post R FLEET UUID [JSON FIELDS]: "STATUS BODY" of an allocation.
post() {
        fleet_post "$1" "$(fleet_allocations "$2")" "{\"allocationId\":\"$3\"${4:+,$4}}"
}
# post_timed R FLEET UUID [JSON FIELDS]: "MS STATUS BODY", MS the time curl measured from its
# connect to the answer's end (%{time_total}): the bound is on the allocator, and the time
# it takes to start curl (a second, at times, in the loaded TCG VM) is not the allocator's.
post_timed() {
        local out ms
        out=$(curl -sS -m $((10 * TIME_SCALE)) -o "$T/timed.body" -w '%{http_code} %{time_total}' \
                -X POST -H "Authorization: Bearer $FLEET_TOKEN" -H 'Content-Type: application/json' \
                --data-binary "{\"allocationId\":\"$3\"${4:+,$4}}" \
                "$(fleet_url "$1" "$(fleet_allocations "$2")")" 2>/dev/null) || true
        ms=${out#* }
        ms=${ms/./}
        printf '%s %s %s\n' "$((10#${ms:-0} / 1000))" "${out%% *}" "$(tr -d '\n' <"$T/timed.body" 2>/dev/null)"
        rm -f "$T/timed.body"
}
status_of() { echo "${1%% *}"; }
body_of() { echo "${1#* }"; }
get_alloc() { fleet_get "$1" "$(fleet_allocations "$2")/$3"; }
# The simulated machines by their numbers: fleet_sim.py's documents carry the number a slotd
# with machine.id = the name would have (SPEC §2), and the API tells only that number.
declare -A SIM_MACHINE
for m in m1 m2 m3 m4; do SIM_MACHINE[$(machine_number_of $m)]=$m; done
# where R FLEET UUID: "machine/slot" of an allocation, as GET tells (a simulated machine by its
# name, another by its number).
where() {
        local out n
        out=$(get_alloc "$1" "$2" "$3")
        [ "$(status_of "$out")" = 200 ] || fail "GET $3: $out"
        n=$(body_of "$out" | api_machine_id) || fail "GET $3: $out"
        echo "${SIM_MACHINE[$n]:-$n}/$(body_of "$out" | json serverId)"
}
# allocate_at R FLEET EXPECTED [JSON FIELDS]: a new allocation lands on EXPECTED (machine/slot).
allocate_at() {
        local u out
        u=$(uuid)
        out=$(post "$1" "$2" "$u" "${4:-}")
        assert_eq "$(status_of "$out")" 200 "POST in fleet $2 ($out)"
        assert_eq "$(where "$1" "$2" "$u")" "$3" "placement of the allocation in fleet $2 ${4:-}"
}

# ---- configuration refused ----

cfg_refused() { # EXPECTED-MESSAGE INI-LINES...
        local want=$1 out rc=0
        shift
        printf '%s\n' "$@" > "$T/bad.ini"
        out=$("$SLOTD_ALLOCATOR" --config "$T/bad.ini" 2>&1) || rc=$?
        assert_eq "$rc" 2 "exit status for a refused configuration"
        assert_ok "message '$want' (got: $out)" grep -qF "$want" <<<"$out"
}
cfg_refused "bad.ini:3: allocator.listen: not a loopback address, and no authentication is configured" \
        "[allocator]" "user = nobody" "listen = 0.0.0.0:$(free_port)" \
        "[etcd]" "endpoints = $ETCD_ENDPOINTS"
cfg_refused "bad.ini:2: allocator.strategy: expected packed or distributed (got 'random')" \
        "[allocator]" "strategy = random" "[etcd]" "endpoints = $ETCD_ENDPOINTS"
cfg_refused "etcd.endpoints: required" "[allocator]" "listen = 127.0.0.1:1"
cfg_refused "allocator.claim_timeout: must be between" "[allocator]" "claim_timeout = 1h" \
        "[etcd]" "endpoints = $ETCD_ENDPOINTS"
# With a token, a non-loopback address is served.
printf '%s\n' "[allocator]" "listen = 0.0.0.0:$(free_port)" "token_file = $T/fleet-token" \
        "[etcd]" "endpoints = $ETCD_ENDPOINTS" > "$T/ok.ini"
assert_ok "a non-loopback address with a token is accepted" \
        "$SLOTD_ALLOCATOR" --config "$T/ok.ini" --check

# ---- a simulated fleet: m1, m2 in eu, m3 in us; 3 ready slots each, build 1001 ----

P=/t/api
for m in m1 m2 m3; do
        echo "machine $m"
        region=eu
        [ $m = m3 ] && region=us
        for i in 0 1 2; do echo "slot game $m $i online running true 1001 $region"; done
done | sim $P -
alloc_start 1 $P
alloc_start 2 $P

note "authentication"
out=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$(fleet_url 1 "$(fleet_allocations)")" \
        -d "{\"allocationId\":\"$(uuid)\"}")
assert_eq "$out" 401 "POST without a token"
out=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer wrong-token-0123456789" \
        "$(fleet_url 1 "$(fleet_allocations)")")
assert_eq "$out" 401 "GET with a wrong token"
assert_eq "$(metric 1 slotd_allocator_cache_slots)" 9 "slots in the fleet view (metrics, no token)"

note "allocate, get, list: the shape of Multiplay's API"
U1=$(uuid)
out=$(post 1 game "$U1" '"buildConfigurationId":1001,"payload":"{\"map\":\"dust\"}"')
assert_eq "$(status_of "$out")" 200 "POST ($out)"
assert_eq "$(body_of "$out" | json allocationId)" "$U1" "POST's allocationId"
assert_eq "$(body_of "$out" | json href)" "$(fleet_allocations)/$U1" "POST's href"
# The same allocationId again, on the other replica (upper case: the same UUID): the same.
out=$(post 2 game "${U1^^}" '"buildConfigurationId":1001')
assert_eq "$(status_of "$out")" 200 "POST of the same allocationId again ($out)"
assert_eq "$(body_of "$out" | json href)" "$(fleet_allocations)/$U1" "href of the repeated POST"
out=$(get_alloc 2 game "$U1")
assert_eq "$(status_of "$out")" 200 "GET ($out)"
for f in allocationId buildConfigurationId fleetId machineId serverId gamePort status fulfilled ready \
        readiness requestId; do
        v=$(body_of "$out" | json $f)
        case $f in
        allocationId) assert_eq "$v" "$U1" $f ;;
        buildConfigurationId) assert_eq "$v" 1001 $f ;;
        fleetId) assert_eq "$v" game $f ;;
        machineId) assert_eq "$(body_of "$out" | api_machine_id)" "$(machine_number_of m1)" \
                "$f: m1's machine number, a JSON integer (packed, ties to the lowest machine ID)" ;;
        serverId) assert_eq "$v" 0 $f ;;
        gamePort) assert_eq "$v" 7000 $f ;;
        status) assert_eq "$v" claimed $f ;;
        fulfilled) assert_eq "$(body_of "$out" | jq 'has("fulfilled")')" false \
                "$f left out before the host confirmed (Unity's DateTime: never \"\")" ;;
        ready) assert_eq "$(body_of "$out" | jq 'has("ready")')" false "$f left out before it" ;;
        readiness) assert_eq "$v" false "$f before the host confirmed" ;;
        requestId) assert_ok "$f a UUID ($v)" grep -qE '^[0-9a-f]{8}-[0-9a-f]{4}-4' <<<"$v" ;;
        esac
done
REQ1=$(body_of "$out" | json requestId)
assert_eq "$(count_keys $P/hosts/m1/claims/)" 1 \
        "claims in etcd after two POSTs of one allocationId"
claim=$(ectl get $P/hosts/m1/claims/0 --print-value-only)
assert_eq "$(json payload <<<"$claim")" '{"map":"dust"}' "the claim carries the payload"

note "the host confirms: fulfilled, ready"
sim $P confirm m1 0
out=$(get_alloc 1 game "$U1")
assert_eq "$(body_of "$out" | json status)" fulfilled "status once confirmed"
assert_ok "fulfilled is a time once confirmed" test -n "$(body_of "$out" | json fulfilled)"
assert_eq "$(body_of "$out" | json readiness)" false \
        "readiness: the slot's readyForPlayers (not its process's ready) once confirmed"
assert_eq "$(body_of "$out" | jq 'has("ready")')" false "no ready time before readyForPlayers"
assert_eq "$(body_of "$out" | json requestId)" "$REQ1" \
        "requestId: the first POST's (the second of the same allocationId made none)"
sim $P players-ready game m1 0
out=$(get_alloc 2 game "$U1")
assert_eq "$(body_of "$out" | json readiness)" true "readiness once the slot is ready for players"
assert_ok "ready: the time it became so ($(body_of "$out" | json ready))" \
        test -n "$(body_of "$out" | json ready)"

U2=$(uuid)
assert_eq "$(status_of "$(post 1 game "$U2")")" 200 "a second allocation"
out=$(fleet_get 1 "$(fleet_allocations)")
assert_eq "$(body_of "$out" | jq '.allocations | length')" 2 \
        "GET of the list"
out=$(fleet_get 1 "$(fleet_allocations)?status=claimed")
assert_eq "$(body_of "$out" | jq -c '[.allocations[].allocationId]')" \
        "[\"$U2\"]" "the list of claimed allocations"
assert_eq "$(status_of "$(fleet_get 1 "$(fleet_allocations)?status=bogus")")" 400 "?status=bogus"
ids() { jq -r '[.allocations[].allocationId] | join(" ")'; }
out=$(fleet_get 1 "$(fleet_allocations)")
assert_eq "$(body_of "$out" | jq -c .pagination)" '{"limit":100,"offset":0}' "the list's pagination"
all=$(body_of "$out" | ids)
out=$(fleet_get 1 "$(fleet_allocations)?limit=1&offset=1")
assert_eq "$(body_of "$out" | ids)" "${all#* }" "limit=1&offset=1: the second of the list"
assert_eq "$(body_of "$out" | jq -c .pagination)" '{"limit":1,"offset":1}' "pagination as asked"
assert_eq "$(body_of "$(fleet_get 1 "$(fleet_allocations)?ids=${U2^^}")" | ids)" "$U2" "ids="
assert_eq "$(body_of "$(fleet_get 1 "$(fleet_allocations)?ids=$U1,$U2")" | ids)" "$all" "ids=A,B"
assert_eq "$(body_of "$(fleet_get 1 "$(fleet_allocations)?age=1h")" | ids)" "" \
        "age=1h: none requested that long ago"
assert_eq "$(body_of "$(fleet_get 1 "$(fleet_allocations)?age=0s")" | ids)" "$all" "age=0s: all"
for q in limit=0 limit=x offset=-1 age=1d ids=nope; do
        assert_eq "$(status_of "$(fleet_get 1 "$(fleet_allocations)?$q")")" 400 "?$q"
done
assert_eq "$(status_of "$(post 1 game not-a-uuid)")" 400 "POST of an allocationId that is no UUID"
assert_eq "$(status_of "$(post 1 game "$(uuid)" '"payload":{"an":"object"}')")" 400 \
        "POST with a payload that is no string"

note "projects and environments: only those of allocator.environments; each sees its own"
under() { echo "/v1/allocations/projects/$1/environments/$2/fleets/game/allocations${3:+/$3}"; }
out=$(fleet_get 1 "$(under other $FLEET_ENVIRONMENT "$U1")")
assert_eq "$(status_of "$out")" 404 "GET of an allocation under a project not served"
assert_eq "$(body_of "$out" | json error)" "project other not found" "the 404 names the project"
out=$(fleet_post 1 "$(under $FLEET_PROJECT e-nope)" "{\"allocationId\":\"$(uuid)\"}")
assert_eq "$(status_of "$out")" 404 "POST under an environment not served"
assert_eq "$(body_of "$out" | json error)" "environment e-nope of project $FLEET_PROJECT not found" \
        "the 404 names the environment"
assert_eq "$(status_of "$(fleet_post 1 "$(under nope $FLEET_ENVIRONMENT)" "{\"allocationId\":\"$(uuid)\"}")")" \
        404 "POST under a project not served"
assert_eq "$(status_of "$(fleet_get 1 "$(under $FLEET_PROJECT e-nope)")")" 404 \
        "the list under an environment not served"
assert_eq "$(status_of "$(fleet_delete 1 "$(under $FLEET_PROJECT e-nope "$U1")")")" 404 \
        "DELETE under an environment not served"
out=$(fleet_get 1 "$(under $FLEET_PROJECT e-other "$U1")")
assert_eq "$(status_of "$out")" 404 "GET under another served environment of an allocation made in e-test"
assert_eq "$(body_of "$(fleet_get 2 "$(under $FLEET_PROJECT e-other)")" | ids)" "" \
        "the list of e-other holds none of e-test's allocations"
assert_eq "$(status_of "$(fleet_delete 1 "$(under $FLEET_PROJECT e-other "$U1")")")" 404 \
        "DELETE under e-other of an allocation of e-test"
U3=$(uuid)
assert_eq "$(status_of "$(fleet_post 2 "$(under $FLEET_PROJECT e-other)" "{\"allocationId\":\"$U3\"}")")" \
        200 "POST under e-other"
assert_eq "$(body_of "$(fleet_get 1 "$(under $FLEET_PROJECT e-other)")" | ids)" "$U3" \
        "the list of e-other holds its allocation"
assert_eq "$(body_of "$(fleet_get 1 "$(fleet_allocations)?ids=$U3")" | ids)" "" \
        "the list of e-test does not"
assert_eq "$(status_of "$(get_alloc 1 game "$U3")")" 404 "GET under e-test of e-other's allocation"
assert_eq "$(status_of "$(fleet_delete 1 "$(under $FLEET_PROJECT e-other "$U3")")")" 204 \
        "DELETE under e-other of its allocation"

note "delete: the record and the claim go; a fulfilled one's host is told"
assert_eq "$(status_of "$(fleet_delete 2 "$(fleet_allocations)/$U1")")" 204 "DELETE of a fulfilled allocation"
assert_eq "$(ectl get $P/hosts/m1/deallocations/$U1 --print-value-only | json slotID)" 0 \
        "the deallocation key of its machine"
assert_eq "$(status_of "$(get_alloc 1 game "$U1")")" 404 "GET after DELETE"
assert_eq "$(status_of "$(fleet_delete 1 "$(fleet_allocations)/$U1")")" 404 "DELETE again"
c2=$(where 1 game "$U2")
assert_eq "$(status_of "$(fleet_delete 1 "$(fleet_allocations)/$U2")")" 204 "DELETE of a claimed allocation"
assert_eq "$(count_keys "$P/hosts/${c2%/*}/claims/${c2#*/}")" 0 \
        "its claim is deleted"
alloc_stop 1 2

note "placement: the tiers of SPEC §7, draining machines last, the region filter"
P=/t/tiers
sim $P - <<EOS
machine m1
machine m2 draining
machine m3
slot game m2 0 online running true b1 eu
slot game m3 0 online running true b2 eu
slot game m3 1 online running false b1 eu
slot game m3 2 available stopped false "" eu
slot game m3 3 held running true b2 eu
slot game m3 4 online running true b1 eu
slot game m1 0 online running true b1 us
EOS
# In order: ready with the build (m3/4), held (m3/3), starting with it (m3/1), available
# (m3/2), ready with another (m3/0), then the draining machine's ready one (m2/0).
alloc_start 3 $P
allocate_at 3 game m3/4 '"buildConfigurationId":"b1","regionId":"eu"'
allocate_at 3 game m3/3 '"buildConfigurationId":"b1","regionId":"eu"'
allocate_at 3 game m3/1 '"buildConfigurationId":"b1","regionId":"eu"'
allocate_at 3 game m3/2 '"buildConfigurationId":"b1","regionId":"eu"'
allocate_at 3 game m3/0 '"buildConfigurationId":"b1","regionId":"eu"'
allocate_at 3 game m2/0 '"buildConfigurationId":"b1","regionId":"eu"'
# The claim of the last resort says so (its host lets it through while draining); the others
# do not.
assert_eq "$(ectl get $P/hosts/m2/claims/0 --print-value-only | json draining)" true \
        "the claim on the draining machine says draining"
assert_eq "$(ectl get $P/hosts/m3/claims/4 --print-value-only | json draining)" false \
        "a claim on a machine not draining"
out=$(post 3 game "$(uuid)" '"regionId":"eu"')
assert_eq "$(status_of "$out")" 503 "no capacity left in eu"
assert_eq "$(body_of "$out" | json error)" "no capacity in fleet game (region eu)" "the 503's error"
allocate_at 3 game m1/0 '"regionId":"us"'
alloc_stop 3

note "placement: packed and distributed"
for s in packed distributed; do
        for m in m1 m2 m3; do
                echo "machine $m"
                for i in 0 1; do echo "slot game $m $i online running true 1001 eu"; done
        done | sim /t/$s -
        # m2 is the busiest machine: one of its slots is allocated already.
        sim /t/$s slot game m2 1 allocated running true 1001 eu "$(uuid)"
done
alloc_start 4 /t/packed "strategy = packed"
alloc_start 5 /t/distributed "strategy = distributed"
allocate_at 4 game m2/0
allocate_at 4 game m1/0
allocate_at 4 game m1/1
allocate_at 5 game m1/0
allocate_at 5 game m3/0
allocate_at 5 game m1/1
alloc_stop 4 5

note "two replicas, many concurrent clients: no slot twice"
P=/t/race
n_slots=32
for m in m1 m2 m3 m4; do
        echo "machine $m"
        for i in 0 1 2 3 4 5 6 7; do echo "slot game $m $i online running true 1001 eu"; done
done | sim $P -
alloc_start 6 $P
alloc_start 7 $P
# A client answered 503 for any cause but "no capacity" (etcd slower than its timeout on a
# loaded machine, the claim in or not; every slot tried taken first by the other replica,
# whose claims this one's view had not seen yet) asks again with the same allocationId, as a
# matchmaker would: the answer then tells.
race_client() {
        local r=$1 u out n
        u=$(uuid)
        for n in 1 2 3 4 5 6 7 8; do
                out=$(post "$r" game "$u")
                [ "$(status_of "$out")" = 503 ] && ! grep -q '"no capacity' <<<"$out" || break
        done
        echo "$(status_of "$out")" >> "$T/race.out"
}
: > "$T/race.out"
clients=()
for i in $(seq 1 48); do
        race_client $((6 + i % 2)) &
        clients+=($!)
done
wait "${clients[@]}"
assert_eq "$(grep -c '^200$' "$T/race.out")" "$n_slots" "allocations that got a slot"
assert_eq "$(grep -c '^503$' "$T/race.out")" $((48 - n_slots)) "allocations refused: no capacity"
out=$(fleet_get 6 "$(fleet_allocations)")
assert_eq "$(body_of "$out" | py_in 'import json, sys
a = json.load(sys.stdin)["allocations"]
print(len(a), len({(x["machineId"], x["serverId"]) for x in a}))')" "$n_slots $n_slots" \
        "allocations and distinct slots"
assert_eq "$(count_keys $P/hosts/)" "$n_slots" \
        "claims in etcd"
# The claims went to etcd through the group commit (SPEC §13): each replica's requests carried
# every transaction it sent (how many shared a request depends on the timing: noted only).
for r in 6 7; do
        batches=$(metric $r slotd_allocator_etcd_batches_total)
        batched=$(metric $r slotd_allocator_etcd_batched_txns_total)
        assert_ok "replica $r: $batched transactions in $batches requests" \
                test "$batches" -gt 0 -a "$batched" -ge "$batches"
        note "replica $r: $batched claim and read transactions in $batches etcd requests"
done
alloc_stop 6 7

note "a claim not confirmed by its deadline is placed elsewhere (by one replica of two)"
P=/t/deadline
printf '%s\n' "machine m1" "machine m2" "slot game m1 0 online running true 1001 eu" \
        "slot game m2 0 online running true 1001 eu" | sim $P -
CLAIM_TIMEOUT=$((2 * TIME_SCALE)) alloc_start 8 $P
CLAIM_TIMEOUT=$((2 * TIME_SCALE)) alloc_start 9 $P
U=$(uuid)
assert_eq "$(status_of "$(post 8 game "$U")")" 200 "POST"
assert_eq "$(where 8 game "$U")" m1/0 "the first claim"
on_m2() { [ "$(where 9 game "$U")" = m2/0 ]; }
wait_until $((10 * TIME_SCALE)) "the claim moved to m2 after its deadline" on_m2
rec=$(ectl get $P/allocations/game/$U --print-value-only)
assert_eq "$(json excluded <<<"$rec")" '["m1"]' "the record excludes the machine that failed it"
assert_eq "$(json attempts <<<"$rec")" 2 "the record's attempts"
assert_eq "$(count_keys $P/hosts/)" 1 "claims in etcd"
assert_ok "the old claim is gone" test -z "$(ectl get $P/hosts/m1/claims/0 --print-value-only)"
replaced() { echo $(($(metric 8 'slotd_allocator_claims_replaced_total{reason="deadline"}') + \
        $(metric 9 'slotd_allocator_claims_replaced_total{reason="deadline"}'))); }
assert_eq "$(replaced)" 1 "claims re-placed (deadline), both replicas together"
sim $P confirm m2 0
assert_eq "$(get_alloc 9 game "$U" | cut -d' ' -f2- | json status)" fulfilled "confirmed on m2"
# Its machine leaves the fleet view (its lease ended): the allocation reads lost.
ectl del $P/machines/m2 >/dev/null
lost() { [ "$(get_alloc 9 game "$U" | cut -d' ' -f2- | json status)" = lost ]; }
wait_until $((5 * TIME_SCALE)) "the allocation of a machine gone reads lost" lost
assert_eq "$(fleet_get 9 "$(fleet_allocations)?status=lost" | cut -d' ' -f2- | jq -c '[.allocations[].allocationId]')" "[\"$U\"]" "?status=lost"
alloc_stop 8 9

note "a claim refused by its host is placed elsewhere at once; with nowhere to go, failed"
P=/t/refuse
printf '%s\n' "machine m1" "machine m2" "slot game m1 0 online running true 1001 eu" \
        "slot game m2 0 online running true 1001 eu" | sim $P -
alloc_start 10 $P
U=$(uuid)
assert_eq "$(status_of "$(post 10 game "$U")")" 200 "POST"
assert_eq "$(where 10 game "$U")" m1/0 "the first claim"
sim $P refuse m1 0
on_m2() { [ "$(where 10 game "$U")" = m2/0 ]; }
wait_until $((5 * TIME_SCALE)) "the refused claim moved to m2" on_m2
assert_eq "$(metric 10 'slotd_allocator_claims_replaced_total{reason="refused"}')" 1 "claims re-placed (refused)"
sim $P refuse m2 0
failed() { [ "$(get_alloc "$1" game "$U" | cut -d' ' -f2- | json status)" = failed ]; }
wait_until $((5 * TIME_SCALE)) "the allocation refused everywhere reads failed" failed 10
out=$(get_alloc 10 game "$U")
assert_eq "$(status_of "$out")" 200 "GET of the failed allocation (not 404)"
assert_eq "$(body_of "$out" | json error)" "slotd on m2 refused it (simulated)" \
        "its error: the last host's refusal"
assert_eq "$(body_of "$out" | json serverId)" 0 "no slot holds it"
assert_eq "$(metric 10 slotd_allocator_claims_dropped_total)" 1 "claims dropped"
assert_eq "$(count_keys $P/allocation-ids/)" 1 "the failed allocation's index, kept with it"
# (etcd's lease IDs are 64-bit: read as text, not by jq, whose numbers are doubles)
lease_of() { ectl get "$1" -w json | grep -o '"lease":[0-9]*' | cut -d: -f2 || echo 0; }
L=$(lease_of $P/allocations/game/$U)
assert_ok "the failed record on a lease ($L)" test "$L" != 0
assert_eq "$(lease_of $P/allocation-ids/$U)" "$L" "its index on the same lease"
ttl=$(ectl lease timetolive "$(printf '%x' "$L")" | grep -o 'granted with TTL([0-9]*s)' || true)
assert_eq "$ttl" "granted with TTL(600s)" "the lease of allocator.failed_ttl (default 10 min)"
alloc_stop 10

note "a claim refused while no allocator runs: placed again by the next to start; or dropped"
P=/t/orphan
printf '%s\n' "machine m1" "machine m2" "slot game m1 0 online running true 1001 eu" \
        "slot game m2 0 online running true 1001 eu" | sim $P -
alloc_start 14 $P
U=$(uuid)
assert_eq "$(status_of "$(post 14 game "$U")")" 200 "POST"
assert_eq "$(where 14 game "$U")" m1/0 "the first claim"
alloc_stop 14
# The registry's refusal (one transaction: the claim deleted, m1 added to excluded) while no
# replica watches: nobody sees the claim go.
sim $P refuse m1 0
assert_eq "$(count_keys $P/hosts/)" 0 "claims in etcd after the refusal"
assert_eq "$(ectl get $P/allocations/game/$U --print-value-only | json status)" claimed \
        "the record, stranded"
alloc_start 14 $P
# Watched in etcd, not through GET (a GET places such a record again too: below).
claim_on() { [ "$(ectl get $P/hosts/$1/claims/0 --print-value-only | json allocationId)" = "$U" ]; }
wait_until $((5 * TIME_SCALE)) "the stranded record is placed again on m2 by a replica that starts" \
        claim_on m2
assert_eq "$(where 14 game "$U")" m2/0 "the record on m2"
assert_eq "$(count_keys $P/hosts/)" 1 "claims in etcd"
assert_eq "$(metric 14 'slotd_allocator_claims_replaced_total{reason="orphaned"}')" 1 \
        "claims re-placed (orphaned)"
sim $P confirm m2 0
assert_eq "$(get_alloc 14 game "$U" | cut -d' ' -f2- | json status)" fulfilled "confirmed on m2"
# The fleet full but for m1's slot: a claim there refused while no replica runs is dropped.
U=$(uuid)
assert_eq "$(status_of "$(post 14 game "$U")")" 200 "POST in the full fleet"
assert_eq "$(where 14 game "$U")" m1/0 "the claim on the last slot"
alloc_stop 14
sim $P refuse m1 0
alloc_start 14 $P
rec_failed() { [ "$(ectl get $P/allocations/game/$U --print-value-only | json status)" = failed ]; }
wait_until $((5 * TIME_SCALE)) "the stranded record with nowhere to go fails" rec_failed
assert_eq "$(get_alloc 14 game "$U" | cut -d' ' -f2- | json error)" \
        "slotd on m1 refused it (simulated)" "GET of the failed allocation: its error"
assert_eq "$(metric 14 slotd_allocator_claims_dropped_total)" 1 "claims dropped"
assert_eq "$(count_keys $P/allocations/)" 2 "records in etcd (the fulfilled one, the failed one)"
# A record claimed whose claim is gone by other means (a crash between steps, a person),
# written while a replica runs but without any claim event, its deadline passed: a GET finds
# it. Its excluded is empty: the move adds m1, as for a refusal.
sim $P slot game m3 0 online running true 1001 eu
sim $P machine m3
wait_until $((5 * TIME_SCALE)) "m3 in the fleet view" metric_is 14 slotd_allocator_cache_machines 3
wait_until $((5 * TIME_SCALE)) "m3's slot in the fleet view" metric_is 14 slotd_allocator_cache_slots 3
U=$(uuid)
ectl put $P/allocations/game/$U "$(jq -cn --arg u "$U" --arg p $FLEET_PROJECT \
        --arg e $FLEET_ENVIRONMENT '{allocationId: $u, projectId: $p, environmentId: $e,
        fleetId: "game", buildConfigurationId: "1001", regionId: "eu", payload: "",
        status: "claimed", machineID: "m1", slotID: 0, ipv4: "192.0.2.1", ipv6: "",
        gamePort: 7000, requested: "2020-01-01T00:00:00.000Z",
        claimed: "2020-01-01T00:00:00.000Z", deadline: "2020-01-01T00:00:05.000Z",
        fulfilled: "", attempts: 1, excluded: []}')" >/dev/null
# (It has no machineNumber, as a record from before it: GET tells m1's, from its document.)
assert_eq "$(where 14 game "$U")" m1/0 "the stranded record, as GET first reads it"
wait_until $((5 * TIME_SCALE)) "a GET places the stranded record again on m3" claim_on m3
assert_eq "$(where 14 game "$U")" m3/0 "the record on m3"
rec=$(ectl get $P/allocations/game/$U --print-value-only)
assert_eq "$(json excluded <<<"$rec")" '["m1"]' "the record excludes m1"
assert_eq "$(json attempts <<<"$rec")" 2 "the record's attempts"
assert_eq "$(metric 14 'slotd_allocator_claims_replaced_total{reason="orphaned"}')" 1 \
        "claims re-placed (orphaned), by the replica started last"
alloc_stop 14

note "an allocationId of another fleet: 409"
P=/t/fleets
printf '%s\n' "machine m1" "slot game m1 0 online running true 1001 eu" \
        "slot other m1 1 online running true 1001 eu" | sim $P -
alloc_start 11 $P
U=$(uuid)
assert_eq "$(status_of "$(post 11 other "$U")")" 200 "POST in fleet other"
assert_eq "$(ectl get $P/allocation-ids/$U --print-value-only | json fleetId)" other \
        "the allocationId's index, put by the claim"
out=$(post 11 game "$U")
assert_eq "$(status_of "$out")" 409 "the same allocationId in fleet game ($out)"
# What the view cannot show (another replica's claim, not seen yet: its index alone, here):
# the claim's transaction finds the index and refuses, nothing of it written.
U2=$(uuid)
ectl put $P/allocation-ids/$U2 "{\"allocationId\":\"$U2\",\"fleetId\":\"other\"}" >/dev/null
out=$(post 11 game "$U2")
assert_eq "$(status_of "$out")" 409 "an allocationId whose index names fleet other ($out)"
assert_eq "$(body_of "$out" | json error)" "allocation $U2 is of fleet other, not game" \
        "the 409 names the fleet"
assert_eq "$(count_keys $P/allocations/game/)" 0 "records of fleet game after the 409s"
assert_eq "$(count_keys $P/hosts/m1/claims/)" 1 "claims after the 409s (fleet other's)"
assert_eq "$(metric 11 'slotd_allocator_allocations_total{result="conflict"}')" 2 \
        "allocations answered 409"
# DELETE takes the index with the record: the allocationId is free again, for any fleet.
assert_eq "$(status_of "$(fleet_delete 11 "$(fleet_allocations other)/$U")")" 204 \
        "DELETE in fleet other"
assert_eq "$(count_keys $P/allocation-ids/$U)" 0 "the index, deleted with the record"
assert_eq "$(status_of "$(post 11 game "$U")")" 200 "POST in fleet game once fleet other's is gone"
alloc_stop 11

note "capacity: counts by State and ProcessState, per region and in total"
P=/t/capacity
sim $P - <<EOS
machine m1 deprovisionable
machine m2
machine m3 deprovisionable
slot game m1 0 online running true 1001 eu
slot game m1 1 held running true 1001 eu holdUntil=2030-01-01T00:00:00.000Z
slot game m2 0 allocated running true 1001 eu $(uuid)
slot game m2 1 available stopped false "" eu
slot game m3 0 online starting false 1001 us
slot other m3 1 available stopped false "" us
EOS
alloc_start 12 $P
assert_eq "$(status_of "$(post 12 game "$(uuid)" '"regionId":"eu"')")" 200 "a claim"
cap=$(fleet_get 12 /v1/fleets/game/capacity)
assert_eq "$(status_of "$cap")" 200 "GET capacity"
# an unknown fleet: 404 at POST and capacity (issue 25.2)
out=$(post 12 nofleet "$(uuid)")
assert_eq "$(status_of "$out")" 404 "POST to a fleet the view lacks ($out)"
assert_eq "$(body_of "$out" | json error | cut -d' ' -f1-3)" "fleet nofleet not" "its error"
out=$(fleet_get 12 /v1/fleets/nofleet/capacity)
assert_eq "$(status_of "$out")" 404 "capacity of a fleet the view lacks ($out)"
assert_eq "$(body_of "$cap" | py_in 'import json, sys
c = json.load(sys.stdin)
t, eu, us = c["total"], c["regions"]["eu"], c["regions"]["us"]
print(t["slots"], t["machines"], t["claimed"], t["states"]["online"], t["states"]["held"],
      t["states"]["allocated"], t["states"]["available"], t["processStates"]["running"],
      t["processStates"]["starting"], eu["slots"], eu["machines"], us["slots"], us["machines"],
      ",".join(c["deprovisionable"]), c["holdUntil"])')" \
        "5 3 1 2 1 1 1 3 1 4 2 1 1 m1,m3 2030-01-01T00:00:00.000Z" "capacity of fleet game"

note "etcd frozen (SIGSTOP): 503 once its timeout passed, never a hang"
etcd_kill 1 STOP
U=$(uuid)
out=$(post_timed 12 game "$U" '"regionId":"eu"')
took=${out%% *}
out=${out#* }
kill -CONT "${ETCD_PID[1]}"
assert_eq "$(status_of "$out")" 503 "POST with etcd frozen ($out)"
assert_ok "the 503 says etcd is unavailable: $out" grep -q '"error":"etcd unavailable' <<<"$out"
assert_ok "answered after etcd's timeout, within twice it (took ${took} ms)" \
        test "$took" -ge $((1000 * ETCD_TIMEOUT - 100)) -a "$took" -lt $((2000 * ETCD_TIMEOUT + 1000))
etcd_wait_healthy 1

note "etcd down: 503 at once; back when etcd is"
etcd_kill 1
U=$(uuid)
out=$(post_timed 12 game "$U")
took=${out%% *}
out=${out#* }
assert_eq "$(status_of "$out")" 503 "POST with etcd down ($out)"
assert_ok "the 503 says etcd is unavailable: $out" grep -q '"error":"etcd unavailable' <<<"$out"
assert_ok "answered within twice the etcd timeout (took ${took} ms)" test "$took" -lt $((2000 * ETCD_TIMEOUT + 1000))
out=$(get_alloc 12 game "$(uuid)")
assert_eq "$(status_of "$out")" 503 "GET with etcd down ($out)"
assert_ok "the allocator counted etcd's errors" test "$(metric 12 slotd_allocator_etcd_errors_total)" -gt 0
etcd_start_member 1
etcd_wait_healthy 1
ok_again() { [ "$(status_of "$(post 12 game "$(uuid)" '"regionId":"eu"')")" = 200 ]; }
wait_until $((15 * TIME_SCALE)) "allocations again once etcd is back" ok_again

note "started as root, it becomes allocator.user"
P=/t/root
FA_PORT[13]=$(free_port)
printf '%s\n' "[allocator]" "listen = 127.0.0.1:${FA_PORT[13]}" "user = nobody" \
        "token_file = $T/fleet-token" "[etcd]" "endpoints = $ETCD_ENDPOINTS" "prefix = $P" \
        > "$T/allocator-13.ini"
in_cgroup "$CG/alloc-13" "$SLOTD_ALLOCATOR" --config "$T/allocator-13.ini" \
        >>"$T/allocator-13.log" 2>&1 &
FA_PID[13]=$!
wait_until $((10 * TIME_SCALE)) "allocator 13 answers" fleet_allocator_up 13
assert_eq "$(awk '/^Uid:/ { print $2, $3, $4, $5 }' /proc/${FA_PID[13]}/status)" \
        "65534 65534 65534 65534" "the uids of an allocator started as root"
assert_eq "$(awk '/^CapEff:/ { print $2 }' /proc/${FA_PID[13]}/status)" 0000000000000000 \
        "its effective capabilities"

# ---- real hosts: slotd and its registry, allocations fulfilled through slotd ----

if [ -z "${SLOTD_REGISTRY:-}" ]; then
        note "SLOTD_REGISTRY unset: the part with real hosts is left out"
        finish
        exit 0
fi
note "real hosts: an allocation claimed, allocated by slotd, deleted"
FLEET_PREFIX=/t/real
FLEET_SLOTS=2
for k in 1 2; do fleet_host_start $k; done
fleet_wait_registered 1 2
alloc_start 20 $FLEET_PREFIX
U=$(uuid)
out=$(post 20 game "$U" "\"buildConfigurationId\":$FLEET_BUILD_CONFIGURATION,\"payload\":\"hello\"")
assert_eq "$(status_of "$out")" 200 "POST ($out)"
fulfilled() { [ "$(get_alloc 20 game "$U" | cut -d' ' -f2- | json status)" = fulfilled ]; }
wait_until $((20 * TIME_SCALE)) "the allocation fulfilled by its host" fulfilled
out=$(get_alloc 20 game "$U")
k=$(fleet_host_of_machine "$(body_of "$out" | api_machine_id)")
slot=$(body_of "$out" | json serverId)
assert_eq "$(body_of "$out" | api_machine_id)" "$(on_host "$k" mprop MachineNumber)" \
        "machineId: its slotd's MachineNumber, a JSON integer"
assert_eq "$(on_host "$k" sprop "$slot" AllocationUUID)" "$U" "slotd's slot holds the allocation"
assert_eq "$(body_of "$out" | json gamePort)" "$(on_host "$k" sprop "$slot" Port)" "the game port"
assert_eq "$(body_of "$out" | json ipv4)" "$(fleet_ip "$k")" "the machine's address"
assert_eq "$(status_of "$(fleet_delete 20 "$(fleet_allocations)/$U")")" 204 "DELETE"
deallocated() { [ -z "$(on_host "$k" sprop "$slot" AllocationUUID)" ]; }
wait_until $((20 * TIME_SCALE)) "slotd deallocated the slot" deallocated
# A record rewritten after its confirmation: the view's revision of it is stale, the DELETE
# without a read fails its compare, and the record read anew is deleted all the same.
U=$(uuid)
assert_eq "$(status_of "$(post 20 game "$U" "\"buildConfigurationId\":$FLEET_BUILD_CONFIGURATION")")" 200 "POST"
wait_until $((20 * TIME_SCALE)) "the allocation fulfilled by its host" fulfilled
out=$(get_alloc 20 game "$U")
k=$(fleet_host_of_machine "$(body_of "$out" | api_machine_id)")
slot=$(body_of "$out" | json serverId)
ectl put "$FLEET_PREFIX/allocations/game/$U" "$(ectl get "$FLEET_PREFIX/allocations/game/$U" --print-value-only)" >/dev/null
assert_eq "$(status_of "$(fleet_delete 20 "$(fleet_allocations)/$U")")" 204 "DELETE of a record rewritten since its confirmation"
assert_eq "$(count_keys "$FLEET_PREFIX/allocations/game/$U")" 0 "the rewritten record deleted"
wait_until $((20 * TIME_SCALE)) "slotd deallocated the rewritten record's slot" deallocated

note "real hosts: a draining machine is the last resort, and its slotd lets the claim through"
alloc_stop 20
on_host 1 mcall SetDraining b true >/dev/null
fleet_wait_running 1 2
# Every slot free and running in etcd, host 1's (and only its) documents draining; replica
# 21 then reads that view at its start.
view_drains_1() {
        fleet_etcdctl get --prefix "$FLEET_PREFIX/slots/$FLEET_NAME/" --print-value-only |
                jq -s -e --arg m "$(fleet_machine_id 1)" --argjson n $((2 * FLEET_SLOTS)) \
                'length == $n and all(.[]; .allocationId == "" and .state == "online" and
                        .processState == "running" and .draining == (.machineID == $m))' \
                >/dev/null &&
                [ "$(fleet_etcd_get "machines/$(fleet_machine_id 1)" | json draining)" = true ] &&
                [ "$(fleet_etcd_get "machines/$(fleet_machine_id 2)" | json draining)" = false ]
}
wait_until $((20 * TIME_SCALE)) "host 1 draining in the fleet view" view_drains_1
alloc_start 21 $FLEET_PREFIX
# fleet_allocate UUID: POST, fulfilled by its host; HOST_OF is the machine's host number.
fleet_allocate() {
        local out
        U=$1
        out=$(post 21 game "$U" '"payload":"last resort"')
        assert_eq "$(status_of "$out")" 200 "POST ($out)"
        wait_until $((20 * TIME_SCALE)) "allocation $U fulfilled by its host" fulfilled
        HOST_OF=$(fleet_host_of_machine "$(get_alloc 21 game "$U" | cut -d' ' -f2- | api_machine_id)")
}
fulfilled() { [ "$(get_alloc 21 game "$U" | cut -d' ' -f2- | json status)" = fulfilled ]; }
# Host 2 first (packed would take host 1, the lower machine ID, were it not draining), until
# it is full; then host 1, whose slotd allocates although it is draining.
for i in $(seq 1 "$FLEET_SLOTS"); do
        fleet_allocate "$(uuid)"
        assert_eq "$HOST_OF" 2 "allocation $i on the host not draining"
done
fleet_allocate "$(uuid)"
assert_eq "$HOST_OF" 1 "with host 2 full, the draining host"
out=$(get_alloc 21 game "$U")
slot=$(body_of "$out" | json serverId)
assert_eq "$(on_host 1 sprop "$slot" AllocationUUID)" "$U" "the draining slotd's slot holds it"
assert_eq "$(on_host 1 mprop Draining)" true "host 1 still draining"
assert_eq "$(json attempts <<<"$(fleet_etcd_get "allocations/game/$U")")" 1 \
        "fulfilled at the first claim (not refused, placed again)"
assert_eq "$(metric 21 slotd_allocator_claims_dropped_total)" 0 "no claim dropped"

note "every answer of the API was of Unity's classes"
fleet_unity_checked 20

finish
