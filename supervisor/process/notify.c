/* SPDX-License-Identifier: MIT */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "macro.h"
#include "notify.h"
#include "utf8.h"

int notify_parse(const char *buf, size_t size, NotifyMessage *ret) {
        NotifyMessage m = {};
        bool any = false;

        if (size == 0 || size > NOTIFY_MESSAGE_MAX || memchr(buf, '\0', size))
                return -EBADMSG;
        for (size_t pos = 0; pos < size;) {
                const char *line = buf + pos, *nl = memchr(line, '\n', size - pos);
                size_t len = nl ? (size_t) (nl - line) : size - pos;

                pos += len + (nl ? 1 : 0);
                if (len == 7 && memcmp(line, "READY=1", 7) == 0)
                        m.ready = any = true;
                else if (len == 10 && memcmp(line, "WATCHDOG=1", 10) == 0)
                        m.watchdog = any = true;
                else if (len == 10 && memcmp(line, "STOPPING=1", 10) == 0)
                        m.stopping = any = true;
                else if (len >= 7 && memcmp(line, "STATUS=", 7) == 0) {
                        size_t n = MIN(len - 7, sizeof(m.status) - 1);
                        for (size_t i = 0; i < n; i++) {
                                unsigned char c = (unsigned char) line[7 + i];
                                m.status[i] = (c < 0x20 || c == 0x7f) ? '?' : (char) c;
                        }
                        m.status[n] = '\0';
                        utf8_sanitize(m.status);
                        m.has_status = any = true;
                } else if (memchr(line, '=', len))
                        any = true; /* a well-formed assignment we do not use */
        }
        if (!any)
                return -EBADMSG;
        *ret = m;
        return 0;
}

int notify_socket_open(const char *path, int *ret_fd) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        int one = 1;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return negative_errno();
        (void) unlink(path);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return negative_errno();
        if (chmod(path, 0666) < 0)
                return negative_errno();
        if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}
