/* SPDX-License-Identifier: MIT */
/* sd_notify datagram parser. The input is one datagram. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "notify.h"
#include "utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        NotifyMessage m, untouched;
        char copy[NOTIFY_STATUS_MAX];
        int r;

        memset(&m, 0x5a, sizeof(m));
        memcpy(&untouched, &m, sizeof(m));
        r = notify_parse((const char *) data, size, &m);
        FUZZ_ASSERT(r == 0 || r == -EBADMSG);
        if (r < 0) {
                FUZZ_ASSERT(memcmp(&m, &untouched, sizeof(m)) == 0);
                return 0;
        }

        /* Accepted datagrams are within the size limit and carry no NUL byte. */
        FUZZ_ASSERT(size > 0 && size <= NOTIFY_MESSAGE_MAX && !memchr(data, '\0', size));

        /* The status reaches D-Bus and logs: terminated, no control characters, valid UTF-8
         * (sanitizing a valid string leaves it as it is). */
        FUZZ_ASSERT_CLEAN_STRING(m.status);
        memcpy(copy, m.status, sizeof(copy));
        utf8_sanitize(copy);
        FUZZ_ASSERT(strcmp(copy, m.status) == 0);
        FUZZ_ASSERT(m.has_status || m.status[0] == '\0');
        FUZZ_ASSERT(!m.has_status || (size >= 7 && memmem(data, size, "STATUS=", 7)));
        FUZZ_ASSERT(!m.ready || memmem(data, size, "READY=1", 7));
        FUZZ_ASSERT(!m.watchdog || memmem(data, size, "WATCHDOG=1", 10));
        FUZZ_ASSERT(!m.stopping || memmem(data, size, "STOPPING=1", 10));
        return 0;
}
