/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Replaces, in place, every byte that is not part of a valid UTF-8 sequence (overlong forms,
 * surrogates and code points above U+10FFFF included) with '?'. Strings from game servers
 * reach D-Bus, which refuses a message carrying invalid UTF-8. Pure. */
void utf8_sanitize(char *s);
