#!/usr/bin/env bash
# The loopback interface down (SPEC §6, §12): no query probe can reach a server (older
# kernels refuse the send with ENETUNREACH, newer ones drop the datagram: the probe meets
# silence while lo is down, ENETDOWN). That is the host's fault: no strike, no server killed;
# each slot shows the cause in LastCheckError, the log says it once for the whole machine
# (the fault check-error:query:<ERRNO>), and once when it clears. With lo up again the
# checks judge as before. slotd runs in a network namespace of its own (lib.sh's
# SLOTD_NETNS), so the host's loopback is not touched.
. "$(dirname "$0")/lib.sh"
SIGS="$T/signals.json"
for c in unshare nsenter ip; do
        command -v "$c" >/dev/null || skip "$c is not installed"
done
unshare --net true 2>/dev/null || skip "cannot make a network namespace here"

MACHINE_CPUS=4 write_config
IV=$((1000 * TIME_SCALE))
D=$((30 * TIME_SCALE)) # deadline for a handful of rounds
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet lo "servers = 3" \
        "[ports]" "game_base = 33200" "query_base = 33250" \
        "[checks]" "interval = ${IV}ms" "query = sqp" "query_timeout = $((400 * TIME_SCALE))ms" \
        "cpu_tolerance = 1000%" "memory_tolerance = 20M" "strikes = 3" "window = 10m" \
        "[crash]" "restarts = 5" "window = 10m"
SLOTD_NETNS=1 start_slotd
start_monitor "$SIGS"
for id in 0 1 2; do
        wait_prop $id ProcessState running
        wait_server $id
        wait_prop $id QueryMap test-map "$D" # the probes work in the namespace
done
assert_eq "$(sprop 0 LastCheckError)" "" "LastCheckError while the probes work"
in_netns() { nsenter --net="/proc/$SLOTD_PID/ns/net" "$@"; }
assert_ok "slotd in a namespace of its own" \
        bash -c "[ \"\$(readlink /proc/$SLOTD_PID/ns/net)\" != \"\$(readlink /proc/self/ns/net)\" ]"
# Slot 1, which the test neither strikes nor restarts, holds an acknowledged allocation.
ack_allocate 1

pids=()
for id in 0 1 2; do pids+=("$(sprop $id MainPID)"); done
check_error_is() {
        sprop "$1" LastCheckError |
                grep -Eq "^query: (sendto )?127\.0\.0\.1:$(sprop "$1" QueryPort): .*(Network is unreachable|Network is down)$"
}
raised() { grep -c 'Host fault check-error:query:[A-Z]*: ' "$T/slotd.log" || true; }

# ---- Loopback down: no strike, LastCheckError on every slot, one log line per cause ----
in_netns ip link set lo down
for id in 0 1 2; do
        wait_until "$D" "slot $id LastCheckError names the errno" check_error_is $id
done
note "LastCheckError: $(sprop 0 LastCheckError)"
# Four rounds without a single probe answered: three would have struck a server out.
wait_rounds 0 4 "$D"
assert_eq "$(signal_count "$SIGS" Misbehaved)" 0 "Misbehaved signals with loopback down"
assert_eq "$(signal_count "$SIGS" Crashed)" 0 "Crashed signals with loopback down"
assert_eq "$(signal_count "$SIGS" MachineFault)" 0 "MachineFault signals (checks not made are not failed)"
for id in 0 1 2; do
        assert_eq "$(sprops $id MainPID ProcessState Strikes)" "${pids[$id]}|running|0" \
                "slot $id MainPID|ProcessState|Strikes with loopback down"
        assert_ok "slot $id LastCheckError still set" check_error_is $id
done
assert_ok "no strike in the log" bash -c "! grep -q 'Check [a-z]* failed' '$T/slotd.log'"
# One line a cause for the whole machine, not one per slot per round: ENETUNREACH from the
# send, or ENETDOWN for probes that met silence (a probe already out when lo went down may
# meet the other one).
causes=$(grep -o 'Host fault check-error:query:[A-Z]*: ' "$T/slotd.log" | sort -u | wc -l)
note "$(grep 'Host fault check-error:query:' "$T/slotd.log")"
assert_ok "a log line names the cause" [ "$causes" -ge 1 ]
assert_eq "$(raised)" "$causes" "log lines raising a check-error fault (one per cause)"
assert_ok "Faults lists the cause" bash -c "mprop() { busctl --address='$BUS' get-property org.slotd.Supervisor1 /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager Faults; }; mprop | grep -Eq '\"check-error:query:(ENETUNREACH|ENETDOWN): query: '"

# ---- Loopback up: LastCheckError clears, one line says so, judgement resumes ----
in_netns ip link set lo up
for id in 0 1 2; do
        wait_prop $id LastCheckError "" "$D"
done
cleared_all() { [ "$(grep -c 'Host fault check-error:query:[A-Z]* cleared after' "$T/slotd.log")" = "$causes" ]; }
wait_until "$D" "the cause cleared in the log" cleared_all
PASSED=$((PASSED + 1))
assert_eq "$(mprop Faults)" "0" "Faults with loopback up"
assert_eq "$(raised)" "$causes" "log lines raising a check-error fault after recovery"
for id in 0 1 2; do
        assert_eq "$(sprops $id MainPID Strikes)" "${pids[$id]}|0" "slot $id MainPID|Strikes"
done
ack_check "with loopback up again"
# A server silent now is its own fault: struck out as ever.
control 2 "query off"
wait_sig "$SIGS" Crashed "2 0 11 misbehaviour" "$D"
assert_eq "$(sig_args "$SIGS" Misbehaved | paste -sd,)" "2 query 1,2 query 2,2 query 3" \
        "Misbehaved signals after recovery: slot 2's"
wait_new_pid 2 "${pids[2]}"
wait_prop 2 ProcessState running
assert_eq "$(sprops 0 MainPID Strikes)" "${pids[0]}|0" "slot 0 untouched"
assert_eq "$(signal_count "$SIGS" MachineFault)" 0 "MachineFault signals in all"
ack_check "at the end"
finish
