/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>

#include "fileio.h"
#include "log.h"
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

int check_file_readable(const char *path, const char *key) {
        _cleanup_close_ int fd = -EBADF;
        struct passwd *pw;
        struct stat st;
        int r;

        if (!path)
                return 0;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd >= 0 && fstat(fd, &st) >= 0)
                return S_ISREG(st.st_mode) ? 0 : log_error_errno(EINVAL, "%s: %s is not a "
                                                                 "regular file", key, path);
        r = -errno;
        pw = getpwuid(geteuid());
        return log_error_errno(r, "%s: cannot read %s as user %s (uid %u): %m", key, path,
                               pw ? pw->pw_name : "?", (unsigned) geteuid());
}
