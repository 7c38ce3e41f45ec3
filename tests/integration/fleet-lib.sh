# SPDX-License-Identifier: MIT
# Simulated fleet hosts on this one machine (issue 15), sourced after lib.sh and etcd-lib.sh.
# Host K is its own dbus-daemon, slotd and slotd-registry, with its own configuration
# ($T/hosts/K/etc), state_dir, slots_dir, bus, cgroup subtree ($CG/host-K), machine.id,
# machine.ip and port ranges (none overlapping another host's). The host's daemons run in
# $CG/host-K/daemons and its slot tree is $CG/host-K/slots, so cgroup.kill of $CG/host-K is
# the whole host gone at once. Allocator replica R listens on a free loopback port and runs
# in $CG/alloc-R. lib.sh's cleanup ends all of it (CLEANUP_HOOKS, then the cgroup tree).
#
# Tunables (set before sourcing or before the first fleet_host_start):
#   FLEET_NAME (game), FLEET_SLOTS (slots per host, 4; at most 20 with the default
#   fleet_game_port), FLEET_PREFIX (/slotd/v1),
#   FLEET_LEASE_TTL (fleet.lease_ttl, seconds), FLEET_CLAIM_TIMEOUT (allocator.claim_timeout,
#   seconds), FLEET_STRATEGY (packed), FLEET_PORT_BASE (41000), FLEET_REGION_OF (a function
#   K -> region id; default one region), FLEET_BUILD_CONFIGURATION (fleet.build_configuration),
#   FLEET_LOG_LEVEL (SLOTD_LOG_LEVEL of every daemon started here: debug; benchmarks: info),
#   FLEET_ALLOCATOR_EXTRA (text appended to each allocator replica's allocator.ini, e.g. a
#   [scaler] section).
FLEET_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

FLEET_NAME=${FLEET_NAME:-game}
FLEET_SLOTS=${FLEET_SLOTS:-4}
FLEET_PREFIX=${FLEET_PREFIX:-/slotd/v1}
FLEET_LEASE_TTL=${FLEET_LEASE_TTL:-5}
FLEET_CLAIM_TIMEOUT=${FLEET_CLAIM_TIMEOUT:-5}
FLEET_STRATEGY=${FLEET_STRATEGY:-packed}
FLEET_BUILD_CONFIGURATION=${FLEET_BUILD_CONFIGURATION:-1001}
# Ports of host K: game FLEET_PORT_BASE + 40 K + i, query that + 20 (i < 20). The other
# integration tests use 20000-37999 (fixed, per test); 41000-42999 is this harness's.
FLEET_PORT_BASE=${FLEET_PORT_BASE:-41000}
FLEET_PROJECT=${FLEET_PROJECT:-5c5a9c63-6b53-4a6e-9b7c-2f5c1e0d0a01}
FLEET_ENVIRONMENT=${FLEET_ENVIRONMENT:-8e2d7f51-3c44-4d8e-a1f0-6b9e2c7d4e02}
FLEET_ADMIN_GROUP=${FLEET_ADMIN_GROUP:-adm}
# allocator.environments: this test's project environment, and FLEET_MORE_ENVIRONMENTS
# ("<projectId>/<environmentId> ..."); allocator.failed_ttl (seconds).
FLEET_MORE_ENVIRONMENTS=${FLEET_MORE_ENVIRONMENTS:-}
FLEET_FAILED_TTL=${FLEET_FAILED_TTL:-600}
declare -f FLEET_REGION_OF >/dev/null || FLEET_REGION_OF() { echo "0f8a6b3e-2d1c-4e5f-9a7b-1c2d3e4f5a6b"; }

command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
command -v curl >/dev/null || skip "curl is not installed"
command -v jq >/dev/null || skip "jq is not installed"
getent group "$FLEET_ADMIN_GROUP" >/dev/null ||
        skip "no group '$FLEET_ADMIN_GROUP' for supervisor.admin_group (the registry's group)"

declare -A FH_BUS_PID=() FH_SLOTD_PID=() FH_REGISTRY_PID=() FA_PID=() FA_PORT=()
FLEET_TOKEN=
FLEET_WATCH_PIDS=()

fleet_dir() { echo "$T/hosts/$1"; }
fleet_bus() { echo "unix:path=$T/hosts/$1/bus"; }
fleet_cg() { echo "$CG/host-$1"; }
# 32 hex digits, as /etc/machine-id; host K's sorts after host K-1's (placement ties go to
# the lowest machine ID, SPEC §13).
fleet_machine_id() { printf 'f1ee7%03x%024x\n' "$1" $((0xa11 + $1)); }
fleet_ip() { echo "192.0.2.$((10 + $1))"; }
fleet_game_port() { echo $((FLEET_PORT_BASE + 40 * $1 + $2)); }
# Host K's machine number: machine.number is not set, so slotd derives it from the machine ID
# (SPEC §2); the Allocations API's machineId.
fleet_machine_number() { machine_number_of "$(fleet_machine_id "$1")"; }
fleet_host_of_machine() { # machine number (the API's machineId) -> K, or nothing
        local k
        for k in "${!FH_BUS_PID[@]}"; do
                [ "$(fleet_machine_number "$k")" = "$1" ] && { echo "$k"; return 0; }
        done
        return 1
}
# api_machine_id: the machineId of the Allocations API's answer on stdin (one allocation), as
# it is written, and only if it is a JSON integer: read from the text, as jq 1.6 reads every
# number as a double and a machine number may need 63 bits, and without a Python, which costs
# the TCG VM a second a start (unity_schema.py checks the whole answer's types).
api_machine_id() {
        local body re='"machineId"[[:space:]]*:[[:space:]]*(-?(0|[1-9][0-9]*))[[:space:]]*[,}]'
        body=$(cat)
        if [[ $body =~ $re ]]; then echo "${BASH_REMATCH[1]}"; return 0; fi
        echo "machineId is no JSON integer in: $body" >&2
        return 1
}

# in_cgroup DIR COMMAND...: COMMAND (exec'd, so $! is its pid) in cgroup DIR, made if needed.
# Call it with &.
in_cgroup() {
        local dir=$1
        shift
        mkdir -p "$dir"
        echo "$BASHPID" > "$dir/cgroup.procs"
        exec "$@"
}

# fleet_write_config K: host K's slotd.ini and its fleet file.
fleet_write_config() {
        local k=$1 d
        d=$(fleet_dir "$k")
        mkdir -p "$d/etc/fleets.d"
        cat > "$d/etc/slotd.ini" <<EOC
[machine]
id = $(fleet_machine_id "$k")
ip = $(fleet_ip "$k")
cpus = $FLEET_SLOTS
memory = 8G

[supervisor]
cgroup = $(fleet_cg "$k")/slots
state_dir = $d/state
slots_dir = $d/slots
bus = $(fleet_bus "$k")
admin_group = $FLEET_ADMIN_GROUP

[localproxy]
listen = off

[metrics]
listen = off
EOC
        if [ -n "${SLOTD_REGISTRY:-}" ]; then
                cat >> "$d/etc/slotd.ini" <<EOC

[fleet]
etcd_endpoints = ${ETCD_ENDPOINTS:?etcd-lib.sh sets ETCD_ENDPOINTS}
prefix = $FLEET_PREFIX
lease_ttl = $FLEET_LEASE_TTL
registry_user = nobody
EOC
        fi
        local g q
        g=$(fleet_game_port "$k" 0)
        q=$((g + 20))
        cat > "$d/etc/fleets.d/$FLEET_NAME.ini" <<EOC
[fleet]
build = $TEST_SERVER
args = --server-id \${SERVER_ID} --port \${PORT} --query-port \${QUERY_PORT}
stop_timeout = 2s
build_configuration = $FLEET_BUILD_CONFIGURATION
region_id = $(FLEET_REGION_OF "$k")
[usage]
cpu = 1
memory = 64M
servers = $FLEET_SLOTS
[ports]
game_base = $g
query_base = $q
[checks]
readiness = notify
EOC
}

fleet_bus_start() {
        local k=$1 d
        d=$(fleet_dir "$k")
        sed -e "s|<listen>.*</listen>|<listen>$(fleet_bus "$k")</listen>|" "$T/bus.conf" > "$d/bus.conf"
        rm -f "$d/bus"
        in_cgroup "$(fleet_cg "$k")/daemons" dbus-daemon --config-file="$d/bus.conf" --nofork \
                --nosyslog >>"$d/dbus.log" 2>&1 &
        FH_BUS_PID[$k]=$!
        wait_until 10 "host $k's bus socket" test -S "$d/bus"
}

fleet_slotd_running() {
        kill -0 "${FH_SLOTD_PID[$1]}" 2>/dev/null || fail "host $1's slotd exited during start-up"
        busctl --address="$(fleet_bus "$1")" status org.slotd.Supervisor1 >/dev/null 2>&1
}
# fleet_slotd_start K: host K's slotd (again), on its bus; returns once it owns its name.
fleet_slotd_start() {
        local k=$1 d
        d=$(fleet_dir "$k")
        SLOTD_LOG_LEVEL=${FLEET_LOG_LEVEL:-debug} in_cgroup "$(fleet_cg "$k")/daemons" "$SLOTD" \
                --config "$d/etc/slotd.ini" >>"$d/slotd.log" 2>&1 &
        FH_SLOTD_PID[$k]=$!
        wait_until $((20 * TIME_SCALE)) "host $k's slotd on its bus" fleet_slotd_running "$k"
}
# fleet_registry_start K: host K's slotd-registry, started as nobody with the admin group as
# its one supplementary group (as a unit would give it; nobody is in no group here, so the
# registry's own drop from root, which takes the user's groups, would leave it out).
fleet_registry_start() {
        local k=$1 d
        d=$(fleet_dir "$k")
        [ -n "${SLOTD_REGISTRY:-}" ] || return 0
        SLOTD_LOG_LEVEL=${FLEET_LOG_LEVEL:-debug} in_cgroup "$(fleet_cg "$k")/daemons" \
                setpriv --reuid=nobody --regid=nogroup \
                --groups="$(getent group "$FLEET_ADMIN_GROUP" | cut -d: -f3)" \
                "$SLOTD_REGISTRY" --config "$d/etc/slotd.ini" --bus "$(fleet_bus "$k")" \
                >>"$d/registry.log" 2>&1 &
        FH_REGISTRY_PID[$k]=$!
}

# fleet_host_start K: host K up: bus, slotd (its slots running), registry. The host's machine
# key in etcd is awaited by fleet_wait_registered.
fleet_host_start() {
        local k=$1
        [ -f "$(fleet_dir "$k")/etc/slotd.ini" ] || fleet_write_config "$k"
        fleet_bus_start "$k"
        fleet_slotd_start "$k"
        fleet_registry_start "$k"
}

# reap PID: waits for a child that was killed (its status is of no interest).
reap() { [ -z "$1" ] || wait "$1" 2>/dev/null || true; }

cg_unpopulated() { grep -q '^populated 0' "$1/cgroup.events"; }
cg_kill_tree() {
        if [ -e "$1/cgroup.kill" ]; then
                echo 1 > "$1/cgroup.kill"
        else
                local d
                for d in $(find "$1" -type d); do
                        xargs -r kill -9 < "$d/cgroup.procs" 2>/dev/null || true
                done
        fi
}

# fleet_host_kill K: host K gone at once: its bus, slotd, registry, keepers and game servers
# SIGKILLed together (cgroup.kill of its subtree; FLEET_KILLED_MS is when). Returns once its
# cgroup is empty.
fleet_host_kill() {
        local k=$1
        cg_kill_tree "$(fleet_cg "$k")"
        FLEET_KILLED_MS=$((${EPOCHREALTIME/./} / 1000))
        reap "${FH_SLOTD_PID[$k]:-}"
        reap "${FH_REGISTRY_PID[$k]:-}"
        reap "${FH_BUS_PID[$k]:-}"
        FH_SLOTD_PID[$k]= FH_REGISTRY_PID[$k]= FH_BUS_PID[$k]=
        wait_until 10 "host $k's cgroup empty" cg_unpopulated "$(fleet_cg "$k")"
}
# fleet_slotd_kill K: host K's slotd alone SIGKILLed; its servers, bus and registry stay.
fleet_slotd_kill() {
        local k=$1
        kill -KILL "${FH_SLOTD_PID[$k]}"
        reap "${FH_SLOTD_PID[$k]}"
        FH_SLOTD_PID[$k]=
}
fleet_registry_kill() {
        local k=$1
        kill -KILL "${FH_REGISTRY_PID[$k]}"
        reap "${FH_REGISTRY_PID[$k]}"
        FH_REGISTRY_PID[$k]=
}

# on_host K COMMAND...: a lib.sh helper (sprop, mprop, scall, mcall, list_slots, slot_of,
# wait_prop, one_server...) run against host K's slotd.
on_host() {
        local BUS
        BUS=$(fleet_bus "$1")
        shift
        "$@"
}

# fleet_slots K: host K's ListSlots as lines "K id State ProcessState uuid" (uuid "-" when
# none), the truth the fleet's view is checked against.
# ListSlots is a(ussssso) and none of its strings has a blank: busctl's plain output is read
# seven words an entry (a JSON parser per call would cost more than the call).
fleet_slots() {
        busctl --address="$(fleet_bus "$1")" call org.slotd.Supervisor1 /org/slotd/Supervisor1 \
                org.slotd.Supervisor1.Manager ListSlots |
                awk -v k="$1" '
                        function s(v) { gsub(/"/, "", v); return v }
                        { for (i = 3; i + 6 <= NF; i += 7) {
                                u = s($(i + 4))
                                print k, $i, s($(i + 2)), s($(i + 3)), (u == "" ? "-" : u)
                        } }'
}
# fleet_wait_running K...: every slot of each host runs its server.
fleet_all_running() {
        [ "$(fleet_slots "$1" | awk '$4 == "running"' | wc -l)" = "$FLEET_SLOTS" ]
}
fleet_wait_running() {
        local k
        for k in "$@"; do
                wait_until $((20 * TIME_SCALE)) "every slot of host $k running" fleet_all_running "$k"
        done
}

# ---- the allocator ----

fleet_token() {
        if [ -z "$FLEET_TOKEN" ]; then
                FLEET_TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
                printf '%s\n' "$FLEET_TOKEN" > "$T/fleet-token"
                chown nobody "$T/fleet-token"
                chmod 600 "$T/fleet-token"
        fi
}
fleet_allocator_up() {
        kill -0 "${FA_PID[$1]}" 2>/dev/null || fail "allocator $1 exited during start-up"
        curl -s -o /dev/null "http://127.0.0.1:${FA_PORT[$1]}/metrics"
}
# fleet_allocator_start R: replica R of slotd-allocator, as nobody, on a free loopback port
# (FA_PORT[R]) with the bearer token of $T/fleet-token; returns once it has read the fleet
# view (its metric slotd_allocator_fleet_view_ready).
fleet_allocator_start() {
        local r=$1
        : "${SLOTD_ALLOCATOR:?SLOTD_ALLOCATOR must name the slotd-allocator binary}"
        fleet_token
        FA_PORT[$r]=$(free_port)
        cat > "$T/allocator-$r.ini" <<EOC
[allocator]
listen = 127.0.0.1:${FA_PORT[$r]}
token_file = $T/fleet-token
claim_timeout = $FLEET_CLAIM_TIMEOUT
strategy = $FLEET_STRATEGY
environments = $FLEET_PROJECT/$FLEET_ENVIRONMENT $FLEET_MORE_ENVIRONMENTS
failed_ttl = ${FLEET_FAILED_TTL}s

[etcd]
endpoints = ${ETCD_ENDPOINTS:?etcd-lib.sh sets ETCD_ENDPOINTS}
prefix = $FLEET_PREFIX
EOC
        printf '%s\n' "${FLEET_ALLOCATOR_EXTRA:-}" >> "$T/allocator-$r.ini"
        SLOTD_LOG_LEVEL=${FLEET_LOG_LEVEL:-debug} in_cgroup "$CG/alloc-$r" \
                setpriv --reuid=nobody --regid=nogroup \
                --clear-groups "$SLOTD_ALLOCATOR" --config "$T/allocator-$r.ini" \
                >>"$T/allocator-$r.log" 2>&1 &
        FA_PID[$r]=$!
        wait_until $((10 * TIME_SCALE)) "allocator $r listening" fleet_allocator_up "$r"
        wait_until $((10 * TIME_SCALE)) "allocator $r has read the fleet view" fleet_allocator_ready "$r"
}
fleet_allocator_ready() {
        curl -s "$(fleet_url "$1" /metrics)" | grep -qx 'slotd_allocator_fleet_view_ready 1'
}
fleet_allocator_kill() {
        local r=$1
        kill -KILL "${FA_PID[$r]}"
        reap "${FA_PID[$r]}"
        FA_PID[$r]=
}
fleet_url() { echo "http://127.0.0.1:${FA_PORT[$1]}${2:-}"; }
# The collection of this test's allocations (SPEC §13), relative to a replica's base URL.
fleet_allocations() {
        local env="projects/$FLEET_PROJECT/environments/$FLEET_ENVIRONMENT"
        echo "/v1/allocations/$env/fleets/${1:-$FLEET_NAME}/allocations"
}

# fleet_http R METHOD PATH [BODY]: prints "STATUS BODY" (one line; STATUS 000 when no answer
# came within FLEET_HTTP_TIMEOUT seconds). fleet_post / fleet_get / fleet_delete name the
# method.
fleet_http() {
        local r=$1 method=$2 path=$3 body=${4:-} out file="$T/http.$BASHPID"
        local args=(-sS -m "${FLEET_HTTP_TIMEOUT:-$((10 * TIME_SCALE))}" -o "$file"
                -w '%{http_code}' -X "$method" -H "Authorization: Bearer $FLEET_TOKEN")
        [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
        out=$(curl "${args[@]}" "$(fleet_url "$r" "$path")" 2>/dev/null) || true
        [ -n "${FLEET_UNITY_SCHEMA:-}" ] && fleet_unity_check "$method" "$path" "${out:-000}" "$file"
        printf '%s %s\n' "${out:-000}" "$(tr -d '\n' < "$file" 2>/dev/null)"
        rm -f "$file"
}
# With FLEET_UNITY_SCHEMA set, every 200 of the Allocations API is kept in $T/unity-schema.d
# (one file per answer, named after its class, the request on its first line) and
# fleet_unity_checked checks them all against Unity's client classes (unity_schema.py) in one
# Python process: one per answer cost the TCG VM seconds each (test-allocator took 716 s there).
fleet_unity_check() {
        local method=$1 path=${2%%\?*} status=$3 file=$4 kind keep
        [ "$status" = 200 ] && [[ $path == /v1/allocations/* ]] || return 0
        if [ "$method" = POST ]; then kind=AllocateResponse
        elif [[ $path == */allocations ]]; then kind=ListAllocationsResponse
        else kind=Allocation; fi
        mkdir -p "$T/unity-schema.d"
        keep="$T/unity-schema.d/$kind.$BASHPID.$SRANDOM$SRANDOM"
        printf '%s %s\n%s\n' "$method" "$2" "$(<"$file")" >"$keep"
}
# fleet_unity_checked MIN: at least MIN answers were checked, and each was of Unity's class.
fleet_unity_checked() {
        local out n
        out=$(python3 "$FLEET_LIB_DIR/unity_schema.py" --dir "$T/unity-schema.d" 2>&1)
        n=${out##*checked: }
        assert_eq "$(sed '$d' <<<"$out")" "" \
                "every answer of the Allocations API decodes as Unity's classes (checked: $n)"
        assert_ok "at least $1 answers checked against Unity's classes (checked: $n)" \
                [ "$(find "$T/unity-schema.d" -type f | wc -l)" -ge "$1" ]
}
fleet_post() { fleet_http "$1" POST "$2" "$3"; }
fleet_get() { fleet_http "$1" GET "$2"; }
fleet_delete() { fleet_http "$1" DELETE "$2"; }

# json FIELD: FIELD (a.b for nested) of the JSON object on stdin: a string as it is, "" when
# absent, anything else as compact JSON (numbers, true/false, lists). Not an object: "". No
# input: nothing. Not JSON, or a path through a value that is no object: nothing, and a
# non-zero status, as jq -r answered. (Python through py_in: a jq start costs the TCG VM a
# quarter of a CPU second; and integers are exact.)
json() {
        py_in 'import json, sys
text = sys.stdin.read()
if not text.strip():
    sys.exit(0)
try:
    v = json.loads(text)
except ValueError:
    sys.exit(4)
if not isinstance(v, dict):
    v = None
for part in sys.argv[1].split("."):
    if v is None:
        break
    if not isinstance(v, dict):
        sys.exit(5)
    v = v.get(part)
if isinstance(v, float) and v.is_integer():
    v = int(v)
if v is None:
    print("")
elif isinstance(v, str):
    print(v)
else:
    print(json.dumps(v, separators=(",", ":"), ensure_ascii=False))' "$1" 2>/dev/null
}

# ---- etcd, read directly ----

fleet_etcdctl() { ectl "$@"; }
# etcd_leader: the index (etcd-lib.sh's 1..N) of the member that leads now; none without one.
etcd_leader() {
        local i
        for ((i = 1; i <= ETCD_N; i++)); do
                [ -n "${ETCD_PID[i]:-}" ] || continue
                curl -sf -m 2 -X POST -d '{}' "$(etcd_url "${ETCD_CLIENT_PORT[i]}")/v3/maintenance/status" |
                        jq -e '.leader != null and .leader == .header.member_id' >/dev/null &&
                        { echo "$i"; return 0; }
        done
        return 1
}
# fleet_etcd_count PREFIX: how many keys start with FLEET_PREFIX/PREFIX.
fleet_etcd_count() { fleet_etcdctl get --prefix "$FLEET_PREFIX/$1" --keys-only | grep -c . || true; }
fleet_etcd_get() { fleet_etcdctl get --print-value-only "$FLEET_PREFIX/$1"; }
fleet_machine_registered() { [ -n "$(fleet_etcd_get "machines/$(fleet_machine_id "$1")")" ]; }
fleet_machine_gone() { [ "$(fleet_etcd_count "slots/$FLEET_NAME/$(fleet_machine_id "$1")/")" = 0 ] &&
        ! fleet_machine_registered "$1"; }
# fleet_wait_registered K...: each host's machine key and all its slot keys are in etcd.
fleet_host_registered() {
        fleet_machine_registered "$1" &&
                [ "$(fleet_etcd_count "slots/$FLEET_NAME/$(fleet_machine_id "$1")/")" = "$FLEET_SLOTS" ]
}
fleet_wait_registered() {
        local k
        for k in "$@"; do
                wait_until $((20 * TIME_SCALE)) "host $k registered in etcd" fleet_host_registered "$k"
        done
}

# fleet_watch PREFIX FILE: every etcd event under FLEET_PREFIX/PREFIX from the current
# revision on (so none is missed while the watch connects), appended to FILE as lines
# "MS_SINCE_EPOCH line-of-etcdctl-watch" (PUT/DELETE, key, value each a line). It runs in the
# test's cgroup tree ($CG/watch): fleet_watch_stop or the cleanup ends it.
fleet_watch() {
        local rev
        rev=$(fleet_etcdctl get / -w json | jq -r .header.revision)
        (
                in_cgroup_self "$CG/watch"
                fleet_etcdctl watch --prefix --rev=$((rev + 1)) "$FLEET_PREFIX/$1" |
                        while read -r l; do echo "$((${EPOCHREALTIME/./} / 1000)) $l"; done
        ) >> "$2" 2>/dev/null &
        FLEET_WATCH_PIDS+=($!)
}
fleet_watch_stop() {
        local p
        [ -d "$CG/watch" ] && cg_kill_tree "$CG/watch"
        for p in "${FLEET_WATCH_PIDS[@]}"; do reap "$p"; done
        FLEET_WATCH_PIDS=()
}
in_cgroup_self() { mkdir -p "$1" && echo "$BASHPID" > "$1/cgroup.procs"; }
# fleet_event_ms FILE TYPE KEY: when the watch of FILE saw the first event TYPE (PUT or
# DELETE) of KEY (FLEET_PREFIX/KEY).
fleet_event_ms() {
        awk -v t="$2" -v k="$FLEET_PREFIX/$3" '$2 == t { getline; if ($2 == k) { print $1; exit } }' "$1"
}
fleet_event_seen() { [ -n "$(fleet_event_ms "$@")" ]; }

# etcd_move_leader I: leadership handed to member I (etcd's move-leader), once it leads.
etcd_move_leader() {
        local to=$1 from id
        from=$(etcd_leader) || fail "etcd has no leader to move"
        [ "$from" = "$to" ] && return 0
        id=$(fleet_etcdctl member list | awk -F', ' -v n="m$to" '$3 == n { print $1 }')
        ETCDCTL_API=3 etcdctl --endpoints="$(etcd_url "${ETCD_CLIENT_PORT[from]}")" \
                move-leader "$id" >/dev/null || fail "etcd move-leader to member $to failed"
        wait_until $((10 * TIME_SCALE)) "etcd member $to leading" etcd_leader_is "$to"
}
etcd_leader_is() { [ "$(etcd_leader)" = "$1" ]; }

# ---- cleanup ----

# Registries and allocators first (so that none acts on a half-gone host), then every slotd
# with SIGTERM, as lib.sh does for its own; lib.sh then empties the cgroup tree. On failure
# the last lines of each log are shown; a sanitizer report in any log fails the test.
fleet_cleanup() {
        local rc=$1 k r pid bad=0 log
        fleet_watch_stop
        for r in "${!FA_PID[@]}"; do [ -n "${FA_PID[$r]}" ] && kill -TERM "${FA_PID[$r]}" 2>/dev/null; done
        for k in "${!FH_REGISTRY_PID[@]}"; do
                [ -n "${FH_REGISTRY_PID[$k]}" ] && kill -TERM "${FH_REGISTRY_PID[$k]}" 2>/dev/null
        done
        for pid in "${FA_PID[@]}" "${FH_REGISTRY_PID[@]}"; do reap "$pid"; done
        for k in "${!FH_SLOTD_PID[@]}"; do
                [ -n "${FH_SLOTD_PID[$k]}" ] && kill -TERM "${FH_SLOTD_PID[$k]}" 2>/dev/null
        done
        for pid in "${FH_SLOTD_PID[@]}"; do reap "$pid"; done
        for pid in "${FH_BUS_PID[@]}"; do [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; reap "$pid"; done
        for log in "$T"/hosts/*/slotd.log "$T"/hosts/*/registry.log "$T"/allocator-*.log; do
                [ -f "$log" ] || continue
                if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
                        echo "---- last lines of ${log#"$T"/} ----" >&3
                        tail -n 15 "$log" >&3
                fi
                if grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$log"; then
                        echo "FAIL: sanitizer report in ${log#"$T"/}:" >&3
                        grep -E -A 30 "ERROR: (Address|Leak)Sanitizer|runtime error:" "$log" | head -n 60 >&3
                        bad=1
                fi
        done
        return $bad
}
CLEANUP_HOOKS+=(fleet_cleanup)
