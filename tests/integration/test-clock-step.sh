#!/usr/bin/env bash
# The fault matrix (issue 14): the wall clock stepped an hour forward, then two hours back.
# No hold, reservation, idle TTL, payload TTL or strike window moves: each ends when its time
# has elapsed (CLOCK_BOOTTIME), not when the wall clock says; only what is shown follows the
# wall clock. Stepping the clock disturbs every program of the machine, so this runs only in
# the VM test bed, alone (meson: is_parallel false), and puts the clock back in any case.
. "$(dirname "$0")/lib.sh"

[ -n "${SLOTD_VM:-}" ] || skip "stepping the wall clock would disturb the host; this test runs in the VM test bed (tests/vm/run-in-vm)"
command -v curl >/dev/null || skip "curl is not installed"

# Every wait of this test runs on the boot clock: lib.sh's wait_until reads the wall clock.
uptime_ms() {
        local u
        read -r u _ < /proc/uptime
        echo $((${u%.*} * 1000 + 10#${u#*.} * 10))
}
# wait_boot TIMEOUT_S DESCRIPTION COMMAND...: wait_until on the boot clock.
wait_boot() {
        local timeout=$1 what=$2
        shift 2
        local deadline=$(($(uptime_ms) + timeout * 1000))
        until "$@" >/dev/null 2>&1; do
                [ "$(uptime_ms)" -lt "$deadline" ] || fail "timed out after ${timeout}s waiting for: $what"
                sleep 0.1
        done
}

STEPPED=0 # seconds the wall clock was moved by
step_clock() {
        date -s "$1" >/dev/null || fail "date -s '$1'"
        STEPPED=$((STEPPED + $2))
        note "wall clock stepped $1: $(date)"
}
restore_clock() {
        [ "$STEPPED" = 0 ] || date -s "@$(($(date +%s) - STEPPED))" >/dev/null
        STEPPED=0
}
clock_cleanup() {
        local rc=$?
        restore_clock
        (exit $rc)
        cleanup
}
trap clock_cleanup EXIT

TS=$TIME_SCALE
HOLD=$((30 * TS))  # seconds: the hold
TTL=$((35 * TS))   # machine.idle_ttl
D=$((20 * TS))     # the reservation and the payload's TTL
SLACK=$((5 * TS))  # how late an end may be seen (a property read takes seconds in the VM)
PORT=$(free_port)
URL=http://127.0.0.1:$PORT
LOCALPROXY_LISTEN=127.0.0.1:$PORT write_config
config_key machine "idle_ttl = ${TTL}s"
config_key localproxy "payload_ttl = ${D}s"
write_fleet game "[ports]" "game_base = 37200" "query_base = 37300" \
        "[checks]" "query = sqp" "interval = $((4 * TS))s" "query_timeout = ${TS}s" \
        "strikes = 63" "window = 30m"
t_start0=$(uptime_ms)
start_slotd
t_start1=$(uptime_ms)
for id in 0 1 2 3; do
        wait_prop $id ProcessState running 60
        wait_server $id 60
done

# between VALUE LOW HIGH WHAT: LOW <= VALUE <= HIGH (ms of the boot clock).
between() { assert_between "$1" "$2" "$3" "$4"; }
# shown_left PROPERTY_VALUE: seconds from the wall clock's now to a shown deadline.
shown_left() { echo $((($1 - $(now_usec)) / 1000000)); }
strikes_is() { [ "$(sprop 1 Strikes)" = '1 "query" 1' ]; }

# ---- 1. The machine idle: a hold, the idle TTL, a strike in its window ----
t0=$(uptime_ms)
hold 0 $((HOLD * 1000000)) >/dev/null
t1=$(uptime_ms)
control 1 "query off"
wait_boot $((20 * TS)) "one query strike of slot 1" strikes_is
control 1 "query on"

check_idle_side() {
        assert_eq "$(sprop 0 State)" held "the hold after the step ($1)"
        local left
        left=$(shown_left "$(sprop 0 HoldUntilUSec)")
        between "$left" 1 "$HOLD" "HoldUntilUSec, seconds from now as the wall clock shows them ($1)"
        assert_eq "$(mprop Deprovisionable)" false "Deprovisionable ($1)"
        left=$(($(mprop IdleSinceUSec) / 1000000 - $(date +%s)))
        between "$left" $((-TTL)) 0 "IdleSinceUSec follows the wall clock ($1)"
        assert_ok "the strike still counted ($1)" strikes_is
}
step_clock '+1 hour' 3600
check_idle_side "an hour forward"
step_clock '-2 hours' -7200
check_idle_side "an hour back"

# Each ends when its time has elapsed: not earlier (the forward step), not later (the back).
wait_boot $((HOLD + 30 * TS)) "the hold of slot 0 ended" prop_is_not 0 State held
between "$(uptime_ms)" $((t0 + HOLD * 1000 - 50)) $((t1 + (HOLD + SLACK) * 1000)) \
        "when the hold ended (boot clock, ms)"
# Deprovisionable once idle for machine.idle_ttl and no hold reaches past now.
max() { echo $(($1 > $2 ? $1 : $2)); }
wait_boot $((TTL + 30 * TS)) "the machine deprovisionable" mprop_is Deprovisionable true
between "$(uptime_ms)" $(($(max $((t_start0 + TTL * 1000)) $((t0 + HOLD * 1000))) - 50)) \
        $(($(max $((t_start1 + TTL * 1000)) $((t1 + HOLD * 1000))) + SLACK * 1000)) \
        "when the machine became deprovisionable (boot clock, ms)"
assert_ok "the strike still counted within checks.window" strikes_is

# ---- 2. The machine busy: a reservation and a payload with its TTL ----
# Acknowledged allocations the steps must not lose: slot 3's (not in part 1, which needs the
# machine idle), and p-step's below. Slot 3 taken, Reserve and Allocate pick among 0-2.
ack_allocate 3
t0=$(uptime_ms)
R=$(reserve game r-step $((D * 1000000)))
t1=$(uptime_ms)
out=$(mcall AllocateWithOptions sssa{sv} game p-step "" 1 payload ay 3 104 105 33) ||
        fail "AllocateWithOptions: $out"
t2=$(uptime_ms)
P=$(set -- $out; echo "$2")
[[ $P =~ ^[0-9]+$ ]] || fail "AllocateWithOptions reply: $out"
ACKED+=("$P p-step")
payload_is() { [ "$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "$URL/payload/p-step")" = "$1" ]; }
wait_boot 20 "the local proxy" payload_is 200
assert_eq "$(curl -s --max-time 5 "$URL/payload/p-step")" "hi!" "the payload"

check_busy_side() {
        assert_eq "$(sprop $R State)" reserved "the reservation after the step ($1)"
        local left
        left=$(shown_left "$(sprop $R ReservedUntilUSec)")
        between "$left" 1 "$D" "ReservedUntilUSec, seconds from now as the wall clock shows them ($1)"
        assert_ok "the payload still served ($1)" payload_is 200
}
step_clock '+1 hour' 3600
check_busy_side "an hour forward"
step_clock '-2 hours' -7200
check_busy_side "an hour back"

wait_boot $((D + 30 * TS)) "the reservation ended" prop_is_not $R State reserved
between "$(uptime_ms)" $((t0 + D * 1000 - 50)) $((t1 + (D + SLACK) * 1000)) \
        "when the reservation ended (boot clock, ms)"
wait_boot $((D + 30 * TS)) "the payload's TTL over" payload_is 404
between "$(uptime_ms)" $((t1 + D * 1000 - 50)) $((t2 + (D + SLACK) * 1000)) \
        "when the payload's TTL ended (boot clock, ms)"
assert_ok "the allocation itself stays (the TTL is the payload's)" test -n "$(slot_of p-step)"
# (Checked here, not at once after the steps: the reservation's end is timed meanwhile.)
ack_check "after the steps and the ends they must not move"

# The servers were never touched by any of it.
for id in 0 1 2 3; do assert_eq "$(sprop $id Restarts)" 0 "slot $id's restarts"; done
restore_clock
ack_check "with the clock put back"
stop_slotd
finish
