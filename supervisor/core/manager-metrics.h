/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

#include "metrics.h"

/* The machine's metrics (SPEC §14): what the manager tells metrics.c as things happen, each
 * call O(1) in the number of slots, and the text the local proxy serves on metrics.listen
 * (supervisor/proxy/proxy-metrics.c). */

typedef struct Manager Manager;
typedef struct Slot Slot;
typedef struct Fleet Fleet;

/* Every change of a slot (manager_slot_changed()), and once it is gone. */
void manager_metrics_slot_changed(Manager *m, Slot *s);
void manager_metrics_slot_removed(Manager *m, Slot *s);
/* The Crashed signal's reason, a strike, a fleet's round of checks (its duration). */
void manager_metrics_crashed(Manager *m, Slot *s, const char *reason);
void manager_metrics_strike(Manager *m, Slot *s, CheckKind check);
void manager_metrics_sweep(Manager *m, Fleet *f, usec_t duration);
/* A request of an allocation or reservation for 'fleet' (NULL or unknown: fleet="") and its
 * result; a granted one's time from 'started' (CLOCK_MONOTONIC) to its durable reply. */
void manager_metrics_request(Manager *m, const char *fleet, MetricsRequest request,
                             OpsErrorCode result);
void manager_metrics_replied(Manager *m, MetricsDoor door, MetricsRequest request,
                             usec_t started);
/* The exposition text, O(fleets + faults). */
int manager_metrics_format(Manager *m, char **ret, size_t *ret_size);
