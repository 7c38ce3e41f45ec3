#!/usr/bin/env bash
# meson install puts the binary, the unit, the D-Bus policy and the example config in place,
# and what it installs is valid: the unit parses, the policy is well-formed XML.
set -euo pipefail
: "${BUILD_ROOT:?}"
dest=$(mktemp -d /tmp/slotd-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
n=0
check() { [ -e "$dest$1" ] || fail "not installed: $1"; n=$((n + 1)); }

meson install -C "$BUILD_ROOT" --no-rebuild --destdir "$dest" --quiet >/dev/null
prefix=$(meson introspect "$BUILD_ROOT" --buildoptions |
        python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
check "$prefix/sbin/slotd"
check "$prefix/libexec/slotd-keeper"
check "$prefix/libexec/slotd-proxy"
check "$prefix/lib/systemd/system/slotd.service"
check "$prefix/share/dbus-1/system.d/org.slotd.Supervisor1.conf"
check "$prefix/sbin/slotd-registry"
check "$prefix/lib/systemd/system/slotd-registry.service"
check "$prefix/lib/sysusers.d/slotd-registry.conf"
# The man pages (man/), when they were built (-Dman, scdoc).
if [ -f "$BUILD_ROOT/man/slotd.8" ]; then
        for page in man8/slotd.8 man5/slotd.ini.5 man8/slotd-registry.8 man8/slotd-allocator.8 \
                    man5/slotd-allocator.ini.5; do
                check "$prefix/share/man/$page"
        done
fi
"$dest$prefix/sbin/slotd-registry" --version | grep -q '^slotd-registry ' ||
        fail "installed slotd-registry does not run"
n=$((n + 1))
reg_unit="$dest$prefix/lib/systemd/system/slotd-registry.service"
for kv in User=slotd-registry NoNewPrivileges=yes CapabilityBoundingSet= After=network-online.target\ dbus.service\ slotd.service; do
        grep -qx "$kv" "$reg_unit" || fail "slotd-registry.service lacks $kv"
        n=$((n + 1))
done
check "$prefix/sbin/slotd-allocator"
check "$prefix/lib/systemd/system/slotd-allocator.service"
check "$prefix/lib/sysusers.d/slotd-allocator.conf"
"$dest$prefix/sbin/slotd-allocator" --version | grep -q '^slotd-allocator ' ||
        fail "installed slotd-allocator does not run"
n=$((n + 1))
alloc_unit="$dest$prefix/lib/systemd/system/slotd-allocator.service"
for kv in User=slotd-allocator Type=notify NoNewPrivileges=yes CapabilityBoundingSet=; do
        grep -qx "$kv" "$alloc_unit" || fail "slotd-allocator.service lacks $kv"
        n=$((n + 1))
done
alloc_conf=$(find "$dest" -path '*/etc/slotd/allocator.ini' | head -n 1)
[ -n "$alloc_conf" ] || fail "allocator.ini not installed"
"$dest$prefix/sbin/slotd-allocator" --check --config "$alloc_conf" >/dev/null ||
        fail "the installed allocator.ini does not pass --check"
n=$((n + 2))
sysconf=$(find "$dest" -path '*/etc/slotd/slotd.ini' | head -n 1)
[ -n "$sysconf" ] || fail "slotd.ini not installed"
n=$((n + 1))
"$dest$prefix/sbin/slotd" --version | grep -q '^slotd ' || fail "installed binary does not run"
n=$((n + 1))
python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' \
        "$dest$prefix/share/dbus-1/system.d/org.slotd.Supervisor1.conf" || fail "policy is not XML"
n=$((n + 1))
unit="$dest$prefix/lib/systemd/system/slotd.service"
for kv in Type=notify KillMode=process; do
        grep -qx "$kv" "$unit" || fail "unit lacks $kv"
        n=$((n + 1))
done
# The slot tree is in slotd-slots.scope, not in the unit's cgroup (manager-scope.c): nothing
# below the unit is slotd's, so it delegates nothing.
grep -q '^Delegate=' "$unit" && fail "unit has Delegate=: its cgroup must stay a leaf"
n=$((n + 1))
if command -v systemd-analyze >/dev/null && [ -d /run/systemd/system ]; then
        systemd-analyze verify "$unit" "$reg_unit" "$alloc_unit" 2>&1 | grep -v "not executable\|No such file" | grep . &&
                fail "systemd-analyze verify complains" || true
fi
# The installed example config is the one a fresh machine gets: all defaults, so a check
# with it and no fleets passes.
"$dest$prefix/sbin/slotd" --check --config "$sysconf" --fleets "$dest/no-fleets" >/dev/null ||
        fail "the installed slotd.ini does not pass --check"
n=$((n + 1))
echo "ok: $n assertions"
