#!/usr/bin/env bash
# Mass-failure protection (SPEC §6, §12): when more than checks.machine_fault_share of a
# fleet's checked slots fail the same check in one round, the machine is the likely cause:
# that round counts no strikes, the fault check:<check>:<fleet> is raised (Faults, one log
# line, the MachineFault signal), and it clears by itself with the first round under the
# share; that first round and the fault's rounds strike nobody. Both sides: every server of the
# fleet silent at once (SIGSTOP: no query answers, no WATCHDOG=1) is struck by nobody, nor is a
# straggler still silent in the round after the fault; one silent server among healthy ones is
# struck out as before.
. "$(dirname "$0")/lib.sh"
SIGS="$T/signals.json"

MACHINE_CPUS=4 write_config
# A check round a second (3 s in the TCG VM); the heartbeat a little shorter. The CPU check
# is out of the way (an idle server is far under 1000 %), memory too (a few MB of 64M + 20M).
IV=$((1000 * TIME_SCALE))
HB=$((800 * TIME_SCALE))
D=$((30 * TIME_SCALE)) # deadline for a handful of rounds
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet mf "servers = 4" \
        "[ports]" "game_base = 33000" "query_base = 33050" \
        "[checks]" "interval = ${IV}ms" "query = sqp" "query_timeout = $((400 * TIME_SCALE))ms" \
        "heartbeat = ${HB}ms" "cpu_tolerance = 1000%" "memory_tolerance = 20M" \
        "machine_fault_share = 50%" "strikes = 3" "window = 10m" \
        "[crash]" "restarts = 5" "window = 10m"
start_slotd
start_monitor "$SIGS"
for id in 0 1 2 3; do
        wait_prop $id ProcessState running
        wait_server $id
        wait_prop $id QueryMap test-map "$D"
done
assert_eq "$(mprop Faults)" "0" "Faults of a healthy machine"

# fault_rounds CHECK: the rounds of fleet mf's CHECK judged a machine fault so far.
fault_rounds() {
        grep -c "Fleet mf: [0-9]* of [0-9]* checked slots failed check $1 in one round: a machine fault" \
                "$T/slotd.log" || true
}
fault_rounds_ge() { [ "$(fault_rounds "$1")" -ge "$2" ]; }
has_fault() { mprop Faults | grep -q "\"check:$1:mf: "; }
no_fault() { ! has_fault "$1"; }

# ---- a. Every server silent at once: no strike, no SIGSEGV, a machine fault ----
pids=()
for id in 0 1 2 3; do pids+=("$(sprop $id MainPID)"); done
kill -STOP "${pids[@]}"
# A SIGSTOP takes effect when its target next runs, which on a busy machine can be after kill
# has returned (run 2 of docs/test-time.md read one still running): wait for it, then assert.
for p in "${pids[@]}"; do
        wait_until 10 "server $p stopped by SIGSTOP" all_threads_stopped "$p"
        assert_ok "server $p stopped" all_threads_stopped "$p"
done
wait_until "$D" "MachineFault(mf, query, 4, 4)" has_sig "$SIGS" MachineFault "mf query 4 4"
wait_until "$D" "MachineFault(mf, heartbeat, ...)" \
        bash -c "grep -q '\"member\":\"MachineFault\".*\"mf\",\"heartbeat\"' '$SIGS'"
# Four silent rounds of each: three strikes would have sent SIGSEGV.
wait_until "$D" "four query rounds judged a machine fault" fault_rounds_ge query 4
wait_until "$D" "four heartbeat rounds judged a machine fault" fault_rounds_ge heartbeat 4
faults=$(mprop Faults)
note "Faults: $faults"
assert_ok "Faults lists check:query:mf ($faults)" grep -q '"check:query:mf: 4 of 4 checked slots of fleet mf failed the query check in one round' <<<"$faults"
assert_ok "Faults lists check:heartbeat:mf ($faults)" grep -q '"check:heartbeat:mf: ' <<<"$faults"
assert_eq "$(sig_count "$SIGS" MachineFault mf)" 2 "MachineFault signals (one per check, when raised)"
assert_eq "$(grep -c 'Host fault check:query:mf: ' "$T/slotd.log")" 1 "log lines raising check:query:mf"
assert_eq "$(grep -c 'Host fault check:heartbeat:mf: ' "$T/slotd.log")" 1 "log lines raising check:heartbeat:mf"
assert_eq "$(signal_count "$SIGS" Misbehaved)" 0 "Misbehaved signals while all were silent"
assert_eq "$(signal_count "$SIGS" Crashed)" 0 "Crashed signals while all were silent"
for id in 0 1 2 3; do
        assert_eq "$(sprops $id MainPID ProcessState Strikes)" "${pids[$id]}|running|0" \
                "slot $id MainPID|ProcessState|Strikes while all were silent"
done
assert_ok "no strike in the log" bash -c "! grep -q 'Check [a-z]* failed' '$T/slotd.log'"

# ---- a'. They answer again, one of them late: the faults clear, nobody is struck for them ----
# Slot 3 is a straggler for sure: its "query off" waits in its control file while it is stopped,
# and it reads it as soon as it runs again, before a query can reach it (a query takes a second
# datagram, after the challenge). So slot 3 fails every query round from the fault on. The first
# round under the share clears check:query:mf and strikes nobody (SPEC §6: the round after a
# machine fault); the rounds after it strike slot 3 out, as a server that stays silent. (Before
# this rule, the clearing round struck whoever came back late: the VM's failure in
# docs/test-time.md.)
control 3 "query off"
kill -CONT "${pids[@]}"
wait_until "$D" "check:query:mf cleared" no_fault query
wait_until "$D" "check:heartbeat:mf cleared" no_fault heartbeat
assert_eq "$(grep -c 'Host fault check:query:mf cleared after' "$T/slotd.log")" 1 "log lines clearing check:query:mf"
assert_eq "$(grep -c 'Host fault check:heartbeat:mf cleared after' "$T/slotd.log")" 1 "log lines clearing check:heartbeat:mf"
wait_sig "$SIGS" Misbehaved "3 query 1" "$D"
# query_rounds_before_strike: the query rounds judged after the one that cleared the fault and
# before slot 3's first strike (the clearing round's own verdict line comes before "cleared").
query_rounds_before_strike() {
        awk '/Host fault check:query:mf cleared after/ { on = 1; next }
             on && /slot 3 \(mf\): Check query failed/ { print n + 0; found = 1; exit }
             on && /Fleet mf: [0-9]* of [0-9]* checked slots failed check query in one round/ { n++ }
             END { if (!found) print "none" }' "$T/slotd.log"
}
assert_eq "$(query_rounds_before_strike)" 1 \
        "query rounds between the fault's clearing round and slot 3's first strike (the clearing round struck nobody)"
assert_ok "log: the round after the fault struck nobody" \
        grep -q "Fleet mf: the round of check query after a machine fault, no strikes" "$T/slotd.log"
# Slot 3 stays silent: struck three times and signalled, then started again.
wait_sig "$SIGS" Crashed "3 0 11 misbehaviour" "$D"
wait_new_pid 3 "${pids[3]}"
wait_prop 3 ProcessState running
pids[3]=$(sprop 3 MainPID)
# Three rounds more (a heartbeat miss of the last silent period waits a round for its verdict;
# any strike left would show now).
wait_rounds 0 3 "$D"
assert_eq "$(sig_args "$SIGS" Misbehaved | paste -sd,)" "3 query 1,3 query 2,3 query 3" \
        "Misbehaved signals after the servers came back: slot 3's three query strikes, nobody else's"
assert_eq "$(sig_args "$SIGS" Crashed | paste -sd,)" "3 0 11 misbehaviour" \
        "Crashed signals after the servers came back: slot 3's only"
for id in 0 1 2; do
        assert_eq "$(sprops $id MainPID ProcessState Strikes)" "${pids[$id]}|running|0" \
                "slot $id MainPID|ProcessState|Strikes after the servers came back"
done
assert_eq "$(mprop Faults)" "0" "Faults after recovery"

# ---- b. One silent server among healthy ones: struck out as before ----
control 1 "query off"
wait_sig "$SIGS" Misbehaved "1 query 1" "$D"
wait_sig "$SIGS" Crashed "1 0 11 misbehaviour" "$D"
assert_eq "$(sig_args "$SIGS" Misbehaved | grep -v '^3 ' | paste -sd,)" "1 query 1,1 query 2,1 query 3" \
        "Misbehaved signals but slot 3's (part a'): slot 1's three query strikes, nobody else's"
assert_eq "$(sig_args "$SIGS" Misbehaved | grep '^3 ' | paste -sd,)" "3 query 1,3 query 2,3 query 3" \
        "Misbehaved signals of slot 3: those of part a' only"
assert_ok "log: three strikes, SIGSEGV" grep -q \
        "slot 1 (mf): 3 strikes of check query: sending SEGV to process ${pids[1]}" "$T/slotd.log"
wait_new_pid 1 "${pids[1]}"
wait_prop 1 ProcessState running
assert_eq "$(sprop 1 FailureReason)" misbehaviour "FailureReason of slot 1"
assert_eq "$(sig_count "$SIGS" MachineFault mf)" 2 "MachineFault signals: none for one silent server"
for id in 0 2 3; do
        assert_eq "$(sprops $id MainPID Strikes)" "${pids[$id]}|0" "slot $id MainPID|Strikes"
done
assert_eq "$(mprop Faults)" "0" "Faults with one silent server"
finish
