#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A READY=1 that slotd took from the slot's notify socket and was SIGKILLed before it recorded
# (test-soak met it under the sanitizers: a slot left starting for good although its server
# was ready). gdb stops slotd at slot_became_ready(), the first thing it does with a READY=1
# it has read, and kills it there with SIGKILL: nothing of it is marked or committed. The
# next slotd takes the socket back from the keeper and must find the datagram still there
# (slotd drops a datagram only once it has handled it), so the slot becomes running.
. "$(dirname "$0")/lib.sh"

command -v gdb >/dev/null || skip "gdb is not installed (tests/deps.sh installs it)"

MACHINE_CPUS=1 write_config
write_fleet game "servers = 1" "[ports]" "game_base = 36400" "query_base = 36500"
fleet_args game "--no-ready"
start_slotd
wait_prop 0 ProcessState starting
wait_until 10 "the server of slot 0 up" server_up 0
server=$(sprop 0 MainPID)
# The server's own state file, read while slotd is away.
server_state_of() { sed -n "s/^$2=//p" "$T/slots/game/slot-$1/test-server.state"; }

# gdb on slotd: a breakpoint where a READY=1 read from the socket is first acted on, and the
# kill (SIGKILL, through ptrace) when it is hit.
gdb_arm slot_became_ready
# Sent while gdb holds slotd or after: the datagram waits in the socket either way.
control 0 "ready 1"
gdb_fired slot_became_ready
assert_ok "gdb saw the READY=1 handled from the socket ($(grep -m1 '^#1' "$T/gdb.log"))" \
        grep -qE "^#[12] .*(slot_handle_notify|notify_handle_head)" "$T/gdb.log"
assert_eq "$(server_state_of 0 ready)" 1 "the server said READY=1"
assert_ok "the state file says slot 0 is not ready (nothing committed)" \
        grep -qE "^slot id=0 .*ready=0" "$T/state/state"
assert_ok "no READY=1 mark in slot 0's status file (nothing marked)" \
        sh -c "! grep -qa 'ready ' '$T/state/exit/0'"
assert_ok "slotd logged no READY=1 for slot 0 before it died" \
        sh -c "! grep -q 'slot 0 (game): READY=1' '$T/slotd.log'"

# The next slotd adopts the server and reads the READY=1 the socket still holds.
start_slotd
assert_eq "$(sprop 0 MainPID)" "$server" "slot 0: the same server, adopted"
wait_prop 0 ProcessState running $((10 * TIME_SCALE))
assert_ok "the READY=1 came from the socket, read again ($(grep 'slot 0 (game)' "$T/slotd.log" | tail -n 3 | paste -sd '|'))" \
        grep -Eqx "$LOG_TIME slotd\[debug\]: slot 0 \(game\): READY=1" "$T/slotd.log"
assert_ok "slot 0: one server" one_server 0
finish
