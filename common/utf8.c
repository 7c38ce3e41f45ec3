/* SPDX-License-Identifier: MIT */
#include <stdint.h>

#include "utf8.h"

/* Length of the valid sequence starting at p, 0 if it is not one. */
static size_t utf8_valid_length(const unsigned char *p) {
        uint32_t c;
        size_t n;

        if (p[0] < 0x80)
                return 1;
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                n = 2, c = p[0] & 0x1f;
        else if (p[0] >= 0xe0 && p[0] <= 0xef)
                n = 3, c = p[0] & 0x0f;
        else if (p[0] >= 0xf0 && p[0] <= 0xf4)
                n = 4, c = p[0] & 0x07;
        else
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80) /* also stops at the NUL */
                        return 0;
                c = (c << 6) | (p[i] & 0x3f);
        }
        if ((n == 3 && c < 0x800) || (n == 4 && (c < 0x10000 || c > 0x10ffff)) ||
            (c >= 0xd800 && c <= 0xdfff))
                return 0;
        return n;
}

void utf8_sanitize(char *s) {
        unsigned char *p = (unsigned char *) s;

        while (*p) {
                size_t n = utf8_valid_length(p);
                if (n == 0) {
                        *p++ = '?';
                        continue;
                }
                p += n;
        }
}
