#!/usr/bin/env bash
# Installs the Debian 12 packages slotd needs to build, run its demo and pass its tests.
# Idempotent: asks apt only for what is missing. Run as root.
set -euo pipefail

build=(meson ninja-build pkg-config gcc libc6-dev libsystemd-dev libseccomp-dev
       libinih-dev libyaml-dev libcmocka-dev libssl-dev libjansson-dev libcurl4-openssl-dev
       libwebsockets-dev libmicrohttpd-dev libwslay-dev curl
       libprotobuf-c-dev protobuf-c-compiler libnghttp2-dev libc-ares-dev libgnutls28-dev
       scdoc man-db)
run=(dbus-daemon systemd python3 iproute2)
# The fleet (issue 15): a real etcd (and etcdctl) and a real Prometheus in its tests; openssl
# makes the CA and certificates of the TLS etcd (test-etcd-tls); headless Chromium loads the
# allocator's status page (test-fleet-status).
fleet=(etcd-server etcd-client prometheus jq openssl chromium)
# The Debian packages (debian/, tests/package/build-deb): dpkg-buildpackage, dh, lintian;
# debootstrap makes the fresh Debian 12 they are installed on (tests/package/fresh-install).
package=(dpkg-dev debhelper build-essential lintian debootstrap)
# test-notify-kill stops slotd with gdb at an exact instruction before it SIGKILLs it.
debug=(gdb)
vm=(qemu-system-x86 busybox-static cpio xz-utils)
fuzz=(clang libclang-rt-14-dev)

want=("${build[@]}" "${run[@]}" "${fleet[@]}" "${package[@]}" "${debug[@]}")
for arg in "$@"; do
        case "$arg" in
                --vm) want+=("${vm[@]}") ;;
                --fuzz) want+=("${fuzz[@]}") ;;
                *) echo "usage: $0 [--vm] [--fuzz]" >&2; exit 2 ;;
        esac
done

# The real Centrifuge clients the local proxy's wire test drives (tests/integration/node), at
# the versions its package-lock.json fixes; without node the test skips itself.
node_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/integration/node
if command -v node >/dev/null && command -v npm >/dev/null && [ ! -d "$node_dir/node_modules" ]; then
        echo "deps: npm ci in $node_dir"
        if ! (cd "$node_dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null); then
                # A half-filled node_modules would fail the test instead of skipping it.
                rm -rf "$node_dir/node_modules"
                echo "deps: npm ci failed; test-centrifuge-wire will be skipped" >&2
        fi
fi

missing=()
for p in "${want[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
        echo "deps: missing ${missing[*]}; run as root to install them" >&2
        exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

# Debian starts etcd (port 2379) and prometheus (9090) as system services when they are
# installed. The tests and the demo start their own on free ports and never use those: the
# services this script just installed are stopped and disabled rather than left running.
if [ -d /run/systemd/system ]; then
        for p in "${missing[@]}"; do
                case "$p" in
                        etcd-server) unit=etcd.service ;;
                        prometheus) unit=prometheus.service ;;
                        *) continue ;;
                esac
                echo "deps: $p was installed for the tests only: disabling its $unit"
                systemctl disable --now "$unit" >/dev/null 2>&1 || true
        done
fi
