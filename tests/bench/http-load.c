/* SPDX-License-Identifier: MIT */
/*
 * http-load: a closed-loop HTTP/1.1 load client for the local proxy's benchmark
 * (tests/bench/README.md, "The local proxy"), the way wrk drives a server: CONNS keep-alive
 * connections to 127.0.0.1:PORT, each sending its next GET as soon as the answer to the last
 * is read (no pipelining), on one thread and one epoll loop.
 *
 *   http-load PORT SECONDS CONNS PATH [SLOT_CGROUP_FMT HOME_CGROUP FIRST COUNT ROTATE]
 *
 * PATH may hold one %u: the slot of the connection. With SLOT_CGROUP_FMT (a printf format with
 * one %u: a slot's cgroup directory), each connection's socket is made while this process is
 * in the cgroup of a slot (FIRST .. FIRST+COUNT-1, in turn), so that the proxy counts it as that
 * slot's (see ws-sub.c), and after ROTATE answers the connection is closed and another opened
 * in the next slot: a slot may make 50 requests a second (bursts of 100), so one connection in
 * one slot is capped at 50/s, and a load beyond the limit must come from many slots. Without
 * it every connection is the host's (one shared limit: 64 connections, 50 requests/s).
 * SLOT_CGROUP_FMT "-" keeps every socket in this process's cgroup but rotates the same way
 * (a peer server driven with the same settings).
 *
 * 0.5 s of warm-up, then SECONDS measured. Prints one line (times in µs):
 *   conns= seconds= requests= rps= s2xx= s429= sother= errors= reconnects= p50= p99= max=
 *   client_cpu_pct=
 * requests counts every answer (any status); client_cpu_pct is this process's CPU time over
 * the window (near 100: the client may be what bounds the rate). Dies with its parent.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF 16384
#define WARMUP_USEC 500000ULL

typedef struct Conn {
        int fd;
        unsigned slot;
        unsigned answered;             /* on this connection */
        int connecting;
        uint64_t sent_at;
        size_t rlen;
        char rbuf[RBUF];
} Conn;

static unsigned port, rotate, first, count, next_slot;
static const char *path_fmt, *cg_fmt, *cg_home;
static int epfd;
static uint64_t t_start, t_end;
static unsigned long long n_req, n_2xx, n_429, n_other, n_err, n_reconn;
static uint32_t *lat;
static size_t n_lat, lat_cap;

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000;
}

static uint64_t cpu_usec(void) {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        return (uint64_t) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000ULL +
               (uint64_t) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static void write_cgroup(const char *dir) {
        char p[4096];
        int fd;

        snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
        fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1) {
                fprintf(stderr, "http-load: cannot move into %s: %s\n", dir, strerror(errno));
                exit(1);
        }
        close(fd);
}

static int send_request(Conn *c) {
        char req[512];
        int n;

        n = snprintf(req, sizeof(req), "GET ");
        n += snprintf(req + n, sizeof(req) - (size_t) n, path_fmt, c->slot);
        n += snprintf(req + n, sizeof(req) - (size_t) n, " HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n", port);
        c->sent_at = now_usec();
        return send(c->fd, req, (size_t) n, MSG_NOSIGNAL) == n ? 0 : -1;
}

static void open_conn(Conn *c) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = c };
        int one = 1;

        if (count > 0)
                c->slot = first + next_slot++ % count;
        if (cg_fmt) {
                char dir[4096];
                snprintf(dir, sizeof(dir), cg_fmt, c->slot);
                write_cgroup(dir);
        }
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (cg_fmt)
                write_cgroup(cg_home);
        if (c->fd < 0) {
                fprintf(stderr, "http-load: socket: %s\n", strerror(errno));
                exit(1);
        }
        (void) setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->answered = 0;
        c->rlen = 0;
        c->connecting = 1;
        if (connect(c->fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
                fprintf(stderr, "http-load: connect: %s\n", strerror(errno));
                exit(1);
        }
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
                exit(1);
}

static void reopen(Conn *c, int error) {
        uint64_t t = now_usec();

        if (t >= t_start && t < t_end) {
                if (error)
                        n_err++;
                else
                        n_reconn++;
        }
        close(c->fd);
        open_conn(c);
}

/* The length of a whole answer at the start of the buffer, 0 if it is not all there yet. */
static size_t answer_length(Conn *c, int *status, int *close_after) {
        char *end = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4), *p;
        size_t hdr, body = 0;

        if (!end)
                return 0;
        hdr = (size_t) (end + 4 - c->rbuf);
        *end = '\0';
        *status = c->rlen > 12 ? atoi(c->rbuf + 9) : 0;
        *close_after = 0;
        for (p = strstr(c->rbuf, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
                char *line = p + 2, *eol = strstr(line, "\r\n");
                size_t l = eol ? (size_t) (eol - line) : strlen(line);

                if (strncasecmp(line, "Content-Length:", 15) == 0)
                        body = strtoul(line + 15, NULL, 10);
                else if (strncasecmp(line, "Connection:", 11) == 0 && (memmem(line + 11, l - 11, "close", 5) || memmem(line + 11, l - 11, "Close", 5)))
                        *close_after = 1;
        }
        *end = '\r';
        if (c->rlen < hdr + body)
                return 0;
        return hdr + body;
}

static void on_event(Conn *c, uint32_t events) {
        if (c->connecting) {
                struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
                int err = 0;
                socklen_t l = sizeof(err);
                if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0 || err != 0)
                        return reopen(c, 1);
                c->connecting = 0;
                (void) epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
                if (send_request(c) < 0)
                        reopen(c, 1);
                return;
        }
        (void) events;
        for (;;) {
                ssize_t n = recv(c->fd, c->rbuf + c->rlen, RBUF - c->rlen - 1, MSG_DONTWAIT);
                int status, close_after;
                size_t len;
                uint64_t t;

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return;
                if (n <= 0)
                        return reopen(c, 1);
                c->rlen += (size_t) n;
                len = answer_length(c, &status, &close_after);
                if (len == 0) {
                        if (c->rlen >= RBUF - 1)
                                return reopen(c, 1);
                        continue;
                }
                t = now_usec();
                if (t >= t_start && t < t_end) {
                        n_req++;
                        if (status >= 200 && status < 300)
                                n_2xx++;
                        else if (status == 429)
                                n_429++;
                        else
                                n_other++;
                        if (n_lat == lat_cap) {
                                lat_cap = lat_cap ? lat_cap * 2 : 1 << 16;
                                lat = realloc(lat, lat_cap * sizeof(uint32_t));
                                if (!lat)
                                        exit(1);
                        }
                        lat[n_lat++] = (uint32_t) (t - c->sent_at);
                }
                memmove(c->rbuf, c->rbuf + len, c->rlen - len);
                c->rlen -= len;
                c->answered++;
                if (close_after || (rotate > 0 && c->answered >= rotate))
                        return reopen(c, 0);
                if (send_request(c) < 0)
                        return reopen(c, 1);
                return;
        }
}

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return x < y ? -1 : x > y;
}

static uint32_t pct(double p) {
        size_t k;
        if (n_lat == 0)
                return 0;
        k = (size_t) (p / 100.0 * (double) n_lat + 0.999999);
        if (k < 1)
                k = 1;
        if (k > n_lat)
                k = n_lat;
        return lat[k - 1];
}

int main(int argc, char **argv) {
        struct epoll_event evs[256];
        unsigned conns;
        double seconds;
        Conn *c;
        uint64_t cpu0 = 0, cpu1 = 0;
        int cpu_taken = 0;

        if (argc != 5 && argc != 10) {
                fprintf(stderr, "usage: http-load PORT SECONDS CONNS PATH [SLOT_CGROUP_FMT HOME_CGROUP FIRST COUNT ROTATE]\n");
                return 2;
        }
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
                return 1;
        signal(SIGPIPE, SIG_IGN);
        port = (unsigned) strtoul(argv[1], NULL, 10);
        seconds = strtod(argv[2], NULL);
        conns = (unsigned) strtoul(argv[3], NULL, 10);
        path_fmt = argv[4];
        if (argc == 10) {
                /* "-": no cgroup, but the same rotation (a peer driven the same way). */
                cg_fmt = strcmp(argv[5], "-") != 0 ? argv[5] : NULL;
                cg_home = argv[6];
                first = (unsigned) strtoul(argv[7], NULL, 10);
                count = (unsigned) strtoul(argv[8], NULL, 10);
                rotate = (unsigned) strtoul(argv[9], NULL, 10);
                if (count == 0)
                        return 2;
        }
        if (conns == 0 || seconds <= 0 || seconds > 600)
                return 2;
        c = calloc(conns, sizeof(Conn));
        epfd = epoll_create1(EPOLL_CLOEXEC);
        if (!c || epfd < 0)
                return 1;
        t_start = now_usec() + WARMUP_USEC;
        t_end = t_start + (uint64_t) (seconds * 1e6);
        for (unsigned i = 0; i < conns; i++)
                open_conn(&c[i]);
        for (;;) {
                uint64_t t = now_usec();
                int n;

                if (!cpu_taken && t >= t_start) {
                        cpu0 = cpu_usec();
                        cpu_taken = 1;
                }
                if (t >= t_end)
                        break;
                n = epoll_wait(epfd, evs, 256, 100);
                if (n < 0 && errno != EINTR)
                        return 1;
                for (int i = 0; i < n; i++)
                        on_event(evs[i].data.ptr, evs[i].events);
        }
        cpu1 = cpu_usec();
        qsort(lat, n_lat, sizeof(uint32_t), cmp_u32);
        printf("conns=%u seconds=%.3f requests=%llu rps=%.1f s2xx=%llu s429=%llu sother=%llu errors=%llu "
               "reconnects=%llu p50=%u p99=%u max=%u client_cpu_pct=%.1f\n",
               conns, seconds, n_req, (double) n_req / seconds, n_2xx, n_429, n_other, n_err, n_reconn, pct(50),
               pct(99), n_lat ? lat[n_lat - 1] : 0, 100.0 * (double) (cpu1 - cpu0) / (seconds * 1e6));
        return 0;
}
