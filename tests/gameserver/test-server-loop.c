/* SPDX-License-Identifier: MIT */
/*
 * The main loop: signals, inotify, timers and the query socket, all in one
 * poll() on the main thread, which alone touches struct server.
 */

#include "test-server.h"

static void reload(struct server *s, usec_t now)
{
        json_check(s, JSON_ALWAYS);
        if (s->control_enabled)
                control_check(s, now, false, true);
        s->state_dirty = true;
}

static void signals_handle(struct server *s, usec_t now)
{
        struct signalfd_siginfo si;

        while (read(s->signal_fd, &si, sizeof(si)) == sizeof(si)) {
                switch (si.ssi_signo) {
                case SIGTERM:
                        if (s->ignore_term) {
                                log_line("SIGTERM from pid %u ignored", si.ssi_pid);
                                break;
                        }
                        log_line("SIGTERM, exiting");
                        (void) notify_send(s, "STOPPING=1");
                        fflush(stdout);
                        exit(0);
                case SIGINT:
                        log_line("SIGINT, exiting");
                        fflush(stdout);
                        exit(0);
                case SIGHUP:
                        log_line("SIGHUP, re-reading %s and %s", JSON_NAME, CONTROL_NAME);
                        reload(s, now);
                        break;
                case SIGCHLD:
                        children_reap(s);
                        break;
                }
        }
}

static void inotify_handle(struct server *s)
{
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        ssize_t n;

        /* Only a wake-up: the content comparison decides what changed, so nothing runs twice. */
        while ((n = read(s->inotify_fd, buf, sizeof(buf))) > 0) {
                for (char *p = buf; p < buf + n;) {
                        struct inotify_event *ev = (struct inotify_event *) p;

                        if (ev->len > 0 && strcmp(ev->name, CONTROL_NAME) == 0)
                                s->control_event = true;
                        if (ev->len > 0 && strcmp(ev->name, JSON_NAME) == 0)
                                s->json_event = true;
                        p += sizeof(*ev) + ev->len;
                }
        }
}

static void deadline_min(usec_t *next, usec_t deadline)
{
        if (deadline != 0 && deadline < *next)
                *next = deadline;
}

static void timers_run(struct server *s, usec_t now)
{
        if (s->ready_at != 0 && now >= s->ready_at)
                ready_set(s, true);
        if (s->exit_at != 0 && now >= s->exit_at)
                exit_with(s->exit_code, "exit-after expired");
        if (s->crash_at != 0 && now >= s->crash_at)
                die_by_signal(s->crash_signal);
        if (s->watchdog_enabled && s->watchdog_usec > 0 && now >= s->watchdog_next)
                watchdog_ping(s, now);
        if (now >= s->next_file_check || s->json_event || s->control_event) {
                json_check(s, s->json_event ? JSON_IF_CONTENT_CHANGED : JSON_IF_STAMP_CHANGED);
                if (s->control_enabled)
                        control_check(s, now, false, s->control_event);
                s->json_event = false;
                s->control_event = false;
                s->next_file_check = now + s->file_check_usec;
        }
        if (now >= s->next_refresh) {
                char cgroup[sizeof(s->cgroup)];

                /* The supervisor's fork fallback moves us into the slot's cgroup after exec. */
                cgroup_read(cgroup, sizeof(cgroup));
                if (strcmp(cgroup, s->cgroup) != 0) {
                        copy_string(s->cgroup, sizeof(s->cgroup), cgroup);
                        s->state_dirty = true;
                }
                s->next_refresh = now + STATE_REFRESH_USEC;
        }
        memory_step(s, now);
        if (s->state_dirty ||
            (s->counters_dirty && now - s->state_written_at >= STATE_REFRESH_USEC))
                state_write(s, now);
}

static int poll_timeout(struct server *s, usec_t now)
{
        usec_t next = s->next_file_check;

        if (s->memory_pending >= (uint64_t) sysconf(_SC_PAGESIZE))
                return 0;
        deadline_min(&next, s->ready_at);
        deadline_min(&next, s->exit_at);
        deadline_min(&next, s->crash_at);
        if (s->watchdog_enabled && s->watchdog_usec > 0)
                deadline_min(&next, s->watchdog_next);
        if (next <= now)
                return 0;
        return (int) ((next - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC);
}

void __attribute__((noreturn)) main_loop(struct server *s)
{
        for (;;) {
                struct pollfd fds[4];
                nfds_t n = 0;
                usec_t now;
                int r;

                now = now_usec(CLOCK_MONOTONIC);
                timers_run(s, now);
                fds[n++] = (struct pollfd) { .fd = s->signal_fd, .events = POLLIN };
                if (s->query_fd >= 0)
                        fds[n++] = (struct pollfd) { .fd = s->query_fd, .events = POLLIN };
                if (s->inotify_fd >= 0)
                        fds[n++] = (struct pollfd) { .fd = s->inotify_fd, .events = POLLIN };
                if (s->sdk_fd >= 0)
                        fds[n++] = (struct pollfd) { .fd = s->sdk_fd, .events = POLLIN };
                r = poll(fds, n, poll_timeout(s, now));
                if (r < 0 && errno != EINTR) {
                        log_line("poll failed: %s", strerror(errno));
                        exit(1);
                }
                if (r <= 0)
                        continue;
                now = now_usec(CLOCK_MONOTONIC);
                signals_handle(s, now);
                if (s->query_fd >= 0)
                        query_handle(s);
                if (s->inotify_fd >= 0)
                        inotify_handle(s);
                if (s->sdk_fd >= 0)
                        sdk_handle(s);
        }
}

int signals_open(void)
{
        sigset_t set;

        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        sigaddset(&set, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                return -errno;
        (void) signal(SIGPIPE, SIG_IGN);
        return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* The 50 ms stat check works without it; inotify only makes changes land sooner. */
void inotify_open(struct server *s)
{
        s->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (s->inotify_fd < 0)
                return;
        if (inotify_add_watch(s->inotify_fd, s->home, IN_CLOSE_WRITE | IN_MOVED_TO | IN_MODIFY |
                                                      IN_CREATE | IN_DELETE | IN_ATTRIB) < 0) {
                close(s->inotify_fd);
                s->inotify_fd = -1;
        }
}
