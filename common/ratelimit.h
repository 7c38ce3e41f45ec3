/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

#include "time-util.h"

/* For log lines about what outsiders send (garbage datagrams): one line per source per
 * interval, saying how many went untold since the last. Pure. */

/* How often a flood of what outsiders send is told, at most. */
#define FLOOD_LOG_INTERVAL (10 * USEC_PER_SEC)

typedef struct RateLimit {
        usec_t begin;        /* CLOCK_MONOTONIC of the last event told, 0: none yet */
        unsigned suppressed; /* events since then not told */
} RateLimit;

/* An event at 'now': true when it is to be told (the first of an interval); then
 * *ret_suppressed holds how many were not told since the last one that was. */
bool ratelimit_tell(RateLimit *r, usec_t now, usec_t interval, unsigned *ret_suppressed);
