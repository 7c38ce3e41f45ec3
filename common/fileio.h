/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Reads all of fd (a file, or a /proc or cgroup file whose size stat does not tell) into a
 * NUL-terminated buffer; -EFBIG past max bytes. */
int read_full_fd(int fd, size_t max, char **ret, size_t *ret_size);
