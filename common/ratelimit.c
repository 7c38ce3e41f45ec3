/* SPDX-License-Identifier: MIT */
#include "ratelimit.h"

bool ratelimit_tell(RateLimit *r, usec_t now, usec_t interval, unsigned *ret_suppressed) {
        if (r->begin != 0 && now >= r->begin && now - r->begin < interval) {
                if (r->suppressed < UINT32_MAX)
                        r->suppressed++;
                return false;
        }
        *ret_suppressed = r->suppressed;
        r->begin = now ?: 1;
        r->suppressed = 0;
        return true;
}
