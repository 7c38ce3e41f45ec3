/* SPDX-License-Identifier: MIT */
/* slotd's metrics as kept (metrics.h): the slot gauges moved at each change, deallocations
 * and restarts told from two looks at a slot, requests by result, crashes by cause, strikes,
 * histograms; and the families of the text. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "macro.h"
#include "metrics.h"

static char *format(const Metrics *mx) {
        PromText t = {};
        char *text = NULL;
        size_t size;

        metrics_format(mx, &t);
        assert_int_equal(prom_text_take(&t, &text, &size), 0);
        return text;
}

static void assert_has(const char *text, const char *line) {
        if (!strstr(text, line))
                fail_msg("missing line: %s", line);
}

static void test_slots(void **state) {
        SlotMetricsMark a = {}, b = {};
        FleetMetrics *f;
        Metrics mx;

        metrics_init(&mx);
        f = metrics_fleet(&mx, "game");
        assert_non_null(f);
        assert_ptr_equal(metrics_fleet(&mx, "game"), f);
        assert_ptr_equal(metrics_fleet_find(&mx, "game"), f);
        assert_null(metrics_fleet_find(&mx, "other"));

        /* First sight: counted, its Restarts and allocation from before are no events. */
        metrics_slot_update(f, &a, &(SlotMetricsView){ SLOT_ALLOCATED, PROCESS_RUNNING, true, 4 });
        metrics_slot_update(f, &b, &(SlotMetricsView){ SLOT_AVAILABLE, PROCESS_STOPPED, false, 0 });
        assert_int_equal(f->slots[SLOT_ALLOCATED][PROCESS_RUNNING], 1);
        assert_int_equal(f->slots[SLOT_AVAILABLE][PROCESS_STOPPED], 1);
        assert_int_equal(f->restarts, 0);
        assert_int_equal(f->deallocations, 0);

        /* a's server crashes and restarts twice (keeper), deallocated on its way */
        metrics_slot_update(NULL, &a, &(SlotMetricsView){ SLOT_ONLINE, PROCESS_STARTING, false, 6 });
        assert_int_equal(f->slots[SLOT_ALLOCATED][PROCESS_RUNNING], 0);
        assert_int_equal(f->slots[SLOT_ONLINE][PROCESS_STARTING], 1);
        assert_int_equal(f->restarts, 2);
        assert_int_equal(f->deallocations, 1);
        /* a change that is no event */
        metrics_slot_update(NULL, &a, &(SlotMetricsView){ SLOT_ONLINE, PROCESS_RUNNING, false, 6 });
        assert_int_equal(f->restarts, 2);
        assert_int_equal(f->deallocations, 1);
        assert_int_equal(f->log_bytes_lost, 0);
        /* its keeper dropped output twice: counted by what is new each time */
        metrics_slot_update(NULL, &a, &(SlotMetricsView){ SLOT_ONLINE, PROCESS_RUNNING, false, 6, 4096 });
        metrics_slot_update(NULL, &b, &(SlotMetricsView){ SLOT_AVAILABLE, PROCESS_STOPPED, false, 0, 10 });
        metrics_slot_update(NULL, &a, &(SlotMetricsView){ SLOT_ONLINE, PROCESS_RUNNING, false, 6, 5000 });
        assert_int_equal(f->log_bytes_lost, 5010);
        /* allocated again, then to another allocation with nothing between: not counted here
         * (slotd never moves a slot from one allocation to another directly) */
        metrics_slot_update(NULL, &a, &(SlotMetricsView){ SLOT_ALLOCATED, PROCESS_RUNNING, true, 6, 5000 });
        assert_int_equal(f->deallocations, 1);
        assert_int_equal(f->log_bytes_lost, 5010);
        /* an invalid view changes nothing */
        metrics_slot_update(NULL, &a, &(SlotMetricsView){ _SLOT_STATE_MAX, PROCESS_RUNNING, false, 9 });
        assert_int_equal(f->slots[SLOT_ALLOCATED][PROCESS_RUNNING], 1);
        assert_int_equal(f->restarts, 2);

        metrics_slot_remove(&a);
        metrics_slot_remove(&a); /* twice: once counted */
        assert_null(a.fleet);
        assert_int_equal(f->slots[SLOT_ALLOCATED][PROCESS_RUNNING], 0);
        assert_int_equal(f->slots[SLOT_AVAILABLE][PROCESS_STOPPED], 1);
        /* a slot with no fleet metrics (out of memory) is not counted */
        SlotMetricsMark c = {};
        metrics_slot_update(NULL, &c, &(SlotMetricsView){ SLOT_ONLINE, PROCESS_RUNNING, false, 0 });
        assert_null(c.fleet);
        metrics_done(&mx);
}

static void test_events(void **state) {
        _cleanup_free_ char *text = NULL;
        FleetMetrics *f;
        Metrics mx;

        metrics_init(&mx);
        f = metrics_fleet(&mx, "game");
        metrics_request(&mx, f, METRICS_REQUEST_ALLOCATE, OPS_OK);
        metrics_request(&mx, f, METRICS_REQUEST_ALLOCATE, OPS_OK);
        metrics_request(&mx, f, METRICS_REQUEST_ALLOCATE, OPS_ERROR_NO_CAPACITY);
        metrics_request(&mx, f, METRICS_REQUEST_RESERVE, OPS_ERROR_DRAINING);
        metrics_request(&mx, NULL, METRICS_REQUEST_ALLOCATE, OPS_ERROR_INVALID_ARGUMENT);
        metrics_request(&mx, f, METRICS_REQUEST_ALLOCATE, _OPS_ERROR_MAX); /* ignored */
        metrics_crash(f, FAILURE_NONE, 0, false);
        metrics_crash(f, FAILURE_NONE, SIGSEGV, true);
        metrics_crash(f, FAILURE_NONE, SIGRTMIN + 2, false);
        metrics_crash(f, FAILURE_OOM, SIGKILL, false);
        metrics_crash(f, FAILURE_OOM, SIGKILL, false);
        metrics_crash(f, FAILURE_MISBEHAVIOUR, 99, false);       /* no such signal: counted without */
        metrics_crash(f, FAILURE_CRASH_BACKOFF, 0, false); /* holds a slot down: no cause */
        metrics_crash(NULL, FAILURE_OOM, SIGKILL, false);
        metrics_strike(f, CHECK_QUERY);
        metrics_strike(f, _CHECK_KIND_MAX);
        metrics_sweep(f, 3 * USEC_PER_MSEC);
        metrics_latency(&mx, METRICS_DOOR_DBUS, METRICS_REQUEST_ALLOCATE, 300);
        metrics_latency(&mx, METRICS_DOOR_LOCALPROXY, METRICS_REQUEST_RESERVE, 2 * USEC_PER_SEC);
        text = format(&mx);

        assert_has(text, "slotd_allocations_total{fleet=\"game\",result=\"ok\"} 2\n");
        assert_has(text, "slotd_allocations_total{fleet=\"game\",result=\"NoCapacity\"} 1\n");
        assert_has(text, "slotd_allocations_total{fleet=\"game\",result=\"Draining\"} 0\n");
        assert_has(text, "slotd_reservations_total{fleet=\"game\",result=\"Draining\"} 1\n");
        /* requests naming no fleet: fleet="", shown only where counted */
        assert_has(text, "slotd_allocations_total{fleet=\"\",result=\"InvalidArgument\"} 1\n");
        assert_null(strstr(text, "slotd_allocations_total{fleet=\"\",result=\"ok\"}"));
        assert_null(strstr(text, "slotd_reservations_total{fleet=\"\""));
        assert_has(text, "slotd_crashes_total{fleet=\"game\",cause=\"exit\",signal=\"\"} 1\n");
        assert_has(text, "slotd_crashes_total{fleet=\"game\",cause=\"exit\",signal=\"SIGSEGV\"} 1\n");
        assert_has(text, "slotd_crashes_total{fleet=\"game\",cause=\"exit\",signal=\"SIGRTMIN+2\"} 1\n");
        assert_has(text, "slotd_crashes_total{fleet=\"game\",cause=\"oom\",signal=\"\"} 0\n");
        assert_has(text, "slotd_crashes_total{fleet=\"game\",cause=\"oom\",signal=\"SIGKILL\"} 2\n");
        assert_has(text, "slotd_crashes_total{fleet=\"game\",cause=\"misbehaviour\",signal=\"\"} 1\n");
        assert_has(text, "slotd_crashes_total{fleet=\"game\",cause=\"exec\",signal=\"\"} 0\n");
        assert_null(strstr(text, "cause=\"exec\",signal=\"SIG"));
        /* the common signals at 0 before their first crash, so that increase() sees it */
        assert_has(text, "slotd_crashes_total{fleet=\"game\",cause=\"exit\",signal=\"SIGABRT\"} 0\n");
        assert_has(text, "slotd_crashes_total{fleet=\"game\",cause=\"misbehaviour\",signal=\"SIGSEGV\"} 0\n");
        assert_has(text, "slotd_crashes_total{fleet=\"game\",cause=\"start-timeout\",signal=\"SIGKILL\"} 0\n");
        assert_null(strstr(text, "cause=\"exit\",signal=\"SIGRTMIN+3\""));
        assert_has(text, "slotd_core_dumps_total{fleet=\"game\"} 1\n");
        assert_has(text, "slotd_log_bytes_lost_total{fleet=\"game\"} 0\n");
        assert_null(strstr(text, "crash-backoff"));
        assert_has(text, "slotd_strikes_total{fleet=\"game\",check=\"query\"} 1\n");
        assert_has(text, "slotd_strikes_total{fleet=\"game\",check=\"heartbeat\"} 0\n");
        assert_has(text, "slotd_check_sweep_duration_seconds_bucket{fleet=\"game\",le=\"0.0025\"} 0\n");
        assert_has(text, "slotd_check_sweep_duration_seconds_bucket{fleet=\"game\",le=\"0.005\"} 1\n");
        assert_has(text, "slotd_check_sweep_duration_seconds_count{fleet=\"game\"} 1\n");
        assert_has(text, "slotd_allocate_duration_seconds_bucket{door=\"dbus\",request=\"allocate\",le=\"0.00025\"} 0\n");
        assert_has(text, "slotd_allocate_duration_seconds_bucket{door=\"dbus\",request=\"allocate\",le=\"0.0005\"} 1\n");
        assert_has(text, "slotd_allocate_duration_seconds_sum{door=\"dbus\",request=\"allocate\"} 0.0003\n");
        assert_has(text, "slotd_allocate_duration_seconds_bucket{door=\"localproxy\",request=\"reserve\",le=\"1\"} 0\n");
        assert_has(text, "slotd_allocate_duration_seconds_bucket{door=\"localproxy\",request=\"reserve\",le=\"2.5\"} 1\n");
        assert_has(text, "slotd_allocate_duration_seconds_count{door=\"localproxy\",request=\"allocate\"} 0\n");
        metrics_done(&mx);
}

/* Every family is announced once, by HELP then TYPE, before its samples; every sample line
 * belongs to the family announced last; fleets come in the order they were first seen. */
static void test_families(void **state) {
        static const char *const families[] = {
                "slotd_slots", "slotd_allocations_total", "slotd_reservations_total",
                "slotd_deallocations_total", "slotd_restarts_total", "slotd_crashes_total",
                "slotd_core_dumps_total", "slotd_log_bytes_lost_total", "slotd_strikes_total",
                "slotd_check_sweep_duration_seconds",
                "slotd_allocate_duration_seconds",
        };
        _cleanup_free_ char *text = NULL;
        const char *family = NULL;
        size_t n_families = 0, slot_lines = 0;
        Metrics mx;

        metrics_init(&mx);
        assert_non_null(metrics_fleet(&mx, "zeta"));
        assert_non_null(metrics_fleet(&mx, "alpha"));
        text = format(&mx);
        assert_true(strstr(text, "fleet=\"zeta\"") < strstr(text, "fleet=\"alpha\""));
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
                if (strncmp(line, "# HELP ", 7) == 0) {
                        assert_true(n_families < ELEMENTSOF(families));
                        family = families[n_families++];
                        assert_memory_equal(line + 7, family, strlen(family));
                        continue;
                }
                assert_non_null(family);
                if (strncmp(line, "# TYPE ", 7) == 0)
                        continue;
                assert_memory_equal(line, family, strlen(family));
                slot_lines += strncmp(line, "slotd_slots{", 12) == 0;
        }
        assert_int_equal(n_families, ELEMENTSOF(families));
        /* every State × ProcessState of each fleet, zeros included */
        assert_int_equal(slot_lines, 2 * _SLOT_STATE_MAX * _PROCESS_STATE_MAX);
        metrics_done(&mx);
}

static void test_names(void **state) {
        assert_string_equal(metrics_result_to_string(OPS_OK), "ok");
        assert_string_equal(metrics_result_to_string(OPS_ERROR_STATE_UNWRITABLE), "StateUnwritable");
        assert_string_equal(metrics_result_to_string(_OPS_ERROR_MAX), "Failed");
        assert_string_equal(metrics_cause_to_string(FAILURE_START_TIMEOUT), "start-timeout");
        assert_null(metrics_cause_to_string(FAILURE_PRE_RECOVERY));
        assert_string_equal(metrics_door_to_string(METRICS_DOOR_LOCALPROXY), "localproxy");
        assert_string_equal(metrics_request_to_string(METRICS_REQUEST_RESERVE), "reserve");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_slots),
                cmocka_unit_test(test_events),
                cmocka_unit_test(test_families),
                cmocka_unit_test(test_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
