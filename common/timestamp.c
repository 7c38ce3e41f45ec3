/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <time.h>

#include "macro.h"
#include "timestamp.h"

const char *rfc3339_format(usec_t t, char buf[static RFC3339_MAX]) {
        struct tm tm;
        time_t sec;

        if (t == 0) {
                buf[0] = '\0';
                return buf;
        }
        t = MIN(t, RFC3339_LAST_USEC);
        sec = (time_t) (t / USEC_PER_SEC);
        if (!gmtime_r(&sec, &tm)) {
                buf[0] = '\0';
                return buf;
        }
        /* The modulos only tell the compiler the widths (t is at most RFC3339_LAST_USEC). */
        snprintf(buf, RFC3339_MAX, "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ",
                 (unsigned) (tm.tm_year + 1900) % 10000U, (unsigned) (tm.tm_mon + 1) % 100U,
                 (unsigned) tm.tm_mday % 100U, (unsigned) tm.tm_hour % 100U,
                 (unsigned) tm.tm_min % 100U, (unsigned) tm.tm_sec % 100U,
                 (unsigned) (t % USEC_PER_SEC / USEC_PER_MSEC));
        return buf;
}
