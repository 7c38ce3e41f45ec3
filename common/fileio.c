/* SPDX-License-Identifier: MIT */
#include "fileio.h"
#include "macro.h"

int read_full_fd(int fd, size_t max, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, allocated = 0;

        for (;;) {
                ssize_t n;

                if (allocated - size < 4096) {
                        char *t;
                        if (allocated > max)
                                return -EFBIG;
                        t = realloc(buf, allocated + 8192);
                        if (!t)
                                return -ENOMEM;
                        buf = t;
                        allocated += 8192;
                }
                n = read(fd, buf + size, allocated - size - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (n == 0)
                        break;
                size += (size_t) n;
                if (size > max)
                        return -EFBIG;
        }
        buf[size] = '\0';
        *ret = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = size;
        return 0;
}
