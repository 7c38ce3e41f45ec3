#!/usr/bin/env bash
# The memory check and the OOM kill (SPEC §3, §6): a server holding more than usage.memory +
# memory_tolerance collects `memory` strikes and gets SIGSEGV (on hosts without the memory
# controller, memory is the RSS of the slot's processes); one that reaches memory.max is
# killed by the kernel, a crash with reason oom.
. "$(dirname "$0")/lib.sh"
SIGS="$T/signals.json"
MB=1048576

MACHINE_CPUS=4 write_config
# The CPU check is out of the way (cpu_tolerance 1000%: a start-up in the TCG VM can take
# over half a core for a round). grow: the memory check strikes above 64M + 20M = 84M;
# memory.max is 64M + 2 × 20M = 104M.
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet grow "servers = 1" \
        "[ports]" "game_base = 32400" "query_base = 32450" \
        "[checks]" "interval = $((1000 * TIME_SCALE))ms" "cpu_tolerance = 1000%" \
        "memory_tolerance = 20M" \
        "strikes = 3" "window = 10m" \
        "[crash]" "restarts = 5" "window = 10m"
# oom: the check allows 64M + 200M, but memory.max is 96M: the kernel acts first.
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet oom "servers = 1" \
        "[ports]" "game_base = 32410" "query_base = 32460" \
        "[checks]" "interval = 150ms" "cpu_tolerance = 1000%" "window = 10m" \
        "[limits]" "memory_max = 96M" \
        "[crash]" "restarts = 5" "window = 10m"
start_slotd
start_monitor "$SIGS"
for id in 0 1; do
        wait_prop $id ProcessState running
        wait_server $id
done
note "Enforcement: $(mprop Enforcement)"
mem0=$(sprop 0 MemoryCurrent)
note "MemoryCurrent of an idle test server: $mem0"
assert_ok "MemoryCurrent of slot 0 measured and under 84M ($mem0)" test "$mem0" -gt 0 -a "$mem0" -lt $((84 * MB))

# ---- 2a. A memory grower past usage.memory + memory_tolerance: strikes, SIGSEGV ----
# First 40M, within the budget: MemoryCurrent follows, and no strike comes of it.
pid0=$(sprop 0 MainPID)
control 0 "grow-memory 40M"
mem_above() { [ "$(sprop "$1" MemoryCurrent)" -gt "$2" ]; }
wait_until 20 "MemoryCurrent of slot 0 over 40M" mem_above 0 $((40 * MB))
wait_rounds 0 1 $((20 * TIME_SCALE))
assert_eq "$(sig_count "$SIGS" Misbehaved 0)" 0 "strikes of slot 0 at 40M"
# Then 50M more: 90M and the server's own few, over 84M.
control 0 "grow-memory 50M"
wait_sig "$SIGS" Misbehaved "0 memory 1"
# SIGSEGV. (Were limits.memory_high at budget + tolerance, the very line the check draws, the
# kernel would throttle the server there: a throttled task sleeps through any signal short of
# SIGKILL, and slotd would kill the cgroup fleet.stop_timeout later. It is off by default.)
wait_sig "$SIGS" Crashed '0 0 11 misbehaviour' $((20 * TIME_SCALE))
sig=11
assert_eq "$(sig_args "$SIGS" Misbehaved | grep '^0 ' | head -n 3 | paste -sd,)" \
        "0 memory 1,0 memory 2,0 memory 3" "slot 0's first three Misbehaved signals"
assert_ok "PropertiesChanged Strikes memory 2" grep -q \
        '"path":"/org/slotd/Supervisor1/slot/0".*"Strikes":{"type":"a(su)","data":\[\["memory",2\]\]}' "$SIGS"
assert_ok "log: memory check failed" grep -q "slot 0 (grow): Check memory failed: .* bytes in use, budget $((64 * MB)) + $((20 * MB))" "$T/slotd.log"
assert_ok "log: SIGSEGV for memory" grep -q "slot 0 (grow): 3 strikes of check memory: sending SEGV to process $pid0" "$T/slotd.log"
wait_new_pid 0 "$pid0"
wait_prop 0 ProcessState running
assert_eq "$(sprops 0 LastExitSignal FailureReason Strikes)" "$sig|misbehaviour|0" \
        "LastExitSignal|FailureReason|Strikes of the new process"
wait_server 0
mem0=$(sprop 0 MemoryCurrent)
assert_ok "MemoryCurrent of the new process back under 84M ($mem0)" test "$mem0" -lt $((84 * MB))
# No CPU or query strikes came with it.
assert_eq "$(sig_args "$SIGS" Misbehaved | grep -vc ' memory ')" 0 "Misbehaved signals of other checks"

# ---- 2b. Past memory.max: the OOM killer, a crash with reason oom ----
if ! enforced memory; then
        note "skipped OOM part: no memory controller"
        assert_ok "no memory.max without the memory controller" test ! -e "$CG/oom/slot-1/memory.max"
        finish
        exit 0
fi
assert_eq "$(cat "$CG/grow/slot-0/memory.max")" $((104 * MB)) "memory.max of grow (default)"
assert_eq "$(cat "$CG/grow/slot-0/memory.high")" max "memory.high of grow (limits.memory_high off)"
assert_eq "$(cat "$CG/oom/slot-1/memory.max")" $((96 * MB)) "memory.max of oom (limits.memory_max)"
assert_eq "$(cat "$CG/oom/slot-1/memory.oom.group")" 1 "memory.oom.group"
pid1=$(sprop 1 MainPID)
control 1 "fork 1"
has_children() { [ -n "$(server_state "$1" children)" ]; }
wait_until 20 "slot 1 has a child" has_children 1
# Every process of the slot, host PIDs (the server's own list may be of its PID namespace).
kids=$(cat "$CG/oom/slot-1/cgroup.procs")
control 1 "grow-memory 200M"
wait_sig "$SIGS" Crashed "1 0 9 oom" 60
assert_ok "memory.events counts the OOM kill" \
        awk '$1 == "oom_kill" && $2 >= 1 { ok = 1 } END { exit !ok }' "$CG/oom/slot-1/memory.events"
for k in $kids; do
        assert_ok "process $k of slot 1 gone (memory.oom.group)" bash -c "! kill -0 $k 2>/dev/null"
done
wait_new_pid 1 "$pid1" 30
wait_prop 1 ProcessState running 30
assert_eq "$(sprops 1 LastExitSignal FailureReason Restarts)" "9|oom|1" \
        "LastExitSignal|FailureReason|Restarts after the OOM kill"
assert_ok "log: cause oom" grep -q "slot 1 (oom): Server crashed: killed by signal 9 (KILL), cause oom; restarting" "$T/slotd.log"
# The kernel was first: no strike at all against slot 1 (its check allows 264M).
assert_eq "$(sig_count "$SIGS" Misbehaved 1)" 0 "Misbehaved signals of slot 1"
finish
