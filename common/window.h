/* SPDX-License-Identifier: MIT */
#pragma once

#include "time-util.h"

/* The times of the last TIME_WINDOW_MAX events, to count how many fell within a window:
 * crashes within crash.window, strikes within checks.window. Pure, fixed size. */
#define TIME_WINDOW_MAX 64

typedef struct TimeWindow {
        usec_t at[TIME_WINDOW_MAX];   /* CLOCK_MONOTONIC */
        unsigned n, head;
} TimeWindow;

void time_window_add(TimeWindow *w, usec_t now);
/* Events at or after now - window; at most TIME_WINDOW_MAX. */
unsigned time_window_count(const TimeWindow *w, usec_t now, usec_t window);
void time_window_reset(TimeWindow *w);
