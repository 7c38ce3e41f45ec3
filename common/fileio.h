/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Reads all of fd (a file, or a /proc or cgroup file whose size stat does not tell) into a
 * NUL-terminated buffer; -EFBIG past max bytes. */
int read_full_fd(int fd, size_t max, char **ret, size_t *ret_size);

/* Whether this process, as the user it runs as now, can open path (a regular file) for
 * reading: for files a library opens later, on its own (libcurl's TLS files). Logs "KEY:
 * cannot read PATH as user U (uid N): ..." and returns a negative errno when not. NULL: 0. */
int check_file_readable(const char *path, const char *key);
