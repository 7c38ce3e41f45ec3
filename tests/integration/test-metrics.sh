#!/usr/bin/env bash
# slotd's metrics (SPEC §14) scraped by Debian's real Prometheus server and read back through
# its HTTP API. metrics.listen is served by slotd-proxy, unprivileged, also with the local
# proxy off; only GET /metrics is served. Allocations (ok and refused), a deallocation, a
# reservation, query strikes ending in a misbehaviour crash, a crash of its own, restarts,
# sweeps, the latency of granted requests on both doors, and the bus fault while the bus is
# gone (the text does not need the bus); the proxy killed and restarted.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/prometheus-lib.sh"
SIGS="$T/signals.json"

MPORT=$(free_port)
MURL=http://127.0.0.1:$MPORT
IV=$((1000 * TIME_SCALE))
METRICS_LISTEN=127.0.0.1:$MPORT MACHINE_CPUS=4 write_config
# Slot 0 stops answering queries (strikes, then the misbehaviour crash), slot 1 crashes by
# itself, slot 2 is allocated.
USAGE_CPU=1 USAGE_MEMORY=64M write_fleet game "servers = 3" \
        "[ports]" "game_base = 33300" "query_base = 33350" \
        "[checks]" "interval = ${IV}ms" "query = sqp" "query_timeout = $((500 * TIME_SCALE))ms" \
        "strikes = 3" "window = 10m" "[crash]" "restarts = 5" "window = 10m"
# A second fleet, idle: its own series, and a text over one 16 KiB part of the channel.
USAGE_CPU=1 USAGE_MEMORY=64M write_fleet idle "servers = 1" \
        "[ports]" "game_base = 33400" "query_base = 33450"
"$SLOTD" --check --config "$T/etc/slotd.ini" > "$T/check.out" 2>&1 || fail "--check: $(cat "$T/check.out")"
assert_ok "--check shows metrics.listen" grep -qx "metrics: 127.0.0.1:$MPORT" "$T/check.out"
start_slotd
start_monitor "$SIGS"
for id in 0 1 2 3; do
        wait_prop $id ProcessState running
        wait_server $id
done

# metrics_status PATH [CURL ARGS...]: the status of a request to metrics.listen.
metrics_status() { curl -s -o /dev/null -w '%{http_code}' --max-time 10 "${@:2}" "$MURL$1"; }
proxy_pid() { pgrep -P "$SLOTD_PID" -x slotd-proxy; }

# ---- 1. The proxy runs for metrics.listen alone, unprivileged; GET /metrics only ----
assert_ok "log: the proxy started for metrics only" grep -q \
        "Local proxy started as process [0-9]* on 0 addresses, metrics on 127.0.0.1:$MPORT" \
        "$T/slotd.log"
P=$(proxy_pid)
assert_eq "$(awk '/^Uid:/ { print $2 "/" $3 }' "/proc/$P/status")" "$(id -u nobody)/$(id -u nobody)" \
        "slotd-proxy's uid (real/effective)"
assert_eq "$(awk '/^CapEff:/ { print $2 }' "/proc/$P/status")" 0000000000000000 \
        "slotd-proxy's effective capabilities"
# (A function: wait_until runs its command again each time, a $(...) argument would be read
# once.)
scrape_ok() { [ "$(metrics_status /metrics)" = 200 ]; }
wait_until 20 "GET /metrics answered" scrape_ok
assert_eq "$(curl -s -o /dev/null -w '%{content_type}' "$MURL/metrics")" \
        "text/plain; version=0.0.4; charset=utf-8" "Content-Type of /metrics"
assert_eq "$(metrics_status /)" 404 "GET /"
assert_eq "$(metrics_status /metrics -X POST -d x)" 404 "POST /metrics"
assert_eq "$(metrics_status /metrics -X DELETE)" 404 "DELETE /metrics"
assert_eq "$(metrics_status /metric%73)" 404 "GET /metric%73"
assert_eq "$(metrics_status /v1/servers/0/hold)" 404 "the local proxy's routes"
curl -s "$MURL/metrics" > "$T/metrics.txt"
note "the text: $(wc -c < "$T/metrics.txt") bytes, $(wc -l < "$T/metrics.txt") lines (two fleets)"
assert_ok "the text came in more than one part (16 KiB)" test "$(wc -c < "$T/metrics.txt")" -gt 16384
assert_eq "$(tail -n 1 "$T/metrics.txt")" 'slotd_fault_active{fault="fork"} 0' \
        "the text's last line (the last part's)"
# Prometheus' own linter on the text as served.
if command -v promtool >/dev/null; then
        promtool check metrics < "$T/metrics.txt" > "$T/promtool.out" 2>&1 ||
                fail "promtool check metrics: $(cat "$T/promtool.out")"
        assert_eq "$(cat "$T/promtool.out")" "" "promtool's complaints"
fi
assert_ok "every slot counted" grep -q \
        '^slotd_slots{fleet="game",state="online",process_state="running"} 3$' "$T/metrics.txt"
# A flood: 200 scrapes, 4 at a time. The first 20 (the burst) are answered, then 10 a second;
# the rest get 429, nothing else. (200 scrapes in under 18 s, even in the VM.) The scrapes above
# took tokens of the burst, and a fast host floods before they grew back: the bucket refills
# at 10 a second, so 2 s without a scrape fill it again, whatever the host's speed (a wait on
# the rate's own clock, not on an event).
urls=()
for i in $(seq 200); do urls+=(-o /dev/null "$MURL/metrics"); done
sleep 2
curl -s --no-progress-meter -Z --parallel-max 4 --max-time 60 -w '%{http_code}\n' "${urls[@]}" \
        > "$T/flood.out" 2>/dev/null || true
note "flood: $(sort "$T/flood.out" | uniq -c | paste -sd' ')"
assert_eq "$(grep -cvE '^(200|429)$' "$T/flood.out")" 0 "answers other than 200 and 429"
assert_ok "at least the burst of 20 answered" test "$(grep -c '^200$' "$T/flood.out")" -ge 20
assert_ok "scrapes over the rate refused" test "$(grep -c '^429$' "$T/flood.out")" -ge 1
wait_until 20 "GET /metrics answered after the flood" scrape_ok

# A Reload that leaves metrics.listen as it is leaves the listener and the proxy alone (one
# that moves it: test-metrics-reload).
mcall Reload >/dev/null
assert_eq "$(proxy_pid)" "$P" "the proxy after a Reload"
assert_eq "$(grep -c "metrics.listen: " "$T/slotd.log")" 0 "metrics.listen moves in the log"
wait_until 20 "GET /metrics answered after the Reload" scrape_ok

# With the shipped rules (config/prometheus/), evaluated on slotd's real series.
PROM_RULES=$(cd "$(dirname "$0")/../../config/prometheus" && pwd)/slotd.rules.yml prom_start "127.0.0.1:$MPORT"
wait_until $((30 * TIME_SCALE)) "prometheus scraped slotd" prom_targets_up
prom_wait_value 'sum(slotd_slots{fleet="game"})' 3
prom_wait_value 'slotd_slots{fleet="game",state="online",process_state="running"}' 3
prom_wait_value 'slotd_info{machine_id="0123456789abcdef0123456789abcdef"}' 1
prom_wait_value 'slotd_slots{fleet="idle",state="online",process_state="running"}' 1
prom_wait_value 'count(slotd_slots{fleet="idle"})' $((5 * 5))
prom_wait_value 'slotd_faults_active' 0

# ---- 2. Allocations, granted and refused, a deallocation, a reservation ----
scall 2 Allocate ss m-1 "" >/dev/null
assert_eq "$(sprop 2 State)" allocated "slot 2 allocated through the Slot door"
assert_eq "$(allocate game m-1)" 2 "Manager.Allocate of the same UUID again"
expect_merr InvalidArgument Allocate string:nosuch string:m-x string:
expect_merr InvalidArgument Allocate string:game "string:bad uuid" string:
mcall SetDraining b true >/dev/null
expect_merr Draining Allocate string:game string:m-2 string:
mcall SetDraining b false >/dev/null
prom_wait_value 'sum(slotd_slots{fleet="game",state="allocated"})' 1
prom_wait_value 'slotd_slots{fleet="game",state="allocated",process_state="running"}' 1
prom_wait_value 'slotd_allocations_total{fleet="game",result="ok"}' 2
prom_wait_value 'slotd_allocations_total{fleet="game",result="InvalidArgument"}' 1
prom_wait_value 'slotd_allocations_total{fleet="game",result="Draining"}' 1
# A made-up fleet name makes no series of its own.
prom_wait_value 'slotd_allocations_total{fleet="",result="InvalidArgument"}' 1
assert_eq "$(prom_query 'slotd_allocations_total{fleet="nosuch"}')" "" "series of a made-up fleet"
# Granted requests only, each timed to its durable reply.
prom_wait_value 'slotd_allocate_duration_seconds_count{door="dbus",request="allocate"}' 2
prom_wait_value 'slotd_allocate_duration_seconds_bucket{door="dbus",request="allocate",le="+Inf"}' 2
prom_wait_value 'slotd_draining' 0
# The shipped recording rules on these series: slots, and the share taken (one of three).
prom_wait_value 'slotd:slots:sum{fleet="game"}' 3
prom_wait_value 'slotd:slots_taken:sum{fleet="game"}' 1
prom_wait_value 'slotd:slots_taken:ratio{fleet="game"} * 3' 1
# Per slot (issue 27.4): its states, its CPU and memory as D-Bus shows them, its players.
prom_wait_value 'slotd_slot_info{fleet="game",slot="2",state="allocated",process_state="running"}' 1
prom_wait_value 'count(slotd_slot_info{fleet="game"})' 3
prom_wait_value 'count(slotd_slot_info{fleet="idle"})' 1
prom_wait_value 'slotd_slot_memory_bytes{fleet="game",slot="2"} > bool 0' 1
prom_wait_value 'count(slotd_slot_cpu_cores{fleet="game"} >= 0)' 3
control 2 "players 7"
control 2 "max-players 16"
prom_wait_value 'slotd_slot_players{fleet="game",slot="2"}' 7
prom_wait_value 'slotd_slot_max_players{fleet="game",slot="2"}' 16
assert_eq "$(sprop 2 QueryPlayers)" 7 "QueryPlayers on D-Bus, as the metric"
# The idle fleet does not query: no players series of its own.
assert_eq "$(prom_query 'slotd_slot_players{fleet="idle"}')" "" "players of a fleet without queries"

mcall Deallocate s m-1 >/dev/null
prom_wait_value 'slotd_deallocations_total{fleet="game"}' 1
prom_wait_value 'sum(slotd_slots{fleet="game",state="allocated"})' 0
R=$(reserve game r-1 0)
prom_wait_value 'slotd_reservations_total{fleet="game",result="ok"}' 1
prom_wait_value 'sum(slotd_slots{fleet="game",state="reserved"})' 1
prom_wait_value 'slotd_allocate_duration_seconds_count{door="dbus",request="reserve"}' 1
# (a reservation is allocated by its UUID: it ends with that allocation's deallocation)
assert_eq "$(allocate game r-1)" "$R" "the reservation's slot allocated"
mcall Deallocate s r-1 >/dev/null
prom_wait_value 'slotd_deallocations_total{fleet="game"}' 2
prom_wait_value 'slotd_allocations_total{fleet="game",result="ok"}' 3

# ---- 3. Strikes, crashes by cause, restarts, sweeps ----
control 0 "query off"
wait_sig "$SIGS" Misbehaved "0 query 3" $((30 * TIME_SCALE))
wait_sig "$SIGS" Crashed "0 0 11 misbehaviour" $((30 * TIME_SCALE))
wait_prop 0 ProcessState running $((20 * TIME_SCALE))
control 1 "crash segv"
wait_sig "$SIGS" Crashed "1 0 11 " $((20 * TIME_SCALE))
wait_prop 1 ProcessState running $((20 * TIME_SCALE))
# The restarted server of slot 0 answers: two quiet rounds, no strike more.
wait_rounds 0 2 $((20 * TIME_SCALE))
STRIKES=$(sig_count "$SIGS" Misbehaved 0)
assert_eq "$STRIKES" 3 "Misbehaved signals of slot 0"
prom_wait_value 'slotd_strikes_total{fleet="game",check="query"}' "$STRIKES"
prom_wait_value 'slotd_strikes_total{fleet="game",check="cpu"}' 0
# ... which the shipped alert SlotdStrikesRising (3 in 30 minutes, at once) fires on.
prom_wait_value 'ALERTS{alertname="SlotdStrikesRising",alertstate="firing",fleet="game",check="query"}' 1
# Each by its cause and the signal that ended it: checks.signal, and the server's own SIGSEGV.
prom_wait_value 'slotd_crashes_total{fleet="game",cause="misbehaviour",signal="SIGSEGV"}' 1
prom_wait_value 'slotd_crashes_total{fleet="game",cause="exit",signal="SIGSEGV"}' 1
prom_wait_value 'slotd_crashes_total{fleet="game",cause="exit",signal=""}' 0
prom_wait_value 'sum(slotd_crashes_total{fleet="game"})' "$(signal_count "$SIGS" Crashed)"
prom_wait_value 'slotd_restarts_total{fleet="game"}' $(($(sprop 0 Restarts) + $(sprop 1 Restarts)))
prom_wait_value 'slotd_restarts_total{fleet="game"}' 2
prom_wait_value 'slotd_check_sweep_duration_seconds_count{fleet="game"} > bool 2' 1
# A sweep waits for its probes: a round with a silent server lasts checks.query_timeout.
prom_wait_value 'slotd_check_sweep_duration_seconds_sum{fleet="game"} >= bool 1.5' 1

# ---- 4. The bus gone: metrics still served, and they say so ----
kill -KILL "$DBUS_PID"
wait "$DBUS_PID" 2>/dev/null || true
DBUS_PID=
prom_wait_value 'slotd_fault_active{fault="bus"}' 1
prom_wait_value 'slotd_faults_active' 1
rm -f "$T/bus"
start_bus
wait_until $((20 * TIME_SCALE)) "slotd back on the new bus" bus_name_owned
prom_wait_value 'slotd_fault_active{fault="bus"}' 0

# ---- 5. The proxy killed: slotd starts another on the same socket ----
kill -KILL "$P"
new_proxy() { local q; q=$(proxy_pid) && [ -n "$q" ] && [ "$q" != "$P" ]; }
wait_until 20 "a new slotd-proxy" new_proxy
wait_until 20 "GET /metrics answered by the new proxy" scrape_ok
prom_wait_value 'slotd_strikes_total{fleet="game",check="query"}' "$STRIKES"
prom_wait_value 'up{job="slotd"}' 1

# ---- 6. Both doors: the local proxy's reservation, timed on its own ----
stop_slotd
PPORT=$(free_port)
sed -i "/^\[localproxy\]/,/^\[/ s|^listen = off\$|listen = 127.0.0.1:$PPORT|" "$T/etc/slotd.ini"
start_slotd
wait_until 20 "GET /metrics after the restart" scrape_ok
free_slot=
for id in 0 1 2; do [ "$(sprop $id State)" = online ] && { free_slot=$id; break; }; done
[ -n "$free_slot" ] || fail "no online slot to reserve"
out=$(curl -s --max-time 10 -X POST "http://127.0.0.1:$PPORT/v1/servers/$free_slot/reservations" -d '{}')
grep -q '"reservationId"' <<<"$out" || fail "reservation through the local proxy: $out"
prom_wait_value 'slotd_allocate_duration_seconds_count{door="localproxy",request="reserve"}' 1
prom_wait_value 'slotd_reservations_total{fleet="game",result="ok"}' 1
prom_wait_value 'sum(slotd_slots{fleet="game",state="reserved"})' 1
finish
