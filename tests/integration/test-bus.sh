#!/usr/bin/env bash
# The D-Bus surface: --bus overrides supervisor.bus; bad calls get errors and never take
# slotd down; PropertiesChanged and SlotChanged are emitted on state changes.
. "$(dirname "$0")/lib.sh"

MACHINE_CPUS=2 write_config
# supervisor.bus names a bus that does not exist; --bus must win.
sed -i "s|^bus = .*|bus = unix:path=$T/no-such-bus|" "$T/etc/slotd.ini"
write_fleet game "[ports]" "game_base = 23000" "query_base = 23100"
SLOTD_LOG_LEVEL=debug "$SLOTD" --config "$T/etc/slotd.ini" --bus "$BUS" >>"$T/slotd.log" 2>&1 &
SLOTD_PID=$!
wait_until 20 "slotd on the bus given by --bus" bus_name_owned
assert_eq "$(mprop SlotCount)" 2 "SlotCount"
wait_prop 0 ProcessState running
wait_prop 1 ProcessState running

expect_error() { # expect_error PATTERN COMMAND...: the call fails with PATTERN in its error
        local pattern=$1 out
        shift
        if out=$("$@" 2>&1); then
                fail "expected an error matching '$pattern' from: $*"
        fi
        grep -q -- "$pattern" <<<"$out" || fail "expected '$pattern', got: $out"
        PASSED=$((PASSED + 1))
}
M=(org.slotd.Supervisor1 /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager)
S=org.slotd.Supervisor1.Slot
expect_error "No slot 4294967295" bctl call "${M[@]}" GetSlot u 4294967295
expect_error "No slot 2" bctl call "${M[@]}" GetSlot u 2
expect_error "InvalidArgs\|Invalid argument\|signature" bctl call "${M[@]}" GetSlot s nope
expect_error "InvalidArgs\|Invalid argument\|signature" bctl call "${M[@]}" ListSlots u 1
expect_error "Unknown method\|UnknownMethod" bctl call "${M[@]}" NoSuchMethod
for path in /org/slotd/Supervisor1/slot/2 /org/slotd/Supervisor1/slot/01 \
            /org/slotd/Supervisor1/slot/-1 /org/slotd/Supervisor1/slot/99999999999999999999 \
            /org/slotd/Supervisor1/slot/x; do
        expect_error "Unknown object\|UnknownObject\|Unknown interface\|UnknownInterface\|Invalid object path" \
                bctl call org.slotd.Supervisor1 "$path" $S Start
done
long=$(head -c 100000 /dev/zero | tr '\0' a)
expect_error "InvalidArgs\|Invalid argument\|signature" bctl call org.slotd.Supervisor1 \
        /org/slotd/Supervisor1/slot/0 $S Start s "$long"
expect_error "Unknown property\|UnknownProperty\|or property NoSuchProperty" bctl get-property "${M[@]}" NoSuchProperty
expect_error "not writable\|read-only\|PropertyReadOnly" bctl set-property org.slotd.Supervisor1 \
        /org/slotd/Supervisor1/slot/0 $S State s allocated
assert_ok "slotd survived the bad calls" kill -0 "$SLOTD_PID"
assert_eq "$(sprop 0 State)" online "slot 0 untouched"

# The harness's property reader (lib.sh's get_property, tests/integration/busprop.c) prints
# what busctl prints, for every property of the Manager and of a running and a stopped slot,
# one at a time and all in one read; it declines an unknown property, which then gets
# busctl's own error.
[ -n "$BUSPROP_PID" ] || fail "BUSPROP is not set: the harness reads properties with busctl only"
same_as_busctl() { # same_as_busctl PATH INTERFACE PROPERTY...
        local want got
        want=$(bctl get-property org.slotd.Supervisor1 "$@" 2>&1) ||
                fail "busctl get-property $*: $want"
        got=$(busprop_get "$@" 2>&1) || fail "busprop declined $*: $got"
        [ "$got" = "$want" ] || fail "busprop $*: got '$got', busctl prints '$want'"
        PASSED=$((PASSED + 1))
}
declined() { # declined PATH INTERFACE PROPERTY...: busprop declines, get_property is busctl
        local want got want_rc=0 got_rc=0
        ! busprop_get "$@" >/dev/null 2>&1 || fail "busprop answered $*"
        want=$(bctl get-property org.slotd.Supervisor1 "$@" 2>&1) || want_rc=$?
        got=$(get_property "$@" 2>&1) || got_rc=$?
        [ "$got" = "$want" ] && [ $got_rc = $want_rc ] && [ $want_rc != 0 ] ||
                fail "get_property $*: got '$got' ($got_rc), busctl prints '$want' ($want_rc)"
        PASSED=$((PASSED + 1))
}
scall 1 Stop
wait_prop 1 ProcessState stopped
for obj in "/org/slotd/Supervisor1 ${M[2]}" "/org/slotd/Supervisor1/slot/0 $S" \
           "/org/slotd/Supervisor1/slot/1 $S"; do
        read -r path iface <<<"$obj"
        mapfile -t props < <(bctl introspect org.slotd.Supervisor1 "$path" "$iface" |
                awk '$2 == "property" && $1 != ".CPUUsage" && $1 != ".MemoryCurrent" {
                        print substr($1, 2) }')
        [ ${#props[@]} -gt 10 ] || fail "introspect $path: only ${#props[@]} properties"
        for p in "${props[@]}"; do same_as_busctl "$path" "$iface" "$p"; done
        # A running server's CPU and memory change between two reads: their type and form.
        if [ "$iface" = "$S" ]; then
                assert_ok "busprop's CPUUsage of $path (busctl's form: d NUMBER)" \
                        grep -qxE 'd [0-9.e+-]+' <<<"$(busprop_get "$path" "$iface" CPUUsage)"
                assert_ok "busprop's MemoryCurrent of $path (busctl's form: t NUMBER)" \
                        grep -qxE 't [0-9]+' <<<"$(busprop_get "$path" "$iface" MemoryCurrent)"
        fi
        same_as_busctl "$path" "$iface" "${props[@]}"
        declined "$path" "$iface" "${props[0]}" NoSuchProperty
done
scall 1 Start
wait_prop 1 ProcessState running

# Signals: PropertiesChanged on the slot, SlotChanged on the Manager.
bctl monitor --match "type='signal',sender='org.slotd.Supervisor1'" >"$T/signals.log" 2>&1 &
bg_track $!
wait_until 10 "monitor attached" grep -q "Monitoring bus" "$T/signals.log"
scall 1 Stop
wait_prop 1 ProcessState stopped
wait_until 10 "PropertiesChanged of slot 1" grep -q "Path=/org/slotd/Supervisor1/slot/1.*Member=PropertiesChanged\|Member=PropertiesChanged" "$T/signals.log"
wait_until 10 "SlotChanged to stopped" grep -A3 "Member=SlotChanged" "$T/signals.log"
python3 - "$T/signals.log" <<'PY' || fail "signals"
import re, sys
text = open(sys.argv[1]).read()
msgs = text.split("‣ Type=")
pc = [m for m in msgs if "Member=PropertiesChanged" in m and "/slot/1" in m]
sc = [m for m in msgs if "Member=SlotChanged" in m]
assert pc, "no PropertiesChanged for slot 1"
assert any('"ProcessState"' in m and '"stopped"' in m for m in pc), "no ProcessState=stopped in PropertiesChanged"
assert any('UINT32 1;' in m and '"available"' in m and '"stopped"' in m for m in sc), "no SlotChanged(1, available, stopped)"
PY
PASSED=$((PASSED + 1))
finish
