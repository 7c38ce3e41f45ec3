#!/usr/bin/env bash
# state_dir full (issue 14, SPEC §12): supervisor.state_dir on a small tmpfs, filled in the
# middle of a burst of allocations (some with payloads). Every call is either acknowledged,
# and then durable (a SIGKILL loses none, payload included), or refused with StateUnwritable
# naming the cause, and then in effect nowhere: not in any slot, not in any server.json, not
# in any event an SDK game server heard. Meanwhile every session goes on; reads work; the local
# proxy answers 503; once there is room again the fault clears by itself, with no restart.
. "$(dirname "$0")/lib.sh"

command -v gdbus >/dev/null || skip "gdbus is not installed (it prints D-Bus error names)"
command -v curl >/dev/null || skip "curl is not installed"

# 40 slots and 4 workers of 8 calls; under TCG in the VM, where an SDK server takes seconds to
# start, 24 slots and 4 workers of 5. (No checks: a strike is not this test's subject.)
SLOTS=40 PER=8
[ "$TIME_SCALE" -gt 1 ] && SLOTS=24 PER=5
CALLS=$((4 * PER)) FILL_AT=$((PER / 2)) FULL_AT=$((PER / 2 + 2))
PORT=$(free_port)
SDK_MODE=1 LOCALPROXY_LISTEN="127.0.0.1:$PORT" write_config
SDK_MODE=1 READINESS=default USAGE_CPU=0.1 USAGE_MEMORY=64M write_fleet game "servers = $SLOTS" \
        "[ports]" "game_base = 26200" "query_base = 26300" \
        "[checks]" "readiness = exec" "interval = 1h"
STATE=$T/state
mkdir -p "$STATE"

mount -t tmpfs -o size=4m,mode=0755 slotd-it-state "$STATE" || skip "cannot mount a tmpfs"
track_mount "$STATE" # lib.sh takes it off after slotd and its keepers are gone

start_slotd
for id in $(seq 0 $((SLOTS - 1))); do wait_prop $id ProcessState running $((60 * TIME_SCALE)); done
# The slots' own files (notify sockets, the keepers' status files) are there now: the tmpfs
# shrinks to what it holds plus 192 KiB, room for a few payloads besides the journal's reserve.
used_kib=$(df -k --output=used "$STATE" | tail -n 1 | tr -d ' ')
size_kib=$((used_kib + 192))
mount -o remount,size=${size_kib}k "$STATE"
note "state_dir: ${used_kib} KiB used at start, tmpfs of ${size_kib} KiB"
start_monitor "$T/signals"
declare -A pid_before
for id in $(seq 0 $((SLOTS - 1))); do pid_before[$id]=$(sprop $id MainPID); done

# gcall PATH METHOD ARGS...: gdbus call; prints the reply, or "Error NAME: MESSAGE".
gcall() {
        local path=$1 method=$2 out
        shift 2
        if out=$(gdbus call --address "$BUS" --dest org.slotd.Supervisor1 --object-path "$path" \
                 --method "$method" "$@" 2>&1); then
                echo "$out"
                return 0
        fi
        sed -nE 's/.*GDBus\.Error:([A-Za-z0-9_.]+): (.*)/Error \1: \2/p' <<<"$out" | grep . || echo "$out"
        return 1
}
# A payload of 4 KiB, different for each UUID, kept to compare with later.
make_payload() {
        head -c 4096 /dev/urandom > "$T/payload-$1"
        od -An -v -tx1 "$T/payload-$1" | tr -s ' \n' ' ' | sed -E 's/^ //; s/ $//; s/ /, 0x/g; s/^/@ay [0x/; s/$/]/'
}
# alloc UUID [payload]: Allocate, or AllocateWithOptions with a payload; writes one line
# "ack UUID", "refused UUID NAME: MESSAGE" or "other UUID OUTPUT" to $T/results.
alloc() {
        local u=$1 out
        if [ "${2:-}" = payload ]; then
                out=$(gcall /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager.AllocateWithOptions \
                        game "$u" "" "{'payload': <$(make_payload "$u")>}") || true
        else
                out=$(gcall /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager.Allocate game "$u" "") || true
        fi
        case $out in
        "(uint32 "*) echo "ack $u" >> "$T/results" ;;
        "Error org.slotd.Supervisor1.Error.StateUnwritable: "*) echo "refused $u ${out#Error }" >> "$T/results" ;;
        *) echo "other $u $out" >> "$T/results" ;;
        esac
}

# 1. The burst: four workers of PER allocations each, the first, third and last with a
# payload; the tmpfs fills before their call FILL_AT (dd runs while they go on), and is full
# before their call FULL_AT. Calls without a payload may still be acknowledged after that,
# within the journal's reserve, until a top-up of the reserve fails; a payload cannot be
# written.
: > "$T/results"
worker() {
        local w=$1 i
        for i in $(seq 1 $PER); do
                [ $i -eq $FILL_AT ] && wait_until $((60 * TIME_SCALE)) "the fill starts" test -e "$T/fill-started"
                [ $i -eq $FULL_AT ] && wait_until $((60 * TIME_SCALE)) "the fill ends" test -e "$T/filled"
                if [ $i -eq 1 ] || [ $i -eq 3 ] || [ $i -eq $PER ]; then
                        alloc "u-$w-$i" payload
                else
                        alloc "u-$w-$i"
                fi
        done
        touch "$T/worker-$w-done"
}
workers=()
for w in 1 2 3 4; do
        worker $w &
        workers+=($!)
        bg_track $!
done
results_at_least() { [ "$(wc -l < "$T/results")" -ge "$1" ]; }
wait_until $((60 * TIME_SCALE)) "the first calls answered" results_at_least $((4 * (FILL_AT - 1)))
touch "$T/fill-started"
dd if=/dev/zero of="$STATE/filler" bs=4k status=none 2>/dev/null || true
touch "$T/filled"
for w in 1 2 3 4; do wait_until $((120 * TIME_SCALE)) "worker $w done" test -e "$T/worker-$w-done"; done
for p in "${workers[@]}"; do
        wait "$p" || true
        bg_untrack "$p"
done
acked=$(grep -c '^ack ' "$T/results" || true)
refused=$(grep -c '^refused ' "$T/results" || true)
after_full=$(awk -v f=$FULL_AT '$1 == "ack" { split($2, p, "-"); if (p[3] >= f) n++ } END { print n + 0 }' "$T/results")
note "burst: $acked acknowledged ($after_full of them after the tmpfs was full), $refused refused of $CALLS"
assert_eq "$(grep -v '^ack \|^refused ' "$T/results" | tr '\n' ' ')" "" "answers other than ack or StateUnwritable"
assert_eq "$((acked + refused))" $CALLS "answers to the burst"
assert_ok "the calls with a payload on a full tmpfs were refused" test "$(grep -c "^refused u-.-$PER " "$T/results")" -eq 4
assert_ok "some calls were acknowledged ($acked)" test "$acked" -gt 0
grep '^refused ' "$T/results" | head -n 1 | sed 's/^/# /'
why="state_dir $STATE takes no writes: No space left on device; changes are refused until it does"
assert_eq "$(grep '^refused ' "$T/results" | grep -vcF "$why" || true)" 0 "refusals that do not name the cause"
faults=$(mprop Faults)
note "Faults: $faults"
assert_ok "Faults lists state_dir" grep -q "\"state_dir: $STATE takes no writes: No space left on device" <<<"$faults"
grep -q "Host fault state_dir: $STATE takes no writes" "$T/slotd.log" || fail "no log line names the fault"
PASSED=$((PASSED + 1))

# 2. Refused means in effect nowhere: no slot, no server.json, no event a server heard.
list_slots > "$T/slots.full"
for u in $(awk '$1 == "refused" { print $2 }' "$T/results"); do
        assert_eq "$(awk -v u="$u" '$5 == u' "$T/slots.full")" "" "refused $u on a slot"
        assert_eq "$(grep -rl --include=server.json -F "\"$u\"" "$T/slots" || true)" "" "refused $u in a server.json"
        assert_eq "$(grep -rl --include=server.log -F "sdk: allocated $u" "$T/slots" || true)" "" "refused $u announced"
done
# Acknowledged means in effect: on its slot, and the server heard of it.
for u in $(awk '$1 == "ack" { print $2 }' "$T/results"); do
        id=$(awk -v u="$u" '$5 == u { print $1 }' "$T/slots.full")
        assert_ok "acknowledged $u on a slot" test -n "$id"
        wait_until 30 "slot $id's server heard of $u" grep -qF "sdk: allocated $u" \
                "$(sprop $id Home)/logs/server.log"
done
PASSED=$((PASSED + 1))

# 3. While full: reads work, a change through the local proxy is 503 naming the cause, and
# every session goes on (same processes, no Crashed, nothing failed).
assert_eq "$(gcall /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager.GetSlot 3)" \
        "(objectpath '/org/slotd/Supervisor1/slot/3',)" "GetSlot while full"
free_id=$(awk '$5 == "-" { print $1; exit }' "$T/slots.full")
code=$(curl -s -o "$T/hold.json" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        -d '{"timeout":"1m"}' "http://127.0.0.1:$PORT/v1/servers/$free_id/hold")
note "proxy hold while full: $code $(cat "$T/hold.json")"
assert_eq "$code" 503 "the local proxy's status for a change while full"
assert_ok "its error names the cause" grep -qF "\"error\": \"$why" <(python3 -m json.tool "$T/hold.json")
assert_eq "$(sprop $free_id HoldUntilUSec)" 0 "a refused hold is not in effect"
for id in $(seq 0 $((SLOTS - 1))); do
        [ "$(sprop $id MainPID)" = "${pid_before[$id]}" ] || fail "slot $id runs another process while full"
        [ "$(sprop $id ProcessState)" = running ] || fail "slot $id is $(sprop $id ProcessState) while full"
done
PASSED=$((PASSED + 1))
assert_eq "$(signal_count "$T/signals" Crashed)" 0 "Crashed signals while full"

# 4. SIGKILL while full, room again, a new slotd: every acknowledged allocation is back with
# its payload, and no refused one.
kill -KILL "$SLOTD_PID"
wait "$SLOTD_PID" 2>/dev/null || true
SLOTD_PID=
rm -f "$STATE/filler"
start_slotd
list_slots > "$T/slots.after"
for u in $(awk '$1 == "ack" { print $2 }' "$T/results"); do
        id=$(awk -v u="$u" '$5 == u { print $1 }' "$T/slots.after")
        assert_ok "acknowledged $u back after SIGKILL" test -n "$id"
        assert_eq "$(sprop $id AllocationUUID)" "$u" "AllocationUUID of slot $id"
        if [ -e "$T/payload-$u" ]; then
                curl -sf -o "$T/got-$u" "http://127.0.0.1:$PORT/payload/$u" || fail "no payload for $u"
                assert_ok "payload of $u intact" cmp -s "$T/payload-$u" "$T/got-$u"
        fi
done
for u in $(awk '$1 == "refused" { print $2 }' "$T/results"); do
        assert_eq "$(awk -v u="$u" '$5 == u' "$T/slots.after")" "" "refused $u after the restart"
done
assert_eq "$(mprop Faults)" 0 "Faults after the restart with room"

# 5. Full again, no restart: refused (a payload cannot be written), then room again: the fault
# clears by itself and changes are accepted.
dd if=/dev/zero of="$STATE/filler" bs=4k status=none 2>/dev/null || true
alloc v-2 payload
assert_eq "$(tail -n 1 "$T/results" | cut -d' ' -f1-3)" "refused v-2 org.slotd.Supervisor1.Error.StateUnwritable:" \
        "an allocation with a payload while full"
alloc v-1
assert_eq "$(tail -n 1 "$T/results" | cut -d' ' -f1-2)" "refused v-1" "an allocation while the fault is raised"
faults_has() { mprop Faults | grep -q "$1"; }
wait_until 10 "Faults lists state_dir" faults_has "state_dir: $STATE takes no writes"
rm -f "$STATE/filler"
wait_until $((30 * TIME_SCALE)) "the fault clears by itself" mprop_is Faults 0
grep -q "Host fault state_dir cleared after" "$T/slotd.log" || fail "no log line says the fault cleared"
alloc v-3
alloc v-4 payload
assert_eq "$(tail -n 2 "$T/results" | cut -d' ' -f1-2 | tr '\n' ' ')" "ack v-3 ack v-4 " "allocations once there is room"
finish
