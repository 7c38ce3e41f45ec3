#!/usr/bin/env bash
# Confinement (issue 5): from inside a slot, a build executable cannot gain a capability,
# signal or ptrace another slot's processes, write to any cgroup file, leave its cgroup,
# mount, load modules, set the clock or reboot.
. "$(dirname "$0")/lib.sh"
: "${ESCAPE:?ESCAPE must name the slotd-escape test program}"

MACHINE_CPUS=2 write_config
write_fleet target "[ports]" "game_base = 35000" "query_base = 35100" "[usage]" "servers = 1"
cat > "$T/etc/fleets.d/zescape.ini" <<EOC
[fleet]
build = $ESCAPE
start_on_provision = no
[usage]
cpu = 1
memory = 256M
servers = 1
[ports]
game_base = 35200
query_base = 35300
[checks]
readiness = notify
EOC
start_slotd
wait_prop 0 ProcessState running
target=$(sprop 0 MainPID)
home=$(sprop 1 Home)
echo "$target" > "$home/target.pid"
scall 1 Start
wait_until 20 "the escape attempts" test -s "$home/escape.results"
note "$(cat "$home/escape.results")"
r() { grep "^$1 " "$home/escape.results" | head -n 1; }

# No capability at all, none to gain, no_new_privs, seccomp in filter mode, not root.
grep -q "^status CapEff:	0000000000000000" "$home/escape.results" || fail "CapEff not empty"
PASSED=$((PASSED + 1))
grep -q "^status CapPrm:	0000000000000000" "$home/escape.results" || fail "CapPrm not empty"
PASSED=$((PASSED + 1))
grep -q "^status CapBnd:	0000000000000000" "$home/escape.results" || fail "bounding set not empty"
PASSED=$((PASSED + 1))
grep -q "^status NoNewPrivs:	1" "$home/escape.results" || fail "no_new_privs not set"
PASSED=$((PASSED + 1))
grep -q "^status Seccomp:	2" "$home/escape.results" || fail "no seccomp filter"
PASSED=$((PASSED + 1))
for attempt in setuid-root capset kill-other-slot ptrace-other-slot process_vm_readv \
               write-own-cgroup.procs write-own-limit move-to-parent-cgroup move-to-root-cgroup \
               mount unshare-user-mount init_module finit_module clock_settime settimeofday \
               reboot chroot; do
        line=$(r "$attempt")
        [ -n "$line" ] || fail "no result for $attempt"
        case "$line" in
                *" denied "*) PASSED=$((PASSED + 1)) ;;
                *) fail "$attempt was allowed: $line" ;;
        esac
done
# kill(-1, 0) reaches only its own PID namespace: itself, never another slot.
assert_ok "the other slot's server untouched" kill -0 "$target"
assert_eq "$(sprop 0 MainPID)" "$target" "target server not restarted"
# The escape program is still in its own cgroup, under its keeper, and the keeper survived
# a SIGKILL from inside.
assert_ok "escape program still confined to its slot" one_server 1
assert_ok "keeper survived" grep -q "^survived-kill-keeper yes" "$home/escape.results"
assert_eq "$(sprop 1 ProcessState)" starting "escape slot still running (it never sends READY)"
finish
