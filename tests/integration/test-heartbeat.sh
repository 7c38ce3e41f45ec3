#!/usr/bin/env bash
# What the game server must say over NOTIFY_SOCKET (SPEC §6, §9): with checks.heartbeat, a
# WATCHDOG=1 each period (slotd passes WATCHDOG_USEC), else a `heartbeat` strike, and three
# end the server as misbehaving; with checks.start_timeout, READY=1 in time, else the slot's
# cgroup is killed: a crash with reason start-timeout, under the crash back-off like any other.
. "$(dirname "$0")/lib.sh"
SIGS="$T/signals.json"

MACHINE_CPUS=4 write_config
# checks.interval = 0 everywhere: no resource rounds, only the timers under test. HB is the
# heartbeat period: 300 ms on a host; 2 s in the TCG VM, whose processes stall for hundreds
# of milliseconds when the host is busy (a whole period without a ping is a strike).
HB=300
[ "$TIME_SCALE" = 1 ] || HB=2000
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet beat "servers = 2" \
        "[ports]" "game_base = 32200" "query_base = 32250" \
        "[checks]" "interval = 0" "heartbeat = ${HB}ms" "strikes = 3" "window = 10m" \
        "[crash]" "restarts = 5" "window = 10m"
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet noready "servers = 1" \
        "[ports]" "game_base = 32210" "query_base = 32260" \
        "[checks]" "interval = 0" "start_timeout = 300ms" "[crash]" "restarts = 1" "window = 10m"
fleet_args noready "--no-ready"
fleet_key noready "start_on_provision = no"
# READY=1 after 500 ms: later than noready's whole start_timeout, well within its own.
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet slowready "servers = 1" \
        "[ports]" "game_base = 32220" "query_base = 32270" \
        "[checks]" "interval = 0" "start_timeout = $((3 * TIME_SCALE))s"
fleet_args slowready "--ready-delay 500"
fleet_key slowready "start_on_provision = no"
start_slotd
start_monitor "$SIGS"
# Slots in file-name order: beat 0 and 1, noready 2, slowready 3.
for id in 0 1; do
        wait_prop $id ProcessState running
        wait_server $id
done

# ---- 5. start_timeout: no READY=1 in time is a crash; the back-off still applies ----
scall 2 Start
scall 3 Start
wait_sig "$SIGS" Crashed "2 0 9 start-timeout"
# The restart after the first one shows only briefly (the second start times out too), so
# it is read from the PropertiesChanged that announced it.
wait_until 20 "slot 2 announced restarting after start-timeout" grep -q \
        '"path":"/org/slotd/Supervisor1/slot/2".*"ProcessState":{"type":"s","data":"starting"},"FailureReason":{"type":"s","data":"start-timeout"}.*"Restarts":{"type":"u","data":1}' "$SIGS"
PASSED=$((PASSED + 1))
# crash.restarts = 1: the second crash within crash.window fails the slot.
wait_prop 2 ProcessState failed
assert_eq "$(sprop 2 FailureReason)" crash-backoff "FailureReason after the second start-timeout"
assert_eq "$(sig_args "$SIGS" Crashed | grep '^2 ' | paste -sd,)" \
        "2 0 9 start-timeout,2 0 9 start-timeout" "Crashed signals of slot 2"
assert_eq "$(sprop 2 LastExitSignal)" 9 "LastExitSignal (cgroup.kill)"
assert_eq "$(sprop 2 Ready)" false "Ready of slot 2"
assert_eq "$(sprop 2 MainPID)" 0 "MainPID of the failed slot"
assert_ok "cgroup of slot 2 empty" cgroup_empty 2
assert_eq "$(grep -c 'slot 2 (noready): Not ready (checks.readiness = notify) within checks.start_timeout, killing the server' "$T/slotd.log")" \
        2 "log lines of the start timeout"
# (Its state file may not even exist: under TCG a start-up takes longer than 300 ms.)
assert_ok "no READY=1 from slot 2" bash -c "! grep -q 'slot 2 (noready): READY=1' '$T/slotd.log'"
assert_ok "READY=1 seen at all (the log has debug lines)" grep -q "slot 0 (beat): READY=1" "$T/slotd.log"
# The slot that said READY=1 after 500 ms runs on (see the end for its whole start_timeout).
wait_prop 3 Ready true
pid3=$(sprop 3 MainPID)
assert_eq "$(sprop 3 ProcessState)" running "ProcessState of slot 3"
assert_ok "no WATCHDOG_USEC without checks.heartbeat" bash -c "! grep -qz '^WATCHDOG_USEC=' /proc/$pid3/environ"

# ---- 4. Heartbeat: WATCHDOG_USEC passed, the server pings; silence is struck out ----
for id in 0 1; do
        pid=$(sprop $id MainPID)
        assert_ok "slot $id env WATCHDOG_USEC" grep -qzx "WATCHDOG_USEC=$((HB * 1000))" /proc/$pid/environ
        assert_eq "$(server_state $id watchdog_usec)" $((HB * 500)) "slot $id pings at half the period"
        assert_eq "$(server_state $id watchdog)" on "slot $id watchdog"
done
pid0=$(sprop 0 MainPID)
control 0 "watchdog off"
wait_sig "$SIGS" Misbehaved "0 heartbeat 1"
wait_sig "$SIGS" Crashed "0 0 11 misbehaviour"
assert_eq "$(sig_args "$SIGS" Misbehaved | grep '^0 ' | head -n 3 | paste -sd,)" \
        "0 heartbeat 1,0 heartbeat 2,0 heartbeat 3" "Misbehaved signals of slot 0"
assert_ok "log: no WATCHDOG=1" grep -q "slot 0 (beat): Check heartbeat failed: no WATCHDOG=1 within checks.heartbeat ($HB ms)" "$T/slotd.log"
wait_new_pid 0 "$pid0"
wait_prop 0 ProcessState running
assert_eq "$(sprop 0 FailureReason)" misbehaviour "FailureReason of slot 0"
assert_eq "$(sprop 0 LastExitSignal)" 11 "LastExitSignal of slot 0"
assert_eq "$(sprop 0 Strikes)" 0 "Strikes of the new process"
wait_server 0
assert_eq "$(server_state 0 watchdog)" on "the new server of slot 0 pings again"
# Slot 1 pinged all along: slot 0's three strikes took three periods of the same length,
# and no strike of slot 1 has been seen.
assert_eq "$(sig_count "$SIGS" Misbehaved 1)" 0 "Misbehaved signals of slot 1"
assert_eq "$(sprop 1 Strikes)" 0 "Strikes of slot 1"
# The later event that proves it: slot 1 now falls silent, and its first heartbeat strike
# counts 1 within the 10-minute checks.window, so none came before.
control 1 "watchdog off"
wait_sig "$SIGS" Misbehaved "1 heartbeat 1"
assert_eq "$(sig_args "$SIGS" Misbehaved | grep -m1 '^1 ')" "1 heartbeat 1" "first Misbehaved of slot 1"
control 1 "watchdog on"
# The restarted slot 0 has pinged through those periods too.
assert_eq "$(sig_args "$SIGS" Misbehaved | grep -c '^0 ')" 3 "Misbehaved signals of slot 0 in all"

# ---- 5, end: the slot that was ready in time outlives its whole start_timeout ----
# READY=1 disarms the timer; the only trace it could leave is a kill at StartedAtUSec +
# start_timeout, so waiting past that moment is the only way to show it does not come.
deadline=$(($(sprop 3 StartedAtUSec) + TIME_SCALE * 3000000 + 500000))
wait_until $((30 * TIME_SCALE)) "slot 3's start_timeout over" bash -c "[ \$(date +%s%6N) -gt $deadline ]"
assert_eq "$(sprop 3 MainPID)" "$pid3" "MainPID of slot 3"
assert_eq "$(sprop 3 Restarts)" 0 "Restarts of slot 3"
assert_eq "$(sig_count "$SIGS" Crashed 3)" 0 "Crashed signals of slot 3"
finish
