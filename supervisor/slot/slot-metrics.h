/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

#include "slot-fsm.h"

/* What the machine's metrics (core/metrics.h) keep in each slot; the slot only holds it. */
typedef struct FleetMetrics FleetMetrics;

/* What the metrics count a slot as, kept in the slot: the gauge cell it is in, and what
 * tells a deallocation or a restart from the previous look. fleet NULL: not counted. */
typedef struct SlotMetricsMark {
        FleetMetrics *fleet;
        SlotState state;
        ProcessState process_state;
        bool allocated;
        unsigned restarts;
        uint64_t log_bytes_lost;
} SlotMetricsMark;
