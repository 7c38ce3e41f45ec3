# SPDX-License-Identifier: MIT
# Debian's real Prometheus server for the integration tests: started on a free loopback port
# (never 9090) with its storage under $T, scraping the targets given, and asked through its
# HTTP API. Sourced after lib.sh (it uses T, TIME_SCALE, free_port, wait_until, fail and
# CLEANUP_HOOKS). Skips the test (77) when prometheus or curl is missing.
#
#   prom_start TARGET...          TARGET: HOST:PORT (job "slotd") or JOB=HOST:PORT; every
#                                 target scraped at GET /metrics every PROM_SCRAPE_INTERVAL
#                                 (default TIME_SCALE seconds); returns once Prometheus is
#                                 ready. PROM_URL is then its base URL. PROM_RULES=FILE loads
#                                 that rule file, evaluated at the same interval.
#   prom_query EXPR               the value of each series of an instant query, one a line
#                                 (nothing for an empty result); a scalar's value
#   prom_wait_value EXPR VALUE [TIMEOUT]
#                                 polls until EXPR has exactly one value, numerically VALUE
#                                 (default timeout 30 × TIME_SCALE seconds)
#   prom_targets_up               every target's last scrape succeeded

PROMETHEUS=${PROMETHEUS:-/usr/bin/prometheus}
[ -x "$PROMETHEUS" ] || skip "prometheus is not installed ($PROMETHEUS)"
command -v curl >/dev/null || skip "curl is not installed"

PROM_PID=
PROM_URL=
PROM_DIR=

prom_stop() {
        if [ -n "$PROM_PID" ]; then
                kill -TERM "$PROM_PID" 2>/dev/null
                wait "$PROM_PID" 2>/dev/null
                PROM_PID=
        fi
        return 0
}
CLEANUP_HOOKS+=(prom_stop)

# The YAML of one job per name, its targets in the order given.
prom_config() {
        local interval=$1 t job jobs=() addr
        declare -A targets
        shift
        for t in "$@"; do
                job=slotd
                addr=$t
                case $t in *=*) job=${t%%=*} addr=${t#*=} ;; esac
                [ -n "${targets[$job]+x}" ] || jobs+=("$job")
                targets[$job]="${targets[$job]:-}${targets[$job]:+, }'$addr'"
        done
        echo "global:"
        echo "  scrape_interval: $interval"
        echo "  scrape_timeout: $interval"
        echo "  evaluation_interval: $interval"
        [ -z "${PROM_RULES:-}" ] || echo "rule_files: ['$PROM_RULES']"
        echo "scrape_configs:"
        for job in "${jobs[@]}"; do
                echo "  - job_name: '$job'"
                echo "    metrics_path: /metrics"
                echo "    static_configs:"
                echo "      - targets: [${targets[$job]}]"
        done
}

prom_ready() { curl -sf --max-time 2 "$PROM_URL/-/ready" >/dev/null; }

prom_start() {
        local port interval=${PROM_SCRAPE_INTERVAL:-${TIME_SCALE}s}
        [ $# -gt 0 ] || fail "prom_start: no target"
        [ -z "$PROM_PID" ] || fail "prom_start: prometheus already runs"
        PROM_DIR=$T/prometheus
        mkdir -p "$PROM_DIR/data"
        prom_config "$interval" "$@" > "$PROM_DIR/prometheus.yml"
        port=$(free_port)
        [ "$port" != 9090 ] || port=$(free_port)
        PROM_URL=http://127.0.0.1:$port
        "$PROMETHEUS" --config.file="$PROM_DIR/prometheus.yml" \
                --storage.tsdb.path="$PROM_DIR/data" --web.listen-address="127.0.0.1:$port" \
                --log.level=warn >"$PROM_DIR/prometheus.log" 2>&1 &
        PROM_PID=$!
        wait_until $((60 * TIME_SCALE)) "prometheus ready on $PROM_URL" prom_ready_or_dead
}

prom_ready_or_dead() {
        kill -0 "$PROM_PID" 2>/dev/null ||
                fail "prometheus exited: $(tail -n 5 "$PROM_DIR/prometheus.log")"
        prom_ready
}

# The API's answer as lines: the value of each series of a vector, the value of a scalar.
# Parsed with grep and sed (a python3 start costs seconds on a loaded host): the answer is
# {"status":"success","data":{"resultType":"vector","result":[{"metric":{…},"value":[T,"V"]},…]}}
# or, for a scalar, …"result":[T,"V"]…; label values cannot end a match, their quotes being
# escaped.
prom_query() {
        local out
        out=$(curl -sf --max-time 10 --get --data-urlencode "query=$1" "$PROM_URL/api/v1/query") ||
                return 1
        grep -q '"status":"success"' <<<"$out" || return 1
        case $out in
        *'"resultType":"scalar"'*)
                grep -o '"result":\[[^],]*,"[^"]*"\]' <<<"$out" ;;
        *)
                grep -o '"value":\[[^],]*,"[^"]*"\]' <<<"$out" || true ;;
        esac | sed -E 's/.*,"([^"]*)"\]$/\1/'
}

# EXPR has exactly one value, numerically VALUE.
prom_value_is() {
        local got
        got=$(prom_query "$1") || return 1
        [ -n "$got" ] && [ "$(wc -l <<<"$got")" -eq 1 ] || return 1
        awk -v a="$got" -v b="$2" 'BEGIN { exit !(a + 0 == b + 0) }'
}

prom_wait_value() {
        local expr=$1 want=$2 timeout=${3:-$((30 * TIME_SCALE))}
        local deadline=$(($(date +%s%N) + timeout * 1000000000))
        until prom_value_is "$expr" "$want"; do
                [ "$(date +%s%N)" -lt "$deadline" ] ||
                        fail "timed out after ${timeout}s waiting for prometheus: $expr = $want" \
                                "(it is '$(prom_query "$expr" 2>&1 | paste -sd' ')')"
                sleep 0.2
        done
        PASSED=$((PASSED + 1))
}

prom_targets_up() {
        local out n up
        out=$(curl -sf --max-time 10 "$PROM_URL/api/v1/targets?state=active") || return 1
        n=$(grep -o '"health":"[a-z]*"' <<<"$out" | wc -l)
        up=$(grep -o '"health":"up"' <<<"$out" | wc -l)
        [ "$n" -gt 0 ] && [ "$n" -eq "$up" ]
}
