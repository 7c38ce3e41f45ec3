#!/usr/bin/env bash
# The CPU check (SPEC §6): a server using more than usage.cpu × (1 + cpu_tolerance) over a
# checks.interval collects a `cpu` strike each round; the third within checks.window gets
# checks.signal (SIGSEGV), and its death is a crash with reason misbehaviour, restarted. A
# well-behaved neighbour collects nothing. With checks.interval = 0 nothing is checked at all.
. "$(dirname "$0")/lib.sh"
SIGS="$T/signals.json"

MACHINE_CPUS=4 write_config
# usage.cpu BUDGET and cpu_tolerance 10%: a round over LIMIT = 1.1 × BUDGET is a strike. On a
# host BUDGET is 0.1: an idle test server uses about 0.001 cores, and a burner of 1.5 cores
# gets more than 0.11 even on a 2-core host loaded 20 deep. In the TCG VM (TIME_SCALE 3)
# guest CPU time swells when the host is busy (an idle server measured up to 0.34 cores,
# a start-up 0.15 CPU seconds), so there BUDGET is 0.5 and the interval 3 s. The test
# server idles at a few MB, far below usage.memory + memory_tolerance (84M).
BUDGET=0.1
[ "$TIME_SCALE" = 1 ] || BUDGET=0.5
LIMIT=$(awk -v b=$BUDGET 'BEGIN { print b * 1.1 }')
IV=$((1000 * TIME_SCALE))
D=$((20 * TIME_SCALE)) # deadline for a few rounds
USAGE_CPU=$BUDGET USAGE_MEMORY=64M write_fleet checked "servers = 2" \
        "[ports]" "game_base = 32000" "query_base = 32050" \
        "[checks]" "interval = ${IV}ms" "cpu_tolerance = 10%" "memory_tolerance = 20M" \
        "strikes = 3" "window = 10m" "[crash]" "restarts = 5" "window = 10m"
USAGE_CPU=$BUDGET USAGE_MEMORY=64M write_fleet unchecked "servers = 1" \
        "[ports]" "game_base = 32010" "query_base = 32060" "[checks]" "interval = 0"
# windowed: checks.window is 1.5 intervals, so at most two strikes are ever within it.
USAGE_CPU=$BUDGET USAGE_MEMORY=64M write_fleet windowed "servers = 1" \
        "[ports]" "game_base = 32020" "query_base = 32070" \
        "[checks]" "interval = ${IV}ms" "strikes = 3" "window = $((IV * 3 / 2))ms"
start_slotd
start_monitor "$SIGS"
# Slots in file-name order: checked 0 and 1, unchecked 2, windowed 3.
for id in 0 1 2 3; do
        wait_prop $id ProcessState running
        wait_server $id
done
assert_eq "$(sprop 0 Strikes)" 0 "Strikes of a fresh slot"

# ---- 1. A CPU burner: cpu strikes 1, 2, 3, SIGSEGV, a crash, a restart ----
pid0=$(sprop 0 MainPID)
control 0 "burn-cpu 1.5"
wait_sig "$SIGS" Misbehaved "0 cpu 1" "$D"
wait_sig "$SIGS" Crashed "0 0 11 misbehaviour" "$D"
assert_eq "$(sig_args "$SIGS" Misbehaved | grep '^0 ' | head -n 3 | paste -sd,)" \
        "0 cpu 1,0 cpu 2,0 cpu 3" "slot 0's first three Misbehaved signals"
# Every strike was also announced as a change of Strikes, up to the third. (Strikes read
# directly: see 1b, where they last; here they are gone with the process.)
for n in 1 2 3; do
        assert_ok "PropertiesChanged Strikes cpu $n" grep -q \
                "\"path\":\"/org/slotd/Supervisor1/slot/0\".*\"Strikes\":{\"type\":\"a(su)\",\"data\":\[\[\"cpu\",$n\]\]}" "$SIGS"
done
assert_ok "log: three strikes, SIGSEGV" grep -q "slot 0 (checked): 3 strikes of check cpu: sending SEGV to process $pid0" "$T/slotd.log"
wait_new_pid 0 "$pid0"
wait_prop 0 ProcessState running
# (Properties read several at a time: a busctl call is slow in the TCG VM.)
assert_eq "$(sprops 0 LastExitSignal LastExitCode FailureReason Restarts State Strikes)" \
        "11|0|misbehaviour|1|online|0" \
        "LastExitSignal|LastExitCode|FailureReason|Restarts|State|Strikes after the restart"
assert_ok "old process gone" bash -c "! kill -0 $pid0 2>/dev/null"
# The new server does not burn (burn-cpu is not an at-start command): two rounds of its own
# pass without a strike.
wait_server 0
wait_rounds 0 2 "$D"
assert_eq "$(sprop 0 Strikes)" 0 "Strikes after two rounds of the new process"
assert_ok "CPUUsage of the restarted slot 0 under budget" cpu_below 0 "$LIMIT"
assert_eq "$(sig_count "$SIGS" Misbehaved 0)" 3 "Misbehaved signals of slot 0 in all"
# The neighbour: checked all along on the same interval (slot 0's three strikes and two
# quiet rounds took five rounds; slot 1 started with it), and one more of its own round
# now; nothing against it.
wait_rounds 1 1 "$D"
assert_eq "$(sig_count "$SIGS" Misbehaved 1)" 0 "Misbehaved signals of slot 1"
assert_eq "$(sig_count "$SIGS" Crashed 1)" 0 "Crashed signals of slot 1"
assert_eq "$(sprops 1 Strikes Restarts)" "0|0" "Strikes|Restarts of slot 1"
cpu1=$(sprop 1 CPUUsage)
note "CPUUsage of the idle neighbour: $cpu1"
assert_ok "CPUUsage of slot 1 under $LIMIT ($cpu1)" num_lt "$cpu1" "$LIMIT"
assert_ok "CPUUsage of slot 1 measured ($cpu1)" num_lt 0 "$cpu1"

# ---- 1b. Strikes count within checks.window only: a burner whose strikes age out first ----
pid3=$(sprop 3 MainPID)
control 3 "burn-cpu 1.5"
wait_sig "$SIGS" Misbehaved "3 cpu 2" "$D"
# Read at leisure, since they last: the last strike, perhaps the one before it too.
s=$(sprop 3 Strikes)
assert_ok "Strikes of slot 3 shows cpu ($s)" grep -Eqx '1 "cpu" [12]' <<<"$s"
# Four strikes, and never a third within the window: no signal, the same process.
wait_until $((30 * TIME_SCALE)) "four strikes of slot 3" sig_count_ge "$SIGS" Misbehaved 3 4
assert_eq "$(sig_args "$SIGS" Misbehaved | grep '^3 ' | grep -vc '^3 cpu [12]$')" 0 \
        "Misbehaved of slot 3 other than cpu 1 or 2"
assert_eq "$(sig_count "$SIGS" Crashed 3)" 0 "Crashed signals of slot 3"
assert_eq "$(sprop 3 MainPID)" "$pid3" "MainPID of slot 3"
control 3 "burn-cpu 0"

# ---- 7. Checks off (checks.interval = 0): a burner is never struck ----
pid2=$(sprop 2 MainPID)
control 2 "burn-cpu 1.5"
# Without checks CPUUsage is sampled when read: it shows the burn, well over budget.
wait_until "$D" "slot 2 burns over $LIMIT cores" cpu_above 2 "$LIMIT"
# Waiting is the only way to show this: with checks.interval = 0 slotd arms no timer for the
# slot at all, so nothing of the slot happens later that a test could wait for instead.
# Five would-be rounds of the checked fleet (5 intervals); any of them would have struck.
stays_true $((5 * IV)) "slot 2 has no strikes" prop_is 2 Strikes 0
assert_eq "$(server_state 2 burn_cpu)" 1.500 "slot 2's server still burning"
assert_eq "$(sig_count "$SIGS" Misbehaved 2)" 0 "Misbehaved signals of slot 2"
assert_eq "$(sprops 2 MainPID ProcessState FailureReason)" "$pid2|running|" \
        "MainPID|ProcessState|FailureReason of slot 2"
control 2 "burn-cpu 0"
finish
