#!/usr/bin/env bash
# Fault matrix (issue 14), the starts: a fork refused (pids.max on slotd's own group), a cgroup
# limit write refused, a slot cgroup removed behind slotd's back (SPEC §3, §12). None is a
# crash: the slot waits, retried with back-off, under the host fault fork or cgroup; the other
# slots run on; once the fault clears, the slot starts by itself.
#
# slotd runs in a group of its own, $CG/slotd, beside the slot tree $CG/slots, as in a group
# delegated to slotd: pids.max on $CG is like a unit's TasksMax over slotd and the game
# servers. On a host whose v2 tree has no pids controller, slotd runs in a v1 pids group
# instead, which its children inherit.
. "$(dirname "$0")/lib.sh"
SIGS="$T/signals.json"

trap pids_limit_cleanup EXIT
pids_limit_init

MACHINE_CPUS=4 write_config
sed -i "s|^cgroup = .*|cgroup = $CG/slots|" "$T/etc/slotd.ini"
write_fleet game "servers = 3" "[ports]" "game_base = 27600" "query_base = 27650" \
        "[crash]" "restarts = 1" "window = 10m"
write_fleet weak "servers = 1" "[ports]" "game_base = 27700" "query_base = 27750" \
        "[crash]" "restarts = 0" "window = 10m"
start_slotd_in_group
start_monitor "$SIGS"
trap pids_limit_cleanup EXIT # start_monitor set its own
for id in 0 1 2 3; do
        wait_prop $id ProcessState running
        wait_server $id
done
pid2=$(sprop 2 MainPID)
# Slot 2, which no fault touches, holds an acknowledged allocation throughout.
ack_allocate 2
faults_has() { bctl get-property org.slotd.Supervisor1 /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager Faults | grep -q -- "$1"; }

# ---- 1. Fork refused: pids.max leaves no room ----
echo 1 > "$LIMIT/pids.max"
note "pids.current $(cat "$LIMIT/pids.current") under pids.max 1"
# slot 1: a restart asked for; slot 0: a crash, whose restart is refused the same way (by
# the keeper first, then by slotd).
scall 1 Restart >/dev/null
control 0 "crash"
wait_until 20 "log: fork refused for slot 1" grep -q \
        "slot 1 (game): Host fault fork: cannot fork the keeper of .*: Resource temporarily unavailable; retrying with back-off" "$T/slotd.log"
wait_until 20 "log: fork refused for slot 0" grep -q "slot 0 (game): Host fault fork: cannot fork" "$T/slotd.log"
assert_ok "Faults names fork" faults_has "fork: slot [01] (game): cannot fork the keeper of"
assert_ok "log: the machine's fault" grep -q "Host fault fork: slot [01] (game): cannot fork" "$T/slotd.log"
wait_until 20 "a retry of slot 1" grep -q "slot 1 (game): Still cannot fork" "$T/slotd.log"
assert_eq "$(sprops 1 ProcessState FailureReason)" "stopped|" "slot 1 while fork is refused"
r1=$(sprop 1 Restarts)
r0=$(sprop 0 Restarts)
assert_eq "$(sprops 0 ProcessState FailureReason)" "stopped|" "slot 0 while fork is refused"
assert_eq "$(sprop 2 MainPID)" "$pid2" "slot 2's server meanwhile"
assert_eq "$(sig_count "$SIGS" Crashed 1)" 0 "Crashed signals of slot 1"
assert_eq "$(sig_count "$SIGS" Crashed 0)" 1 "Crashed signals of slot 0 (its own crash, once)"
echo max > "$LIMIT/pids.max"
wait_prop 1 ProcessState running 30
wait_prop 0 ProcessState running 30
wait_until 30 "the fork fault cleared" bash -c "! busctl --address='$BUS' get-property org.slotd.Supervisor1 /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager Faults | grep -q fork:"
assert_ok "log: fork cleared" grep -q "Host fault fork cleared after" "$T/slotd.log"
assert_eq "$(sprops 0 Restarts FailureReason)" "$r0|" "slot 0 after the fault (its retries were no crashes)"
assert_eq "$(sprop 1 Restarts)" "$r1" "Restarts of slot 1 after the fault"
assert_eq "$(sig_count "$SIGS" Crashed 0)" 1 "Crashed signals of slot 0 after the fault"
assert_eq "$(sprop 2 MainPID)" "$pid2" "slot 2's server throughout"
ack_check "after the fork fault"

# ---- 2. A cgroup limit write refused (where limits are written at all) ----
file=
for f in memory.max pids.max cpu.max; do
        [ -e "$CG/slots/game/slot-1/$f" ] && { file=$f; break; }
done
if [ -n "$file" ]; then
        want=$(cat "$CG/slots/game/slot-1/$file")
        scall 1 Stop >/dev/null
        wait_prop 1 ProcessState stopped
        BOUND=$CG/slots/game/slot-1/$file
        mount --bind /dev/full "$BOUND" # every write: ENOSPC
        scall 1 Start >/dev/null
        wait_until 20 "log: limit write refused" grep -q \
                "slot 1 (game): Host fault cgroup: cannot write $CG/slots/game/slot-1/[a-z.]*: No space left on device; retrying" "$T/slotd.log"
        assert_ok "Faults names cgroup" faults_has "cgroup: slot 1 (game): cannot write"
        assert_eq "$(sprops 1 ProcessState MainPID)" "stopped|0" "slot 1 without its limits: not started"
        assert_ok "no process in slot 1's cgroup" cgroup_empty 1
        assert_eq "$(sprop 2 MainPID)" "$pid2" "slot 2's server meanwhile"
        umount "$BOUND"
        BOUND=
        wait_prop 1 ProcessState running 30
        wait_until 30 "the cgroup fault cleared" bash -c "! busctl --address='$BUS' get-property org.slotd.Supervisor1 /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager Faults | grep -q cgroup:"
        assert_eq "$(cat "$CG/slots/game/slot-1/$file")" "$want" "$file of slot 1 once it started"
        assert_eq "$(sig_count "$SIGS" Crashed 1)" 0 "Crashed signals of slot 1"
        ack_check "after the cgroup fault"
else
        note "no limit is written on this host (no v2 controllers): the limit write part does not apply"
fi

# ---- 3. A slot cgroup removed behind slotd's back ----
# Stopped, then removed: made anew at the next start.
scall 1 Stop >/dev/null
wait_prop 1 ProcessState stopped
rmdir "$CG/slots/game/slot-1"
scall 1 Start >/dev/null
wait_prop 1 ProcessState running
wait_server 1
assert_ok "log: made anew" grep -q "slot 1 (game): Cgroup $CG/slots/game/slot-1 was removed behind slotd's back, making it anew" "$T/slotd.log"
assert_ok "slot 1's server in its new cgroup" one_server 1
# Running, then cgroup.kill and rmdir: the server's death is a crash as any other (weak has
# no restart left: it stays failed, and the group empty), the group is made anew at the start.
pid3=$(sprop 3 MainPID)
echo 1 > "$CG/slots/weak/slot-3/cgroup.kill"
wait_prop 3 ProcessState failed
wait_until 20 "slot 3's cgroup removed" rmdir "$CG/slots/weak/slot-3"
assert_eq "$(sprops 3 LastExitSignal FailureReason)" "9|crash-backoff" "slot 3 after cgroup.kill"
scall 3 Start >/dev/null
wait_prop 3 ProcessState running
wait_server 3
assert_ok "log: slot 3's made anew" grep -q "slot 3 (weak): Cgroup $CG/slots/weak/slot-3 was removed behind slotd's back, making it anew" "$T/slotd.log"
assert_ok "slot 3's server in its new cgroup" one_server 3
assert_ok "slot 3 runs a new server" test "$(sprop 3 MainPID)" != "$pid3"
assert_eq "$(sprop 2 MainPID)" "$pid2" "slot 2's server throughout"
assert_eq "$(mprop Faults)" 0 "Faults at the end"
ack_check "at the end"
finish
