/* SPDX-License-Identifier: MIT */
#include "checks.h"
#include "macro.h"

static const char *const check_names[_CHECK_KIND_MAX] = {
        [CHECK_CPU] = "cpu",
        [CHECK_MEMORY] = "memory",
        [CHECK_QUERY] = "query",
        [CHECK_HEARTBEAT] = "heartbeat",
};

const char *check_kind_to_string(CheckKind k) {
        return k >= 0 && k < _CHECK_KIND_MAX ? check_names[k] : "invalid";
}

bool check_cpu_ok(double used_cores, double budget_cores, double tolerance) {
        /* A hair of slack so that a server using exactly its allowance passes despite the
         * rounding of microsecond counters. */
        return used_cores <= budget_cores * (1.0 + tolerance) + 1e-6;
}

bool check_memory_ok(uint64_t current, uint64_t budget, uint64_t tolerance) {
        uint64_t limit = budget > UINT64_MAX - tolerance ? UINT64_MAX : budget + tolerance;
        return current <= limit;
}

double cpu_cores_used(usec_t usage_before, usec_t usage_after, usec_t elapsed) {
        if (elapsed == 0 || usage_after < usage_before)
                return 0.0;
        return (double) (usage_after - usage_before) / (double) elapsed;
}

StrikeVerdict strike_record(TimeWindow *w, usec_t now, usec_t window, unsigned needed) {
        unsigned n;

        time_window_add(w, now);
        n = time_window_count(w, now, window);
        return (StrikeVerdict){ .strikes = n, .act = n >= needed };
}
