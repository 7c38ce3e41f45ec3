/* SPDX-License-Identifier: MIT */
/* sd_notify by hand: READY=1, WATCHDOG=1, STATUS= and whatever a test asks to send. */

#include "test-server.h"

int notify_open(struct server *s)
{
        size_t len = strlen(s->notify_socket);

        if (len == 0)
                return 0;
        if (len >= sizeof(s->notify_addr.sun_path) || (s->notify_socket[0] != '/' &&
                                                       s->notify_socket[0] != '@'))
                return -EINVAL;
        s->notify_addr = (struct sockaddr_un) { .sun_family = AF_UNIX };
        memcpy(s->notify_addr.sun_path, s->notify_socket, len);
        /* "@name" is Linux's abstract namespace: a leading NUL, no terminator counted. */
        if (s->notify_socket[0] == '@')
                s->notify_addr.sun_path[0] = '\0';
        s->notify_addr_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len +
                                          (s->notify_socket[0] == '/'));
        /* Blocking, as sd_notify() is: a full queue at the supervisor (many servers starting
         * at once) delays the message instead of losing it; the timeout bounds the wait. */
        s->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s->notify_fd < 0)
                return -errno;
        (void) setsockopt(s->notify_fd, SOL_SOCKET, SO_SNDTIMEO,
                          &(struct timeval){ .tv_sec = 2 }, sizeof(struct timeval));
        return 0;
}

bool notify_send(struct server *s, const char *msg)
{
        if (s->notify_fd < 0)
                return false;
        if (sendto(s->notify_fd, msg, strlen(msg), MSG_NOSIGNAL,
                   (const struct sockaddr *) &s->notify_addr, s->notify_addr_len) >= 0)
                return true;
        if (!s->notify_error_shown) {
                log_line("notify: sending \"%s\" to %s failed: %s (further failures not shown)",
                         msg, s->notify_socket, strerror(errno));
                s->notify_error_shown = true;
        }
        return false;
}

void ready_set(struct server *s, bool ready)
{
        s->ready_at = 0;
        s->ready_wanted = false;
        if (ready)
                (void) notify_send(s, "READY=1");
        if (s->ready != ready)
                log_line("ready=%d", ready);
        s->ready = ready;
        s->state_dirty = true;
}

void watchdog_ping(struct server *s, usec_t now)
{
        if (notify_send(s, "WATCHDOG=1")) {
                s->watchdogs_sent++;
                s->counters_dirty = true;
        }
        s->watchdog_next = now + s->watchdog_usec;
}

/* systemd's convention: WATCHDOG_USEC is the deadline, so ping at half of it. */
void watchdog_from_env(struct server *s)
{
        const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
        uint64_t deadline, owner;

        if (!usec || parse_uint(usec, UINT64_MAX, &deadline) < 0 || deadline == 0)
                return;
        /* Meant for another process of the same environment (a wrapper, say). */
        if (pid && parse_uint(pid, INT_MAX, &owner) == 0 && (pid_t) owner != getpid())
                return;
        s->watchdog_usec = deadline / 2 > 0 ? deadline / 2 : 1;
        s->watchdog_enabled = true;
}
