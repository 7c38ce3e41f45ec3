/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "time-util.h"
#include "window.h"

/* The misbehaviour checks of SPEC §6 as pure verdicts; the manager applies them. */

typedef enum CheckKind {
        CHECK_CPU,
        CHECK_MEMORY,
        CHECK_QUERY,
        CHECK_HEARTBEAT,
        _CHECK_KIND_MAX,
} CheckKind;

const char *check_kind_to_string(CheckKind k);

/* CPU used over the last interval ≤ budget × (1 + tolerance). */
bool check_cpu_ok(double used_cores, double budget_cores, double tolerance);
/* Memory ≤ budget + tolerance. */
bool check_memory_ok(uint64_t current, uint64_t budget, uint64_t tolerance);
/* Cores used between two cpu.stat usage_usec samples taken 'elapsed' apart. */
double cpu_cores_used(usec_t usage_before, usec_t usage_after, usec_t elapsed);

typedef struct StrikeVerdict {
        unsigned strikes;   /* strikes of this check within the window, this one included */
        bool act;           /* enough of them: send checks.signal */
} StrikeVerdict;

/* Records a failure of one check and says whether it is the one too many. */
StrikeVerdict strike_record(TimeWindow *w, usec_t now, usec_t window, unsigned needed);
