/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "alloc-id.h"

bool alloc_id_is_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > ALLOC_ID_MAX)
                return false;
        return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") == n;
}
