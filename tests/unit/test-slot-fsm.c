/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "macro.h"
#include "slot-fsm.h"
#include "window.h"

static void test_every_pair_is_decided(_unused_ void **state) {
        /* The table must decide every (state, event) pair: a valid transition names a real
         * state, or the event is refused on purpose. */
        for (int s = 0; s < _PROCESS_STATE_MAX; s++)
                for (int e = 0; e < _SLOT_EVENT_MAX; e++) {
                        SlotTransition t = slot_fsm_next(s, e, false);
                        if (t.valid)
                                assert_in_range(t.next, 0, _PROCESS_STATE_MAX - 1);
                        else
                                assert_int_equal(e, SLOT_EVENT_RESET);
                }
}

static void test_start_spawns_from_stopped_and_failed(_unused_ void **state) {
        SlotTransition t = slot_fsm_next(PROCESS_STOPPED, SLOT_EVENT_START, false);
        assert_true(t.valid);
        assert_int_equal(t.next, PROCESS_STARTING);
        assert_int_equal(t.actions, SLOT_ACTION_SPAWN);

        t = slot_fsm_next(PROCESS_FAILED, SLOT_EVENT_START, false);
        assert_int_equal(t.next, PROCESS_STARTING);
        assert_int_equal(t.actions, SLOT_ACTION_SPAWN | SLOT_ACTION_CLEAR_FAILURE);

        /* Starting a running server does nothing. */
        t = slot_fsm_next(PROCESS_RUNNING, SLOT_EVENT_START, false);
        assert_int_equal(t.next, PROCESS_RUNNING);
        assert_int_equal(t.actions, SLOT_ACTION_NONE);
}

static void test_ready_moves_starting_to_running(_unused_ void **state) {
        SlotTransition t = slot_fsm_next(PROCESS_STARTING, SLOT_EVENT_READY, false);
        assert_int_equal(t.next, PROCESS_RUNNING);
        t = slot_fsm_next(PROCESS_STOPPING, SLOT_EVENT_READY, false);
        assert_int_equal(t.next, PROCESS_STOPPING);
}

static void test_stop_terminates_then_kills(_unused_ void **state) {
        SlotTransition t = slot_fsm_next(PROCESS_RUNNING, SLOT_EVENT_STOP, false);
        assert_int_equal(t.next, PROCESS_STOPPING);
        assert_int_equal(t.actions, SLOT_ACTION_TERMINATE);
        t = slot_fsm_next(PROCESS_STOPPING, SLOT_EVENT_STOP_TIMEOUT, true);
        assert_int_equal(t.next, PROCESS_STOPPING);
        assert_int_equal(t.actions, SLOT_ACTION_KILL);
        t = slot_fsm_next(PROCESS_STOPPING, SLOT_EVENT_EMPTY, false);
        assert_int_equal(t.actions, SLOT_ACTION_SETTLE);
}

static void test_exit_with_leftovers_kills_first(_unused_ void **state) {
        SlotTransition t = slot_fsm_next(PROCESS_RUNNING, SLOT_EVENT_EXIT, false);
        assert_int_equal(t.next, PROCESS_STOPPING);
        assert_int_equal(t.actions, SLOT_ACTION_SETTLE);
        t = slot_fsm_next(PROCESS_RUNNING, SLOT_EVENT_EXIT, true);
        assert_int_equal(t.next, PROCESS_STOPPING);
        assert_int_equal(t.actions, SLOT_ACTION_KILL);
        t = slot_fsm_next(PROCESS_STARTING, SLOT_EVENT_EXIT, true);
        assert_int_equal(t.actions, SLOT_ACTION_KILL);
}

static void test_reset_only_from_failed(_unused_ void **state) {
        assert_false(slot_fsm_next(PROCESS_RUNNING, SLOT_EVENT_RESET, false).valid);
        SlotTransition t = slot_fsm_next(PROCESS_FAILED, SLOT_EVENT_RESET, false);
        assert_true(t.valid);
        assert_int_equal(t.next, PROCESS_STOPPED);
        assert_int_equal(t.actions, SLOT_ACTION_CLEAR_FAILURE);
        assert_true(slot_fsm_next(PROCESS_STOPPED, SLOT_EVENT_RESET, false).valid);
}

static void test_out_of_range_is_refused(_unused_ void **state) {
        assert_false(slot_fsm_next(_PROCESS_STATE_MAX, SLOT_EVENT_START, false).valid);
        assert_false(slot_fsm_next(PROCESS_STOPPED, _SLOT_EVENT_MAX, false).valid);
        assert_string_equal(process_state_to_string(_PROCESS_STATE_MAX), "invalid");
}

static void test_names(_unused_ void **state) {
        assert_string_equal(process_state_to_string(PROCESS_STOPPED), "stopped");
        assert_string_equal(process_state_to_string(PROCESS_STARTING), "starting");
        assert_string_equal(process_state_to_string(PROCESS_RUNNING), "running");
        assert_string_equal(process_state_to_string(PROCESS_STOPPING), "stopping");
        assert_string_equal(process_state_to_string(PROCESS_FAILED), "failed");
        assert_string_equal(failure_reason_to_string(FAILURE_NONE), "");
        assert_string_equal(failure_reason_to_string(FAILURE_CRASH_BACKOFF), "crash-backoff");
        assert_string_equal(failure_reason_to_string(FAILURE_PRE_RECOVERY), "pre-recovery");
        assert_string_equal(failure_reason_to_string(FAILURE_MISBEHAVIOUR), "misbehaviour");
        assert_string_equal(failure_reason_to_string(FAILURE_START_TIMEOUT), "start-timeout");
        assert_string_equal(failure_reason_to_string(FAILURE_OOM), "oom");
        assert_string_equal(failure_reason_to_string(FAILURE_EXEC), "exec");
}

static void test_exit_zero_deallocates_and_restarts_on_provision(_unused_ void **state) {
        ExitVerdict v = slot_exit_policy(&(ExitInput){
                .clean_exit = true, .allocated = true, .start_on_provision = true,
                .pre_recovery = true, .crash_restarts = 1,
        });
        assert_int_equal(v.decision, EXIT_DECISION_RESTART);
        assert_true(v.deallocate);

        v = slot_exit_policy(&(ExitInput){ .clean_exit = true, .start_on_provision = false });
        assert_int_equal(v.decision, EXIT_DECISION_STOP);
        assert_true(v.deallocate);
        assert_int_equal(v.reason, FAILURE_NONE);
}

static void test_crash_while_allocated_with_pre_recovery_stays_stopped(_unused_ void **state) {
        ExitVerdict v = slot_exit_policy(&(ExitInput){
                .allocated = true, .pre_recovery = true, .start_on_provision = true,
                .crashes_in_window = 1, .crash_restarts = 1,
        });
        assert_int_equal(v.decision, EXIT_DECISION_STOP);
        assert_int_equal(v.reason, FAILURE_PRE_RECOVERY);
        assert_false(v.deallocate);

        /* Without pre-recovery the allocated server comes back with its allocation. */
        v = slot_exit_policy(&(ExitInput){
                .allocated = true, .pre_recovery = false, .crashes_in_window = 1,
                .crash_restarts = 1,
        });
        assert_int_equal(v.decision, EXIT_DECISION_RESTART);
        assert_false(v.deallocate);
}

static void test_crash_backoff_after_restarts(_unused_ void **state) {
        ExitVerdict v = slot_exit_policy(&(ExitInput){ .crashes_in_window = 1, .crash_restarts = 1 });
        assert_int_equal(v.decision, EXIT_DECISION_RESTART);
        v = slot_exit_policy(&(ExitInput){ .crashes_in_window = 2, .crash_restarts = 1 });
        assert_int_equal(v.decision, EXIT_DECISION_FAIL);
        assert_int_equal(v.reason, FAILURE_CRASH_BACKOFF);
        v = slot_exit_policy(&(ExitInput){ .crashes_in_window = 3, .crash_restarts = 3 });
        assert_int_equal(v.decision, EXIT_DECISION_RESTART);
}

static void test_requests_win_over_exit_status(_unused_ void **state) {
        ExitVerdict v = slot_exit_policy(&(ExitInput){ .stop_requested = true, .crashes_in_window = 9 });
        assert_int_equal(v.decision, EXIT_DECISION_STOP);
        assert_int_equal(v.reason, FAILURE_NONE);
        v = slot_exit_policy(&(ExitInput){ .restart_requested = true, .stop_requested = true });
        assert_int_equal(v.decision, EXIT_DECISION_RESTART);
}

/* The keeper restarts by itself only where every exit would be restarted at once anyway. */
static void test_exit_always_restarts(_unused_ void **state) {
        ExitInput in = { .start_on_provision = true, .pre_recovery = true, .crash_restarts = 2 };

        assert_true(slot_exit_always_restarts(&in));
        in.crashes_in_window = 1;
        assert_true(slot_exit_always_restarts(&in));
        /* The next crash would be the third within the window: back-off, slotd decides. */
        in.crashes_in_window = 2;
        assert_false(slot_exit_always_restarts(&in));
        in.crashes_in_window = 0;

        /* Exit 0 without start_on_provision leaves the slot available. */
        in.start_on_provision = false;
        assert_false(slot_exit_always_restarts(&in));
        in.start_on_provision = true;

        /* Allocated: a crash is pre-recovery's (or restarts into the session), exit 0 ends
         * the session; with or without pre-recovery, slotd decides. */
        in.allocated = true;
        assert_false(slot_exit_always_restarts(&in));
        in.pre_recovery = false;
        assert_false(slot_exit_always_restarts(&in));
        in.allocated = false;

        /* A requested stop or restart is slotd's own. */
        in.stop_requested = true;
        assert_false(slot_exit_always_restarts(&in));
        in.stop_requested = false;
        in.restart_requested = true;
        assert_false(slot_exit_always_restarts(&in));
        in.restart_requested = false;

        /* crash.restarts = 0: no crash is ever restarted. */
        in.crash_restarts = 0;
        assert_false(slot_exit_always_restarts(&in));
        in.crash_restarts = 2;

        /* What the policy's inputs say about the exit itself does not count. */
        in.clean_exit = true;
        in.cause = FAILURE_MISBEHAVIOUR;
        assert_true(slot_exit_always_restarts(&in));
}

static void test_crash_history_window(_unused_ void **state) {
        TimeWindow h = {};
        usec_t min = USEC_PER_MINUTE;

        assert_int_equal(time_window_count(&h, 100 * min, 30 * min), 0);
        time_window_add(&h, 10 * min);
        time_window_add(&h, 50 * min);
        time_window_add(&h, 60 * min);
        assert_int_equal(time_window_count(&h, 60 * min, 30 * min), 2);
        assert_int_equal(time_window_count(&h, 60 * min, 60 * min), 3);
        assert_int_equal(time_window_count(&h, 200 * min, 30 * min), 0);
        for (int i = 0; i < 100; i++)
                time_window_add(&h, 300 * min);
        assert_int_equal(time_window_count(&h, 300 * min, min), TIME_WINDOW_MAX);
        time_window_reset(&h);
        assert_int_equal(time_window_count(&h, 300 * min, min), 0);
}

static void test_cause_makes_a_crash(_unused_ void **state) {
        /* A server slotd signalled for misbehaviour that then exits 0 still crashed. */
        ExitVerdict v = slot_exit_policy(&(ExitInput){
                .clean_exit = true, .start_on_provision = true, .cause = FAILURE_MISBEHAVIOUR,
                .crashes_in_window = 1, .crash_restarts = 1,
        });
        assert_int_equal(v.decision, EXIT_DECISION_RESTART);
        assert_int_equal(v.reason, FAILURE_MISBEHAVIOUR);
        assert_false(v.deallocate);

        /* Held down, the reason says why it is held down, not what caused the crash. */
        v = slot_exit_policy(&(ExitInput){ .cause = FAILURE_OOM, .crashes_in_window = 2,
                                           .crash_restarts = 1 });
        assert_int_equal(v.decision, EXIT_DECISION_FAIL);
        assert_int_equal(v.reason, FAILURE_CRASH_BACKOFF);
        v = slot_exit_policy(&(ExitInput){ .cause = FAILURE_START_TIMEOUT, .allocated = true,
                                           .pre_recovery = true, .crashes_in_window = 1,
                                           .crash_restarts = 1 });
        assert_int_equal(v.decision, EXIT_DECISION_STOP);
        assert_int_equal(v.reason, FAILURE_PRE_RECOVERY);
        /* A plain crash that is restarted has no reason. */
        v = slot_exit_policy(&(ExitInput){ .crashes_in_window = 1, .crash_restarts = 1 });
        assert_int_equal(v.reason, FAILURE_NONE);
}

/* A build that cannot be executed fails at once, whatever crash.restarts allows: a restart a
 * few microseconds later meets the same file. Pre-recovery of an allocated slot and requests
 * still come first; the crash never keeps the keeper from restarting on its own (it never
 * restarts such a server: keeper.c). */
static void test_exec_fails_at_once(_unused_ void **state) {
        ExitVerdict v = slot_exit_policy(&(ExitInput){ .cause = FAILURE_EXEC, .crashes_in_window = 1,
                                                       .crash_restarts = 63, .start_on_provision = true });
        assert_int_equal(v.decision, EXIT_DECISION_FAIL);
        assert_int_equal(v.reason, FAILURE_EXEC);
        assert_false(v.deallocate);

        v = slot_exit_policy(&(ExitInput){ .cause = FAILURE_EXEC, .crashes_in_window = 5,
                                           .crash_restarts = 1 });
        assert_int_equal(v.reason, FAILURE_EXEC);
        v = slot_exit_policy(&(ExitInput){ .cause = FAILURE_EXEC, .allocated = true,
                                           .pre_recovery = true, .crashes_in_window = 1 });
        assert_int_equal(v.decision, EXIT_DECISION_STOP);
        assert_int_equal(v.reason, FAILURE_PRE_RECOVERY);
        v = slot_exit_policy(&(ExitInput){ .cause = FAILURE_EXEC, .restart_requested = true });
        assert_int_equal(v.decision, EXIT_DECISION_RESTART);
        v = slot_exit_policy(&(ExitInput){ .cause = FAILURE_EXEC, .stop_requested = true });
        assert_int_equal(v.decision, EXIT_DECISION_STOP);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exec_fails_at_once),
                cmocka_unit_test(test_every_pair_is_decided),
                cmocka_unit_test(test_start_spawns_from_stopped_and_failed),
                cmocka_unit_test(test_ready_moves_starting_to_running),
                cmocka_unit_test(test_stop_terminates_then_kills),
                cmocka_unit_test(test_exit_with_leftovers_kills_first),
                cmocka_unit_test(test_reset_only_from_failed),
                cmocka_unit_test(test_out_of_range_is_refused),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_exit_zero_deallocates_and_restarts_on_provision),
                cmocka_unit_test(test_crash_while_allocated_with_pre_recovery_stays_stopped),
                cmocka_unit_test(test_crash_backoff_after_restarts),
                cmocka_unit_test(test_requests_win_over_exit_status),
                cmocka_unit_test(test_exit_always_restarts),
                cmocka_unit_test(test_crash_history_window),
                cmocka_unit_test(test_cause_makes_a_crash),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
