/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

#include "macro.h"

/* NULL-terminated arrays of owned strings. */
char **strv_free(char **l);
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);
#define _cleanup_strv_free_ _cleanup_(strv_freep)

size_t strv_length(char *const *l);
/* Appends a copy of s; on failure l is unchanged. */
int strv_extend(char ***l, const char *s);
/* Appends s itself (taking ownership only on success). */
int strv_push(char ***l, char *s);
char **strv_copy(char *const *l);
bool strv_equal(char *const *a, char *const *b);
bool strv_contains(char *const *l, const char *s);

/* Splits a string into words like a shell would for plain words: whitespace separates,
 * 'single' and "double" quotes group, backslash escapes the next character. No expansion.
 * Returns -EINVAL for an unterminated quote or trailing backslash. */
int strv_split_quoted(const char *s, char ***ret);

#define STRV_FOREACH(s, l) for (char *const *s = (l); s && *s; s++)
