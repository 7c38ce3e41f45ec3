# SPDX-License-Identifier: MIT
# A private etcd cluster on free loopback ports (issue 15), sourced after lib.sh. Never the
# default ports 2379/2380: the kernel picks free ones (tests run in parallel).
#
#   etcd_cluster_start N   starts members 1..N (data in $T/etcd/mI), waits until every one is
#                          healthy, exports ETCD_ENDPOINTS ("http://127.0.0.1:P1,...") and sets
#                          ETCD_CLIENT_PORT[i], ETCD_PEER_PORT[i], ETCD_PID[i] (i = 1..N).
#   etcd_kill I [SIGNAL]   SIGKILLs member I (or sends SIGNAL) and reaps it.
#   etcd_start_member I    restarts member I on its data and ports; etcd_wait_member I waits
#                          until it answers, etcd_wait_healthy I...  until they have a leader.
#   ectl ARGS...           etcdctl (v3) against the cluster.
#   etcd_tls_init          called before etcd_cluster_start: the cluster then speaks TLS to its
#                          clients and asks each for a certificate of its CA (see there).
#
# lib.sh's cleanup SIGKILLs every member (the hook is registered by the first
# etcd_cluster_start, so it runs after the hooks of harnesses sourced before: their processes
# stop before the store does) and $T goes with the data.
#
# Benchmarks may set SLOTD_ETCD_NO_FSYNC=1 (--unsafe-no-fsync); fault tests must not: a
# member killed must lose nothing it acknowledged. Timings scale with TIME_SCALE (lib.sh).

ETCD_BIN=${ETCD_BIN:-/usr/bin/etcd}
[ -x "$ETCD_BIN" ] || skip "etcd not installed ($ETCD_BIN; Debian's etcd-server)"
command -v curl >/dev/null || skip "curl is not installed"

ETCD_N=0
ETCD_CLIENT_PORT=()
ETCD_PEER_PORT=()
ETCD_PID=()
ETCD_CLUSTER=
ETCD_HOOKED=
# etcd_tls_init sets these: the scheme of client URLs, etcd's flags, and the client side's
# arguments for etcdctl and curl.
ETCD_SCHEME=http
ETCD_TLS_FLAGS=()
ETCDCTL_TLS=()
ETCD_CURL_TLS=()

ectl() { ETCDCTL_API=3 etcdctl --endpoints="$ETCD_ENDPOINTS" --command-timeout=$((3 * TIME_SCALE))s "${ETCDCTL_TLS[@]}" "$@"; }

# A member's client URL; peers always speak plain HTTP (loopback only).
etcd_url() { echo "$ETCD_SCHEME://127.0.0.1:$1"; }
etcd_peer_url() { echo "http://127.0.0.1:$1"; }

# etcd_tls_init: TLS between the cluster and its clients, client certificates required
# (--client-cert-auth, as production etcd runs). openssl makes, in $T/tls, a CA (ca.crt,
# ETCD_TLS_CA), etcd's certificate for 127.0.0.1 (subjectAltName IP:127.0.0.1, and the names
# test-etcd-names.sh gives that address in its own /etc/hosts; serverAuth and
# clientAuth, since etcd's JSON gateway dials its own gRPC port with it), a client certificate
# and key (ETCD_TLS_CERT, ETCD_TLS_KEY), another CA (ETCD_TLS_OTHER_CA) and a client
# certificate of that one (ETCD_TLS_OTHER_CERT, ETCD_TLS_OTHER_KEY). Keys are mode 0644: the
# registry and the allocator run as nobody in the tests. etcdctl (ectl) and the health checks
# use the CA and the client certificate.
etcd_tls_init() {
        local d=$T/tls
        command -v openssl >/dev/null || skip "openssl is not installed"
        [ "$ETCD_N" -eq 0 ] || fail "etcd_tls_init: a cluster is already running"
        mkdir -p "$d"
        cat > "$d/openssl.cnf" <<'EOC'
[req]
distinguished_name = dn
x509_extensions = ca
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = IP:127.0.0.1, DNS:etcd.slotd-test, DNS:etcd-two.slotd-test
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
EOC
        etcd_tls_ca ca "slotd test etcd CA"
        etcd_tls_ca other-ca "slotd test other CA"
        etcd_tls_leaf server ca 127.0.0.1 server
        etcd_tls_leaf client ca slotd-client client
        etcd_tls_leaf other-client other-ca slotd-other-client client
        chmod 644 "$d"/*.key
        ETCD_TLS_CA=$d/ca.crt ETCD_TLS_CERT=$d/client.crt ETCD_TLS_KEY=$d/client.key
        ETCD_TLS_OTHER_CA=$d/other-ca.crt
        ETCD_TLS_OTHER_CERT=$d/other-client.crt ETCD_TLS_OTHER_KEY=$d/other-client.key
        ETCD_SCHEME=https
        ETCD_TLS_FLAGS=(--cert-file "$d/server.crt" --key-file "$d/server.key"
                        --trusted-ca-file "$ETCD_TLS_CA" --client-cert-auth)
        ETCDCTL_TLS=(--cacert "$ETCD_TLS_CA" --cert "$ETCD_TLS_CERT" --key "$ETCD_TLS_KEY")
        ETCD_CURL_TLS=(--cacert "$ETCD_TLS_CA" --cert "$ETCD_TLS_CERT" --key "$ETCD_TLS_KEY")
}
# etcd_tls_ca NAME CN: a self-signed CA, $T/tls/NAME.crt and .key (P-256).
etcd_tls_ca() {
        openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
                -subj "/CN=$2" -config "$T/tls/openssl.cnf" -keyout "$T/tls/$1.key" \
                -out "$T/tls/$1.crt" 2>"$T/tls/$1.err" || fail "openssl: $(cat "$T/tls/$1.err")"
}
# etcd_tls_leaf NAME CA CN EXTENSIONS: $T/tls/NAME.crt and .key, signed by CA.
etcd_tls_leaf() {
        local d=$T/tls
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$3" \
                -config "$d/openssl.cnf" -keyout "$d/$1.key" -out "$d/$1.csr" 2>"$d/$1.err" &&
        openssl x509 -req -in "$d/$1.csr" -CA "$d/$2.crt" -CAkey "$d/$2.key" -days 2 \
                -set_serial "0x$(openssl rand -hex 8)" -extfile "$d/openssl.cnf" -extensions "$4" \
                -out "$d/$1.crt" 2>>"$d/$1.err" || fail "openssl: $(cat "$d/$1.err")"
}

# etcd_start_member I: member I on its ports, data dir and log; the initial-cluster flags
# matter only while the data dir is empty.
etcd_start_member() {
        local i=$1 extra=() clean=() v
        [ -n "${SLOTD_ETCD_NO_FSYNC:-}" ] && extra+=(--unsafe-no-fsync)
        # The write buffer's bound that docs/fleet.md recommends ("etcd for the fleet");
        # SLOTD_ETCD_BATCH_LIMIT=default leaves etcd's own (tests/bench/etcd-batch-limit).
        v=${SLOTD_ETCD_BATCH_LIMIT:-500}
        [ "$v" = default ] || extra+=(--backend-batch-limit="$v")
        # more flags for every member (benchmarks: profiling)
        [ -n "${SLOTD_ETCD_FLAGS:-}" ] && read -ra v <<<"$SLOTD_ETCD_FLAGS" && extra+=("${v[@]}")
        # etcd takes every ETCD_* variable of its environment as a flag (and refuses one that
        # a flag shadows): ours (ETCD_ENDPOINTS, ETCD_DRIVE...) are not for it.
        for v in $(compgen -e | grep '^ETCD_' || true); do clean+=(-u "$v"); done
        mkdir -p "$T/etcd"
        # Raft's timers scaled for the TCG VM (10x slower): a heartbeat missed there must not
        # be an election.
        env "${clean[@]}" "$ETCD_BIN" --name "m$i" --data-dir "$T/etcd/m$i" \
                --listen-client-urls "$(etcd_url "${ETCD_CLIENT_PORT[i]}")" \
                --advertise-client-urls "$(etcd_url "${ETCD_CLIENT_PORT[i]}")" \
                --listen-peer-urls "$(etcd_peer_url "${ETCD_PEER_PORT[i]}")" \
                --initial-advertise-peer-urls "$(etcd_peer_url "${ETCD_PEER_PORT[i]}")" \
                --initial-cluster "$ETCD_CLUSTER" --initial-cluster-state new \
                --initial-cluster-token "slotd-it-$$" \
                --heartbeat-interval $((100 * TIME_SCALE)) \
                --election-timeout $((1000 * TIME_SCALE)) \
                --logger zap --log-level warn --log-outputs stderr \
                "${ETCD_TLS_FLAGS[@]}" "${extra[@]}" >>"$T/etcd/m$i.log" 2>&1 &
        ETCD_PID[i]=$!
}

etcd_answers() { curl -sf -m 2 "${ETCD_CURL_TLS[@]}" "$(etcd_url "${ETCD_CLIENT_PORT[$1]}")/version" >/dev/null; }
etcd_healthy() {
        kill -0 "${ETCD_PID[$1]}" 2>/dev/null || fail "etcd member $1 exited: $(tail -n 5 "$T/etcd/m$1.log")"
        curl -sf -m 2 "${ETCD_CURL_TLS[@]}" "$(etcd_url "${ETCD_CLIENT_PORT[$1]}")/health" | grep -q '"health":"true"'
}

etcd_wait_member() {
        wait_until $((20 * TIME_SCALE)) "etcd member $1 answers" etcd_answers "$1"
}
etcd_wait_healthy() {
        local i
        for i in "$@"; do
                wait_until $((30 * TIME_SCALE)) "etcd member $i healthy" etcd_healthy "$i"
        done
}

etcd_kill() {
        local i=$1 sig=${2:-KILL}
        [ -n "${ETCD_PID[i]:-}" ] || fail "etcd member $i is not running"
        kill -"$sig" "${ETCD_PID[i]}"
        # A SIGSTOP wakes one of etcd's threads, which then stops the others: until it has
        # run, the others go on serving (seen on a loaded host: a claim committed after the
        # kill). Frozen means every thread stopped.
        [ "$sig" != STOP ] ||
                wait_until $((10 * TIME_SCALE)) "etcd member $i stopped by SIGSTOP" \
                        all_threads_stopped "${ETCD_PID[i]}"
        if [ "$sig" = KILL ] || [ "$sig" = TERM ]; then
                wait "${ETCD_PID[i]}" 2>/dev/null || true
                ETCD_PID[i]=
        fi
}

# Distinct free ports for every member (a port the kernel handed out twice would fail the
# member's bind).
etcd_pick_ports() {
        local n=$1 p i seen=" "
        for ((i = 1; i <= n; i++)); do
                for which in client peer; do
                        p=$(free_port)
                        while [[ $seen == *" $p "* ]]; do p=$(free_port); done
                        seen+="$p "
                        if [ $which = client ]; then ETCD_CLIENT_PORT[i]=$p; else ETCD_PEER_PORT[i]=$p; fi
                done
        done
}

etcd_cluster_start() {
        local n=${1:-1} i endpoints=()
        [ "$ETCD_N" -eq 0 ] || fail "etcd_cluster_start: a cluster is already running"
        if [ -z "$ETCD_HOOKED" ]; then
                CLEANUP_HOOKS+=(etcd_cleanup)
                ETCD_HOOKED=1
        fi
        etcd_pick_ports "$n"
        ETCD_CLUSTER=
        for ((i = 1; i <= n; i++)); do
                ETCD_CLUSTER+="${ETCD_CLUSTER:+,}m$i=$(etcd_peer_url "${ETCD_PEER_PORT[i]}")"
                endpoints+=("$(etcd_url "${ETCD_CLIENT_PORT[i]}")")
        done
        ETCD_N=$n
        for ((i = 1; i <= n; i++)); do etcd_start_member "$i"; done
        for ((i = 1; i <= n; i++)); do etcd_wait_healthy "$i"; done
        ETCD_ENDPOINTS=$(IFS=,; echo "${endpoints[*]}")
        export ETCD_ENDPOINTS
        note "etcd: $n member(s) at $ETCD_ENDPOINTS"
}

# etcd_leader: the index of the member that leads now (fails when none answers).
etcd_leader() {
        ectl endpoint status -w json 2>/dev/null | py_in '
import json, sys
eps = sys.argv[1].split(",")
for s in json.load(sys.stdin):
    if s["Status"]["header"]["member_id"] == s["Status"]["leader"]:
        print(eps.index(s["Endpoint"]) + 1)
        break
else:
    sys.exit(1)' "$ETCD_ENDPOINTS"
}
# etcd_make_leader I: moves the leadership to member I (a no-op when it leads), so that a test
# can kill a member that is not the leader (no election) or one that is.
etcd_make_leader() {
        local i=$1 id
        id=$(ETCDCTL_API=3 etcdctl --endpoints="$(etcd_url "${ETCD_CLIENT_PORT[i]}")" \
                "${ETCDCTL_TLS[@]}" endpoint status -w json | py_in '
import json, sys; print("%x" % json.load(sys.stdin)[0]["Status"]["header"]["member_id"])')
        [ "$(etcd_leader)" = "$i" ] || ectl move-leader "$id" >/dev/null ||
                fail "could not move etcd's leadership to member $i"
        wait_until $((10 * TIME_SCALE)) "etcd member $i leads" etcd_leader_is "$i"
}
etcd_leader_is() { [ "$(etcd_leader)" = "$1" ]; }

# The cleanup hook: every member SIGKILLed (a member stopped with SIGSTOP too) and reaped, so
# its ports are free when the test ends.
etcd_cleanup() {
        local i
        for ((i = 1; i <= ETCD_N; i++)); do
                [ -n "${ETCD_PID[i]:-}" ] || continue
                kill -KILL "${ETCD_PID[i]}" 2>/dev/null
                wait "${ETCD_PID[i]}" 2>/dev/null
                ETCD_PID[i]=
        done
        return 0
}
