#!/usr/bin/env bash
# Fault matrix (issue 14): slots_dir full, server.json cannot be written (SPEC §4, §12).
# supervisor.slots_dir is a tiny tmpfs, filled while the servers run. Every server.json write
# reserves its room first (the content with the longest allocation UUID), so an allocation
# or deallocation on a running slot needs no new space and is acknowledged and written. An
# allocation whose server.json needs more room (another build configuration, with variables)
# is refused with Unavailable before anything changed; a start whose server.json cannot be
# written is no crash: the slot waits, retried with back-off, under the host fault slots_dir.
# Freeing the space ends it: the slot starts by itself, the refused allocation goes through.
. "$(dirname "$0")/lib.sh"
SIGS="$T/signals.json"
command -v mount >/dev/null || skip "mount is not installed"

fault_cleanup() {
        local rc=$?
        set +e
        umount -l "$T/slots" 2>/dev/null
        (exit $rc)
        bg_cleanup
}
trap fault_cleanup EXIT
mkdir -p "$T/slots"
mount -t tmpfs -o size=1M,mode=755 slotd-it-slots "$T/slots" || skip "cannot mount a tmpfs"

# "big" writes four variables of 1000 bytes into server.json: over a 4 KiB page, where the
# default configuration's server.json takes less than one.
pad=$(printf 'x%.0s' $(seq 1000))
MACHINE_CPUS=4 write_config
write_fleet game "servers = 2" "[ports]" "game_base = 26600" "query_base = 26650" \
        "[crash]" "restarts = 1" "window = 10m" \
        "[build_configuration big]" "variables.a = $pad" "variables.b = $pad" \
        "variables.c = $pad" "variables.d = $pad"
start_slotd
start_monitor "$SIGS"
trap fault_cleanup EXIT # start_monitor set its own
for id in 0 1; do
        wait_prop $id ProcessState running
        wait_server $id
done
pid0=$(sprop 0 MainPID)
pid1=$(sprop 1 MainPID)
json_size() { stat -c %s "$(sprop "$1" Home)/server.json"; }
size1=$(json_size 1)
assert_ok "the default server.json fits a page ($size1 bytes)" test "$size1" -lt 3900

# Fill the file system: the filler takes every block left.
fill() { dd if=/dev/zero of="$T/slots/filler" bs=4k oflag=append conv=notrunc 2>/dev/null || true; }
fill
assert_eq "$(df --output=avail -B1 "$T/slots" | tail -n 1 | tr -d ' ')" 0 "space left on slots_dir"

# ---- An allocation of a running slot: acknowledged, and in server.json ----
u1=11111111-aaaa-4000-8000-000000000001
id1=$(allocate game "$u1")
assert_eq "$(server_json "$id1" allocatedUUID)" "$u1" "server.json of slot $id1 on a full slots_dir"
assert_eq "$(mprop Faults)" "0" "Faults after an allocation on a full slots_dir"
mcall Deallocate s "$u1" >/dev/null || fail "Deallocate $u1 on a full slots_dir"
assert_eq "$(server_json "$id1" allocatedUUID)" "" "server.json after the deallocation"

# ---- An allocation whose server.json needs more room: refused, nothing changed ----
u2=22222222-bbbb-4000-8000-000000000002
expect_merr Unavailable Allocate string:game string:"$u2" string:big
out=$(dsend /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager.Allocate string:game \
        string:"$u2" string:big || true)
assert_ok "the error names server.json and ENOSPC ($out)" \
        grep -q "server.json: No space left on device; the allocation was not made" <<<"$out"
assert_eq "$(slot_of "$u2")" "" "slot allocated to the refused $u2"
for id in 0 1; do
        assert_eq "$(server_json $id allocatedUUID)" "" "allocatedUUID of slot $id after the refusal"
        assert_ok "slot $id's server.json has no variable of big" bash -c "! grep -q '\"a\"' '$(sprop $id Home)/server.json'"
        assert_eq "$(sprops $id State BuildConfiguration)" "online|default" "slot $id after the refusal"
done
assert_eq "$(sprop 0 MainPID)|$(sprop 1 MainPID)" "$pid0|$pid1" "servers after the refusal (none killed)"
assert_eq "$(sig_args "$SIGS" SlotChanged | grep -c allocated)" 1 "SlotChanged(allocated) signals (only $u1's)"
assert_ok "Faults names slots_dir" bash -c "busctl --address='$BUS' get-property org.slotd.Supervisor1 /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager Faults | grep -q 'slots_dir: slot [01] (game): cannot write .*/server.json: No space left on device'"
assert_ok "log: host fault slots_dir" grep -q "Host fault slots_dir: slot [01] (game): cannot write .*server.json: No space left on device" "$T/slotd.log"

# ---- A start whose server.json cannot be written: no crash, the slot waits ----
scall 1 Stop >/dev/null
wait_prop 1 ProcessState stopped
rm "$(sprop 1 Home)/server.json" # its page goes back to the filler
fill
restarts=$(sprop 1 Restarts)
scall 1 Start >/dev/null
wait_until 20 "log: slot 1's start held back by slots_dir" \
        grep -q "slot 1 (game): Host fault slots_dir: cannot write .*/server.json: No space left on device; retrying with back-off" "$T/slotd.log"
assert_eq "$(sprops 1 ProcessState FailureReason Restarts)" "stopped||$restarts" \
        "slot 1 waiting (no crash, no failure)"
assert_eq "$(sig_count "$SIGS" Crashed 1)" 0 "Crashed signals of slot 1"
# The retries come with back-off and stay quiet: one line per episode.
wait_until 20 "a retry of slot 1" grep -q "slot 1 (game): Still cannot write" "$T/slotd.log"
assert_eq "$(grep -c "slot 1 (game): Host fault slots_dir" "$T/slotd.log")" 1 "warnings for slot 1's episode"
assert_eq "$(sprop 0 MainPID)" "$pid0" "slot 0's server meanwhile"

# ---- The space comes back: everything goes on by itself ----
rm "$T/slots/filler"
wait_prop 1 ProcessState running 30
wait_mprop Faults 0 30
assert_ok "log: fault cleared" grep -q "Host fault slots_dir cleared after" "$T/slotd.log"
assert_eq "$(sprop 1 Restarts)" "$restarts" "Restarts of slot 1 (its wait was no crash)"
id2=$(allocate game "$u2" big)
assert_eq "$(server_json "$id2" allocatedUUID)" "$u2" "server.json of the allocation once the space is back"
assert_eq "$(server_json "$id2" a)" "$pad" "big's variable in server.json"
# The other slot's server ran through all of it.
if [ "$id2" = 1 ]; then
        assert_eq "$(sprop 0 MainPID)" "$pid0" "slot 0's server throughout"
else
        assert_eq "$(sprop 1 State)" online "slot 1 after the fault"
fi
assert_eq "$(sig_count "$SIGS" Crashed 0)|$(sig_count "$SIGS" Crashed 1)" "0|0" "Crashed signals"
finish
