/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <time.h>

/* One time type: microseconds. CLOCK_MONOTONIC for timeouts within one slotd, CLOCK_BOOTTIME
 * for deadlines that outlive it (holds, reservations, TTLs: wallclock.h), CLOCK_REALTIME only
 * for what people and D-Bus clients read. */
typedef uint64_t usec_t;

#define USEC_INFINITY ((usec_t) UINT64_MAX)
#define USEC_PER_MSEC ((usec_t) 1000ULL)
#define USEC_PER_SEC ((usec_t) 1000000ULL)
#define USEC_PER_MINUTE (60ULL * USEC_PER_SEC)
#define USEC_PER_HOUR (60ULL * USEC_PER_MINUTE)
#define NSEC_PER_USEC ((uint64_t) 1000ULL)

static inline usec_t now_usec(clockid_t clock) {
        struct timespec ts;
        if (clock_gettime(clock, &ts) < 0)
                return 0;
        return (usec_t) ts.tv_sec * USEC_PER_SEC + (usec_t) ts.tv_nsec / NSEC_PER_USEC;
}

/* Moves a CLOCK_BOOTTIME moment t of one boot, whose wall offset (CLOCK_REALTIME −
 * CLOCK_BOOTTIME, wallclock.h) was from_offset, to the boot whose offset is to_offset, through
 * the wall clock. A realtime value is a moment of offset 0. 0 (none) and infinity stay; a
 * moment before the new boot is its earliest, 1. */
static inline usec_t boottime_rebase(usec_t t, usec_t from_offset, usec_t to_offset) {
        usec_t wall;

        if (t == 0 || t == USEC_INFINITY)
                return t;
        wall = t + from_offset;
        return wall > to_offset ? wall - to_offset : 1;
}

/* Converts a monotonic deadline into the realtime clock for display; 0 and infinity stay. */
static inline usec_t monotonic_to_realtime(usec_t mono) {
        if (mono == 0 || mono == USEC_INFINITY)
                return mono;
        usec_t m = now_usec(CLOCK_MONOTONIC), r = now_usec(CLOCK_REALTIME);
        if (mono >= m)
                return r + (mono - m);
        return r > (m - mono) ? r - (m - mono) : 0;
}
