#!/usr/bin/env bash
# state_dir read-only (issue 14, SPEC §12): supervisor.state_dir's filesystem remounted
# read-only under a running slotd. Changes are refused before they are made, with
# StateUnwritable naming EROFS; what is in effect stays in effect (slots, server.json); the
# game servers are untouched, and slotd goes on supervising them (a crash is restarted);
# remounted read-write, the fault clears by itself, what slotd did meanwhile is written, and
# changes are accepted again.
#
# The keepers hold their status files (<state_dir>/exit/<id>) open for writing, and Linux
# refuses to remount read-only a filesystem with files open for writing (EBUSY): here exit/
# lives on another filesystem. (A disk that fails does not ask: ext4's errors=remount-ro
# turns it read-only whatever is open, which is the case this stands for.)
. "$(dirname "$0")/lib.sh"

write_config
write_fleet game "servers = 3" "[ports]" "game_base = 26400" "query_base = 26450"
STATE=$T/state
mkdir -p "$STATE" "$T/exit-elsewhere"

mount -t tmpfs -o size=1m,mode=0755 slotd-it-state "$STATE" || skip "cannot mount a tmpfs"
track_mount "$STATE" # lib.sh takes it off after slotd and its keepers are gone
mkdir "$STATE/exit"
mount --bind "$T/exit-elsewhere" "$STATE/exit"
track_mount "$STATE/exit"

start_slotd
for id in 0 1 2; do wait_prop $id ProcessState running; done
a=$(allocate game a-1)
declare -A pid_before
for id in 0 1 2; do pid_before[$id]=$(sprop $id MainPID); done
start_monitor "$T/signals"

# 1. Read-only: every change is refused, naming the cause; nothing of it is in effect.
mount -o remount,ro "$STATE" || fail "cannot remount $STATE read-only: $(fuser -vm "$STATE" 2>&1)"
why="state_dir $STATE takes no writes: Read-only file system; changes are refused until it does"
out=$(dsend /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager.Allocate string:game string:b-1 string:) || true
note "Allocate while read-only: $out"
assert_eq "$out" "Error org.slotd.Supervisor1.Error.StateUnwritable: $why" "Allocate while read-only"
expect_merr StateUnwritable Deallocate string:a-1
expect_merr StateUnwritable Reserve string:game string:r-1 uint64:60000000
free_id=$(list_slots | awk '$5 == "-" { print $1; exit }')
expect_serr StateUnwritable $free_id Hold uint64:60000000
expect_merr StateUnwritable SetDraining boolean:true
assert_eq "$(slot_of b-1)" "" "refused b-1 on a slot"
assert_eq "$(grep -rlF '"b-1"' --include=server.json "$T/slots" || true)" "" "refused b-1 in a server.json"
assert_eq "$(slot_of a-1)" "$a" "a-1 still allocated after a refused Deallocate"
assert_eq "$(server_json $a allocatedUUID)" a-1 "server.json of a-1's slot"
assert_eq "$(slot_of r-1)" "" "refused reservation r-1"
assert_eq "$(sprop $free_id HoldUntilUSec)" 0 "refused hold"
assert_eq "$(mprop Draining)" false "Draining after a refused SetDraining"
assert_ok "Faults names EROFS" grep -qF "state_dir: $STATE takes no writes: Read-only file system" <(mprop Faults)
# Reads and the same allocation again (it is in effect: answered, not refused).
assert_eq "$(allocate game a-1)" "$a" "Allocate a-1 again while read-only"
assert_eq "$(sprop $a State)" allocated "a property read while read-only"

# 2. The game servers are untouched, and still supervised: a crash is restarted, though
# slotd cannot write it down yet.
for id in 0 1 2; do assert_eq "$(sprop $id MainPID)" "${pid_before[$id]}" "MainPID of slot $id"; done
crash_id=$(list_slots | awk -v a="$a" '$1 != a && $5 == "-" { print $1; exit }')
control $crash_id crash
wait_new_pid $crash_id "${pid_before[$crash_id]}"
wait_prop $crash_id ProcessState running
assert_eq "$(sprop $crash_id Restarts)" 1 "Restarts of slot $crash_id after its crash"
assert_eq "$(sprop $a MainPID)" "${pid_before[$a]}" "the allocated server"

# 3. Read-write again: the fault clears by itself, the crash reaches the state file, and
# changes are accepted.
mount -o remount,rw "$STATE"
wait_until $((30 * TIME_SCALE)) "the fault clears by itself" mprop_is Faults 0
grep -q "Host fault state_dir cleared after" "$T/slotd.log" || fail "no log line says the fault cleared"
PASSED=$((PASSED + 1))
assert_ok "the crash written down" grep -qE "^slot id=$crash_id .* restarts=1 " "$STATE/state"
b=$(allocate game b-1)
wait_until 10 "server.json of slot $b says b-1" server_json_is $b allocatedUUID b-1
PASSED=$((PASSED + 1))
mcall Deallocate s a-1
assert_eq "$(slot_of a-1)" "" "a-1 deallocated once writable"
assert_eq "$(signal_count "$T/signals" Crashed)" 1 "Crashed signals (the one crash caused)"
finish
