/* SPDX-License-Identifier: MIT */
#include "macro.h"
#include "state-reserve.h"

#define RESERVE_ALIGN 4096u

uint64_t state_reserve_need(size_t n_slots) {
        return (uint64_t) n_slots * STATE_SLOT_LINE_MAX + STATE_MACHINE_LINES_MAX;
}

bool state_reserve_covers(uint64_t size, uint64_t end, uint64_t bytes) {
        return end >= size && end - size >= bytes;
}

uint64_t state_reserve_target(uint64_t need) {
        uint64_t target = need + need / 2;

        return (target + RESERVE_ALIGN - 1) / RESERVE_ALIGN * RESERVE_ALIGN;
}

uint64_t state_reserve_top_up(uint64_t size, uint64_t end, uint64_t need) {
        if (state_reserve_covers(size, end, need + need / 4))
                return 0;
        return state_reserve_target(need);
}

usec_t state_retry_next(usec_t previous) {
        if (previous < STATE_RETRY_MIN_USEC)
                return STATE_RETRY_MIN_USEC;
        return MIN(previous * 2, (usec_t) STATE_RETRY_MAX_USEC);
}
