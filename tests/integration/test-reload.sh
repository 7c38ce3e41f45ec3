#!/usr/bin/env bash
# Reload (SPEC §2, §7): a bad config is refused and the running one stays; a new build
# configuration or new arguments restart the unallocated servers at once (ending their holds)
# and the allocated ones after their deallocation; a removed fleet's slots go when they are
# not allocated; an added fleet gets slots.
. "$(dirname "$0")/lib.sh"

MACHINE_CPUS=8 MACHINE_MEMORY=8G write_config
write_fleet alpha "servers = 3" "[ports]" "game_base = 25500" "query_base = 25550"
write_fleet beta "servers = 2" "[ports]" "game_base = 25510" "query_base = 25560"
start_slotd
ALPHA=$(list_slots | awk '$2 == "alpha" { print $1 }')
BETA=$(list_slots | awk '$2 == "beta" { print $1 }')
for id in $ALPHA $BETA; do wait_prop $id ProcessState running; done
pids() { for id in "$@"; do echo -n "$(sprop $id MainPID) "; done; }
before=$(pids $ALPHA $BETA)

# 1. A bad config is refused with file:line and the key; nothing changes.
cp "$T/etc/fleets.d/alpha.ini" "$T/alpha.good"
fleet_key alpha "bogus_key = 1"
out=$(mcall Reload 2>&1) && fail "Reload of a config with an unknown key succeeded"
note "Reload refused: $out"
assert_ok "error names alpha.ini:2 ($out)" grep -q "alpha.ini:2" <<<"$out"
assert_ok "error names the key ($out)" grep -q "bogus_key" <<<"$out"
cp "$T/alpha.good" "$T/etc/fleets.d/alpha.ini"
write_fleet gamma "servers = 20" "[ports]" "game_base = 25520" "query_base = 25570"
line=$(grep -n "^servers = 20" "$T/etc/fleets.d/gamma.ini" | cut -d: -f1)
out=$(mcall Reload 2>&1) && fail "Reload of a fleet that does not fit succeeded"
note "Reload refused: $out"
assert_ok "error names gamma.ini:$line ($out)" grep -q "gamma.ini:$line" <<<"$out"
assert_ok "error names usage.servers ($out)" grep -q "servers" <<<"$out"
rm "$T/etc/fleets.d/gamma.ini"
assert_eq "$(mprop SlotCount)" 5 "SlotCount after refused reloads"
assert_eq "$(mprop Fleets)" '2 "alpha" "beta"' "Fleets after refused reloads"
assert_eq "$(pids $ALPHA $BETA)" "$before" "no server restarted by refused reloads"
assert_ok "slotd still running" kill -0 "$SLOTD_PID"

# 2. Reloading an unchanged config changes nothing.
mcall Reload
assert_eq "$(pids $ALPHA $BETA)" "$before" "no server restarted by an unchanged reload"

# 3. alpha gets build configuration v2 and one more argument. A0 is allocated, A1 held,
# A2 online: A1 and A2 restart into v2 at once (A1's hold ends), A0 keeps running.
A0=$(allocate alpha u-a)
set -- $(for id in $ALPHA; do [ $id = $A0 ] || echo $id; done)
A1=$1 A2=$2
hold $A1 60000000 >/dev/null
pa0=$(sprop $A0 MainPID) pa1=$(sprop $A1 MainPID) pa2=$(sprop $A2 MainPID)
pbeta=$(pids $BETA)
fleet_key alpha "build_configuration = v2"
sed -i 's|^args = .*|& --map reloaded|' "$T/etc/fleets.d/alpha.ini"
mcall Reload
for id in $A1 $A2; do
        wait_prop $id BuildConfiguration v2
done
wait_new_pid $A1 "$pa1"
wait_new_pid $A2 "$pa2"
for id in $A1 $A2; do
        wait_prop $id ProcessState running
        assert_eq "$(sprop $id State)" online "slot $id State after the reload"
        wait_until 10 "server of slot $id up" server_state_is $id pid "$(sprop $id MainPID)"
        assert_ok "slot $id runs the new arguments" grep -q -- "--map reloaded" <<<"$(server_state $id argv)"
done
assert_eq "$(sprop $A1 HoldUntilUSec)" 0 "the new build configuration ended the hold"
assert_eq "$(mprop HoldUntilUSec)" 0 "Manager HoldUntilUSec after the reload"
assert_eq "$(sprop $A0 MainPID)" "$pa0" "allocated slot keeps its process"
assert_eq "$(sprop $A0 BuildConfiguration)" default "allocated slot keeps its configuration"
assert_eq "$(sprop $A0 State)" allocated "allocated slot still allocated"
assert_eq "$(pids $BETA)" "$pbeta" "beta untouched"
# The fleet's configuration now defaults to v2: a ready v2 slot is taken as it is.
p1=$(sprop $A1 MainPID) p2=$(sprop $A2 MainPID)
c=$(allocate alpha u-c)
assert_ok "u-c on a v2 slot ($c)" test "$c" = "$A1" -o "$c" = "$A2"
assert_eq "$(pids $A1 $A2)" "$p1 $p2 " "no restart for the new default"
mcall Deallocate s u-c
# Once deallocated, A0 restarts into v2.
mcall Deallocate s u-a
wait_new_pid $A0 "$pa0"
wait_prop $A0 ProcessState running
assert_eq "$(sprop $A0 BuildConfiguration)" v2 "A0 BuildConfiguration after its restart"
assert_eq "$(sprop $A0 State)" online "A0 online in v2"
wait_until 10 "server of slot $A0 up" server_state_is $A0 pid "$(sprop $A0 MainPID)"
assert_ok "A0 runs the new arguments" grep -q -- "--map reloaded" <<<"$(server_state $A0 argv)"

# 4. beta removed: its unallocated slot goes at once, the allocated one when deallocated.
B0=$(allocate beta u-b)
B1=$(for id in $BETA; do [ $id = $B0 ] || echo $id; done)
pb0=$(sprop $B0 MainPID) pb1=$(sprop $B1 MainPID)
rm "$T/etc/fleets.d/beta.ini"
mcall Reload
gone() { ! list_slots | awk '{ print $1 }' | grep -qx "$1"; }
wait_until 20 "slot $B1 gone" gone $B1
expect_merr NoSuchSlot GetSlot uint32:$B1
wait_until 20 "server of slot $B1 ended" bash -c "! kill -0 $pb1"
assert_eq "$(sprop $B0 State)" allocated "allocated beta slot stays"
assert_eq "$(sprop $B0 MainPID)" "$pb0" "allocated beta slot keeps its process"
assert_eq "$(list_slots | awk -v id=$B0 '$1 == id { print $5 }')" u-b "ListSlots row of $B0"
assert_eq "$(mprop SlotCount)" "$(list_slots | wc -l)" "SlotCount = ListSlots"
mcall Deallocate s u-b
wait_until 20 "slot $B0 gone" gone $B0
wait_until 20 "server of slot $B0 ended" bash -c "! kill -0 $pb0"
expect_merr NoSuchSlot GetSlot uint32:$B0
assert_eq "$(mprop SlotCount)" 3 "SlotCount without beta"
assert_eq "$(mprop Fleets)" '1 "alpha"' "Fleets without beta"

# 5. gamma added: it gets its slots, which start.
write_fleet gamma "servers = 2" "[ports]" "game_base = 25520" "query_base = 25570"
mcall Reload
assert_eq "$(mprop SlotCount)" 5 "SlotCount with gamma"
assert_eq "$(mprop Fleets)" '2 "alpha" "gamma"' "Fleets with gamma"
set -- $(list_slots | awk '$2 == "gamma" { print $1 }')
assert_eq "$#" 2 "gamma slots in ListSlots"
for id in "$@"; do wait_prop $id ProcessState running; done
assert_eq "$(sprop $1 Port) $(sprop $2 Port)" "25520 25521" "gamma ports"
assert_eq "$(allocate gamma u-g)" "$(slot_of u-g)" "Allocate on gamma"
assert_eq "$(sprop "$(slot_of u-g)" Fleet)" gamma "u-g on a gamma slot"
for id in $ALPHA; do assert_eq "$(sprop $id BuildConfiguration)" v2 "slot $id BuildConfiguration"; done
finish
