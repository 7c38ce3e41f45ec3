#!/usr/bin/env bash
# Fault matrix (issue 14), memory: limits.memory_high throttling a server, and slotd's own
# memory limited (SPEC §2, §3, §12). Needs the v2 memory controller (the VM of tests/vm).
#
# memory.high is off ("max") unless limits.memory_high sets it; set, and reloaded, a server
# over it is throttled by the kernel: slotd says so once per episode and strikes nothing for
# it (the memory check still judges usage.memory + checks.memory_tolerance). slotd itself runs
# in a group of its own under memory.max 64M, which it logs at start-up: the game servers'
# memory is charged to their slots, not to slotd, and slotd works on.
. "$(dirname "$0")/lib.sh"
SIGS="$T/signals.json"
MB=1048576

grep -qw memory "$CG_MOUNT/cgroup.controllers" || skip "no v2 memory controller on this host"
grep -qw memory "$CG_MOUNT/cgroup.subtree_control" || echo +memory > "$CG_MOUNT/cgroup.subtree_control"
mkdir -p "$CG/slotd"
echo +memory > "$CG/cgroup.subtree_control"
echo $((64 * MB)) > "$CG/slotd/memory.max"

MACHINE_CPUS=4 write_config
sed -i "s|^cgroup = .*|cgroup = $CG/slots|" "$T/etc/slotd.ini"
# hot: the memory check strikes above 16M + 100M; memory.high comes with the Reload.
USAGE_CPU=0.5 USAGE_MEMORY=16M write_fleet hot "servers = 1" \
        "[ports]" "game_base = 28600" "query_base = 28650" \
        "[checks]" "interval = $((1000 * TIME_SCALE))ms" "cpu_tolerance = 1000%" \
        "memory_tolerance = 100M" "window = 10m"
USAGE_CPU=0.5 USAGE_MEMORY=256M write_fleet plain "servers = 2" \
        "[ports]" "game_base = 28700" "query_base = 28750"
(
        echo "$BASHPID" > "$CG/slotd/cgroup.procs"
        SLOTD_LOG_LEVEL=debug exec "$SLOTD" --config "$T/etc/slotd.ini"
) >>"$T/slotd.log" 2>&1 &
SLOTD_PID=$!
wait_until 20 "slotd on the bus" bus_name_owned
start_monitor "$SIGS"
for id in 0 1 2; do
        wait_prop $id ProcessState running
        wait_server $id
done
assert_ok "log: slotd's own memory.max" grep -q "slotd's own memory.max is 64M (in $CG/slotd)" "$T/slotd.log"
note "slotd: $(grep VmRSS /proc/$SLOTD_PID/status), its group's memory.current $(cat "$CG/slotd/memory.current")"
assert_eq "$(cat "$CG/slots/hot/slot-0/memory.high")" max "memory.high by default"
# Slot 0, throttled below but never restarted (a Reload of limits restarts nobody), holds an
# acknowledged allocation throughout; fleet plain's slots stay free for the allocation of part 2.
ack_allocate 0

# ---- 1. limits.memory_high, reloaded, and a server throttled there ----
base=$(sprop 0 MemoryCurrent)
high=$(( (base / MB + 24) * MB ))
sed -i "s|^\[usage\]\$|[limits]\nmemory_high = $high\n[usage]|" "$T/etc/fleets.d/hot.ini"
mcall Reload >/dev/null || fail "Reload with limits.memory_high"
assert_eq "$(cat "$CG/slots/hot/slot-0/memory.high")" "$high" "memory.high after the Reload"
pid0=$(sprop 0 MainPID)
wait_rounds 0 1 $((20 * TIME_SCALE))
# 28M more: a few MiB over memory.high, far under the check's line (116M).
control 0 "grow-memory 28M"
wait_until $((30 * TIME_SCALE)) "log: throttled at memory.high" grep -q \
        "slot 0 (hot): Throttled at memory.high ($high bytes, limits.memory_high) [0-9]* times since the last check; no strike" "$T/slotd.log"
assert_ok "memory.events counts it" awk '$1 == "high" && $2 > 0 { ok = 1 } END { exit !ok }' \
        "$CG/slots/hot/slot-0/memory.events"
wait_rounds 0 2 $((30 * TIME_SCALE))
# Once per episode: an episode ends at a check that finds no new throttling.
episodes() { echo $(( $(grep -c "slot 0 (hot): Throttled at memory.high" "$T/slotd.log") - \
        $(grep -c "slot 0 (hot): No longer throttled" "$T/slotd.log" || true) )); }
assert_ok "one throttling line per episode ($(episodes) open)" test "$(episodes)" -ge 0 -a "$(episodes)" -le 1
assert_eq "$(sig_count "$SIGS" Misbehaved 0)" 0 "strikes of the throttled server"
assert_eq "$(sprop 0 MainPID)" "$pid0" "the throttled server (not killed)"
# The operator raises memory.high (a Reload writes it to the running server): the episode
# ends at the next check. (A server stalled at memory.high may not get to read a command.)
sed -i "s|^memory_high = .*|memory_high = $((high + 64 * MB))|" "$T/etc/fleets.d/hot.ini"
mcall Reload >/dev/null || fail "Reload with a higher limits.memory_high"
assert_eq "$(cat "$CG/slots/hot/slot-0/memory.high")" $((high + 64 * MB)) "memory.high after the second Reload"
wait_until $((30 * TIME_SCALE)) "log: throttling over" grep -q \
        "slot 0 (hot): No longer throttled at memory.high" "$T/slotd.log"
assert_eq "$(sprop 0 MainPID)" "$pid0" "the server after its episode"
ack_check "after the throttling"

# ---- 2. slotd's own memory limited: servers are charged to their slots ----
pid1=$(sprop 1 MainPID)
control 1 "grow-memory 96M"
mem_above() { [ "$(sprop "$1" MemoryCurrent)" -gt "$2" ]; }
wait_until $((30 * TIME_SCALE)) "slot 1 over 96M" mem_above 1 $((96 * MB))
assert_ok "slot 1's 96M in its own group" test "$(cat "$CG/slots/plain/slot-1/memory.current")" -gt $((96 * MB))
assert_ok "slotd's group under its 64M" test "$(cat "$CG/slotd/memory.current")" -lt $((64 * MB))
# slotd works on: allocations, restarts, deallocations.
u=33333333-cccc-4000-8000-000000000003
id=$(allocate plain "$u")
assert_eq "$(server_json "$id" allocatedUUID)" "$u" "server.json of the allocation"
pid2=$(sprop 2 MainPID)
scall 2 Restart >/dev/null
wait_new_pid 2 "$pid2"
wait_prop 2 ProcessState running
mcall Deallocate s "$u" >/dev/null || fail "Deallocate $u"
assert_eq "$(server_json "$id" allocatedUUID)" "" "server.json after the deallocation"
assert_ok "slotd alive" kill -0 "$SLOTD_PID"
assert_ok "no OOM kill in slotd's group" awk '$1 == "oom_kill" && $2 == 0 { ok = 1 } END { exit !ok }' \
        "$CG/slotd/memory.events"
assert_eq "$(sprop 1 MainPID)" "$pid1" "slot 1's server throughout"
ack_check "with slotd's memory limited"
note "slotd at the end: $(grep VmRSS /proc/$SLOTD_PID/status), its group's memory.peak $(cat "$CG/slotd/memory.peak" 2>/dev/null || echo '?')"
finish
