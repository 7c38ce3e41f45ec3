#!/usr/bin/env bash
# The fault matrix (issue 14): dbus-daemon killed with SIGKILL and started again at the same
# address, twice in a row. slotd reconnects by itself, owns its name again and announces its
# state; no game server is touched; nothing waits for the bus meanwhile (the local proxy
# serves, a hold expires on time, changes are committed); replies that were waiting for a
# commit on the dead connection harm nothing; every acknowledged allocation is still there.
. "$(dirname "$0")/lib.sh"

command -v curl >/dev/null || skip "curl is not installed"
PORT=$(free_port)
URL=http://127.0.0.1:$PORT
MACHINE_CPUS=8 LOCALPROXY_LISTEN=127.0.0.1:$PORT write_config
write_fleet game "[ports]" "game_base = 37000" "query_base = 37100"
start_slotd
for id in $(seq 0 7); do wait_prop $id ProcessState running; done
wait_until 20 "the local proxy" curl -s --max-time 2 -o /dev/null "$URL/token"

A=$(allocate game u-before)
declare -A pid restarts
for id in $(seq 0 7); do
        pid[$id]=$(sprop $id MainPID)
        restarts[$id]=$(sprop $id Restarts)
done

# proxy_hold ID: the local proxy's answer to GET /v1/servers/ID/hold, as root on the host.
proxy_hold() { curl -s --max-time 5 "$URL/v1/servers/$1/hold"; }
proxy_not_held() { proxy_hold "$1" | grep -q '"held": *false'; }
fault_lines() { grep -c "Host fault bus: lost the connection" "$T/slotd.log" || true; }
cleared_lines() { grep -c "Host fault bus cleared after" "$T/slotd.log" || true; }
reconnect_lines() { grep -c "Reconnected to bus '$BUS'" "$T/slotd.log" || true; }
# online_slot EXCEPT...: an online slot not among EXCEPT.
online_slot() {
        local id
        for id in $(seq 0 7); do
                [[ " $* " == *" $id "* ]] && continue
                [ "$(sprop $id State)" = online ] && { echo $id; return; }
        done
        fail "no online slot left"
}

for round in 1 2; do
        note "round $round"
        # A short hold that ends while the bus is away (long enough to outlast the burst),
        # and a burst of allocations that the kill cuts off: some acknowledged, one perhaps
        # waiting for its commit.
        H=$(online_slot $A)
        hold $H $((6000000 * TIME_SCALE)) >/dev/null
        (
                for i in 1 2 3 4; do
                        busctl --address="$BUS" --timeout=5 call org.slotd.Supervisor1 \
                                /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager Allocate \
                                sss game "u-burst-$round-$i" "" >/dev/null 2>&1 &&
                                echo "u-burst-$round-$i" >> "$T/acked-$round"
                done
        ) &
        burst=$!
        bg_track $burst
        wait_until 20 "the burst's first acknowledgement" test -s "$T/acked-$round"

        # 1. The bus daemon dies, the hold still on.
        assert_eq "$(sprop $H State)" held "slot $H before the bus dies"
        kill -KILL "$DBUS_PID"
        wait "$DBUS_PID" 2>/dev/null || true
        DBUS_PID=
        wait "$burst" 2>/dev/null || true
        bg_untrack $burst
        # (wait_until runs a command again each time; a $(...) argument would be read once)
        at_least() { [ "$("$1")" -ge "$2" ]; }
        wait_until 10 "slotd noticed the bus is gone" at_least fault_lines $round
        assert_eq "$(fault_lines)" $round "disconnects logged (once each)"
        kill -0 "$SLOTD_PID" || fail "slotd died with the bus"

        # 2. Meanwhile: the hold expires on time, the local proxy serves and changes state,
        # and the change is committed.
        wait_until $((15 * TIME_SCALE)) "the hold of slot $H expired without the bus" proxy_not_held $H
        # A slot the burst did not take, as the state file says (a slot's last line is its
        # record); the proxy holds it.
        H2=
        for id in $(seq 0 7); do
                [ $id = $H ] && continue
                grep "^slot id=$id " "$T/state/state" | tail -n 1 | grep -q " uuid=" ||
                        { H2=$id; break; }
        done
        [ -n "$H2" ] || fail "no free slot left for a hold"
        out=$(curl -s --max-time 5 -X POST "$URL/v1/servers/$H2/hold" -d '{"timeout":"10m"}')
        grep -q '"held": *true' <<<"$out" || fail "hold through the local proxy while the bus is away: $out"
        expires=$(sed -E 's/.*"expiresAt": *([0-9]+).*/\1/' <<<"$out")
        assert_ok "the hold made without the bus is committed" \
                grep -qE "^slot id=$H2 .*hold_until=" "$T/state/state"
        assert_eq "$(reconnect_lines)" $((round - 1)) "no reconnection while the bus is away"

        # 3. A new bus daemon at the same address. slotd is paused while a monitor attaches,
        # so that the monitor hears what slotd announces when it is back.
        kill -STOP "$SLOTD_PID"
        rm -f "$T/bus"
        start_bus
        start_monitor "$T/signals-$round"
        kill -CONT "$SLOTD_PID"
        wait_until $((20 * TIME_SCALE)) "slotd back on the new bus" bus_name_owned
        wait_until 10 "the reconnection logged" at_least reconnect_lines $round
        assert_eq "$(reconnect_lines)" $round "reconnections logged (once each)"
        assert_eq "$(cleared_lines)" $round "bus faults cleared (once each)"
        assert_eq "$(mprop Faults)" 0 "no fault left"

        # 4. No game server was touched, nothing acknowledged is lost, and what changed while
        # the bus was away is there.
        for id in $(seq 0 7); do
                assert_eq "$(sprop $id MainPID)" "${pid[$id]}" "slot $id's server after the bus restart"
                assert_eq "$(sprop $id Restarts)" "${restarts[$id]}" "slot $id's restarts"
        done
        assert_eq "$(sprop $A AllocationUUID)" u-before "the allocation made before"
        while read -r u; do
                [ -n "$(slot_of "$u")" ] || fail "acknowledged allocation $u lost"
                PASSED=$((PASSED + 1))
        done < "$T/acked-$round"
        assert_eq "$(sprop $H State)" online "slot $H once its hold expired"
        assert_eq "$(sprop $H2 State)" held "slot $H2 held through the local proxy"
        assert_eq "$(($(sprop $H2 HoldUntilUSec) / 1000000))" "$expires" "its HoldUntilUSec"

        # 5. Announced: the Manager's properties and every slot's, and SlotChanged for the
        # slot whose hold ended while nobody could hear it.
        ann() { grep -c "\"path\":\"$1\",.*\"member\":\"PropertiesChanged\"" "$T/signals-$round" || true; }
        announced() { [ "$(ann "$1")" -ge 1 ]; }
        wait_until 10 "the Manager's announcement" announced /org/slotd/Supervisor1
        for id in $(seq 0 7); do
                wait_until 10 "slot $id's announcement" announced /org/slotd/Supervisor1/slot/$id
                PASSED=$((PASSED + 1))
        done
        wait_sig "$T/signals-$round" SlotChanged "$H online running" 10
        PASSED=$((PASSED + 1))

        # 6. The new bus works both ways: a call that changes state, and its signal.
        u=$(allocate game "u-after-$round")
        wait_sig "$T/signals-$round" SlotChanged "$u allocated running" 10
        PASSED=$((PASSED + 1))
        # Make room for the next round.
        for u in u-after-$round $(cat "$T/acked-$round"); do mcall Deallocate s "$u" >/dev/null; done
        for id in $(seq 0 7); do
                pid[$id]=$(sprop $id MainPID)
                restarts[$id]=$(sprop $id Restarts)
        done
        scall $H2 ReleaseHold >/dev/null
done

stop_slotd
assert_ok "slotd logged no error" bash -c "! grep -q 'slotd\[err' '$T/slotd.log'"
finish
