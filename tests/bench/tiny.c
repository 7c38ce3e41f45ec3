/* SPDX-License-Identifier: MIT */
/*
 * tiny: the one service every supervisor of the benchmark runs (tests/bench/README.md).
 *
 *   tiny STAMPFILE ID sleep        record the exec, then sleep until killed
 *   tiny STAMPFILE ID crash MS     record the exec, sleep MS, record the exit, exit 1
 *
 * Without arguments it reads the same words from ./tiny.args, so that s6 and runit can run
 * it directly as the service directory's ./run (a symbolic link to this binary): no shell
 * sits between the supervisor and the stamp.
 *
 * Each record is one line appended to STAMPFILE with a single write(2) on an O_APPEND
 * descriptor, so lines from many services never interleave:
 *   ID exec USEC      first thing after exec (CLOCK_MONOTONIC, microseconds)
 *   ID exit USEC      right before exit(1)
 * Then it tells its supervisor it is ready, the way each one listens:
 *   $NOTIFY_SOCKET set (slotd): a READY=1 datagram there (sd_notify);
 *   ./notification-fd present (s6): a newline on that descriptor, which it then closes.
 * runit and supervisord have no readiness protocol.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (unsigned long long) ts.tv_sec * 1000000ULL + (unsigned long long) ts.tv_nsec / 1000;
}

static void stamp(const char *file, const char *id, const char *what, unsigned long long usec) {
        char line[256];
        int fd, n;

        n = snprintf(line, sizeof(line), "%s %s %llu\n", id, what, usec);
        if (n <= 0 || (size_t) n >= sizeof(line))
                return;
        fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0)
                return;
        (void) !write(fd, line, (size_t) n);
        close(fd);
}

static void notify_ready(void) {
        const char *path = getenv("NOTIFY_SOCKET");
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        socklen_t len;
        int fd;

        if (!path || !*path || strlen(path) >= sizeof(sa.sun_path))
                return;
        strcpy(sa.sun_path, path);
        if (sa.sun_path[0] == '@')
                sa.sun_path[0] = '\0';
        len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + strlen(path));
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return;
        (void) sendto(fd, "READY=1", 7, MSG_NOSIGNAL, (struct sockaddr *) &sa, len);
        close(fd);
}

/* s6's readiness protocol: the service directory names the descriptor in notification-fd. */
static void notify_s6(void) {
        char buf[16] = {};
        int fd = open("notification-fd", O_RDONLY | O_CLOEXEC), n;

        if (fd < 0)
                return;
        n = (int) read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return;
        fd = atoi(buf);
        if (fd > 2) {
                (void) !write(fd, "\n", 1);
                close(fd);
        }
}

int main(int argc, char **argv) {
        unsigned long long start = now_usec();
        char buf[512], *words[5] = {};
        int n = 0;

        if (argc >= 4) {
                for (int i = 1; i < argc && n < 4; i++)
                        words[n++] = argv[i];
        } else {
                int fd = open("tiny.args", O_RDONLY | O_CLOEXEC);
                ssize_t r = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
                char *save = NULL;

                if (fd >= 0)
                        close(fd);
                if (r <= 0) {
                        fprintf(stderr, "usage: tiny STAMPFILE ID sleep|crash MS (or ./tiny.args)\n");
                        return 2;
                }
                buf[r] = '\0';
                for (char *w = strtok_r(buf, " \t\n", &save); w && n < 4; w = strtok_r(NULL, " \t\n", &save))
                        words[n++] = w;
        }
        if (n < 3 || (strcmp(words[2], "crash") == 0 && n < 4)) {
                fprintf(stderr, "usage: tiny STAMPFILE ID sleep|crash MS\n");
                return 2;
        }

        stamp(words[0], words[1], "exec", start);
        notify_ready();
        notify_s6();

        if (strcmp(words[2], "crash") == 0) {
                long ms = strtol(words[3], NULL, 10);
                struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
                stamp(words[0], words[1], "exit", now_usec());
                return 1;
        }
        for (;;)
                pause();
}
