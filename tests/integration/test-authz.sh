#!/usr/bin/env bash
# Who may call what (SPEC §8, issue 5): managing methods need root or supervisor.admin_group;
# Hold and ReleaseHold also a process of that slot's own cgroup; anyone may read. Then the
# project's real D-Bus policy file, loaded into a bus configured like a system bus.
. "$(dirname "$0")/lib.sh"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
admin_group=adm
getent group $admin_group >/dev/null || skip "no group '$admin_group' to test supervisor.admin_group with"
admin_gid=$(getent group $admin_group | cut -d: -f3)

# The private bus's socket must let other users connect.
chmod 777 "$T/bus"
MACHINE_CPUS=2 write_config
sed -i "s|^\[supervisor\]|[supervisor]\nadmin_group = $admin_group|" "$T/etc/slotd.ini"
write_fleet game "[ports]" "game_base = 36500" "query_base = 36600"
start_slotd
wait_prop 0 ProcessState running
wait_prop 1 ProcessState running

as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
as_admin() { setpriv --reuid=nobody --regid=nogroup --groups=$admin_gid "$@"; }
denied() { # denied COMMAND...: refused with org.freedesktop.DBus.Error.AccessDenied
        local out
        if out=$("$@" 2>&1); then fail "not denied: $*"; fi
        # busctl shows AccessDenied as the errno text; dbus-send (below) shows who said it.
        grep -q "Access denied" <<<"$out" || fail "refused for another reason: $out"
        PASSED=$((PASSED + 1))
}
bus_denied() { # bus_denied COMMAND...: the bus policy refuses it
        local out
        if out=$("$@" 2>&1); then fail "not denied: $*"; fi
        grep -qi "rejected\|access denied\|not allowed" <<<"$out" || fail "refused for another reason: $out"
        PASSED=$((PASSED + 1))
}
M=(org.slotd.Supervisor1 /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager)
S0=(org.slotd.Supervisor1 /org/slotd/Supervisor1/slot/0 org.slotd.Supervisor1.Slot)
B=(busctl --address="$BUS")

# 1. An unprivileged user: every managing method refused, reading allowed.
denied as_nobody "${B[@]}" call "${M[@]}" Allocate sss game u-x ""
denied as_nobody "${B[@]}" call "${M[@]}" Deallocate s u-x
denied as_nobody "${B[@]}" call "${M[@]}" Reserve sst game r-x 0
denied as_nobody "${B[@]}" call "${M[@]}" SetDraining b true
denied as_nobody "${B[@]}" call "${M[@]}" Reload
denied as_nobody "${B[@]}" call "${M[@]}" StopAll
denied as_nobody "${B[@]}" call "${M[@]}" Reexecute
for m in Start Stop StopIfFree Restart ResetFailed Deallocate ReleaseHold; do
        denied as_nobody "${B[@]}" call "${S0[@]}" $m
done
denied as_nobody "${B[@]}" call "${S0[@]}" Allocate ss u-y ""
denied as_nobody "${B[@]}" call "${S0[@]}" Hold t 1000000
out=$(as_nobody dbus-send --bus="$BUS" --print-reply --dest=org.slotd.Supervisor1 \
        /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager.StopAll 2>&1 || true)
assert_ok "slotd's own check refused it: $out" grep -q \
        "org.freedesktop.DBus.Error.AccessDenied: Managing slots needs root or membership of supervisor.admin_group" <<<"$out"
assert_ok "nobody reads ListSlots" as_nobody "${B[@]}" call "${M[@]}" ListSlots
assert_eq "$(as_nobody "${B[@]}" get-property "${S0[@]}" State | strip_type)" online "nobody reads State"
assert_eq "$(mprop Draining)" false "draining untouched"
assert_eq "$(sprop 0 ProcessState)" running "slot 0 untouched"

# 2. A member of supervisor.admin_group manages.
assert_ok "admin allocates" as_admin "${B[@]}" call "${M[@]}" Allocate sss game u-admin ""
assert_ok "admin deallocates" as_admin "${B[@]}" call "${M[@]}" Deallocate s u-admin

# 3. Hold from inside a slot: its own slot yes, another slot no (checked by the cgroup of the
# caller, which the bus reports; lib.sh's in_slot).
assert_ok "a process of slot 0 holds slot 0" in_slot 0 "${B[@]}" call "${S0[@]}" Hold t 60000000
assert_eq "$(sprop 0 State)" held "slot 0 held by its own server"
assert_ok "and releases it" in_slot 0 "${B[@]}" call "${S0[@]}" ReleaseHold
denied in_slot 1 "${B[@]}" call "${S0[@]}" Hold t 60000000
denied in_slot 0 "${B[@]}" call "${S0[@]}" Stop
assert_eq "$(sprop 0 State)" online "slot 0 not held by another slot"

# 4. The real policy file, in a bus configured like the system bus.
stop_slotd
kill "$DBUS_PID"; wait "$DBUS_PID" 2>/dev/null || true
policy=$(cd "$(dirname "$0")/../../units" && pwd)/org.slotd.Supervisor1.conf
[ -f "$policy" ] || fail "no policy file at $policy"
cat > "$T/bus.conf" <<EOC
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>$BUS</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
  </policy>
  <include>$policy</include>
</busconfig>
EOC
rm -f "$T/bus"
dbus-daemon --config-file="$T/bus.conf" --nofork --nosyslog >"$T/dbus.log" 2>&1 &
DBUS_PID=$!
wait_until 10 "the system-like bus" test -S "$T/bus"
chmod 777 "$T/bus"
# Only root may own the name.
bus_denied as_nobody "${B[@]}" call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus RequestName su org.slotd.Supervisor1 0
start_slotd
assert_ok "root owns the name under the real policy" bus_name_owned
# Anyone may read and call (slotd itself decides who may manage).
assert_ok "nobody reads through the policy" as_nobody "${B[@]}" call "${M[@]}" ListSlots
assert_ok "nobody introspects" as_nobody "${B[@]}" introspect org.slotd.Supervisor1 /org/slotd/Supervisor1
denied as_nobody "${B[@]}" call "${M[@]}" StopAll
assert_ok "admin allocates through the policy" as_admin "${B[@]}" call "${M[@]}" Allocate sss game u-policy ""
assert_ok "root deallocates through the policy" "${B[@]}" call "${M[@]}" Deallocate s u-policy
finish
