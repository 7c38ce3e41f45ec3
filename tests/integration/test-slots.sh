#!/usr/bin/env bash
# Density, the D-Bus objects, and what a running slot looks like from the outside: its
# process in its own cgroup as the fleet user, its limits, its home, its server.json.
. "$(dirname "$0")/lib.sh"

# 6 CPUs, 4G: alpha (1 core, 512M) is capped at 4 servers by usage.servers and leaves 2
# cores and 2G; beta (0.5 core, 256M) gets min(2 / 0.5, 2G / 256M) = min(4, 8) = 4.
MACHINE_CPUS=6 write_config
write_fleet alpha "servers = 4" "[ports]" "game_base = 21000" "query_base = 21100"
USAGE_CPU=0.5 USAGE_MEMORY=256M write_fleet beta "[ports]" "game_base = 22000" \
        "query_base = 22100" "[limits]" "pids = 64" "cpu_max = 0.75" "memory_high = 300M"
start_slotd

assert_eq "$(mprop SlotCount)" 8 "SlotCount"
assert_eq "$(mprop Fleets)" '2 "alpha" "beta"' "Fleets"
assert_eq "$(mprop Version)" "$("$SLOTD" --version | awk '{print $2}')" "Version"
assert_eq "$(mprop MachineID)" "$TEST_MACHINE_ID" "MachineID"
assert_eq "$(mprop MachineNumber)" "$(machine_number_of "$TEST_MACHINE_ID")" \
        "MachineNumber (derived from machine.id)"
assert_eq "$TEST_MACHINE_NUMBER" "$(machine_number_of "$TEST_MACHINE_ID")" "TEST_MACHINE_NUMBER"
assert_eq "$(mprop CPUs)" 6 "CPUs"
assert_eq "$(mprop MemoryBytes)" $((4 * 1024 * 1024 * 1024)) "MemoryBytes"
# slotd undoes every ignored disposition it inherited but SIGPIPE's, which it ignores itself
# (bash starts it with SIGINT and SIGQUIT ignored, as a background job): SIGPIPE alone.
assert_eq "$(awk '/^SigIgn:/ { print $2 }' /proc/$SLOTD_PID/status)" 0000000000001000 \
        "slotd's ignored signals (SigIgn)"

# busctl tree lists one object per slot, through the node enumerator.
tree=$(bctl tree --list org.slotd.Supervisor1)
for id in 0 1 2 3 4 5 6 7; do
        assert_ok "slot $id in busctl tree" grep -qx "/org/slotd/Supervisor1/slot/$id" <<<"$tree"
done
assert_ok "no slot 8" bash -c "! grep -qx /org/slotd/Supervisor1/slot/8 <<<'$tree'"

# ListSlots and GetSlot agree.
list=$(mcall ListSlots)
assert_ok "ListSlots has 8 entries" grep -q '^a(ussssso) 8 ' <<<"$list"
assert_eq "$(mcall GetSlot u 5)" 'o "/org/slotd/Supervisor1/slot/5"' "GetSlot 5"
out=$(mcall GetSlot u 99 2>&1 || true)
assert_ok "GetSlot 99 → NoSuchSlot ($out)" grep -q "No slot 99" <<<"$out"

for id in 0 1 2 3 4 5 6 7; do
        wait_prop $id ProcessState running
done

# A slot of each fleet, looked at closely.
check_slot() {
        local id=$1 fleet=$2 port=$3 qport=$4 home cgroup pid rel
        home=$(sprop $id Home)
        cgroup=$(sprop $id Cgroup)
        pid=$(sprop $id MainPID)
        assert_eq "$(sprop $id Fleet)" "$fleet" "slot $id Fleet"
        assert_eq "$(sprop $id State)" online "slot $id State"
        assert_eq "$(sprop $id Port)" "$port" "slot $id Port"
        assert_eq "$(sprop $id QueryPort)" "$qport" "slot $id QueryPort"
        assert_eq "$cgroup" "$CG/$fleet/slot-$id" "slot $id Cgroup"
        assert_eq "$home" "$T/slots/$fleet/slot-$id" "slot $id Home"
        assert_eq "$(sprop $id Ready)" true "slot $id Ready"
        assert_ok "slot $id StartedAtUSec set" test "$(sprop $id StartedAtUSec)" -gt 0
        # The process runs in the slot's cgroup, as nobody:nogroup.
        rel=${cgroup#"$CG_MOUNT"}
        assert_eq "$(sed -n 's/^0:://p' /proc/$pid/cgroup)" "$rel" "slot $id process cgroup"
        assert_ok "slot $id pid in cgroup.procs" grep -qx "$pid" "$cgroup/cgroup.procs"
        assert_eq "$(stat -c %u /proc/$pid)" "$(id -u nobody)" "slot $id uid"
        assert_eq "$(awk '/^Gid:/ {print $2}' /proc/$pid/status)" "$(getent group nogroup | cut -d: -f3)" "slot $id gid"
        # Its environment (SPEC §3), as the test server saw it.
        local envf=/proc/$pid/environ
        for kv in "SERVER_ID=$id" "PORT=$port" "QUERY_PORT=$qport" "HOME=$home" \
                  "SERVER_LOG_DIR=$home/logs" "NOTIFY_SOCKET=$T/state/notify.d/$id" "ALLOCATION_UUID="; do
                assert_ok "slot $id env $kv" grep -qzx -- "$kv" "$envf"
        done
        # Home owned by the fleet user, log appended by the server.
        assert_eq "$(stat -c %U "$home")" nobody "slot $id home owner"
        wait_until 10 "slot $id log line" grep -q "slotd-test-server: start" "$home/logs/server.log"
        # server.json: every key, values strings.
        local j="$home/server.json"
        # machineID: the machine number derived from machine.id, in decimal (SPEC §4).
        python3 - "$j" "$id" "$fleet" "$port" "$qport" "$home" "$TEST_MACHINE_NUMBER" \
                <<'PY' || fail "slot $id server.json"
import json, sys
path, sid, fleet, port, qport, home, number = sys.argv[1:]
logdir = home + "/logs"
j = json.load(open(path))
want = {"serverID": sid, "allocatedUUID": "", "machineID": number,
        "fleetID": fleet, "ip": "192.0.2.1", "ipv6": "", "port": port, "queryPort": qport,
        "queryType": "", "serverLogDir": logdir, "serverFilesDir": home, "regionID": "",
        "regionName": ""}
assert j == want, (j, want)
PY
        PASSED=$((PASSED + 1))
        # The argument expansion reached the process.
        assert_ok "slot $id argv expanded" grep -qzx -- "$port" /proc/$pid/cmdline
}
check_slot 0 alpha 21000 21100
check_slot 3 alpha 21003 21103
check_slot 4 beta 22000 22100
check_slot 7 beta 22003 22103

# Limits, where this host's tree can hold them; Enforcement says which.
enf=$(mprop Enforcement)
note "Enforcement: $enf"
if enforced memory; then
        # memory.high is off unless limits.memory_high says otherwise (SPEC §3).
        assert_eq "$(cat "$CG/alpha/slot-0/memory.high")" max "memory.high (default off)"
        assert_eq "$(cat "$CG/beta/slot-4/memory.high")" $((300 * 1048576)) "beta memory.high (limits.memory_high)"
        assert_eq "$(cat "$CG/alpha/slot-0/memory.max")" $((512 * 1048576 + 400 * 1048576)) "memory.max"
        assert_eq "$(cat "$CG/alpha/slot-0/memory.oom.group")" 1 "memory.oom.group"
        assert_eq "$(cat "$CG/beta/slot-4/memory.max")" $((256 * 1048576 + 400 * 1048576)) "beta memory.max"
else
        note "memory controller not available here: memory limits not checked"
        assert_ok "no memory.max without the controller" test ! -e "$CG/alpha/slot-0/memory.max"
fi
if enforced cpu; then
        assert_eq "$(cat "$CG/alpha/slot-0/cpu.weight")" 100 "cpu.weight alpha"
        assert_eq "$(cat "$CG/beta/slot-4/cpu.weight")" 50 "cpu.weight beta"
        assert_eq "$(cat "$CG/alpha/slot-0/cpu.max")" "max 100000" "cpu.max alpha"
        assert_eq "$(cat "$CG/beta/slot-4/cpu.max")" "75000 100000" "cpu.max beta"
else
        note "cpu controller not available here: cpu limits not checked"
fi
if enforced pids; then
        assert_eq "$(cat "$CG/alpha/slot-0/pids.max")" 4096 "pids.max alpha"
        assert_eq "$(cat "$CG/beta/slot-4/pids.max")" 64 "pids.max beta"
else
        note "pids controller not available here: pids limits not checked"
fi
# Live figures answer.
assert_ok "MemoryCurrent > 0" test "$(sprop 0 MemoryCurrent)" -gt 0
sprop 0 CPUUsage >/dev/null || fail "CPUUsage"

# SIGTERM ends slotd and leaves the servers running (SPEC §3).
pids=$(for id in 0 4; do sprop $id MainPID; done)
stop_slotd
for p in $pids; do
        assert_ok "server $p still running after slotd's SIGTERM" kill -0 "$p"
done
# A new slotd adopts them as they are: the same processes, never a second server.
start_slotd
wait_prop 0 ProcessState running
wait_prop 4 ProcessState running
assert_eq "$(for id in 0 4; do sprop $id MainPID; done | xargs)" "$(echo $pids | xargs)" "same servers after the restart"
assert_ok "one server (and its keeper) in slot 0 after the second start" one_server 0
assert_ok "one server (and its keeper) in slot 4 after the second start" one_server 4
assert_ok "log says the servers were adopted" grep -q "Adopted the running server" "$T/slotd.log"
finish
