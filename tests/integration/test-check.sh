#!/usr/bin/env bash
# slotd --check validates and prints the plan without starting anything; a bad config exits
# non-zero naming file:line and key; --help and --version answer.
. "$(dirname "$0")/lib.sh"

write_config
write_fleet shooter "[ports]" "game_base = 30000" "query_base = 30100"
out=$("$SLOTD" --check --config "$T/etc/slotd.ini")
note "$out"
assert_ok "plan names the fleet with 4 slots" grep -q "fleet shooter .*: 4 slots" <<<"$out"
assert_ok "plan shows ports" grep -q "ports 30000-30003, query ports 30100-30103" <<<"$out"
assert_ok "plan shows the cgroup tree" grep -q "slot tree $CG" <<<"$out"
assert_ok "plan says what is enforceable" grep -Eq "enforceable: cpu=(yes|no) memory=(yes|no) pids=(yes|no)" <<<"$out"
assert_eq "$(grep '^machine ID' <<<"$out")" \
        "machine ID $TEST_MACHINE_ID, machine number $TEST_MACHINE_NUMBER (derived from machine.id)" \
        "plan shows the machine number derived from machine.id (SPEC §2)"
assert_eq "$TEST_MACHINE_NUMBER" "$(machine_number_of "$TEST_MACHINE_ID")" \
        "the derivation: SHA-256 of machine.id, first 8 bytes, top bit cleared"
assert_ok "--check created no cgroup" test ! -e "$CG"
assert_eq "$(tail -n 1 <<<"$out")" ok "the last line says ok when nothing is wrong"

# check_config [FILE]: slotd --check of FILE (slotd.ini), its output (stderr too) in out, its
# status in rc, the output noted.
check_config() {
        set +e
        out=$("$SLOTD" --check --config "${1:-$T/etc/slotd.ini}" 2>&1)
        rc=$?
        set -e
        note "$out"
}
# Issue 27.7: --check tells the truth.
# A --config path that does not exist is an error (the default path may be absent).
check_config "$T/etc/nonexistent.ini"
assert_ok "--config of a missing file exits non-zero" test $rc -ne 0
assert_ok "--config of a missing file names it" grep -q "$T/etc/nonexistent.ini (--config): No such file" <<<"$out"
assert_ok "--config of a missing file prints no ok" bash -c '! grep -qx ok <<<"$1"' _ "$out"
# The default path absent (an empty /etc/slotd in a mount namespace of its own, if there is
# one): every default, and said so.
set +e
out=$(unshare -m --propagation private sh -c \
        '[ ! -d /etc/slotd ] || mount -t tmpfs -o size=1M slotd-test /etc/slotd; exec "$0" --check' "$SLOTD" 2>&1)
rc=$?
set -e
note "$out"
assert_eq "$rc" 0 "--check with the default config absent exits 0"
assert_ok "the absent default config said" grep -qx \
        "configuration: /etc/slotd/slotd.ini (absent: slotd's defaults), fleets from /etc/slotd/fleets.d" <<<"$out"
assert_eq "$(tail -n 1 <<<"$out")" ok "the absent default config: ok"
# An unknown admin group and an unknown proxy user: both reported in one run, no ok.
cp "$T/etc/slotd.ini" "$T/etc/slotd.ini.good"
sed -i "s/^bus = .*/&\nadmin_group = no-such-group-$$/" "$T/etc/slotd.ini"
sed -i "/^\[localproxy\]/,/^\[/ s/^listen = off$/listen = 127.0.0.1:$(free_port)/" "$T/etc/slotd.ini"
sed -i "/^\[localproxy\]/a user = no-such-user-$$" "$T/etc/slotd.ini"
check_config
assert_ok "unknown admin_group and proxy user: non-zero" test $rc -ne 0
assert_ok "unknown admin_group named" grep -q "supervisor.admin_group: no such group 'no-such-group-$$'" <<<"$out"
assert_ok "unknown localproxy.user named in the same run" grep -q "localproxy.user: no such user 'no-such-user-$$'" <<<"$out"
assert_ok "2 errors counted" grep -q "2 errors: the configuration is not ok" <<<"$out"
assert_ok "no ok printed" bash -c '! grep -qx ok <<<"$1"' _ "$out"
# The same with a fleet file of a bad key and one of an unknown user beside them: the bad key
# does not hide the rest of the run (every file, the users and groups are still checked).
write_fleet typo "no_such_key = 1" "[ports]" "game_base = 31000" "query_base = 31100"
write_fleet stranger "[ports]" "game_base = 32000" "query_base = 32100"
sed -i "s/^\[fleet\]\$/&\nuser = no-such-fleet-user-$$/" "$T/etc/fleets.d/stranger.ini"
check_config
assert_ok "a bad key and unknown names: non-zero" test $rc -ne 0
assert_ok "the bad key named" grep -q "typo.ini:[0-9]*: usage.no_such_key: unknown key" <<<"$out"
assert_ok "the unknown fleet user named in the same run" \
        grep -q "stranger.ini: fleet.user: no such user 'no-such-fleet-user-$$'" <<<"$out"
assert_ok "the unknown admin_group named in the same run" grep -q "supervisor.admin_group: no such group 'no-such-group-$$'" <<<"$out"
assert_ok "the unknown localproxy.user named in the same run" grep -q "localproxy.user: no such user 'no-such-user-$$'" <<<"$out"
assert_ok "4 errors counted" grep -q "4 errors: the configuration is not ok" <<<"$out"
assert_ok "no plan printed for a configuration with errors" bash -c '! grep -q "^fleet shooter" <<<"$1"' _ "$out"
assert_ok "no ok printed" bash -c '! grep -qx ok <<<"$1"' _ "$out"
rm "$T/etc/fleets.d/typo.ini" "$T/etc/fleets.d/stranger.ini"
# Two fleets on the same ports (each range's clash told) beside the unknown names.
write_fleet clash "[ports]" "game_base = 30000" "query_base = 30100"
check_config
assert_ok "clashing ports: non-zero" test $rc -ne 0
assert_ok "the game ports' clash named" grep -q "shooter.ini:[0-9]*: ports.game_base: ports .* overlap ports.game_base" <<<"$out"
assert_ok "the query ports' clash named in the same run" grep -q "shooter.ini:[0-9]*: ports.query_base: ports .* overlap ports.query_base" <<<"$out"
assert_ok "the unknown admin_group named beside them" grep -q "supervisor.admin_group: no such group 'no-such-group-$$'" <<<"$out"
assert_ok "4 errors counted (2 clashes, 2 names)" grep -q "4 errors: the configuration is not ok" <<<"$out"
rm "$T/etc/fleets.d/clash.ini"
cp "$T/etc/slotd.ini.good" "$T/etc/slotd.ini"

# machine.number: set, it is the number; a value Unity's SDKs cannot read is refused with
# file:line, key and value, at --check and at start-up.
cp "$T/etc/slotd.ini" "$T/etc/slotd.ini.good"
sed -i '/^id = /a number = 9223372036854775807' "$T/etc/slotd.ini"
out=$("$SLOTD" --check --config "$T/etc/slotd.ini")
assert_ok "plan shows machine.number" grep -qx \
        "machine ID $TEST_MACHINE_ID, machine number 9223372036854775807 (machine.number)" <<<"$out"
for bad in 0123 9223372036854775808 0 -7 3d1219c7; do
        cp "$T/etc/slotd.ini.good" "$T/etc/slotd.ini"
        sed -i "/^id = /a number = $bad" "$T/etc/slotd.ini"
        line=$(grep -n "^number = " "$T/etc/slotd.ini" | cut -d: -f1)
        check_config
        assert_ok "machine.number $bad refused" test $rc -ne 0
        assert_ok "machine.number $bad: file:line, key and value" grep -Eq \
                "^$LOG_TIME slotd\[error\]: $T/etc/slotd.ini:$line: machine.number: (expected|must be) .*\(got '$bad'\)$" \
                <<<"$out"
done
cp "$T/etc/slotd.ini.good" "$T/etc/slotd.ini"
assert_ok "--check created no state" test ! -e "$T/state"

# A bad value: non-zero exit, file:line and key in the message.
cat >> "$T/etc/fleets.d/shooter.ini" <<EOC
[checks]
interval = soon
EOC
line=$(grep -n "interval = soon" "$T/etc/fleets.d/shooter.ini" | cut -d: -f1)
check_config
assert_ok "bad config exits non-zero" test $rc -ne 0
assert_ok "error names file:line and key" grep -q "$T/etc/fleets.d/shooter.ini:$line: checks.interval" <<<"$out"

# The daemon refuses the same config at start-up.
set +e
"$SLOTD" --config "$T/etc/slotd.ini" >"$T/start.log" 2>&1
rc=$?
set -e
assert_ok "daemon refuses a bad config" test $rc -ne 0
assert_ok "daemon names the key" grep -q "checks.interval" "$T/start.log"

# A fleet that does not fit: 99 servers of 1 core on 4 cores.
printf '[fleet]\nbuild = %s\n[usage]\ncpu = 1\nmemory = 512M\nservers = 99\n' "$TEST_SERVER" \
        > "$T/etc/fleets.d/shooter.ini"
check_config
assert_ok "oversized fleet refused" test $rc -ne 0
assert_ok "oversized fleet names its file" grep -q "shooter.ini" <<<"$out"

assert_ok "--help" bash -c "'$SLOTD' --help | grep -q -- --check"
assert_ok "--version" bash -c "'$SLOTD' --version | grep -Eq '^slotd [0-9]+\.[0-9]+'"
set +e
"$SLOTD" --no-such-option >/dev/null 2>&1
rc=$?
set -e
assert_ok "unknown option exits non-zero" test $rc -ne 0
finish
