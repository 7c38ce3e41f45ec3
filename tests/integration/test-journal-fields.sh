#!/usr/bin/env bash
# The journal's structured fields (issue 27 point 3, SPEC §2 "Logs"): with stderr connected to
# journald (JOURNAL_STREAM), every entry slotd logs about a slot carries SLOT_ID= and FLEET=,
# and while the slot has them ALLOCATION_ID= and RESERVATION_ID=: the allocation's own lines,
# those of events that are not about it (the server's exit), none once it is over.
# The test runs a journald of its own in a mount namespace of its own (tmpfs on /run and
# /var/log/journal: nothing of the test's uses the host's /run): the host's journal, and its
# /run, are not touched, and
# a host without systemd as PID 1 runs it too. tests/vm/systemd-host-test checks the same under
# the shipped unit.
if [ -z "${SLOTD_IT_MOUNTNS:-}" ]; then
        [ "$(id -u)" -eq 0 ] || { echo "skipped: needs root (a mount namespace)"; exit 77; }
        command -v unshare >/dev/null || { echo "skipped: unshare is not installed"; exit 77; }
        SLOTD_IT_MOUNTNS=1 exec unshare --mount --propagation private -- bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
JOURNALD=
for j in /lib/systemd/systemd-journald /usr/lib/systemd/systemd-journald; do
        [ -x "$j" ] && JOURNALD=$j && break
done
[ -n "$JOURNALD" ] || skip "systemd-journald is not installed"
for c in systemd-cat journalctl jq; do
        command -v "$c" >/dev/null || skip "$c is not installed"
done

# A journald of our own: its sockets and its files on tmpfs, in this namespace only.
mount -t tmpfs -o mode=755 slotd-it-journal /run || skip "cannot mount a tmpfs on /run"
mkdir -p /run/systemd/journal /run/log
if [ -d /var/log/journal ]; then
        mount -t tmpfs -o mode=755 slotd-it-journal /var/log/journal || skip "cannot mount a tmpfs"
fi
"$JOURNALD" >"$T/journald.log" 2>&1 &
JOURNALD_PID=$!
BG_PIDS+=($JOURNALD_PID)
# A journald that cannot run on this host (it ends at once) is a reason to skip, not a failure.
journald_up_or_gone() {
        ! kill -0 "$JOURNALD_PID" 2>/dev/null ||
                { test -S /run/systemd/journal/stdout && test -S /run/systemd/journal/socket; }
}
wait_until 20 "journald's sockets" journald_up_or_gone
kill -0 "$JOURNALD_PID" 2>/dev/null ||
        skip "systemd-journald does not run here: $(tail -n 3 "$T/journald.log" | tr '\n' ' ')"

# slotd's log is in the journal: a failure shows it.
eval "lib_$(declare -f fail)"
fail() {
        journalctl --no-pager -o short-iso _PID="${SLOTD_PID:-0}" >"$T/slotd.log" 2>&1
        lib_fail "$@"
}

write_config
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet game "servers = 2" \
        "[ports]" "game_base = 26800" "query_base = 26850" "[checks]" "interval = 0"
USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet other "servers = 1" \
        "[ports]" "game_base = 26900" "query_base = 26950" "[checks]" "interval = 0"
# stderr is journald's stream, as systemd makes it for a unit: systemd-cat connects it and
# execs, the shell says which stream it is (JOURNAL_STREAM, dev:ino) and execs slotd.
start_slotd_journal() {
        SLOTD_LOG_LEVEL=debug systemd-cat -t slotd sh -c \
                'JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2) exec "$@"' sh \
                "$SLOTD" --config "$T/etc/slotd.ini" &
        SLOTD_PID=$!
        wait_until 20 "slotd on the bus" bus_name_owned
}
start_slotd_journal
wait_prop 0 ProcessState running
wait_prop 1 ProcessState running

# jfield REGEX SLOT FIELD: FIELD of slotd's last entry about SLOT whose MESSAGE matches
# REGEX, "-" when the entry has no such field, nothing when there is no such entry.
jfield() {
        journalctl --no-pager -o json _PID="$SLOTD_PID" SLOT_ID="$2" |
                jq -r --arg re "$1" --arg f "$3" 'select(.MESSAGE | test($re)) | (.[$f] // "-")' |
                tail -n 1
}
has_entry() { [ -n "$(jfield "$1" "$2" SLOT_ID)" ]; }
# entry REGEX SLOT: waits for it; then each FIELD=VALUE given after it is checked.
entry() {
        local re=$1 slot=$2 kv
        shift 2
        wait_until 20 "slot $slot's journal entry /$re/" has_entry "$re" "$slot"
        for kv in "$@"; do
                assert_eq "$(jfield "$re" "$slot" "${kv%%=*}")" "${kv#*=}" "/$re/ of slot $slot: ${kv%%=*}"
        done
}

n=$(journalctl --no-pager -o json _PID="$SLOTD_PID" _TRANSPORT=journal | wc -l)
assert_ok "slotd's entries are structured ($n so far), not lines on the stream" test "$n" -gt 0
assert_eq "$(journalctl --no-pager -o cat _PID="$SLOTD_PID" _TRANSPORT=stdout | wc -l)" 0 \
        "lines slotd wrote to the stream instead"
entry "^Started " 0 FLEET=game ALLOCATION_ID=- RESERVATION_ID=-

# An allocation: its own lines carry it, and so does an event that is not about it.
U=7f3c1c52-9a8e-4f61-b1a3-3b1e2f9d0a11
a=$(allocate game "$U")
entry "^Allocated to $U" "$a" SLOT_ID="$a" FLEET=game ALLOCATION_ID="$U" RESERVATION_ID=-
pid=$(sprop "$a" MainPID)
control "$a" "exit 3"
entry "^Server $pid exited with code 3" "$a" FLEET=game ALLOCATION_ID="$U"
scall "$a" Deallocate >/dev/null || fail "Deallocate"
entry "^Deallocated $U" "$a" ALLOCATION_ID="$U"

# A reservation: its ID while it lasts; a hold has none, and the reservation is over.
R=2d0a6f5e-11c4-4c3b-8f0e-6a5b4c3d2e1f
b=$(reserve game "$R" 1000000)
entry "^Reserved for $R" "$b" FLEET=game RESERVATION_ID="$R" ALLOCATION_ID=-
entry "^Reservation for $R expired" "$b" RESERVATION_ID="$R"
wait_prop "$b" State online
hold "$b" 60000000 >/dev/null
# Its deadline as people read it (issue 27 point 5): UTC, RFC 3339 (ISO 8601), not µs.
entry "^Held until $LOG_TIME\$" "$b" SLOT_ID="$b" FLEET=game RESERVATION_ID=- ALLOCATION_ID=-
# The allocation is over on slot a too: its entries since name it no more.
after=$(journalctl --no-pager -o json _PID="$SLOTD_PID" SLOT_ID="$a" |
        jq -r --arg u "$U" 'select(.MESSAGE | test("^Deallocated ")) as $d | .__CURSOR' | tail -n 1)
named=$(journalctl --no-pager -o json --after-cursor="$after" _PID="$SLOTD_PID" SLOT_ID="$a" |
        jq -r 'select(.ALLOCATION_ID) | .MESSAGE')
assert_eq "$named" "" "slot $a's entries after its deallocation that name an allocation"

# A slot the next slotd no longer has (its fleet is gone from the configuration): the line
# that drops its allocation, logged by the manager, names it as the slot's own lines do.
O=0b5e8c1d-3f2a-4e6b-9c7d-1a2b3c4d5e6f
o=$(allocate other "$O")
stop_slotd
rm "$T/etc/fleets.d/other.ini"
start_slotd_journal
entry "held allocation $O but is no longer configured" "$o" FLEET=other ALLOCATION_ID="$O"
finish
