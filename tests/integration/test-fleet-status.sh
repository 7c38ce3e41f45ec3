#!/usr/bin/env bash
# The allocator's fleet status page (issue 27 point 4; SPEC §13, GET /): three real hosts of
# fleet-lib.sh (slotd, slotd-registry; 3 slots each), etcd, one allocator replica. After a few
# allocations, and a machine document with faults written by hand (strings with HTML in them,
# for the escaping), the page is checked twice: with curl (Content-Type text/html;
# charset=utf-8, 401 without the bearer token, no URL to another host in the HTML), and loaded
# in Debian's headless Chromium through a relay that adds the token (auth_relay.py), with every
# host name but 127.0.0.1 unresolvable and a net log of every request it made: the page
# renders, made no request but its own, and its DOM (status_page.py) shows what the API does:
# the machines of the view (the metric slotd_allocator_cache_machines), a row per host, the
# fleet's allocated count equal to the capacity view's and to the list API's fulfilled
# allocations, the faults of the machine document, the allocation rate. Host-only: Chromium
# is too slow in the TCG VM.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"
[ -z "${SLOTD_VM:-}" ] || skip "headless Chromium is too slow in the TCG VM; the test runs on the host"
[ -n "${SLOTD_REGISTRY:-}" ] && [ -x "$SLOTD_REGISTRY" ] || skip "slotd-registry is not built"
[ -n "${SLOTD_ALLOCATOR:-}" ] && [ -x "$SLOTD_ALLOCATOR" ] || skip "slotd-allocator is not built"
command -v etcdctl >/dev/null || skip "etcdctl is not installed (Debian's etcd-client)"
command -v chromium >/dev/null || skip "chromium is not installed (Debian's chromium)"
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH
HERE=$(cd "$(dirname "$0")" && pwd)

FLEET_SLOTS=3
. "$(dirname "$0")/fleet-lib.sh"

# chromium_dump URL: the DOM Chromium made of URL (headless, its own profile under $T), with no
# host name resolvable but 127.0.0.1 and its requests logged to $T/netlog.json.
chromium_dump() {
        rm -rf "$T/chromium-profile" "$T/netlog.json"
        timeout $((60 * TIME_SCALE)) chromium --headless --disable-gpu --no-sandbox \
                --no-first-run --disable-extensions --disable-background-networking \
                --disable-component-update --disable-sync --disable-default-apps \
                --user-data-dir="$T/chromium-profile" \
                --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1" \
                --log-net-log="$T/netlog.json" --net-log-capture-mode=Default \
                --dump-dom "$1" 2>>"$T/chromium.log"
}
# Chromium must run here at all: a page of its own, without the network.
probe=$(chromium_dump "data:text/html,<p id=probe>ok</p>") || true
grep -q '<p id="probe">ok</p>' <<<"$probe" ||
        skip "headless chromium does not run here: $(tail -n 3 "$T/chromium.log" | tr '\n' ' ')"

etcd_cluster_start 1
for k in 1 2 3; do
        fleet_write_config "$k"
        fleet_host_start "$k"
done
fleet_wait_registered 1 2 3
fleet_allocator_start 1
COLL=$(fleet_allocations)
CAP="/v1/fleets/$FLEET_NAME/capacity"

# A machine without a host, draining, with faults whose text is HTML: shown, escaped.
ODD=0123456789abcdef0123456789abcdef
FAULT1='<b>slots_dir</b> & "full"'
FAULT2="<script>alert('x')</script>"
fleet_etcdctl put "$FLEET_PREFIX/machines/$ODD" "$(jq -cn --arg id "$ODD" --arg f1 "$FAULT1" \
        --arg f2 "$FAULT2" '{machineID: $id, ipv4: "192.0.2.99", ipv6: "", fleets: [],
        regions: [], draining: true, idleSince: "", holdUntil: "", deprovisionable: false,
        idleTtlSec: 1800, slots: 0, faults: [$f1, $f2], slotd: "test", registeredAt: ""}')" \
        >/dev/null

# Every host's servers running, in the view too (9), then 4 allocations.
fleet_wait_running 1 2 3
running_is() {
        [ "$(fleet_get 1 "$CAP" | cut -d' ' -f2- | jq -r '.total.processStates.running // 0')" = "$1" ]
}
wait_until $((30 * TIME_SCALE)) "9 servers running in the capacity view" running_is 9
first_post=$(date +%s)
for i in 1 2 3 4; do
        u=$(cat /proc/sys/kernel/random/uuid)
        out=$(fleet_post 1 "$COLL" "{\"allocationId\":\"$u\",\"buildConfigurationId\":$FLEET_BUILD_CONFIGURATION}")
        case ${out%% *} in 200|201|202) ;; *) fail "allocation $i: $out" ;; esac
done
allocated_is() {
        [ "$(fleet_get 1 "$CAP" | cut -d' ' -f2- | jq -r '.total.states.allocated // 0')" = "$1" ]
}
wait_until $((30 * TIME_SCALE)) "4 slots allocated in the capacity view" allocated_is 4
machines_known() { curl -s "$(fleet_url 1 /metrics)" | grep -qx 'slotd_allocator_cache_machines 4'; }
wait_until $((10 * TIME_SCALE)) "the odd machine in the view" machines_known

# ---- curl: the type, the token, no URL ----
hdr=$(curl -sS -m 10 -D - -o "$T/page.html" -H "Authorization: Bearer $FLEET_TOKEN" "$(fleet_url 1 /)")
assert_eq "$(head -n1 <<<"$hdr" | cut -d' ' -f2)" 200 "GET / with the token"
assert_eq "$(grep -i '^content-type:' <<<"$hdr" | cut -d' ' -f2- | tr -d '\r')" \
        "text/html; charset=utf-8" "GET /'s Content-Type"
assert_eq "$(head -c 16 "$T/page.html")" "<!DOCTYPE html>" "the page's first line"
assert_eq "$(curl -s -o /dev/null -w '%{http_code}' "$(fleet_url 1 /)")" 401 "GET / without the token"
assert_eq "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer nope' "$(fleet_url 1 /)")" \
        401 "GET / with a wrong token"
assert_eq "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $FLEET_TOKEN" \
        "$(fleet_url 1 /)")" 405 "POST /"
links=$(grep -Eio '(src|href|action)=|https?:|//[a-z0-9]|url\(|@import' "$T/page.html" || true)
assert_eq "$links" "" "URLs in the page"
grep -q '<script' "$T/page.html" && fail "a script in the page"
grep -qF '&lt;b&gt;slots_dir&lt;/b&gt; &amp; &quot;full&quot;' "$T/page.html" ||
        fail "the first fault is not shown escaped: $(grep -o 'class="faulty".*' "$T/page.html")"
grep -qF "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" "$T/page.html" ||
        fail "the second fault is not shown escaped"

# ---- Chromium, through a relay that adds the token ----
RELAY_PORT=$(free_port)
python3 "$HERE/auth_relay.py" "$RELAY_PORT" "$(fleet_url 1)" "$T/fleet-token" \
        >"$T/relay.out" 2>>"$T/relay.log" &
RELAY_PID=$!
BG_PIDS+=("$RELAY_PID")
wait_until $((10 * TIME_SCALE)) "the relay listening" grep -qx ready "$T/relay.out"
PAGE_URL="http://127.0.0.1:$RELAY_PORT/"
chromium_dump "$PAGE_URL" > "$T/dom.html" || fail "chromium failed: $(tail -n 5 "$T/chromium.log")"
python3 "$HERE/status_page.py" < "$T/dom.html" > "$T/dom.txt"
field() { awk -v k="$1" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }' "$T/dom.txt"; }
fleet_count() { # fleet_count NAME KEY
        awk -v f="$1" -v k="$2" '$1 == "fleet" && $2 == f { for (i = 3; i <= NF; i++) {
                split($i, kv, "="); if (kv[1] == k) print kv[2] } }' "$T/dom.txt"
}
[ -s "$T/dom.txt" ] && grep -q '</html>' "$T/dom.html" || fail "chromium rendered no page"
assert_eq "$(grep -c '^external' "$T/dom.txt")" 0 "outside references in the DOM: $(grep '^external' "$T/dom.txt")"
assert_eq "$(field ready)" yes "the page's fleet view ready"
assert_eq "$(field machines)" "$(curl -s "$(fleet_url 1 /metrics)" | awk '$1 == "slotd_allocator_cache_machines" { print $2 }')" \
        "the page's machines against the metric"
assert_eq "$(field machines)" 4 "the page's machines"
assert_eq "$(field rows)" 3 "machine rows (the hosts with slots)"
assert_eq "$(field strip)" 9 "slot cells"
cap=$(fleet_get 1 "$CAP" | cut -d' ' -f2-)
assert_eq "$(fleet_count "$FLEET_NAME" allocated)" "$(jq -r '.total.states.allocated' <<<"$cap")" \
        "the fleet's allocated count against the capacity view"
assert_eq "$(fleet_count "$FLEET_NAME" available)" "$(jq -r '.total.states.available' <<<"$cap")" \
        "the fleet's available count against the capacity view"
assert_eq "$(fleet_count "$FLEET_NAME" machines)" "$(jq -r '.total.machines' <<<"$cap")" \
        "the fleet's machines against the capacity view"
listed=$(fleet_get 1 "$COLL?status=fulfilled" | cut -d' ' -f2- | jq '.allocations | length')
assert_eq "$(fleet_count "$FLEET_NAME" allocated)" "$listed" \
        "the fleet's allocated count against the list API's fulfilled allocations"
assert_eq "$(fleet_count "$FLEET_NAME" allocated)" 4 "the fleet's allocated count"
assert_eq "$(field faulty)" "$ODD draining|$FAULT1|$FAULT2" \
        "the faulty machine (draining) and its faults as shown"
rate=$(field rate)
if [ $(($(date +%s) - first_post)) -lt 55 ]; then
        assert_eq "$rate" 4 "allocations in the last minute"
else
        [ "$rate" -le 4 ] || fail "allocations in the last minute: $rate > 4"
fi
made=$(field made)
[[ "$made" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$ ]] ||
        fail "the page's time is not RFC 3339: '$made'"

# Every request Chromium made (its net log): the page's own (its navigation, Chromium's
# favicon.ico) and none that the page made elsewhere. The browser's own requests (its update
# and time checks, which the resolver rules fail) name no origin as their initiator.
python3 "$HERE/status_page.py" --netlog "$T/netlog.json" > "$T/requests.txt"
ORIGIN="http://127.0.0.1:$RELAY_PORT"
grep -qx "not_an_origin $PAGE_URL" "$T/requests.txt" || fail "the net log has no request of the page: $(cat "$T/requests.txt")"
others=$(awk -v o="$ORIGIN" '$1 == o && index($2, o "/") != 1' "$T/requests.txt")
assert_eq "$others" "" "requests the page made to other hosts"
echo "status page: $(wc -c < "$T/page.html") bytes; $(tr '\n' ';' < "$T/dom.txt")"
finish
