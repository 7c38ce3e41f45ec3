#!/usr/bin/env bash
# Core dumps of crashed servers (SPEC §3 "Core dumps", issue 27.6): a server that dies of
# SIGSEGV (its own crash, or checks.signal at its third strike) leaves its core, filed by slotd
# under <home>/cores/ (the kernel's core_pattern writing it in the server's working directory,
# its home) or named where core_pattern sends it (systemd-coredump); the newest
# limits.cores_kept are kept; LastCoreDump, the CoreDumped signal and slotd_core_dumps_total
# name it. limits.core = 0 leaves none.
. "$(dirname "$0")/lib.sh"
SIGS="$T/signals.json"

pattern=$(cat /proc/sys/kernel/core_pattern)
uses_pid=$(cat /proc/sys/kernel/core_uses_pid)
note "core_pattern '$pattern', core_uses_pid $uses_pid"
case $pattern in
'|'*) in_home=0 ;;
*/*|*%[tiIcdF]*) skip "core_pattern '$pattern' writes cores where this test cannot follow them" ;;
*) in_home=1 ;;
esac

MPORT=$(free_port)
MACHINE_CPUS=4 METRICS_LISTEN=127.0.0.1:$MPORT write_config
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet game "servers = 1" \
        "[ports]" "game_base = 32500" "query_base = 32550" "[checks]" "interval = 0" \
        "[crash]" "restarts = 10" "window = 10m" "[limits]" "core = 64M" "cores_kept = 2"
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet nocore "servers = 1" \
        "[ports]" "game_base = 32510" "query_base = 32560" "[checks]" "interval = 0" \
        "[crash]" "restarts = 10" "window = 10m" "[limits]" "core = 0"
# striker: a CPU burner's third cpu strike gets checks.signal, SIGSEGV (as in test-checks:
# a budget of 0.1 cores, 0.5 with an interval of 3 s in the TCG VM).
BUDGET=0.1
[ "$TIME_SCALE" = 1 ] || BUDGET=0.5
USAGE_CPU=$BUDGET USAGE_MEMORY=64M write_fleet striker "servers = 1" \
        "[ports]" "game_base = 32520" "query_base = 32570" \
        "[checks]" "interval = $((1000 * TIME_SCALE))ms" "cpu_tolerance = 10%" \
        "memory_tolerance = 20M" "strikes = 3" "window = 10m" \
        "[crash]" "restarts = 10" "window = 10m" "[limits]" "core = 64M" "cores_kept = 2"
# The test server drops RLIMIT_CORE to 0 unless told to keep slotd's (--core-dump).
fleet_args game --core-dump
fleet_args nocore --core-dump
fleet_args striker --core-dump
start_slotd
start_monitor "$SIGS"
for id in 0 1 2; do
        wait_prop $id ProcessState running
        wait_server $id
done
# The server's home is its own (the fleet's user's): the kernel writes the core there.
HOME0=$(sprop 0 Home)

# segv ID N: the server of slot ID crashes by SIGSEGV, the N-th such crash of the slot.
segv() {
        local pid
        pid=$(sprop "$1" MainPID)
        control "$1" "crash segv"
        wait_until 20 "Crashed of slot $1 (#$2)" sig_count_ge "$SIGS" Crashed "$1" "$2"
        wait_new_pid "$1" "$pid"
        wait_prop "$1" ProcessState running
        wait_server "$1"
}

for n in 1 2 3; do
        segv 0 $n
        wait_until 20 "CoreDumped of slot 0 (#$n)" sig_count_ge "$SIGS" CoreDumped 0 $n
        where=$(sig_args "$SIGS" CoreDumped | grep '^0 ' | tail -n 1 | cut -d' ' -f3-)
        assert_eq "$(sig_args "$SIGS" CoreDumped | grep '^0 ' | tail -n 1 | cut -d' ' -f2)" 11 \
                "CoreDumped names the signal (#$n)"
        assert_eq "$(sprop 0 LastCoreDump)" "$where" "LastCoreDump is the signal's place (#$n)"
        if [ $in_home = 1 ]; then
                assert_ok "the core is filed under cores/ (#$n: $where)" \
                        bash -c "[[ '$where' == '$HOME0/cores/core-'*'-SIGSEGV' ]]"
                assert_ok "the core is a non-empty regular file (#$n)" test -f "$where" -a -s "$where"
                assert_ok "no core left in the home (#$n)" bash -c "! ls '$HOME0' | grep -Eqx 'core(\.[0-9]+)?'"
        else
                assert_ok "the core went to core_pattern's program (#$n: $where)" \
                        bash -c "[[ '$where' == '|'* ]]"
        fi
done
if [ $in_home = 1 ]; then
        assert_eq "$(ls "$HOME0/cores" | wc -l)" 2 "limits.cores_kept = 2: the two newest cores"
        assert_ok "the newest is kept" test -f "$(sprop 0 LastCoreDump)"
        assert_eq "$(stat -c %u "$HOME0/cores")" 0 "cores/ is slotd's (root's)"
fi
assert_ok "log: the core named" grep -q "slot 0 (game): Server [0-9]* left a core: " "$T/slotd.log"

# limits.core = 0: no core, no CoreDumped, LastCoreDump empty.
segv 1 1
assert_eq "$(sig_count "$SIGS" CoreDumped 1)" 0 "no CoreDumped with limits.core = 0"
assert_eq "$(sprop 1 LastCoreDump)" "" "LastCoreDump with limits.core = 0"
assert_ok "no cores/ with limits.core = 0" test ! -e "$(sprop 1 Home)/cores"
assert_eq "$(sprop 1 LastExitSignal)" 11 "the crash itself is told as before"

# A strike's SIGSEGV (checks.signal at the third cpu strike) leaves a core the same way.
pid2=$(sprop 2 MainPID)
control 2 "burn-cpu 1.5"
wait_sig "$SIGS" Crashed "2 0 11 misbehaviour" $((20 * TIME_SCALE))
wait_until 20 "CoreDumped of slot 2" sig_count_ge "$SIGS" CoreDumped 2 1
where=$(sig_args "$SIGS" CoreDumped | grep '^2 ' | tail -n 1 | cut -d' ' -f3-)
assert_eq "$(sig_args "$SIGS" CoreDumped | grep '^2 ' | tail -n 1 | cut -d' ' -f2)" 11 \
        "CoreDumped of a strike's SIGSEGV names the signal"
if [ $in_home = 1 ]; then
        assert_ok "the strike's core is filed under cores/ ($where)" \
                bash -c "[[ '$where' == '$(sprop 2 Home)/cores/core-'*'-SIGSEGV' ]]"
        assert_ok "the strike's core is a non-empty regular file" test -f "$where" -a -s "$where"
fi
assert_ok "log: the strike's SIGSEGV" grep -q "slot 2 (striker): 3 strikes of check cpu: sending SEGV to process $pid2" "$T/slotd.log"

# The metrics name them: cores by fleet, crashes by cause and signal.
metric_is() { [ "$(curl -s --max-time 10 "http://127.0.0.1:$MPORT/metrics" | awk -v k="$1" '$1 == k { print $2 }')" = "$2" ]; }
for kv in 'slotd_core_dumps_total{fleet="game"} 3' 'slotd_core_dumps_total{fleet="striker"} 1' \
        'slotd_core_dumps_total{fleet="nocore"} 0' \
        'slotd_crashes_total{fleet="striker",cause="misbehaviour",signal="SIGSEGV"} 1' \
        'slotd_crashes_total{fleet="game",cause="exit",signal="SIGSEGV"} 3'; do
        wait_until 20 "metric $kv" metric_is "${kv% *}" "${kv##* }"
        assert_ok "metrics: $kv" metric_is "${kv% *}" "${kv##* }"
done
finish
