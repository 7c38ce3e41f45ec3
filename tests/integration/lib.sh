# SPDX-License-Identifier: MIT
# Shared harness for the integration tests: a private dbus-daemon, a private cgroup subtree, a
# private state directory, the real slotd driven through busctl. Sourced by each test-*.sh.
# Every wait polls with a deadline; nothing sleeps a fixed time and hopes.
set -euo pipefail

: "${SLOTD:?SLOTD must name the slotd binary}"
: "${TEST_SERVER:?TEST_SERVER must name the test game server binary}"

# The time every line on stderr starts with when stderr is not the journal (docs/configuration.md):
# UTC, RFC 3339 with milliseconds. For grep -E.
LOG_TIME='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'

skip() {
        echo "skipped: $*"
        exit 77
}
# fd 3 is the test's stderr, even inside conditions whose output is thrown away.
exec 3>&2

# Clocks and naps without a process: in the TCG VM of tests/vm every exec costs 0.1-0.5 s, so a
# poll loop that ran `date` and `sleep` twice a turn spent most of its time starting them.
# TIME_SCALE: 1 on a host, 3 in the TCG VM of tests/vm (it sets SLOTD_VM=1; SLOTD_TIME_SCALE
# overrides), for check intervals that a start-up must not fill: there a test server's
# start-up costs about 0.15 CPU seconds, on a host a hundredth of that.
TIME_SCALE=${SLOTD_TIME_SCALE:-${SLOTD_VM:+3}}
TIME_SCALE=${TIME_SCALE:-1}
# now_ns: CLOCK_REALTIME in ns, as `date +%s%N` (bash's EPOCHREALTIME, µs).
now_ns() { local t=${EPOCHREALTIME//[!0-9]/}; echo "${t}000"; }
# NOW_NS: the same, into a variable, without even a subshell: set_now_ns; use $NOW_NS.
set_now_ns() { NOW_NS=${EPOCHREALTIME//[!0-9]/}000; }
# nap SECONDS: sleep (fractions too) in bash itself: a read that times out on a pipe that
# never has data (its writer end held open by us).
exec {NAP_FD}<> <(:)
nap() { read -r -t "$1" -u "$NAP_FD" _ || true; }
# ms_to_s VAR MS: VAR = MS milliseconds as seconds with three decimals (for read -t and nap),
# without a subshell.
ms_to_s() { printf -v "$1" '%d.%03d' $(($2 / 1000)) $(($2 % 1000)); }
fail() {
        echo "FAIL: $*" >&3
        if [ -n "${T:-}" ] && [ -f "$T/slotd.log" ]; then
                echo "---- last lines of slotd's log ----" >&3
                tail -n 40 "$T/slotd.log" >&3 || true
        fi
        exit 1
}
note() { echo "# $*"; }

[ "$(id -u)" -eq 0 ] || skip "needs root (cgroups, setuid to the fleet user)"
command -v dbus-daemon >/dev/null || skip "dbus-daemon is not installed"
command -v busctl >/dev/null || skip "busctl is not installed"

CG_MOUNT=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
[ -n "$CG_MOUNT" ] || skip "no cgroup v2 mount on this host"

T=$(mktemp -d /tmp/slotd-it.XXXXXX)
chmod 755 "$T"
CG="$CG_MOUNT/slotd-it-$$-$RANDOM"
BUS="unix:path=$T/bus"
SLOTD_PID=
DBUS_PID=
PASSED=0
BG_PIDS=()
# py CODE ARG...: as `python3 -c CODE ARG...` with no standard input; py_in CODE ARG...: the
# same, given ours. Each runs in a process forked from tests/integration/pyserve.py, which this
# test starts once: in the TCG VM a python3 start costs about half a CPU second, and the
# harness reads JSON (ListSlots, server.json, etcd's documents) with python, often in polls.
# Should the server not answer, python3 runs the snippet itself: the same result, slower.
PY_SERVE_PORT_FILE=$T/pyserve.port
if [ -x /usr/bin/python3 ]; then PY_SERVE_PYTHON=/usr/bin/python3; else PY_SERVE_PYTHON=python3; fi
"$PY_SERVE_PYTHON" "$(dirname "${BASH_SOURCE[0]}")/pyserve.py" "$PY_SERVE_PORT_FILE" </dev/null &
BG_PIDS+=($!)
py() { py_request "" "$@"; }
py_in() {
        local input
        IFS= read -r -d '' input || true
        py_request "$input" "$@"
}
py_request() {
        local LC_ALL=C input=$1 port fd req a st olen elen out= err= i
        shift
        for ((i = 0; i < 500; i++)); do
                read -r port 2>/dev/null <"$PY_SERVE_PORT_FILE" && break
                nap 0.02
        done
        if [ -z "$port" ] || ! exec {fd}<>"/dev/tcp/127.0.0.1/$port"; then
                printf '%s' "$input" | "$PY_SERVE_PYTHON" -c "$@"
                return
        fi
        req="$# ${#input}"$'\n'
        for a; do req+="${#a}"$'\n'"$a"; done
        printf '%s' "$req$input" >&"$fd"
        if ! IFS=' ' read -r -t 120 -u "$fd" st olen elen; then
                exec {fd}>&-
                echo "py: no answer from pyserve.py" >&2
                return 1
        fi
        [ "$olen" = 0 ] || IFS= read -r -N "$olen" -u "$fd" out
        [ "$elen" = 0 ] || IFS= read -r -N "$elen" -u "$fd" err
        exec {fd}>&-
        printf '%s' "$out"
        [ -z "$err" ] || printf '%s' "$err" >&2
        return "$st"
}

# Functions cleanup calls, with the test's exit status, before it stops slotd and empties the
# cgroup tree; one that returns non-zero fails the test (fleet-lib.sh stops its hosts there).
CLEANUP_HOOKS=()

# Kill every process of the test's cgroup tree, then remove it bottom-up.
cleanup_cgroup() {
        [ -d "$CG" ] || return 0
        local d deadline=$((SECONDS + 10))
        for d in $(find "$CG" -mindepth 0 -type d | sort -r); do
                if [ -e "$d/cgroup.kill" ]; then
                        echo 1 > "$d/cgroup.kill" 2>/dev/null || true
                else
                        xargs -r kill -9 < "$d/cgroup.procs" 2>/dev/null || true
                fi
        done
        for d in $(find "$CG" -mindepth 0 -type d | sort -r); do
                while ! rmdir "$d" 2>/dev/null; do
                        [ $SECONDS -lt $deadline ] || { echo "warning: could not remove $d" >&2; break; }
                        nap 0.05
                done
        done
}

# The local proxy outlives slotd (it waits for the next slotd on <state_dir>/proxy.sock, SPEC
# §11): proxy_pids lists the proxies whose control socket is under $T, stop_proxies ends them.
proxy_pids() {
        ss -Hxlp 2>/dev/null | awk -v t="$T/" 'index($5, t) == 1 && $5 ~ /\/proxy\.sock$/' |
                grep -o 'pid=[0-9]*' |
                cut -d= -f2 | sort -u
}
stop_proxies() {
        local p pids deadline=$((SECONDS + 10))
        pids=$(proxy_pids)
        [ -n "$pids" ] || return 0
        for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
        for p in $pids; do
                while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do nap 0.05; done
                kill -KILL "$p" 2>/dev/null || true
        done
}

# Mounts a test made (track_mount DIR), taken off after slotd and the cgroup tree are gone,
# in reverse order, before $T is removed.
MOUNTS=()
track_mount() { MOUNTS+=("$1"); }

cleanup() {
        local rc=$? i
        set +e
        for i in "${BG_PIDS[@]}"; do
                kill "$i" 2>/dev/null
                wait "$i" 2>/dev/null
        done
        BG_PIDS=()
        for i in "${CLEANUP_HOOKS[@]}"; do
                "$i" "$rc" || { [ $rc -eq 0 ] && rc=1; }
        done
        if [ -n "$SLOTD_PID" ] && kill -0 "$SLOTD_PID" 2>/dev/null; then
                kill -CONT "$SLOTD_PID" 2>/dev/null || true # a test that stopped it failed
                kill -TERM "$SLOTD_PID" 2>/dev/null || true
                wait "$SLOTD_PID" 2>/dev/null || true
        fi
        stop_proxies
        # In the sanitizer build any report from slotd fails the test, whatever it asserted.
        if [ -f "$T/slotd.log" ] &&
           grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T/slotd.log"; then
                echo "FAIL: sanitizer report in slotd's log:" >&3
                grep -E -A 30 "ERROR: (Address|Leak)Sanitizer|runtime error:" "$T/slotd.log" | head -n 60 >&3
                [ $rc -eq 0 ] && rc=1
        fi
        cleanup_cgroup
        for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
                mountpoint -q "${MOUNTS[i]}" && umount -l "${MOUNTS[i]}"
        done
        if [ -n "$DBUS_PID" ]; then
                kill "$DBUS_PID" 2>/dev/null || true
                wait "$DBUS_PID" 2>/dev/null || true
        fi
        if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ -n "${KEEP_FAILED:-}" ]; then
                echo "keeping $T" >&2
        else
                rm -rf "$T"
        fi
        exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# wait_until TIMEOUT_SECONDS DESCRIPTION COMMAND...: polls COMMAND every 20 ms until it
# succeeds or the deadline passes.
wait_until() {
        local timeout=$1 what=$2
        shift 2
        local NOW_NS deadline pause=20 cap=$((WAIT_POLL_MAX_MS * TIME_SCALE)) pause_s
        set_now_ns
        deadline=$((NOW_NS + timeout * 1000000000))
        until "$@" >/dev/null 2>&1; do
                set_now_ns
                [ "$NOW_NS" -lt "$deadline" ] || fail "timed out after ${timeout}s waiting for: $what"
                ms_to_s pause_s "$pause"
                nap "$pause_s"
                pause=$((pause * 2 > cap ? cap : pause * 2))
        done
}
# A poll's pause starts at 20 ms and doubles up to WAIT_POLL_MAX_MS (x TIME_SCALE): a
# condition that holds soon is seen soon, and a long wait does not keep the CPU busy with
# busctl (in the TCG VM a busctl costs ~80 ms of CPU, which the daemon under test needs).
WAIT_POLL_MAX_MS=${WAIT_POLL_MAX_MS:-100}

start_bus() {
        # A second daemon would leave the first one running, unknown to cleanup.
        if [ -n "$DBUS_PID" ] && kill -0 "$DBUS_PID" 2>/dev/null; then
                fail "start_bus: the private bus (PID $DBUS_PID) is still running"
        fi
        cat > "$T/bus.conf" <<EOC
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>$BUS</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOC
        dbus-daemon --config-file="$T/bus.conf" --nofork --nosyslog >"$T/dbus.log" 2>&1 &
        DBUS_PID=$!
        echo "$DBUS_PID" > "$T/dbus.pid" # for a test that restarts the bus (soak_faults.py)
        wait_until 10 "the private bus socket" test -S "$T/bus"
}

# machine_number_of ID: the machine number slotd derives from machine.id ID when machine.number
# is not set (SPEC §2): ID itself when it is a number Unity's SDKs read, else the first 8 bytes
# of its SHA-256, big-endian, top bit cleared, 0 made 1. Written out again here, not asked of
# slotd, so that a change of the derivation shows.
machine_number_of() {
        local h n
        if [[ $1 =~ ^[1-9][0-9]{0,18}$ ]] && [ ${#1} -lt 19 -o "$1" \< 9223372036854775808 ]; then
                echo "$1"; return 0
        fi
        h=$(printf %s "$1" | sha256sum | cut -c1-16)
        n=$(( 0x$h & 0x7fffffffffffffff ))
        echo $(( n == 0 ? 1 : n ))
}
# The machine.id every test's slotd.ini has (write_config), and the number derived from it.
TEST_MACHINE_ID=0123456789abcdef0123456789abcdef
TEST_MACHINE_NUMBER=4517599999261404022

# write_config [EXTRA SLOTD.INI LINES]: slotd.ini for this test, on this test's bus and cgroup.
write_config() {
        # Off unless the test asks for it (tests run in parallel: no fixed port); SDK_MODE's
        # servers need it. metrics.listen likewise (METRICS_LISTEN): its default is 8087.
        local listen=${LOCALPROXY_LISTEN:-off}
        [ -n "${SDK_MODE:-}" ] && [ -z "${LOCALPROXY_LISTEN:-}" ] && listen=127.0.0.1:$(free_port)
        mkdir -p "$T/etc/fleets.d"
        cat > "$T/etc/slotd.ini" <<EOC
[machine]
id = $TEST_MACHINE_ID
ip = 192.0.2.1
cpus = ${MACHINE_CPUS:-4}
memory = ${MACHINE_MEMORY:-4G}

[supervisor]
cgroup = $CG
state_dir = $T/state
slots_dir = $T/slots
bus = $BUS

[localproxy]
listen = $listen

[metrics]
listen = ${METRICS_LISTEN:-off}
EOC
}

# free_port: a loopback port no socket of this machine uses now (TCP or UDP, any state), picked
# at random in 10000-19999: below the kernel's ephemeral range (ip_local_port_range starts at
# 32768), where client sockets never take it, and apart from the fleets' port ranges that the
# tests write (9000-9699 by default, and 21000-45999: a proxy port picked inside a fleet's
# range once failed test-durable-sdk's start). In bash: a Python to bind port 0 cost the TCG
# VM a second.
free_port() {
        local p hex i
        for i in {1..100}; do
                p=$((10000 + SRANDOM % 10000))
                printf -v hex '%04X' "$p"
                port_in_use "$hex" || { echo "$p"; return 0; }
        done
        fail "free_port: 100 random ports in 10000-19999 all in use"
}
# port_in_use HEX: some socket of /proc/net/{tcp,udp}{,6} has local port HEX (4 hex digits).
port_in_use() {
        local f local_address
        for f in /proc/net/tcp /proc/net/tcp6 /proc/net/udp /proc/net/udp6; do
                [ -r "$f" ] || continue
                while read -r _ local_address _; do
                        [[ $local_address == *:"$1" ]] && return 0
                done <"$f"
        done
        return 1
}

# write_fleet NAME [EXTRA FLEET LINES...]: a fleet running the test server.
write_fleet() {
        local name=$1
        shift
        {
                echo "[fleet]"
                echo "build = $TEST_SERVER"
                echo "args = --server-id \${SERVER_ID} --port \${PORT} --query-port \${QUERY_PORT}${SDK_MODE:+ --sdk --sdk-file-control}"
                echo "stop_timeout = ${STOP_TIMEOUT:-2s}"
                echo "[usage]"
                echo "cpu = ${USAGE_CPU:-1}"
                echo "memory = ${USAGE_MEMORY:-512M}"
                local l
                for l in "$@"; do echo "$l"; done
                # The test server sends READY=1: the tests written before checks.readiness
                # judge a start by it. READINESS=exec|query|default tries the others.
                # SDK_MODE=1 runs the same test with Multiplay SDK servers (--sdk), which
                # never notify: they are running once exec'd.
                local readiness=${READINESS:-notify}
                [ -n "${SDK_MODE:-}" ] && [ -z "${READINESS:-}" ] && readiness=exec
                if [ "$readiness" != default ]; then
                        echo "[checks]"
                        echo "readiness = $readiness"
                fi
        } > "$T/etc/fleets.d/$name.ini"
}

start_slotd() {
        if [ -n "${SLOTD_NETNS:-}" ]; then
                # SLOTD_NETNS=1: slotd (and the servers it starts) in a network namespace of
                # their own with its loopback up, for tests that take the loopback down; the
                # host's is not touched. D-Bus is a unix socket, unaffected. unshare execs
                # without forking, so $! is slotd. Reach the namespace with
                # nsenter --net=/proc/$SLOTD_PID/ns/net. SLOTD_NETNS_SETUP: a shell command run
                # in the namespace before slotd (sysctls of its own).
                SLOTD_LOG_LEVEL=debug NETNS_SETUP=${SLOTD_NETNS_SETUP:-true} unshare --net -- \
                        sh -c 'ip link set lo up && eval "$NETNS_SETUP" && exec "$@"' sh \
                        "$SLOTD" --config "$T/etc/slotd.ini" >>"$T/slotd.log" 2>&1 &
        else
                SLOTD_LOG_LEVEL=debug "$SLOTD" --config "$T/etc/slotd.ini" >>"$T/slotd.log" 2>&1 &
        fi
        SLOTD_PID=$!
        wait_until 20 "slotd on the bus" bus_name_owned
}

bus_name_owned() {
        kill -0 "$SLOTD_PID" 2>/dev/null || fail "slotd exited during start-up"
        busctl --address="$BUS" status org.slotd.Supervisor1 >/dev/null 2>&1
}

stop_slotd() {
        kill -TERM "$SLOTD_PID"
        wait "$SLOTD_PID" || fail "slotd exited with $? on SIGTERM"
        SLOTD_PID=
}

bctl() { busctl --address="$BUS" "$@"; }

# get_property PATH INTERFACE PROPERTY...: what `busctl get-property` prints for slotd's
# properties. The lines come from tests/integration/busprop.c, which this test starts once
# and which prints busctl's format without a busctl start for each read (in the TCG VM one
# costs about 80 ms of CPU, and the harness reads properties in nearly every poll); where it
# declines (an error, a value busctl would escape) or does not answer, busctl itself runs.
# test-bus.sh checks that both print the same for every property of the Manager and a slot.
BUSPROP_PORT_FILE=$T/busprop.port
BUSPROP_PID=
if [ -n "${BUSPROP:-}" ] && [ -x "$BUSPROP" ]; then
        "$BUSPROP" "$BUSPROP_PORT_FILE" </dev/null &
        BUSPROP_PID=$!
        BG_PIDS+=($!)
fi
get_property() { busprop_get "$@" || bctl get-property org.slotd.Supervisor1 "$@"; }
# busprop_get PATH INTERFACE PROPERTY...: busprop's answer; fails (printing nothing) where it
# declines or does not answer.
busprop_get() {
        local LC_ALL=C port= fd= st len out= i
        for ((i = 0; i < 250 && ${#BUSPROP_PID} > 0; i++)); do
                read -r port 2>/dev/null <"$BUSPROP_PORT_FILE" && break
                port=
                nap 0.02
        done
        [ -z "$port" ] || { exec {fd}<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || fd=
        if [ -n "$fd" ]; then
                printf '%s\n' "$BUS" org.slotd.Supervisor1 "$1" "$2" "${*:3}" >&"$fd"
                if IFS=' ' read -r -t 120 -u "$fd" st len && [ "$st" = 0 ]; then
                        [ "$len" = 0 ] || IFS= read -r -N "$len" -u "$fd" out
                        exec {fd}>&-
                        printf '%s' "$out"
                        return 0
                fi
                exec {fd}>&-
        fi
        return 1
}
# mprop PROPERTY: a Manager property, value only (strings unquoted).
mprop() {
        get_property /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager "$1" | strip_type
}
# sprop ID PROPERTY: a slot property, value only.
sprop() {
        get_property "/org/slotd/Supervisor1/slot/$1" org.slotd.Supervisor1.Slot "$2" |
                strip_type
}
# strip_type: busctl's "TYPE VALUE" lines to VALUE, strings unquoted (in bash: this runs in
# every poll, and a sed there cost a quarter of the VM's CPU).
STRIP_TYPE_RE='^[a-z()]+ (.*)$'
STRIP_QUOTES_RE='^"(.*)"$'
strip_type() {
        local line
        while IFS= read -r line || [ -n "$line" ]; do
                [[ $line =~ $STRIP_TYPE_RE ]] && line=${BASH_REMATCH[1]}
                [[ $line =~ $STRIP_QUOTES_RE ]] && line=${BASH_REMATCH[1]}
                printf '%s\n' "$line"
        done
}

scall() {
        local id=$1 method=$2
        shift 2
        bctl call org.slotd.Supervisor1 "/org/slotd/Supervisor1/slot/$id" \
                org.slotd.Supervisor1.Slot "$method" "$@"
}
mcall() {
        local method=$1
        shift
        bctl call org.slotd.Supervisor1 /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager \
                "$method" "$@"
}

# all_threads_stopped PID: every thread of PID is stopped (state T): a SIGSTOP has taken
# effect (it stops one thread first, which stops the others when it runs). In bash: polled.
all_threads_stopped() {
        local stat line
        for stat in /proc/"$1"/task/*/stat; do
                read -r line <"$stat" || return 1
                line=${line##*) }
                [ "${line%% *}" = T ] || return 1
        done
}
prop_is() { [ "$(sprop "$1" "$2")" = "$3" ]; }
wait_prop() { wait_until "${4:-20}" "slot $1 $2 = $3" prop_is "$1" "$2" "$3"; }

# The test server's state file, key=value per line.
server_state() { sed -n "s/^$2=//p" "$(sprop "$1" Home)/test-server.state" 2>/dev/null; }

# control ID COMMAND: tells the test server of slot ID what to do.
# control ID COMMAND: appends COMMAND to slot ID's control file. A test server takes what its
# control file holds when it starts as an earlier run's, so while the slot's server is one
# that has not yet written its state file (the last step of its start), this waits for that
# first: a command appended earlier would be taken as old and never run.
control() {
        local home
        home=$(sprop "$1" Home)
        wait_until $((10 * TIME_SCALE)) "slot $1's server started (its state file)" \
                server_started "$1"
        echo "$2" >> "$home/test-server.control"
}
# server_started ID: slot ID runs no server, or its server has written its state file.
server_started() {
        local pid
        pid=$(sprop "$1" MainPID)
        [ "$pid" = 0 ] || [ "$(server_state "$1" pid)" = "$pid" ]
}

cgroup_procs() { cat "$(sprop "$1" Cgroup)/cgroup.procs"; }
cgroup_empty() { [ -z "$(cgroup_procs "$1")" ]; }

enforced() { mprop Enforcement | grep -qw "$1"; }

assert_eq() {
        [ "$1" = "$2" ] || fail "${3:-value}: expected '$2', got '$1'"
        PASSED=$((PASSED + 1))
}
assert_ok() {
        local what=$1
        shift
        "$@" || fail "$what"
        PASSED=$((PASSED + 1))
}

finish() {
        echo "ok: $PASSED assertions"
}

start_bus

# ---- Allocations, reservations, holds (issue 3) ----

# now_usec: CLOCK_REALTIME in µs, the clock of every *USec property.
now_usec() { echo "${EPOCHREALTIME//[!0-9]/}"; }

# mprop_is / wait_mprop PROPERTY VALUE [TIMEOUT]: a Manager property reaches VALUE.
mprop_is() { [ "$(mprop "$1")" = "$2" ]; }
wait_mprop() { wait_until "${3:-20}" "Manager $1 = $2" mprop_is "$1" "$2"; }

# wait_new_pid ID OLD_PID [TIMEOUT]: slot ID runs a process other than OLD_PID.
new_pid() { local p; p=$(sprop "$1" MainPID); [ "$p" != 0 ] && [ "$p" != "$2" ]; }
wait_new_pid() { wait_until "${3:-20}" "slot $1 runs a new process (not $2)" new_pid "$1" "$2"; }

# allocate FLEET UUID [BUILD_CONFIGURATION]: Manager.Allocate; prints the slot id and checks
# that the object path returned matches it. reserve FLEET UUID TIMEOUT_USEC: the same for
# Manager.Reserve. hold ID TIMEOUT_USEC: Slot.Hold; prints until_usec.
allocate() {
        local out
        out=$(mcall Allocate sss "$1" "$2" "${3:-}" 2>&1) || fail "Allocate($1, $2, '${3:-}'): $out"
        set -- $out
        [ "$1" = uo ] && [ "$3" = "\"/org/slotd/Supervisor1/slot/$2\"" ] || fail "Allocate reply: $out"
        echo "$2"
}
reserve() {
        local out
        out=$(mcall Reserve sst "$1" "$2" "$3" 2>&1) || fail "Reserve($1, $2, $3): $out"
        set -- $out
        [ "$1" = uo ] && [ "$3" = "\"/org/slotd/Supervisor1/slot/$2\"" ] || fail "Reserve reply: $out"
        echo "$2"
}
hold() {
        local out
        out=$(scall "$1" Hold t "$2" 2>&1) || fail "Hold($1, $2): $out"
        set -- $out
        [ "$1" = t ] || fail "Hold reply: $out"
        echo "$2"
}

# in_slot ID CMD...: runs CMD as nobody inside slot ID's cgroup, as its game server would
# (setpriv, from util-linux: the tests that use it skip without it).
in_slot() {
        local cg
        cg=$(sprop "$1" Cgroup)
        shift
        bash -c 'echo $$ > "$1/cgroup.procs" && shift && exec setpriv --reuid=65534 \
                 --regid=65534 --clear-groups "$@"' in_slot "$cg" "$@"
}

# need_npm_clients: the real Centrifuge clients of node/ (tests/deps.sh installs them), run in
# a slot as nobody (in_slot): NODE_DIR names them; the test is skipped without them.
NODE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/node" && pwd)
need_npm_clients() {
        command -v node >/dev/null || skip "node is not installed"
        [ -d "$NODE_DIR/node_modules/centrifuge2" ] && [ -d "$NODE_DIR/node_modules/centrifuge5" ] ||
                skip "the npm clients are not installed (tests/deps.sh runs npm ci in $NODE_DIR)"
        command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
}

# gdb_arm FUNCTION: gdb on slotd, with a breakpoint at FUNCTION that SIGKILLs slotd (through
# ptrace) when it is hit; returns once the breakpoint is set (gdb's output in $T/gdb.log).
# gdb_fired FUNCTION: waits for that, checks the breakpoint was FUNCTION's, and for slotd's
# end (SLOTD_PID is then empty). For a kill at an exact instruction (test-notify-kill,
# test-proxy-resync).
GDB_PID=
gdb_arm() {
        gdb -p "$SLOTD_PID" -batch -nx -ex 'set pagination off' -ex "break $1" \
                -ex 'continue' -ex 'bt 3' -ex 'kill' > "$T/gdb.log" 2>&1 &
        GDB_PID=$!
        bg_track $GDB_PID
        wait_until $((30 * TIME_SCALE)) "gdb attached with its breakpoint" \
                grep -q "^Breakpoint 1 at" "$T/gdb.log"
}
gdb_fired() {
        wait_until $((30 * TIME_SCALE)) "gdb to stop slotd at $1 and kill it" gone "$GDB_PID"
        wait "$GDB_PID" || true
        bg_untrack $GDB_PID
        assert_ok "gdb stopped slotd at $1 ($(grep -m1 '^Breakpoint 1,' "$T/gdb.log"))" \
                grep -q "^Breakpoint 1, $1" "$T/gdb.log"
        wait_until $((10 * TIME_SCALE)) "slotd killed" gone "$SLOTD_PID"
        wait "$SLOTD_PID" 2>/dev/null || true
        SLOTD_PID=
}

# dsend PATH INTERFACE.METHOD [TYPED ARGS...]: calls slotd with dbus-send (string:x uint64:5
# ...), which, unlike busctl, prints the D-Bus error name: "Error NAME: MESSAGE".
dsend() {
        local path=$1 method=$2
        shift 2
        dbus-send --bus="$BUS" --print-reply --reply-timeout=20000 \
                --dest=org.slotd.Supervisor1 "$path" "$method" "$@" 2>&1
}
# expect_err NAME PATH INTERFACE.METHOD [TYPED ARGS...]: the call fails with
# org.slotd.Supervisor1.Error.NAME (or NAME in full when it contains a dot).
expect_err() {
        local name=$1 out
        shift
        case $name in *.*) ;; *) name=org.slotd.Supervisor1.Error.$name ;; esac
        if out=$(dsend "$@"); then
                fail "expected $name from $*, got success: $out"
        fi
        grep -q "^Error ${name//./\\.}:" <<<"$out" || fail "expected $name from $*, got: $out"
        PASSED=$((PASSED + 1))
}
# expect_merr NAME METHOD [TYPED ARGS...] and expect_serr NAME ID METHOD [TYPED ARGS...]:
# expect_err on the Manager or on slot ID.
expect_merr() {
        local name=$1 method=$2
        shift 2
        expect_err "$name" /org/slotd/Supervisor1 "org.slotd.Supervisor1.Manager.$method" "$@"
}
expect_serr() {
        local name=$1 id=$2 method=$3
        shift 3
        expect_err "$name" "/org/slotd/Supervisor1/slot/$id" "org.slotd.Supervisor1.Slot.$method" "$@"
}

# list_slots: ListSlots as lines "id fleet State ProcessState uuid build_configuration", an
# empty uuid shown as "-". slot_of UUID: the id of the slot allocated to UUID, if any.
list_slots() {
        bctl --json=short call org.slotd.Supervisor1 /org/slotd/Supervisor1 \
                org.slotd.Supervisor1.Manager ListSlots |
                py_in 'import json, sys
for e in json.load(sys.stdin)["data"][0]:
    print(*[str(x) if str(x) != "" else "-" for x in e[:6]])'
}
slot_of() { list_slots | awk -v u="$1" '$5 == u { print $1 }'; }

# server_json ID KEY: a value from slot ID's server.json.
server_json() {
        py 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
                "$(sprop "$1" Home)/server.json" "$2"
}
server_json_is() { [ "$(server_json "$1" "$2")" = "$3" ]; }
server_state_is() { [ "$(server_state "$1" "$2")" = "$3" ]; }

# Nothing acknowledged lost (issue 14's fault matrix). ack_allocate ID: allocates slot ID to a
# new UUID through the Slot's Allocate and records "ID UUID" in ACKED; for a slot the test
# neither restarts nor stops (a stopped or crashed session may end its allocation by design).
# ack_check WHAT: every allocation in ACKED is still in effect, as the slot, its server.json
# and the slot's last line in the state file (its record) say; WHAT names the moment.
ACKED=()
ack_allocate() {
        local id=$1 uuid out
        uuid=$(cat /proc/sys/kernel/random/uuid)
        out=$(scall "$id" Allocate ss "$uuid" "" 2>&1) || fail "Allocate($uuid) of slot $id: $out"
        [ -z "$out" ] || fail "Allocate($uuid) of slot $id replied: $out"
        [ "$(sprop "$id" AllocationUUID)" = "$uuid" ] || fail "slot $id not allocated to $uuid after its Allocate"
        ACKED+=("$id $uuid")
        note "slot $id allocated to $uuid (acknowledged)"
}
ack_check() {
        local what=$1 a id uuid
        for a in "${ACKED[@]}"; do
                read -r id uuid <<<"$a"
                assert_eq "$(sprop "$id" AllocationUUID)" "$uuid" "slot $id's AllocationUUID $what"
                assert_eq "$(server_json "$id" allocatedUUID)" "$uuid" "slot $id's server.json allocatedUUID $what"
                assert_ok "slot $id's record in the state file names uuid=$uuid $what" \
                        bash -c 'grep "^slot id=$1 " "$2" | tail -n 1 | grep -q " uuid=$3 "' \
                        sh "$id" "$T/state/state" "$uuid"
        done
}

# ---- pids.max over slotd and its slots (issue 14: fork refused) ----
# pids_limit_init: slotd is to run in $CG/slotd, beside the slot tree $CG/slots, as in a group
# delegated to it (under systemd that is slotd-slots.scope's, whose TasksMax counts the
# servers); LIMIT is where pids.max is the fault: $CG (the unit's
# TasksMax, which counts the game servers too), or, on a host whose v2 tree has no pids
# controller, a v1 pids group V1 that slotd joins and its children inherit.
# start_slotd_in_group: start_slotd, in $CG/slotd (and V1). pids_limit_cleanup: the test's
# EXIT trap (set again after start_monitor): BOUND, a bind mount over a cgroup file, taken off;
# the limit lifted; V1 emptied and removed; then bg_cleanup.
V1=
LIMIT=
pids_limit_init() {
        mkdir -p "$CG/slotd"
        if grep -qw pids "$CG_MOUNT/cgroup.controllers"; then
                grep -qw pids "$CG_MOUNT/cgroup.subtree_control" ||
                        echo +pids > "$CG_MOUNT/cgroup.subtree_control"
                LIMIT=$CG
        elif [ -d /sys/fs/cgroup/pids ] && [ -e /sys/fs/cgroup/pids/cgroup.procs ]; then
                V1=/sys/fs/cgroup/pids/slotd-it-$$-$RANDOM
                mkdir "$V1"
                LIMIT=$V1
        else
                skip "no pids controller, v2 or v1"
        fi
        note "pids.max is set on $LIMIT"
}
start_slotd_in_group() {
        (
                echo "$BASHPID" > "$CG/slotd/cgroup.procs"
                [ -z "$V1" ] || echo "$BASHPID" > "$V1/cgroup.procs"
                SLOTD_LOG_LEVEL=debug exec "$SLOTD" --config "$T/etc/slotd.ini"
        ) >>"$T/slotd.log" 2>&1 &
        SLOTD_PID=$!
        wait_until 20 "slotd on the bus" bus_name_owned
}
pids_limit_cleanup() {
        local rc=$? deadline=$((SECONDS + 10))
        set +e
        [ -n "${BOUND:-}" ] && umount -l "$BOUND" 2>/dev/null
        [ -n "$LIMIT" ] && [ -e "$LIMIT/pids.max" ] && echo max > "$LIMIT/pids.max"
        if [ -n "$V1" ] && [ -d "$V1" ]; then
                [ -n "$SLOTD_PID" ] && kill -TERM "$SLOTD_PID" 2>/dev/null && wait "$SLOTD_PID" 2>/dev/null
                xargs -r kill -9 < "$V1/cgroup.procs" 2>/dev/null
                until rmdir "$V1" 2>/dev/null || [ $SECONDS -ge $deadline ]; do nap 0.05; done
        fi
        (exit $rc)
        bg_cleanup
}

# stays_true MS DESCRIPTION COMMAND...: COMMAND holds at every poll for MS milliseconds.
# Only for showing that something does not happen; each caller says why MS is enough.
stays_true() {
        local ms=$1 what=$2
        shift 2
        local NOW_NS deadline
        set_now_ns
        deadline=$((NOW_NS + ms * 1000000))
        while set_now_ns; [ "$NOW_NS" -lt "$deadline" ]; do
                "$@" >/dev/null 2>&1 || fail "no longer true: $what"
                nap 0.05
        done
        PASSED=$((PASSED + 1))
}

# assert_near VALUE EXPECTED TOLERANCE [WHAT]: |VALUE - EXPECTED| <= TOLERANCE.
assert_near() {
        local d=$(($1 - $2))
        [ "${d#-}" -le "$3" ] || fail "${4:-value}: expected $2 ± $3, got $1 (off by $d)"
        PASSED=$((PASSED + 1))
}

# Background helpers (monitors, load): killed before the harness cleans up, keeping the
# test's exit status.
bg_cleanup() {
        local rc=$? p
        set +e # (exit $rc) below must not end the trap before cleanup
        for p in "${BG_PIDS[@]}"; do
                kill "$p" 2>/dev/null || true
                wait "$p" 2>/dev/null || true
        done
        (exit $rc)
        cleanup
}
bg_track() {
        BG_PIDS+=("$1")
        trap bg_cleanup EXIT
}

# start_monitor FILE: every signal slotd sends from now on, one JSON object a line.
# signal_count FILE MEMBER: how many MEMBER signals FILE holds.
start_monitor() {
        busctl --address="$BUS" --json=short monitor \
                --match "type='signal',sender='org.slotd.Supervisor1'" >"$1" 2>"$1.err" &
        bg_track $!
        wait_until 10 "monitor attached" grep -q "Monitoring bus" "$1.err"
}
signal_count() { grep -c "\"member\":\"$2\"" "$1" || true; }

# fleet_key NAME LINE: adds LINE ("key = value") to the [fleet] section of fleet NAME.
fleet_key() { sed -i "s|^\[fleet\]\$|[fleet]\n$2|" "$T/etc/fleets.d/$1.ini"; }
# prop_is_not ID PROPERTY VALUE: for wait_until.
prop_is_not() { ! prop_is "$@"; }
# config_key SECTION LINE: adds LINE ("key = value") to SECTION of slotd.ini.
config_key() { sed -i "s|^\[$1\]\$|[$1]\n$2|" "$T/etc/slotd.ini"; }
# bg_untrack PID: PID was waited for by the test; cleanup must not signal it (or its
# successor with the same number).
bg_untrack() {
        local p keep=()
        for p in "${BG_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
        BG_PIDS=("${keep[@]}")
}

# ---- Checks, probes, crash policy (issues of the checks) ----

# sig_args FILE MEMBER: the arguments of every MEMBER signal in FILE (a start_monitor log),
# one signal a line, space-separated, strings unquoted: "0 cpu 1", "0 0 11 misbehaviour".
sig_args() {
        sed -n "s/.*\"member\":\"$2\",\"payload\":{\"type\":\"[^\"]*\",\"data\":\[\(.*\)\]}}\$/\1/p" \
                "$1" | tr ',' ' ' | tr -d '"'
}
# has_sig FILE MEMBER ARGS / wait_sig FILE MEMBER ARGS [TIMEOUT]: a MEMBER signal with ARGS.
has_sig() { sig_args "$1" "$2" | grep -qx -- "$3"; }
wait_sig() { wait_until "${4:-20}" "signal $2($3)" has_sig "$1" "$2" "$3"; }
# sig_count FILE MEMBER PREFIX: how many MEMBER signals have arguments starting "PREFIX ".
sig_count() { sig_args "$1" "$2" | grep -c -- "^$3 " || true; }
# sig_count_ge FILE MEMBER PREFIX N: at least N of them (for wait_until).
sig_count_ge() { [ "$(sig_count "$1" "$2" "$3")" -ge "$4" ]; }

# fleet_args NAME ARGS: appends ARGS to fleet NAME's args line.
fleet_args() { sed -i "s|^args = .*|& $2|" "$T/etc/fleets.d/$1.ini"; }

# server_up ID: the server of slot ID runs and has written its state file (so control works).
server_up() {
        local p
        p=$(sprop "$1" MainPID)
        [ "$p" != 0 ] && [ "$(server_state "$1" pid)" = "$p" ]
}
wait_server() { wait_until "${2:-20}" "the server of slot $1 up" server_up "$1"; }

# num_lt A B: A < B, as decimal numbers.
num_lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 < b + 0) }'; }
cpu_below() { num_lt "$(sprop "$1" CPUUsage)" "$2"; }
cpu_above() { num_lt "$2" "$(sprop "$1" CPUUsage)"; }

# wait_rounds ID N [TIMEOUT]: N more check rounds ran on slot ID. Each round sets CPUUsage
# (with checks on it is the last interval's figure), so N changes of it are N rounds.
wait_rounds() {
        local id=$1 n=$2 timeout=${3:-20} prev v seen=0
        local NOW_NS deadline
        set_now_ns
        deadline=$((NOW_NS + timeout * 1000000000))
        prev=$(sprop "$id" CPUUsage)
        while [ $seen -lt "$n" ]; do
                set_now_ns
                [ "$NOW_NS" -lt "$deadline" ] || fail "timed out after ${timeout}s waiting for $n check rounds of slot $id"
                nap 0.02
                v=$(sprop "$id" CPUUsage)
                if [ "$v" != "$prev" ]; then
                        seen=$((seen + 1))
                        prev=$v
                fi
        done
}
# sprops ID PROPERTY...: several properties of slot ID in one call (a busctl call takes up to
# seconds in the TCG VM), values joined by "|": "failed|crash-backoff|0".
sprops() {
        local id=$1
        shift
        get_property "/org/slotd/Supervisor1/slot/$id" org.slotd.Supervisor1.Slot "$@" |
                strip_type | paste -sd'|'
}
# ---- end of checks helpers ----
# assert_between VALUE LOW HIGH [WHAT]: LOW <= VALUE <= HIGH. For a deadline computed by slotd
# during a call: LOW = clock before the call + timeout, HIGH = clock after it + timeout.
assert_between() {
        [ "$1" -ge "$2" ] && [ "$1" -le "$3" ] || fail "${4:-value}: expected $2..$3, got $1"
        PASSED=$((PASSED + 1))
}

# one_server ID: the slot's cgroup holds exactly its keeper (a process named slotd-keeper)
# and the game server MainPID under it.
one_server() {
        local id=$1 pid keeper want got
        pid=$(sprop "$id" MainPID)
        [ "$pid" -gt 0 ] || return 1
        keeper=$(sed -E 's/^.*\) . ([0-9]+) .*$/\1/' "/proc/$pid/stat")
        [ "$(cat "/proc/$keeper/comm")" = slotd-keeper ] || return 1
        want=$(printf '%s\n' "$pid" "$keeper" | sort -n | tr '\n' ' ')
        got=$(cgroup_procs "$id" | sort -n | tr '\n' ' ')
        [ "$want" = "$got" ]
}

# gone PID: the process has ended (a zombie waiting for its reaper has ended too).
gone() {
        local st
        st=$(sed -E 's/^.*\) (.) .*$/\1/' "/proc/$1/stat" 2>/dev/null) || return 0
        [ -z "$st" ] || [ "$st" = Z ]
}
