/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>

#include "check-tally.h"
#include "checks.h"
#include "macro.h"
#include "ratelimit.h"

static void test_cpu(void **state) {
        /* Multiplay's rule: within budget + 10 %. */
        assert_true(check_cpu_ok(0.0, 1.0, 0.10));
        assert_true(check_cpu_ok(1.10, 1.0, 0.10));
        assert_false(check_cpu_ok(1.11, 1.0, 0.10));
        assert_true(check_cpu_ok(0.55, 0.5, 0.10));
        assert_false(check_cpu_ok(0.56, 0.5, 0.10));
        assert_false(check_cpu_ok(0.51, 0.5, 0.0));
        assert_true(check_cpu_ok(2.9, 1.0, 2.0));
}

static void test_memory(void **state) {
        uint64_t M = 1024 * 1024;
        /* Multiplay's rule: within budget + 200 MB. */
        assert_true(check_memory_ok(512 * M + 200 * M, 512 * M, 200 * M));
        assert_false(check_memory_ok(512 * M + 200 * M + 1, 512 * M, 200 * M));
        assert_true(check_memory_ok(0, 0, 0));
        /* No overflow near the top. */
        assert_true(check_memory_ok(UINT64_MAX, UINT64_MAX - 5, 10));
}

static void test_cpu_cores_used(void **state) {
        assert_true(cpu_cores_used(0, 1500000, 1000000) > 1.49);
        assert_true(cpu_cores_used(0, 1500000, 1000000) < 1.51);
        assert_true(cpu_cores_used(100, 100, 1000000) == 0.0);
        /* A counter that went backwards (a new cgroup) and no elapsed time give 0. */
        assert_true(cpu_cores_used(500, 100, 1000000) == 0.0);
        assert_true(cpu_cores_used(0, 100, 0) == 0.0);
}

static void test_strikes(void **state) {
        TimeWindow w = {};
        usec_t min = USEC_PER_MINUTE;
        StrikeVerdict v;

        /* Three failures within 30 minutes act; the third is the one. */
        v = strike_record(&w, 0 * min, 30 * min, 3);
        assert_int_equal(v.strikes, 1);
        assert_false(v.act);
        v = strike_record(&w, 10 * min, 30 * min, 3);
        assert_int_equal(v.strikes, 2);
        assert_false(v.act);
        v = strike_record(&w, 20 * min, 30 * min, 3);
        assert_int_equal(v.strikes, 3);
        assert_true(v.act);

        /* Spread over more than the window: the oldest no longer counts. */
        time_window_reset(&w);
        strike_record(&w, 0, 30 * min, 3);
        strike_record(&w, 20 * min, 30 * min, 3);
        v = strike_record(&w, 31 * min, 30 * min, 3);
        assert_int_equal(v.strikes, 2);
        assert_false(v.act);
        v = strike_record(&w, 40 * min, 30 * min, 3);
        assert_int_equal(v.strikes, 3);
        assert_true(v.act);

        /* One strike needed acts at once. */
        time_window_reset(&w);
        assert_true(strike_record(&w, 5, min, 1).act);
}

static void test_names(void **state) {
        assert_string_equal(check_kind_to_string(CHECK_CPU), "cpu");
        assert_string_equal(check_kind_to_string(CHECK_MEMORY), "memory");
        assert_string_equal(check_kind_to_string(CHECK_QUERY), "query");
        assert_string_equal(check_kind_to_string(CHECK_HEARTBEAT), "heartbeat");
        assert_string_equal(check_kind_to_string(_CHECK_KIND_MAX), "invalid");
}

static CheckTally tally(unsigned checked, unsigned failing) {
        CheckTally t = {};

        for (unsigned i = 0; i < checked; i++)
                check_tally_add(&t, i < failing);
        assert_int_equal(t.checked, checked);
        assert_int_equal(t.failing, failing);
        return t;
}

static void test_machine_fault(void **state) {
        CheckTally t;

        /* More than half of the fleet: the machine. Half exactly: the servers. */
        t = tally(4, 4);
        assert_true(check_tally_machine_fault(&t, 0.5));
        t = tally(4, 3);
        assert_true(check_tally_machine_fault(&t, 0.5));
        t = tally(4, 2);
        assert_false(check_tally_machine_fault(&t, 0.5));
        t = tally(4, 1);
        assert_false(check_tally_machine_fault(&t, 0.5));
        t = tally(1000, 501);
        assert_true(check_tally_machine_fault(&t, 0.5));
        t = tally(1000, 500);
        assert_false(check_tally_machine_fault(&t, 0.5));
        /* One failing slot is judged whatever the share: a fleet of one is still judged, and
         * so is one of two with one failing. Two of three are a machine fault. */
        t = tally(1, 1);
        assert_false(check_tally_machine_fault(&t, 0.5));
        t = tally(2, 1);
        assert_false(check_tally_machine_fault(&t, 0.01));
        t = tally(2, 2);
        assert_true(check_tally_machine_fault(&t, 0.5));
        t = tally(3, 2);
        assert_true(check_tally_machine_fault(&t, 0.5));
        /* Off (0): every slot alone. 100 %: never more than all. */
        t = tally(4, 4);
        assert_false(check_tally_machine_fault(&t, 0.0));
        assert_false(check_tally_machine_fault(&t, 1.0));
        t = tally(10, 3);
        assert_true(check_tally_machine_fault(&t, 0.25));
        assert_false(check_tally_machine_fault(&t, 0.30));
        /* Nothing checked (only checks that could not be made): no fault. */
        t = tally(0, 0);
        assert_false(check_tally_machine_fault(&t, 0.5));
}

/* The sweep's rounds of one check over a fleet of 4 (SPEC §6): the machine-fault rounds and the
 * first round after them strike nobody; the second round after is judged as ever. */
static void test_sweep_round_verdict(void **state) {
        bool previous = false;
        CheckTally t;
        SweepVerdict v;

        /* Healthy, then one failing server: struck. */
        t = tally(4, 0);
        v = sweep_round_verdict(&t, 0.5, &previous);
        assert_false(v.machine_fault);
        assert_false(v.drop_strikes);
        t = tally(4, 1);
        v = sweep_round_verdict(&t, 0.5, &previous);
        assert_false(v.machine_fault);
        assert_false(v.drop_strikes);
        assert_false(previous);
        /* All silent for two rounds: machine faults, nobody struck. */
        for (int i = 0; i < 2; i++) {
                t = tally(4, 4);
                v = sweep_round_verdict(&t, 0.5, &previous);
                assert_true(v.machine_fault);
                assert_true(v.drop_strikes);
                assert_true(previous);
        }
        /* They come back, one straggler still silent: the fault clears (no machine fault),
         * the straggler is not struck. */
        t = tally(4, 1);
        v = sweep_round_verdict(&t, 0.5, &previous);
        assert_false(v.machine_fault);
        assert_true(v.drop_strikes);
        assert_false(previous);
        /* Still silent a round later: struck. */
        t = tally(4, 1);
        v = sweep_round_verdict(&t, 0.5, &previous);
        assert_false(v.machine_fault);
        assert_false(v.drop_strikes);
        /* A fault of one round, then a round that nobody failed, then one that one failed. */
        t = tally(4, 3);
        assert_true(sweep_round_verdict(&t, 0.5, &previous).drop_strikes);
        t = tally(4, 0);
        assert_true(sweep_round_verdict(&t, 0.5, &previous).drop_strikes);
        t = tally(4, 1);
        assert_false(sweep_round_verdict(&t, 0.5, &previous).drop_strikes);
        /* Protection off: never a fault, never an excused round. */
        previous = false;
        for (int i = 0; i < 3; i++) {
                t = tally(4, 4);
                v = sweep_round_verdict(&t, 0.0, &previous);
                assert_false(v.machine_fault);
                assert_false(v.drop_strikes);
        }
        /* A round with nothing checked after a fault is the round after it. */
        previous = false;
        t = tally(4, 4);
        assert_true(sweep_round_verdict(&t, 0.5, &previous).machine_fault);
        t = tally(0, 0);
        v = sweep_round_verdict(&t, 0.5, &previous);
        assert_false(v.machine_fault);
        assert_true(v.drop_strikes);
        t = tally(4, 1);
        assert_false(sweep_round_verdict(&t, 0.5, &previous).drop_strikes);
}

static void test_error_is_local(void **state) {
        /* What the server did. */
        assert_false(check_error_is_local(-ETIMEDOUT));
        assert_false(check_error_is_local(-EBADMSG));
        assert_false(check_error_is_local(-ECONNREFUSED));
        assert_false(check_error_is_local(0));
        /* What the host did. */
        static const int local[] = { ENETUNREACH, EHOSTUNREACH, ENETDOWN, EPERM, EACCES, ENOBUFS,
                                     EADDRNOTAVAIL, ENOMEM, EMFILE, ENFILE, EAGAIN, EBUSY, EIO };
        for (size_t i = 0; i < ELEMENTSOF(local); i++) {
                assert_true(check_error_is_local(-local[i]));
                assert_true(check_error_is_local(local[i]));
        }
}

static void test_heartbeat_round(void **state) {
        HeartbeatRound r = {};
        usec_t P = USEC_PER_SEC;
        uint64_t a = 0, b = 0, c = 0;
        bool ma = false, mb = false, mc = false;
        CheckTally closed = { 99, 99 };

        /* The first timer starts the first round; nothing closes. */
        assert_false(heartbeat_round_advance(&r, 10 * P, P, &closed));
        assert_int_equal(closed.checked, 99);
        assert_false(heartbeat_round_count(&r, &a, &ma, false));
        /* b misses: held once, however often its timer fires within the round. */
        assert_false(heartbeat_round_advance(&r, 10 * P + P / 3, P, &closed));
        assert_true(heartbeat_round_count(&r, &b, &mb, true));
        assert_false(heartbeat_round_count(&r, &b, &mb, true));
        assert_false(heartbeat_round_advance(&r, 10 * P + 2 * P / 3, P, &closed));
        assert_true(heartbeat_round_count(&r, &c, &mc, true));
        assert_int_equal(r.tally.checked, 3);
        assert_int_equal(r.tally.failing, 2);
        /* a's next timer, one period on: the round closes with its tally, a new one begins. */
        assert_true(heartbeat_round_advance(&r, 11 * P + 1, P, &closed));
        assert_int_equal(closed.checked, 3);
        assert_int_equal(closed.failing, 2);
        assert_int_equal(r.tally.checked, 0);
        assert_false(heartbeat_round_count(&r, &a, &ma, false));
        /* b misses again: a new round, a new held strike. */
        assert_true(heartbeat_round_count(&r, &b, &mb, true));
        assert_int_equal(r.tally.checked, 2);
        assert_int_equal(r.tally.failing, 1);
        assert_false(heartbeat_round_advance(&r, 12 * P, P, &closed));
        assert_true(heartbeat_round_advance(&r, 12 * P + 1, P, &closed));
        assert_int_equal(closed.checked, 2);
}

static void test_heartbeat_round_verdict(void **state) {
        CheckTally t;

        /* A round that counted one slot keeps the verdict before it. */
        t = tally(1, 1);
        assert_true(heartbeat_round_machine_fault(&t, 0.5, true));
        assert_false(heartbeat_round_machine_fault(&t, 0.5, false));
        t = tally(1, 0);
        assert_true(heartbeat_round_machine_fault(&t, 0.5, true));
        t = tally(0, 0);
        assert_true(heartbeat_round_machine_fault(&t, 0.5, true));
        assert_false(heartbeat_round_machine_fault(&t, 0.0, true));
        /* Two or more: judged on their own. */
        t = tally(2, 0);
        assert_false(heartbeat_round_machine_fault(&t, 0.5, true));
        t = tally(2, 2);
        assert_true(heartbeat_round_machine_fault(&t, 0.5, false));
        t = tally(4, 2);
        assert_false(heartbeat_round_machine_fault(&t, 0.5, true));
}

static void test_ratelimit(void **state) {
        RateLimit rl = {};
        unsigned untold = 99;
        usec_t s = USEC_PER_SEC;

        /* The first is told; the rest of the interval is counted. */
        assert_true(ratelimit_tell(&rl, 100 * s, 10 * s, &untold));
        assert_int_equal(untold, 0);
        for (int i = 0; i < 20000; i++)
                assert_false(ratelimit_tell(&rl, 100 * s + (usec_t) i, 10 * s, &untold));
        assert_false(ratelimit_tell(&rl, 110 * s - 1, 10 * s, &untold));
        /* The next interval's first says how many went untold. */
        assert_true(ratelimit_tell(&rl, 110 * s, 10 * s, &untold));
        assert_int_equal(untold, 20001);
        assert_true(ratelimit_tell(&rl, 200 * s, 10 * s, &untold));
        assert_int_equal(untold, 0);
        /* A clock at 0 works too. */
        rl = (RateLimit) {};
        assert_true(ratelimit_tell(&rl, 0, 10 * s, &untold));
        assert_false(ratelimit_tell(&rl, 1, 10 * s, &untold));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cpu),
                cmocka_unit_test(test_memory),
                cmocka_unit_test(test_cpu_cores_used),
                cmocka_unit_test(test_strikes),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_machine_fault),
                cmocka_unit_test(test_sweep_round_verdict),
                cmocka_unit_test(test_error_is_local),
                cmocka_unit_test(test_heartbeat_round),
                cmocka_unit_test(test_heartbeat_round_verdict),
                cmocka_unit_test(test_ratelimit),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
