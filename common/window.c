/* SPDX-License-Identifier: MIT */
#include "macro.h"
#include "window.h"

void time_window_add(TimeWindow *w, usec_t now) {
        w->at[w->head] = now;
        w->head = (w->head + 1) % TIME_WINDOW_MAX;
        if (w->n < TIME_WINDOW_MAX)
                w->n++;
}

unsigned time_window_count(const TimeWindow *w, usec_t now, usec_t window) {
        unsigned count = 0;

        for (unsigned i = 0; i < w->n; i++) {
                usec_t t = w->at[(w->head + TIME_WINDOW_MAX - 1 - i) % TIME_WINDOW_MAX];
                if (now >= t && now - t <= window)
                        count++;
        }
        return count;
}

void time_window_reset(TimeWindow *w) {
        *w = (TimeWindow){};
}
