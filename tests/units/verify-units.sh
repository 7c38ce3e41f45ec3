#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# systemd-analyze verify on every unit of units/, as installed but with the built binaries at
# the paths the units name and the built man pages on MANPATH (so that Documentation=man:…
# resolves): it must say nothing. Also: slotd.service checks its config before a start and
# reloads over D-Bus. Usage: verify-units.sh UNITS_DIR MAN_PAGE...
set -euo pipefail
: "${BUILD_ROOT:?}"
units=$1
shift
skip() { echo "skipped: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v systemd-analyze >/dev/null || skip "systemd-analyze is not installed (Debian package systemd)"
command -v man >/dev/null || skip "man is not installed (Debian package man-db)"
[ $# -gt 0 ] || skip "the man pages are not built (scdoc is missing, -Dman)"
# systemd-analyze verify loads units without a running systemd; it only needs to run at all.
systemd-analyze --version >/dev/null 2>&1 || skip "systemd-analyze cannot run here"

tmp=$(mktemp -d /tmp/slotd-units.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/man/man5" "$tmp/man/man8" "$tmp/units"
for page in "$@"; do
        ln -s "$(realpath "$page")" "$tmp/man/man${page##*.}/$(basename "$page")"
done
n=0
for unit in "$units"/*.service; do
        sed -E -e "s#/usr/sbin/slotd-registry#$BUILD_ROOT/fleet/registry/slotd-registry#g" \
            -e "s#/usr/sbin/slotd-allocator#$BUILD_ROOT/fleet/allocator/slotd-allocator#g" \
            -e "s#/usr/sbin/slotd( |\$)#$BUILD_ROOT/slotd\1#g" \
            "$unit" > "$tmp/units/$(basename "$unit")"
        n=$((n + 1))
done
[ "$n" -ge 3 ] || fail "only $n units in $units"
grep -q "$BUILD_ROOT/slotd\$" "$tmp/units/slotd.service" || fail "slotd.service: ExecStart not rewritten"

# The check must be able to fail: the units as they are, without the binaries installed.
if [ ! -x /usr/sbin/slotd ]; then
        out=$(MANPATH="$tmp/man" systemd-analyze verify "$units/slotd.service" 2>&1 || true)
        grep -q "is not executable" <<<"$out" || fail "verify does not see a missing binary: $out"
        n=$((n + 1))
fi

out=$(cd "$tmp/units" && MANPATH="$tmp/man" systemd-analyze verify ./*.service 2>&1) ||
        fail "systemd-analyze verify failed: $out"
[ -z "$out" ] || fail "systemd-analyze verify complains: $out"
n=$((n + 1))

unit="$units/slotd.service"
grep -qx 'ExecStartPre=/usr/sbin/slotd --check' "$unit" || fail "slotd.service: no ExecStartPre=… --check"
grep -qx 'ExecReload=/usr/bin/busctl --system call org.slotd.Supervisor1 /org/slotd/Supervisor1 org.slotd.Supervisor1.Manager Reload' "$unit" ||
        fail "slotd.service: no ExecReload calling Reload"
n=$((n + 2))
for u in "$units"/*.service; do
        grep -q '^Documentation=.*man:' "$u" || fail "$u names no man page"
        n=$((n + 1))
done
echo "ok: $n assertions ($(ls "$tmp/units" | wc -l) units verified)"
