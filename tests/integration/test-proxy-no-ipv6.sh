#!/usr/bin/env bash
# localproxy.listen's default on a host without IPv6 (issue 13, SPEC §2): the default is
# 127.0.0.1:8086 and [::1]:8086. Where ::1 cannot be bound (IPv6 disabled, or not built in),
# slotd says so and serves on 127.0.0.1:8086 alone instead of refusing to start. An address
# the key names is never skipped: there slotd refuses to start, naming it. slotd runs in a
# network namespace of its own (lib.sh's SLOTD_NETNS) with IPv6 off on its loopback, so port
# 8086 there is its own and the host's network is not touched.
. "$(dirname "$0")/lib.sh"
for c in unshare nsenter ip curl timeout; do
        command -v "$c" >/dev/null || skip "$c is not installed"
done
unshare --net true 2>/dev/null || skip "cannot make a network namespace here"
# Off on the namespace's loopback; a kernel without IPv6 has no such sysctl, and no ::1.
NO_IPV6='sysctl -qw net.ipv6.conf.lo.disable_ipv6=1 2>/dev/null || true'

# ---- 1. The default: [::1]:8086 skipped, 127.0.0.1:8086 served ----
write_config
sed -i '/^listen = off$/d' "$T/etc/slotd.ini"
grep -q '^listen' "$T/etc/slotd.ini" && fail "slotd.ini still names localproxy.listen"
write_fleet game "servers = 1" "[ports]" "game_base = 33300" "query_base = 33350"
SLOTD_NETNS_SETUP=$NO_IPV6 SLOTD_NETNS=1 start_slotd
in_netns() { nsenter --net="/proc/$SLOTD_PID/ns/net" "$@"; }
wait_until 20 "the local proxy on 127.0.0.1:8086 in slotd's namespace" \
        in_netns curl -sf --max-time 2 -o /dev/null http://127.0.0.1:8086/token
assert_ok "log: [::1]:8086 skipped, and why" grep -q \
        "Not listening on \[::1\]:8086 (localproxy.listen's default): .*; IPv6 is off on this host" \
        "$T/slotd.log"
assert_ok "log: the proxy on the one address" grep -q "Local proxy started as process [0-9]* on 1 addresses" \
        "$T/slotd.log"
assert_eq "$(in_netns curl -s -o /dev/null -w '%{http_code}' --max-time 2 'http://[::1]:8086/token' || true)" \
        000 "nothing answers on [::1]:8086"
wait_prop 0 ProcessState running
assert_eq "$(server_json 0 localProxyUrl)" "http://127.0.0.1:8086" "server.json's localProxyUrl"
stop_slotd

# ---- 2. The same addresses named by the key: not skipped, slotd refuses to start ----
config_key localproxy "listen = 127.0.0.1:8086 [::1]:8086"
rc=0
SLOTD_LOG_LEVEL=debug NETNS_SETUP=$NO_IPV6 timeout 30 unshare --net -- \
        sh -c 'ip link set lo up && eval "$NETNS_SETUP" && exec "$@"' sh \
        "$SLOTD" --config "$T/etc/slotd.ini" >"$T/slotd2.log" 2>&1 || rc=$?
assert_ok "slotd refused to start (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
assert_ok "its log names the address and the key" \
        grep -q "Failed to listen on \[::1\]:8086 (localproxy.listen): " "$T/slotd2.log"
finish
