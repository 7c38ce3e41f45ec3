#!/usr/bin/env bash
# A build that cannot be executed (issue 14, point 4): missing, not executable by the fleet's
# user, behind a directory it cannot search, garbage (ENOEXEC), a #! script whose interpreter
# is missing, and a build broken under a running server that its keeper restarts. Each is the
# cause `exec` (FailureReason, the Crashed signal's reason), said in one log line with the path
# and the errno; the slot is failed at once, no other slot is disturbed, and `slotd --check`
# names the fleet and what stops its user. After the fix, Start runs the slot again.
. "$(dirname "$0")/lib.sh"
SIGS="$T/signals.json"
getent passwd nobody >/dev/null && getent group nogroup >/dev/null ||
        skip "needs the user nobody and the group nogroup (the fleets' default identity)"
NOBODY_UID=$(id -u nobody)

mkdir -p "$T/builds"
chmod 755 "$T/builds"
# build_copy NAME: a working copy of the test server for fleet NAME, in a directory of its own.
build_copy() {
        mkdir -p "$T/builds/$1/dir"
        chmod 755 "$T/builds/$1" "$T/builds/$1/dir"
        install -m 0755 "$TEST_SERVER" "$T/builds/$1/dir/server"
}
# exec_fleet NAME INDEX [EXTRA LINES]: a one-slot fleet on its copy of the test server.
exec_fleet() {
        local name=$1 i=$2
        shift 2
        build_copy "$name"
        USAGE_CPU=0.5 USAGE_MEMORY=64M write_fleet "$name" "servers = 1" \
                "[ports]" "game_base = $((32400 + i * 10))" "query_base = $((32500 + i * 10))" \
                "[checks]" "interval = 0" "$@"
        sed -i "s|^build = .*|build = $T/builds/$name/dir/server|" "$T/etc/fleets.d/$name.ini"
}

MACHINE_CPUS=4 write_config
# Slots in file-name order: amissing 0, bmode 1, cdir 2, dgarbage 3, einterp 4, fkeeper 5,
# steady 6. The first five wait for Start (their builds are broken once slotd runs: a missing
# build is a config error at start-up, SPEC §2).
names=(amissing bmode cdir dgarbage einterp)
for i in 0 1 2 3 4; do
        exec_fleet "${names[$i]}" $i
        fleet_key "${names[$i]}" "start_on_provision = no"
done
exec_fleet fkeeper 5
exec_fleet steady 6
start_slotd
start_monitor "$SIGS"
for id in 5 6; do
        wait_prop $id ProcessState running
        wait_server $id
done
steady_pid=$(sprop 6 MainPID)

# ---- The breakages ----
B=$T/builds
rm "$B/amissing/dir/server"
chmod 0700 "$B/bmode/dir/server"                   # root's alone; the fleet runs as nobody
chmod 0700 "$B/cdir/dir"                           # the directory, not the file
{ printf 'garbage\n'; head -c 4096 /dev/urandom; } > "$B/dgarbage/dir/server"  # mode stays 0755
printf '#!/nonexistent/interpreter\necho never\n' > "$B/einterp/dir/server"

# expect_exec ID FLEET PATH ERRNO_TEXT ERRNO_NAME DETAIL: slot ID failed with cause exec, the
# Crashed signal said so, and one log line names the path, the errno and what stops it.
expect_exec() {
        local id=$1 fleet=$2 path=$3 text=$4 name=$5 detail=$6
        wait_prop "$id" ProcessState failed
        assert_eq "$(sprops "$id" FailureReason LastExitCode MainPID State)" "exec|203|0|available" \
                "slot $id FailureReason|LastExitCode|MainPID|State"
        wait_sig "$SIGS" Crashed "$id 203 0 exec"
        assert_ok "slot $id: log names path, errno and cause" grep -qF \
                "slot $id ($fleet): cannot execute $path: $text ($name)$detail" "$T/slotd.log"
        assert_ok "slot $id: failed at once, without back-off" grep -qF \
                "slot $id ($fleet): The build cannot be executed, not restarting" "$T/slotd.log"
        assert_ok "slot $id: cgroup empty" cgroup_empty "$id"
        # The failed exec's own line went through the keeper's log pipe, emptied into
        # server.log before the keeper reported the exit: the spawner's for a first server,
        # the keeper's for one it restarted.
        local line="slotd: cannot start $path: exec: $text"
        [ "$id" = 5 ] && line="slotd-keeper: cannot exec the build, error $(errno_number "$name")"
        assert_ok "slot $id: server.log has '$line'" grep -qF "$line" "$(sprop "$id" Home)/logs/server.log"
}
errno_number() { case $1 in ENOENT) echo 2 ;; EACCES) echo 13 ;; ENOEXEC) echo 8 ;; esac; }

for id in 0 1 2 3 4; do
        scall $id Start
done
expect_exec 0 amissing "$B/amissing/dir/server" "No such file or directory" ENOENT \
        "; $B/amissing/dir/server does not exist"
expect_exec 1 bmode "$B/bmode/dir/server" "Permission denied" EACCES \
        "; $B/bmode/dir/server is not executable by user nobody (uid $NOBODY_UID"
expect_exec 2 cdir "$B/cdir/dir/server" "Permission denied" EACCES \
        "; the directory $B/cdir/dir is not searchable by user nobody (uid $NOBODY_UID"
expect_exec 3 dgarbage "$B/dgarbage/dir/server" "Exec format error" ENOEXEC \
        "; $B/dgarbage/dir/server is neither an ELF executable nor a #! script"
expect_exec 4 einterp "$B/einterp/dir/server" "No such file or directory" ENOENT \
        "; its interpreter /nonexistent/interpreter cannot run: /nonexistent does not exist"
# Exactly one start each: failed at once, no restart loop.
for id in 0 1 2 3 4; do
        assert_eq "$(sig_count "$SIGS" Crashed "$id")" 1 "Crashed signals of slot $id"
done

# ---- A build broken under a running server: its keeper's restart fails to exec ----
# The first crash is within crash.restarts, so the keeper restarts the server itself
# (test-crash-policy); that exec fails, and the keeper leaves the judgement to slotd.
chmod 0600 "$B/fkeeper/dir/server"
control 5 "exit 3"
expect_exec 5 fkeeper "$B/fkeeper/dir/server" "Permission denied" EACCES \
        "; $B/fkeeper/dir/server is not executable by user nobody (uid $NOBODY_UID"
assert_ok "the keeper made the restart that failed" grep -qF \
        "slot 5 (fkeeper): Server crashed: exit code 3; restarted by its keeper" "$T/slotd.log"
assert_ok "Crashed for the crash before" has_sig "$SIGS" Crashed "5 3 0 "
assert_eq "$(sig_count "$SIGS" Crashed 5)" 2 "Crashed signals of slot 5: the crash, then exec"

# ---- No other slot disturbed ----
assert_eq "$(sprops 6 ProcessState MainPID FailureReason)" "running|$steady_pid|" \
        "steady slot ProcessState|MainPID|FailureReason"
assert_eq "$(sig_count "$SIGS" Crashed 6)" 0 "Crashed signals of the steady slot"

# ---- slotd --check names the fleet, its user and the component ----
# check_fails NAME PATTERN: --check with fleet NAME alone fails, saying PATTERN.
check_fails() {
        local out rc
        mkdir -p "$T/check-$1"
        cp "$T/etc/fleets.d/$1.ini" "$T/check-$1/"
        set +e
        out=$("$SLOTD" --check --config "$T/etc/slotd.ini" --fleets "$T/check-$1" 2>&1)
        rc=$?
        set -e
        note "$out"
        assert_ok "--check fails for $1" test $rc -ne 0
        assert_ok "--check for $1 says: $2" grep -qF -- "$2" <<<"$out"
}
# A missing build stops the configuration itself (file:line and the path).
line=$(grep -n "^build = " "$T/etc/fleets.d/amissing.ini" | cut -d: -f1)
check_fails amissing "$T/check-amissing/amissing.ini:$line: fleet.build: No such file or directory (got '$B/amissing/dir/server')"
check_fails bmode "fleet bmode: user nobody (uid $NOBODY_UID) cannot execute $B/bmode/dir/server: $B/bmode/dir/server is not executable by user nobody"
check_fails cdir "fleet cdir: user nobody (uid $NOBODY_UID) cannot execute $B/cdir/dir/server: the directory $B/cdir/dir is not searchable by user nobody (uid $NOBODY_UID, gid $(getent group nogroup | cut -d: -f3)) (mode 0700, owner uid 0 gid 0) [EACCES]"
check_fails dgarbage "fleet dgarbage: user nobody (uid $NOBODY_UID) cannot execute $B/dgarbage/dir/server: $B/dgarbage/dir/server is neither an ELF executable nor a #! script [ENOEXEC]"
check_fails einterp "fleet einterp: user nobody (uid $NOBODY_UID) cannot execute $B/einterp/dir/server: its interpreter /nonexistent/interpreter cannot run: /nonexistent does not exist [ENOENT]"
# The working fleet passes.
mkdir -p "$T/check-steady"
cp "$T/etc/fleets.d/steady.ini" "$T/check-steady/"
assert_ok "--check passes a build the fleet's user can run" \
        "$SLOTD" --check --config "$T/etc/slotd.ini" --fleets "$T/check-steady"

# ---- After the fix, Start runs each slot again ----
install -m 0755 "$TEST_SERVER" "$B/amissing/dir/server"
chmod 0755 "$B/bmode/dir/server" "$B/cdir/dir" "$B/fkeeper/dir/server"
install -m 0755 "$TEST_SERVER" "$B/dgarbage/dir/server"
install -m 0755 "$TEST_SERVER" "$B/einterp/dir/server"
for id in 0 1 2 3 4 5; do
        scall $id Start
done
for id in 0 1 2 3 4 5; do
        wait_prop $id ProcessState running
        assert_eq "$(sprop $id FailureReason)" "" "slot $id FailureReason after the fix and Start"
        wait_server $id
done
check_fails_not() {
        "$SLOTD" --check --config "$T/etc/slotd.ini" >/dev/null 2>&1
}
assert_ok "--check passes every fleet after the fix" check_fails_not
assert_eq "$(sprop 6 MainPID)" "$steady_pid" "the steady slot's server throughout"
finish
