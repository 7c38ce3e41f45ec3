/* SPDX-License-Identifier: MIT */
#include "wallclock.h"

static usec_t kept_offset;

/* One read of CLOCK_REALTIME between two of CLOCK_BOOTTIME; a few tries, keeping the one
 * least disturbed (a preemption between the reads would skew it). */
static usec_t wall_offset_measure(void) {
        usec_t best = 0, best_gap = USEC_INFINITY;

        for (int i = 0; i < 4 && best_gap > 20; i++) {
                usec_t b1 = now_usec(CLOCK_BOOTTIME), r = now_usec(CLOCK_REALTIME);
                usec_t b2 = now_usec(CLOCK_BOOTTIME);

                if (b2 - b1 < best_gap) {
                        best_gap = b2 - b1;
                        best = r - (b1 + best_gap / 2);
                }
        }
        return best;
}

usec_t wall_offset(void) {
        usec_t o = wall_offset_measure();

        if (kept_offset == 0 || o > kept_offset + WALL_OFFSET_SLACK_USEC ||
            o + WALL_OFFSET_SLACK_USEC < kept_offset)
                kept_offset = o;
        return kept_offset;
}

void wall_offset_seed(usec_t offset) {
        kept_offset = offset;
        (void) wall_offset();
}
