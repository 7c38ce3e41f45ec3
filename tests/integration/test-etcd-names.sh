#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The etcd client (fleet/etcd/etcd.h) with endpoints named by host names, resolved by c-ares
# from the loop (fleet/etcd/etcd-resolve.h), never by the network's DNS: etcd-drive runs in a
# private mount namespace whose /etc/hosts names the cluster's address and whose
# /etc/resolv.conf points at 127.0.0.1, where no name server listens (a name not in the file
# then fails at once: the name server's port is refused). The cluster speaks TLS
# (etcd_tls_init: its certificate is for IP:127.0.0.1, etcd.slotd-test and etcd-two.slotd-test).
#  1. A name of 127.0.0.1: put, range, txn, watch, lease grant, keepalive and revoke.
#  2. A name with an IPv6 and an IPv4 address, etcd listening on the IPv4 one only: whichever
#     c-ares lists first, the client ends up on the address that takes the connection.
#  3. A name nobody knows: every request fails at once (ECONNREFUSED, nothing sent), saying the
#     lookup failed; first in the endpoint list, the requests go to the next endpoint.
#  4. A name of 127.0.0.1 that etcd's certificate does not hold: refused by the client's
#     verification of the name.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/etcd-lib.sh"
: "${ETCD_DRIVE:?ETCD_DRIVE must name the etcd-drive binary}"
command -v etcdctl >/dev/null || skip "etcdctl is not installed (Debian's etcd-client)"
command -v unshare >/dev/null || skip "unshare is not installed (util-linux)"
unshare -m true 2>/dev/null || skip "no private mount namespace here (unshare -m)"

etcd_tls_init
etcd_cluster_start 1
PORT=${ETCD_CLIENT_PORT[1]}
TIMEOUT_MS=$((1000 * TIME_SCALE))
TLS_ENV=(ETCD_CA_FILE="$ETCD_TLS_CA" ETCD_CERT_FILE="$ETCD_TLS_CERT" ETCD_KEY_FILE="$ETCD_TLS_KEY")

cat > "$T/hosts" <<EOH
127.0.0.1 etcd.slotd-test
::1 etcd-two.slotd-test
127.0.0.1 etcd-two.slotd-test
127.0.0.1 etcd-other.slotd-test
EOH
echo "nameserver 127.0.0.1" > "$T/resolv.conf"

# drive NAME ENDPOINTS < SCRIPT: etcd-drive (with the TLS files) in the private namespace with
# those endpoints; its answers, without their " ms=N", in $T/NAME.out; the longest answer's
# milliseconds in MAX_MS.
drive() {
        local name=$1 endpoints=$2
        env ETCD_TIMEOUT_MS=$TIMEOUT_MS ETCD_ENDPOINTS="$endpoints" "${TLS_ENV[@]}" \
                unshare -m sh -c "mount --bind '$T/hosts' /etc/hosts &&
                        mount --bind '$T/resolv.conf' /etc/resolv.conf && exec '$ETCD_DRIVE'" \
                2>"$T/$name.err" >"$T/$name.raw" ||
                fail "etcd-drive ($name) failed: $(cat "$T/$name.err")"
        [ ! -s "$T/$name.err" ] || fail "etcd-drive's stderr ($name): $(cat "$T/$name.err")"
        sed -E 's/ ms=[0-9]+$//' "$T/$name.raw" >"$T/$name.out"
        MAX_MS=$(sed -nE 's/.* ms=([0-9]+)$/\1/p' "$T/$name.raw" | sort -n | tail -n 1)
}
has() { grep -qxE -- "$2" "$T/$1.out"; }
errors() { grep -c '^error' "$T/$1.out" || true; }
BASIC="put /names/NAME one
get /names/NAME
txn create:/names/NAME-t:=:0 then put:/names/NAME-t:v1 else get:/names/NAME-t"

# ---- 1. a name ----
drive one "https://etcd.slotd-test:$PORT" <<EOS
${BASIC//NAME/one}
watch w prefix:/names/w/
put /names/w/1 a
wait w 1 $((10 * TIME_SCALE))
grant $((10 * TIME_SCALE))
keepalive
revoke
EOS
assert_eq "$(errors one)" 0 "errors through etcd.slotd-test ($(paste -sd '|' "$T/one.out"))"
assert_ok "put through a name" has one 'ok rev=[0-9]+'
assert_ok "range through a name" has one 'kv /names/one one c=[0-9]+ m=[0-9]+ v=1 l=0'
assert_ok "txn through a name" has one 'txn succeeded=1 rev=[0-9]+ n=1'
assert_ok "watch through a name" has one 'event w PUT /names/w/1 a m=[0-9]+'
assert_ok "lease granted through a name" has one "lease id=[0-9]+ ttl=$((10 * TIME_SCALE))"
assert_ok "lease kept alive through a name" has one "keepalive ttl=[1-9][0-9]*"
assert_eq "$(ectl get /names/one --print-value-only)" one "etcdctl reads what went through the name"

# ---- 2. two addresses, one refused ----
drive two "https://etcd-two.slotd-test:$PORT" <<EOS
${BASIC//NAME/two}
EOS
assert_eq "$(errors two)" 0 "errors through etcd-two.slotd-test (::1 refused) ($(paste -sd '|' "$T/two.out"))"
assert_ok "range through the name's IPv4 address" has two 'kv /names/two one c=[0-9]+ m=[0-9]+ v=1 l=0'

# ---- 3. an unknown name: alone, then before a known one ----
drive none "https://etcd-none.slotd-test:$PORT" <<EOS
${BASIC//NAME/none}
EOS
n=$(grep -cE "^error ECONNREFUSED POST https://etcd-none.slotd-test:$PORT/etcdserverpb\.KV/[A-Za-z]*: resolving etcd-none.slotd-test: .+" \
        "$T/none.out" || true)
assert_eq "$n" 3 "requests to an unknown name refused, saying the lookup failed ($(paste -sd '|' "$T/none.out"))"
assert_ok "at once: within half the timeout (longest ${MAX_MS} ms)" test "$MAX_MS" -lt $((TIMEOUT_MS / 2))
drive failover "https://etcd-none.slotd-test:$PORT,https://etcd.slotd-test:$PORT" <<EOS
${BASIC//NAME/failover}
EOS
assert_eq "$(errors failover)" 0 "errors with an unknown name first ($(paste -sd '|' "$T/failover.out"))"
assert_ok "range through the next endpoint" has failover 'kv /names/failover one c=[0-9]+ m=[0-9]+ v=1 l=0'

# ---- 4. a name etcd's certificate does not hold ----
drive other "https://etcd-other.slotd-test:$PORT" <<EOS
${BASIC//NAME/other}
EOS
n=$(grep -cE "^error EIO POST https://etcd-other.slotd-test:$PORT/etcdserverpb\.KV/[A-Za-z]*: TLS: etcd's certificate: The certificate is NOT trusted\. The name in the certificate does not match the expected\." \
        "$T/other.out" || true)
assert_eq "$n" 3 "requests to a name not in etcd's certificate refused ($(paste -sd '|' "$T/other.out"))"
assert_eq "$(ectl get --prefix /names/other --keys-only | grep -c . || true)" 0 \
        "keys written through a name not in the certificate"

finish
