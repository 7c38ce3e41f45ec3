/* SPDX-License-Identifier: MIT */
#pragma once

#include "time-util.h"

/* Deadlines, and the moments they count from, run on CLOCK_BOOTTIME: a step of the wall clock
 * does not move them, a suspend does not stop them, and every slotd of one boot reads the
 * same clock. People and D-Bus clients read them in real time, as the wall clock shows them
 * when they read: CLOCK_REALTIME = CLOCK_BOOTTIME + the wall offset below.
 *
 * The offset changes only when the wall clock is stepped (NTP's slewing moves both clocks
 * alike). Measured afresh it differs by a microsecond or so from one measure to the next, so
 * a shown deadline would too: the offset is kept, and replaced only when a measure differs
 * from it by more than WALL_OFFSET_SLACK_USEC, which is a step. The state file carries it, so
 * that the next slotd of the same boot shows the same values. */
#define WALL_OFFSET_SLACK_USEC (1 * USEC_PER_MSEC)

/* CLOCK_REALTIME − CLOCK_BOOTTIME now, as kept. */
usec_t wall_offset(void);
/* The offset an earlier slotd of this boot kept (its state file): kept unless the wall clock
 * was stepped since. */
void wall_offset_seed(usec_t offset);

/* A CLOCK_BOOTTIME moment as the wall clock shows it now; 0 (never) and infinity stay. */
static inline usec_t boottime_to_wall(usec_t t) {
        if (t == 0 || t == USEC_INFINITY)
                return t;
        return t + wall_offset();
}
