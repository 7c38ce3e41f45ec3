/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "digest.h"
#include "machine-number.h"

int machine_number_parse(const char *s, uint64_t *ret) {
        uint64_t v = 0;

        if (!s || s[0] < '1' || s[0] > '9') /* no sign, no leading zero, not empty */
                return s && s[0] == '0' && s[1] == '\0' ? -ERANGE : -EINVAL;
        for (const char *p = s; *p; p++) {
                unsigned d = (unsigned) (*p - '0');

                if (*p < '0' || *p > '9')
                        return -EINVAL;
                /* Keep reading past an overflow: a bad character still says -EINVAL. */
                v = v > (MACHINE_NUMBER_MAX - d) / 10 ? MACHINE_NUMBER_MAX + 1 : v * 10 + d;
        }
        if (v > MACHINE_NUMBER_MAX)
                return -ERANGE;
        *ret = v;
        return 0;
}

uint64_t machine_number_from_id(const char *id) {
        uint8_t md[SHA256_DIGEST_SIZE];
        uint64_t v = 0;

        if (machine_number_parse(id, &v) == 0)
                return v;
        sha256(id ?: "", id ? strlen(id) : 0, md);
        for (unsigned i = 0; i < 8; i++)
                v = v << 8 | md[i];
        v &= MACHINE_NUMBER_MAX;
        return v == 0 ? 1 : v;
}
