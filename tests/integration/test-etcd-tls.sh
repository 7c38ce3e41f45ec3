#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# TLS between the fleet's processes and etcd (issue 15, SPEC §13), against a real etcd that
# serves its clients over TLS only and asks each for a certificate of its CA
# (--client-cert-auth), as production etcd runs (etcd-lib.sh's etcd_tls_init makes the CA and
# the certificates with openssl).
#  1. The etcd client (etcd-drive) with the CA and a client certificate: put, range, txn,
#     watch, lease grant, keepalive and revoke. Without a client certificate, with one of
#     another CA, trusting another CA, or the system's trust store: every request fails at
#     once with the TLS layer's error, and for a refused client etcd's log says why.
#  2. slotd --check shows the TLS files and refuses what the registry could not use.
#  3. slotd-registry, configured through slotd.ini's fleet.etcd_ca, etcd_cert and etcd_key:
#     trusting another CA it registers nothing and says why; a key its user cannot read or a
#     missing CA stops it at start, naming the key and the file; with the right files it
#     registers its machine and slots.
#  4. slotd-allocator, configured through allocator.ini's etcd.ca_file, cert_file and
#     key_file: its configuration errors, a key its user cannot read, and an allocation
#     fulfilled by the registry (claim, watch and confirmation all over TLS).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"
FLEET_PORT_BASE=43000 # not test-allocator's (41000-42999): they may run at the same time
FLEET_SLOTS=2
. "$(dirname "$0")/fleet-lib.sh"
: "${ETCD_DRIVE:?ETCD_DRIVE must name the etcd-drive binary}"
: "${SLOTD_REGISTRY:?SLOTD_REGISTRY must name the slotd-registry binary}"
: "${SLOTD_ALLOCATOR:?SLOTD_ALLOCATOR must name the slotd-allocator binary}"
command -v etcdctl >/dev/null || skip "etcdctl is not installed (Debian's etcd-client)"

etcd_tls_init
etcd_cluster_start 1
PORT=${ETCD_CLIENT_PORT[1]}
assert_eq "$ETCD_ENDPOINTS" "https://127.0.0.1:$PORT" "the cluster's client URL"
TIMEOUT_MS=$((1000 * TIME_SCALE))
# A key only root can read: the registry's and the allocator's user (nobody) cannot.
install -m 600 "$ETCD_TLS_KEY" "$T/tls/root-only.key"

# ---- 1. the etcd client ----

# drive NAME [VAR=VALUE...] < SCRIPT: etcd-drive with that environment; its answers, without
# their " ms=N", in $T/NAME.out.
drive() {
        local name=$1
        shift
        env ETCD_TIMEOUT_MS=$TIMEOUT_MS "$@" "$ETCD_DRIVE" 2>"$T/$name.err" |
                sed -E 's/ ms=[0-9]+$//' >"$T/$name.out" ||
                fail "etcd-drive ($name) failed: $(cat "$T/$name.err")"
        [ ! -s "$T/$name.err" ] || fail "etcd-drive's stderr ($name): $(cat "$T/$name.err")"
}
# has NAME REGEX: a line of $T/NAME.out matches REGEX whole.
has() { grep -qxE -- "$2" "$T/$1.out"; }
TLS_ENV=(ETCD_CA_FILE="$ETCD_TLS_CA" ETCD_CERT_FILE="$ETCD_TLS_CERT" ETCD_KEY_FILE="$ETCD_TLS_KEY")

drive good "${TLS_ENV[@]}" <<EOS
put /tls/a one
get /tls/a
txn create:/tls/t:=:0 then put:/tls/t:v1 else get:/tls/t
txn create:/tls/t:=:0 then put:/tls/t:v2 else get:/tls/t
watch w prefix:/tls/w/
put /tls/w/1 a
wait w 1 $((10 * TIME_SCALE))
grant $((10 * TIME_SCALE))
put /tls/l x @lease
keepalive
get /tls/l
revoke
get /tls/l
EOS
assert_ok "put over TLS ($(head -n 1 "$T/good.out"))" has good 'ok rev=[0-9]+'
assert_ok "range over TLS" has good 'kv /tls/a one c=[0-9]+ m=[0-9]+ v=1 l=0'
assert_ok "txn over TLS: the success branch" has good 'txn succeeded=1 rev=[0-9]+ n=1'
assert_ok "txn over TLS: the failure branch" has good 'txn succeeded=0 rev=[0-9]+ n=1'
assert_ok "watch over TLS: created" has good 'watch w created rev=[0-9]+'
assert_ok "watch over TLS: its event" has good 'event w PUT /tls/w/1 a m=[0-9]+'
assert_ok "watch over TLS: waited" has good 'watch w done events=1'
assert_ok "lease granted over TLS" has good "lease id=[0-9]+ ttl=$((10 * TIME_SCALE))"
assert_ok "lease kept alive over TLS" has good "keepalive ttl=[1-9][0-9]*"
assert_ok "a key under the lease" has good 'kv /tls/l x c=[0-9]+ m=[0-9]+ v=1 l=[1-9][0-9]*'
assert_eq "$(grep -c '^error' "$T/good.out" || true)" 0 "errors of the client with the right files"
assert_ok "the lease revoked, its key is gone ($(tail -n 1 "$T/good.out"))" \
        grep -qxE 'ok rev=[0-9]+' <(tail -n 1 "$T/good.out")
assert_eq "$(grep -c '^kv /tls/l ' "$T/good.out")" 1 "the leased key read before the revocation only"
assert_eq "$(ectl get /tls/a --print-value-only)" one "etcdctl (TLS) reads what the client put"

# refused NAME WHY ETCD-SAYS [VAR=VALUE...]: every request of a client set up so fails at once
# (no timeout: ECONNRESET, ECONNREFUSED or EIO, never ETIMEDOUT) with an error of the TLS layer
# matching WHY (an extended regex), and etcd's log
# says ETCD-SAYS for each connection it rejected.
refused() {
        local name=$1 why=$2 says=$3 n before
        shift 3
        before=$(grep -c "rejected connection.*$says" "$T/etcd/m1.log" || true)
        drive "$name" "$@" <<EOS
put /tls/$name x
get /tls/a
txn create:/tls/$name:=:0 then put:/tls/$name:y
EOS
        n=$(grep -cE "^error E(CONNRESET|CONNREFUSED|IO) POST https://127.0.0.1:$PORT/etcdserverpb\.KV/[A-Za-z]*: .*($why)" \
                "$T/$name.out" || true)
        assert_eq "$n" 3 "requests refused $name, each saying /$why/ ($(paste -sd '|' "$T/$name.out"))"
        [ -z "$says" ] || wait_until $((10 * TIME_SCALE)) "etcd's log saying '$says' 3 times" \
                rejected_since "$before" "$says"
        [ -z "$says" ] || PASSED=$((PASSED + 1))
}
rejected_since() { [ "$(grep -c "rejected connection.*$2" "$T/etcd/m1.log")" -ge $(($1 + 3)) ]; }
# When etcd refuses the client's certificate (or its lack of one) it sends an alert and closes
# the connection, after TLS 1.3's handshake ended on the client's side: gnutls reports the
# alert when the client reads it (gnutls' name of bad_certificate, or of TLS 1.3's
# certificate_required), or the close when it sees that first: reading or writing on a
# connection etcd reset (gnutls' "Error in the pull/push function") or closed without TLS's
# close_notify ("non-properly terminated"). The request went out (ECONNRESET), or its record
# had not all left when the write failed (ECONNREFUSED: nothing sent). etcd's log names the reason, for each of the three.
REFUSED='etcd sent the alert "(Certificate is bad|Certificate is required)"|TLS: Error in the (pull|push) function|TLS: The TLS connection was non-properly terminated'
refused no-client-cert "$REFUSED" "tls: client didn't provide a certificate" \
        ETCD_CA_FILE="$ETCD_TLS_CA"
refused other-client-cert "$REFUSED" \
        "tls: failed to verify client certificate: x509: certificate signed by unknown authority" \
        ETCD_CA_FILE="$ETCD_TLS_CA" ETCD_CERT_FILE="$ETCD_TLS_OTHER_CERT" \
        ETCD_KEY_FILE="$ETCD_TLS_OTHER_KEY"
# The client trusts another CA: it refuses etcd's certificate itself, during the handshake.
UNTRUSTED="TLS: etcd's certificate: The certificate is NOT trusted. The certificate issuer is unknown."
refused wrong-ca "$UNTRUSTED" "" ETCD_CA_FILE="$ETCD_TLS_OTHER_CA" \
        ETCD_CERT_FILE="$ETCD_TLS_CERT" ETCD_KEY_FILE="$ETCD_TLS_KEY"
# No CA given: the system's trust store, which does not hold the test's CA.
refused system-store "$UNTRUSTED" ""
assert_eq "$(ectl get --prefix /tls/ --keys-only | grep -cE '^/tls/(no-client-cert|other-client-cert|wrong-ca|system-store)$' || true)" \
        0 "keys the refused clients tried to write"

# ---- 2. slotd --check ----

fleet_write_config 1
INI=$(fleet_dir 1)/etc/slotd.ini
cat >> "$INI" <<EOC
etcd_ca = $ETCD_TLS_CA
etcd_cert = $ETCD_TLS_CERT
etcd_key = $ETCD_TLS_KEY
EOC
# variant NAME SED-EXPRESSION: a copy of slotd.ini beside it (so the same fleets.d), edited.
variant() { sed -e "$2" "$INI" > "$(dirname "$INI")/$1.ini"; echo "$(dirname "$INI")/$1.ini"; }

out=$("$SLOTD" --check --config "$INI" 2>&1) || fail "--check refused the TLS configuration: $out"
assert_ok "--check shows the fleet layer with its TLS files ($out)" grep -qxF \
        "fleet layer: etcd $ETCD_ENDPOINTS, prefix $FLEET_PREFIX, lease_ttl ${FLEET_LEASE_TTL}s, registry as nobody; TLS: CA $ETCD_TLS_CA, client certificate $ETCD_TLS_CERT" \
        <<<"$out"
# check_refused NAME SED-EXPRESSION MESSAGE: --check of that variant fails, saying MESSAGE.
check_refused() {
        local ini out rc=0
        ini=$(variant "$1" "$2")
        out=$("$SLOTD" --check --config "$ini" 2>&1) || rc=$?
        assert_ok "--check fails for $1" test "$rc" -ne 0
        assert_ok "--check for $1 says: $3 (got: $out)" grep -qF -- "$3" <<<"$out"
}
check_refused no-key "/^etcd_key = /d" \
        "no-key.ini:$(grep -n '^etcd_cert = ' "$INI" | cut -d: -f1): fleet.etcd_cert: set without fleet.etcd_key: a client certificate and its key go together (set both, or neither)"
check_refused relative "s|^etcd_ca = .*|etcd_ca = tls/ca.crt|" \
        "fleet.etcd_ca: expected an absolute path (got 'tls/ca.crt')"
check_refused plain "s|^etcd_endpoints = https://|etcd_endpoints = http://|" \
        "fleet.etcd_ca: TLS to etcd needs https:// endpoints, but fleet.etcd_endpoints has http://127.0.0.1:$PORT"
check_refused root-key "s|^etcd_key = .*|etcd_key = $T/tls/root-only.key|" \
        "fleet.etcd_key: cannot read $T/tls/root-only.key as user nobody (uid 65534): Permission denied"
check_refused no-ca "s|^etcd_ca = .*|etcd_ca = $T/tls/none.crt|" \
        "fleet.etcd_ca: cannot read $T/tls/none.crt as user nobody (uid 65534): No such file or directory"

# ---- 3. slotd-registry ----

fleet_bus_start 1
fleet_slotd_start 1
fleet_wait_running 1
REG_LOG=$(fleet_dir 1)/registry.log
admin_gid=$(getent group "$FLEET_ADMIN_GROUP" | cut -d: -f3)
# registry_once CONFIG [AS-ROOT]: the registry with CONFIG, in the foreground, as nobody (or
# as root, to drop to fleet.registry_user itself): "STATUS OUTPUT".
registry_once() {
        local rc=0 out
        if [ -n "${2:-}" ]; then
                out=$(timeout $((20 * TIME_SCALE)) "$SLOTD_REGISTRY" --config "$1" \
                        --bus "$(fleet_bus 1)" 2>&1) || rc=$?
        else
                out=$(timeout $((20 * TIME_SCALE)) setpriv --reuid=nobody --regid=nogroup \
                        --groups="$admin_gid" "$SLOTD_REGISTRY" --config "$1" \
                        --bus "$(fleet_bus 1)" 2>&1) || rc=$?
        fi
        echo "$rc $out"
}
out=$(registry_once "$(variant root-key "s|^etcd_key = .*|etcd_key = $T/tls/root-only.key|")" root)
assert_eq "${out%% *}" 1 "the registry's exit status with a key its user cannot read ($out)"
assert_ok "it names the key, the file and the user ($out)" grep -qF \
        "fleet.etcd_key: cannot read $T/tls/root-only.key as user nobody (uid 65534): Permission denied" <<<"$out"
out=$(registry_once "$(variant no-ca "s|^etcd_ca = .*|etcd_ca = $T/tls/none.crt|")")
assert_eq "${out%% *}" 1 "the registry's exit status with a missing CA ($out)"
assert_ok "it names the key and the file ($out)" grep -qF \
        "fleet.etcd_ca: cannot read $T/tls/none.crt as user nobody (uid 65534): No such file or directory" <<<"$out"

# Trusting another CA: etcd's certificate refused, said once, nothing registered.
cp "$INI" "$T/slotd-good.ini"
variant wrong-ca "s|^etcd_ca = .*|etcd_ca = $ETCD_TLS_OTHER_CA|" >/dev/null
cp "$(dirname "$INI")/wrong-ca.ini" "$INI"
fleet_registry_start 1
wait_until $((10 * TIME_SCALE)) "the registry says etcd's certificate is not trusted" \
        grep -qF "$UNTRUSTED" "$REG_LOG"
assert_eq "$(fleet_etcd_count machines/)" 0 "machines registered through an untrusted etcd"
fleet_registry_kill 1

# The right files.
cp "$T/slotd-good.ini" "$INI"
fleet_registry_start 1
fleet_wait_registered 1
assert_eq "$(fleet_etcd_get "machines/$(fleet_machine_id 1)" | json machineID)" \
        "$(fleet_machine_id 1)" "the machine's document, written over TLS"
assert_ok "the registry said it registered ($(tail -n 3 "$REG_LOG"))" \
        grep -q "registered under lease" "$REG_LOG"

# ---- 4. slotd-allocator ----

fleet_token
# alloc_ini NAME [LINES OF [etcd]...]: an allocator.ini on a free port, TLS to etcd.
alloc_ini() {
        local name=$1 line
        shift
        ALLOC_PORT=$(free_port)
        {
                echo "[allocator]"
                echo "listen = 127.0.0.1:$ALLOC_PORT"
                echo "token_file = $T/fleet-token"
                echo "user = nobody"
                echo "[etcd]"
                echo "endpoints = $ETCD_ENDPOINTS"
                echo "prefix = $FLEET_PREFIX"
                for line in "$@"; do echo "$line"; done
        } > "$T/$name.ini"
}
TLS_INI=("ca_file = $ETCD_TLS_CA" "cert_file = $ETCD_TLS_CERT" "key_file = $ETCD_TLS_KEY")
# alloc_refused NAME MESSAGE [LINES OF [etcd]...]: --check refuses it with MESSAGE.
alloc_refused() {
        local name=$1 want=$2 out rc=0
        shift 2
        alloc_ini "$name" "$@"
        out=$("$SLOTD_ALLOCATOR" --config "$T/$name.ini" --check 2>&1) || rc=$?
        assert_eq "$rc" 2 "the allocator's --check status for $name ($out)"
        assert_ok "it says: $want (got: $out)" grep -qF -- "$want" <<<"$out"
}
alloc_refused a-no-key "a-no-key.ini:9: etcd.cert_file and etcd.key_file go together" \
        "ca_file = $ETCD_TLS_CA" "cert_file = $ETCD_TLS_CERT"
alloc_refused a-relative "a-relative.ini:8: etcd.ca_file: expected an absolute path (got 'ca.crt')" \
        "ca_file = ca.crt"
ETCD_ENDPOINTS_SAVED=$ETCD_ENDPOINTS
ETCD_ENDPOINTS=http://127.0.0.1:$PORT
alloc_refused a-plain "a-plain.ini:8: etcd.ca_file: TLS to etcd needs https:// endpoints, but etcd.endpoints has http://127.0.0.1:$PORT" \
        "${TLS_INI[@]}"
ETCD_ENDPOINTS=$ETCD_ENDPOINTS_SAVED
alloc_ini a-ok "${TLS_INI[@]}"
assert_ok "the allocator's --check takes the TLS keys" "$SLOTD_ALLOCATOR" --config "$T/a-ok.ini" --check

# Started as root, it drops to allocator.user before it checks: nobody cannot read the key.
alloc_ini a-root-key "ca_file = $ETCD_TLS_CA" "cert_file = $ETCD_TLS_CERT" \
        "key_file = $T/tls/root-only.key"
rc=0
out=$(timeout $((20 * TIME_SCALE)) "$SLOTD_ALLOCATOR" --config "$T/a-root-key.ini" 2>&1) || rc=$?
assert_eq "$rc" 1 "the allocator's exit status with a key its user cannot read ($out)"
assert_ok "it names the key, the file and the user ($out)" grep -qF \
        "etcd.key_file: cannot read $T/tls/root-only.key as user nobody (uid 65534): Permission denied" <<<"$out"

# The allocator over TLS: it reads the fleet view, claims, the registry (over TLS) confirms.
alloc_ini a-run "${TLS_INI[@]}"
FA_PORT[1]=$ALLOC_PORT
SLOTD_LOG_LEVEL=debug in_cgroup "$CG/alloc-1" setpriv --reuid=nobody --regid=nogroup \
        --clear-groups "$SLOTD_ALLOCATOR" --config "$T/a-run.ini" >>"$T/allocator-1.log" 2>&1 &
FA_PID[1]=$!
wait_until $((10 * TIME_SCALE)) "the allocator listening" fleet_allocator_up 1
wait_until $((10 * TIME_SCALE)) "the allocator has read the fleet view over TLS" fleet_allocator_ready 1
U=$(cat /proc/sys/kernel/random/uuid)
out=$(fleet_post 1 "$(fleet_allocations)" \
        "{\"allocationId\":\"$U\",\"buildConfigurationId\":$FLEET_BUILD_CONFIGURATION}")
assert_eq "${out%% *}" 200 "POST of an allocation ($out)"
fulfilled() { [ "$(fleet_get 1 "$(fleet_allocations)/$U" | cut -d' ' -f2- | json status)" = fulfilled ]; }
wait_until $((20 * TIME_SCALE)) "the allocation fulfilled by the registry" fulfilled
out=$(fleet_get 1 "$(fleet_allocations)/$U")
slot=$(cut -d' ' -f2- <<<"$out" | json serverId)
assert_eq "$(on_host 1 sprop "$slot" AllocationUUID)" "$U" "slotd's slot holds the allocation"
assert_eq "$(cut -d' ' -f2- <<<"$out" | json gamePort)" "$(on_host 1 sprop "$slot" Port)" \
        "the allocation's game port"
assert_eq "$(fleet_delete 1 "$(fleet_allocations)/$U" | cut -d' ' -f1)" 204 "DELETE of the allocation"
deallocated() { [ -z "$(on_host 1 sprop "$slot" AllocationUUID)" ]; }
wait_until $((20 * TIME_SCALE)) "slotd deallocated the slot" deallocated

finish
