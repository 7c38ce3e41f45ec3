/* SPDX-License-Identifier: MIT */
/*
 * ws-sub: the subscriber side of the local proxy's benchmark (tests/bench/README.md, "The local
 * proxy"). One process, one epoll loop, one WebSocket per slot, each speaking the Centrifuge
 * client protocol v2 in JSON by hand, as centrifuge-js 5.x does:
 *
 *   {"connect":{},"id":1}                       then, on its reply,
 *   {"subscribe":{"channel":"server#N"},"id":2}
 *
 * and answering the proxy's pings ({}) with pongs ({}). Every publication is stamped with
 * CLOCK_MONOTONIC on the recv() that brought it, before it is parsed.
 *
 *   ws-sub PORT FIRST COUNT [SLOT_CGROUP_FMT HOME_CGROUP]
 *
 * opens COUNT connections to 127.0.0.1:PORT, for slots FIRST .. FIRST+COUNT-1. With
 * SLOT_CGROUP_FMT (a printf format with one %u, the slot's cgroup directory), the socket of
 * slot N is made while this process is in slot N's cgroup (it writes itself into that
 * cgroup.procs, calls socket(), and goes back to HOME_CGROUP): the kernel records the cgroup a
 * socket was made in, and slotd names the caller's slot from it (sock_diag), so each
 * connection is its slot's, as its game server's would be, under that slot's limits. Without
 * it every connection is the host's (root outside any slot: one shared limit of 64
 * connections and 50 requests/s).
 *
 * At most 64 connections are being set up at a time. When every connection is subscribed (or
 * has failed) it prints one line
 *   ready subscribed=S failed=F usec=T        (T: the set-up time)
 * and then obeys commands on stdin, one a line, each answered by one line on stdout:
 *   dump PATH   writes every publication received so far to PATH, one a line:
 *               USEC SLOT EVENT_TYPE ALLOCATION_ID OFFSET
 *               and answers "dumped N"
 *   subs PATH   writes when each subscription was confirmed (the stamp of the recv that
 *               brought the subscribe reply), one a line: USEC SLOT; answers "dumped N"
 *   stats       "stats open=O subscribed=S pubs=P pings=G closed=C"
 *   quit (or end of file)   closes every connection and exits
 * It exits by itself after 30 minutes whatever happens, and dies with its parent
 * (PR_SET_PDEATHSIG).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SETUP 64                 /* connections being set up at once */
#define RBUF 65536                   /* per connection: one proxy frame is far smaller */
#define SETUP_TIMEOUT_USEC (120ULL * 1000000ULL)
#define LIFETIME_USEC (30ULL * 60ULL * 1000000ULL)

enum { C_NEW, C_CONNECTING, C_HANDSHAKE, C_CONNECT_SENT, C_SUBSCRIBE_SENT, C_SUBSCRIBED, C_FAILED };

typedef struct Conn {
        unsigned slot;
        int fd;
        int state;
        size_t rlen;
        uint8_t *rbuf;
        uint8_t *msg;                /* a fragmented message being put together */
        uint64_t t_subscribed;       /* when the subscribe reply came */
        size_t msg_len;
} Conn;

typedef struct Pub {
        uint64_t usec;
        unsigned slot;
        uint64_t offset;
        char type[24];
        char alloc[80];
} Pub;

static Conn *conns;
static unsigned n_conns, n_subscribed, n_failed, n_open, n_pings, n_closed;
static Pub *pubs;
static size_t n_pubs, pubs_cap;
static int epfd;
static unsigned port;
static const char *cg_fmt, *cg_home;
static uint32_t rng = 2463534242u;

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000;
}

static void die(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        fputs("ws-sub: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        exit(1);
}

static void write_cgroup(const char *dir) {
        char path[4096];
        int fd;

        snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
                die("cannot move into %s: %s", dir, strerror(errno));
        close(fd);
}

static void conn_fail(Conn *c, const char *why) {
        if (c->state == C_SUBSCRIBED)
                n_subscribed--;
        if (c->state != C_FAILED) {
                n_failed++;
                fprintf(stderr, "ws-sub: slot %u: %s\n", c->slot, why);
        }
        if (c->fd >= 0) {
                close(c->fd);
                n_open--;
                n_closed++;
        }
        c->fd = -1;
        c->state = C_FAILED;
}

static int send_all(Conn *c, const void *data, size_t len) {
        const uint8_t *p = data;

        /* Small writes on an idle socket: they fit the send buffer at once. */
        while (len > 0) {
                ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

/* One masked frame (a client must mask, RFC 6455 §5.3). */
static int send_frame(Conn *c, int opcode, const char *payload, size_t len) {
        uint8_t buf[512 + 14], mask[4];
        size_t h = 0;

        if (len > 512)
                return -1;
        buf[h++] = (uint8_t) (0x80 | opcode);
        if (len < 126)
                buf[h++] = (uint8_t) (0x80 | len);
        else {
                buf[h++] = 0x80 | 126;
                buf[h++] = (uint8_t) (len >> 8);
                buf[h++] = (uint8_t) len;
        }
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        memcpy(mask, &rng, 4);
        memcpy(buf + h, mask, 4);
        h += 4;
        for (size_t i = 0; i < len; i++)
                buf[h + i] = (uint8_t) payload[i] ^ mask[i & 3];
        return send_all(c, buf, h + len);
}

static int send_text(Conn *c, const char *text) {
        return send_frame(c, 1, text, strlen(text));
}

/* "KEY":"VALUE" → VALUE (no escapes in what the proxy sends here). */
static int json_str(const char *s, size_t len, const char *key, char *out, size_t outsz) {
        char pat[64];
        const char *p, *end = s + len, *q;
        size_t k;

        snprintf(pat, sizeof(pat), "\"%s\":\"", key);
        p = memmem(s, len, pat, strlen(pat));
        if (!p)
                return -1;
        p += strlen(pat);
        q = memchr(p, '"', (size_t) (end - p));
        if (!q)
                return -1;
        k = (size_t) (q - p);
        if (k >= outsz)
                k = outsz - 1;
        memcpy(out, p, k);
        out[k] = '\0';
        return 0;
}

static int json_uint(const char *s, size_t len, const char *key, uint64_t *out) {
        char pat[64];
        const char *p;

        snprintf(pat, sizeof(pat), "\"%s\":", key);
        p = memmem(s, len, pat, strlen(pat));
        if (!p)
                return -1;
        *out = strtoull(p + strlen(pat), NULL, 10);
        return 0;
}

static void on_reply_line(Conn *c, const char *s, size_t len, uint64_t t) {
        char buf[128];

        if (len == 2 && memcmp(s, "{}", 2) == 0) {  /* the server's ping: pong */
                n_pings++;
                if (send_text(c, "{}") < 0)
                        conn_fail(c, "cannot send a pong");
                return;
        }
        if (memmem(s, len, "\"push\"", 6)) {
                Pub *p;
                if (!memmem(s, len, "\"pub\"", 5))
                        return;  /* another push (a disconnect, say): not an event */
                if (n_pubs == pubs_cap) {
                        pubs_cap = pubs_cap ? pubs_cap * 2 : 4096;
                        pubs = realloc(pubs, pubs_cap * sizeof(Pub));
                        if (!pubs)
                                die("out of memory");
                }
                p = &pubs[n_pubs++];
                memset(p, 0, sizeof(*p));
                p->usec = t;
                p->slot = c->slot;
                (void) json_str(s, len, "EventType", p->type, sizeof(p->type));
                (void) json_str(s, len, "AllocationID", p->alloc, sizeof(p->alloc));
                (void) json_uint(s, len, "offset", &p->offset);
                return;
        }
        if (memmem(s, len, "\"error\"", 7)) {
                snprintf(buf, sizeof(buf), "error reply: %.*s", (int) (len < 100 ? len : 100), s);
                conn_fail(c, buf);
                return;
        }
        if (c->state == C_CONNECT_SENT && memmem(s, len, "\"connect\"", 9)) {
                snprintf(buf, sizeof(buf), "{\"subscribe\":{\"channel\":\"server#%u\"},\"id\":2}", c->slot);
                if (send_text(c, buf) < 0)
                        return conn_fail(c, "cannot send subscribe");
                c->state = C_SUBSCRIBE_SENT;
                return;
        }
        if (c->state == C_SUBSCRIBE_SENT && memmem(s, len, "\"subscribe\"", 11)) {
                c->state = C_SUBSCRIBED;
                c->t_subscribed = t;
                n_subscribed++;
        }
}

/* A whole text message: Centrifuge v2 puts one reply a line. */
static void on_message(Conn *c, const uint8_t *m, size_t len, uint64_t t) {
        const char *s = (const char *) m, *end = s + len;

        while (s < end && c->state != C_FAILED) {
                const char *nl = memchr(s, '\n', (size_t) (end - s));
                size_t l = nl ? (size_t) (nl - s) : (size_t) (end - s);
                if (l > 0)
                        on_reply_line(c, s, l, t);
                s += l + 1;
        }
}

/* Frames from the server: never masked. */
static void parse_frames(Conn *c, uint64_t t) {
        size_t pos = 0;

        while (c->state != C_FAILED) {
                uint8_t *b = c->rbuf + pos;
                size_t avail = c->rlen - pos, h = 2;
                uint64_t len;
                int fin, op;

                if (avail < 2)
                        break;
                fin = b[0] & 0x80;
                op = b[0] & 0x0f;
                len = b[1] & 0x7f;
                if (len == 126) {
                        if (avail < 4)
                                break;
                        len = ((uint64_t) b[2] << 8) | b[3];
                        h = 4;
                } else if (len == 127) {
                        if (avail < 10)
                                break;
                        len = 0;
                        for (int i = 0; i < 8; i++)
                                len = (len << 8) | b[2 + i];
                        h = 10;
                }
                if (len > RBUF - 16)
                        return conn_fail(c, "frame too large");
                if (avail < h + len)
                        break;
                if (op == 8)
                        return conn_fail(c, "closed by the proxy");
                if (op == 9) {
                        if (send_frame(c, 10, (const char *) b + h, len) < 0)
                                return conn_fail(c, "cannot send a pong frame");
                } else if (op == 1 || op == 0) {
                        if (!fin || c->msg) {
                                uint8_t *n = realloc(c->msg, c->msg_len + len);
                                if (!n)
                                        die("out of memory");
                                memcpy(n + c->msg_len, b + h, len);
                                c->msg = n;
                                c->msg_len += len;
                                if (fin) {
                                        on_message(c, c->msg, c->msg_len, t);
                                        free(c->msg);
                                        c->msg = NULL;
                                        c->msg_len = 0;
                                }
                        } else
                                on_message(c, b + h, len, t);
                }
                pos += h + len;
        }
        if (pos > 0 && c->state != C_FAILED) {
                memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
                c->rlen -= pos;
        }
}

static void start_conn(Conn *c) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.ptr = c };
        char dir[4096];
        int one = 1;

        if (cg_fmt) {
                snprintf(dir, sizeof(dir), cg_fmt, c->slot);
                write_cgroup(dir);
        }
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (cg_fmt)
                write_cgroup(cg_home);
        if (c->fd < 0)
                die("socket: %s", strerror(errno));
        n_open++;
        (void) setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->rbuf = malloc(RBUF);
        if (!c->rbuf)
                die("out of memory");
        if (connect(c->fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
                return conn_fail(c, "connect failed");
        c->state = C_CONNECTING;
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
                die("epoll_ctl: %s", strerror(errno));
}

static void on_writable(Conn *c) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
        char req[512];
        int err = 0;
        socklen_t l = sizeof(err);

        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0 || err != 0)
                return conn_fail(c, "connect refused");
        snprintf(req, sizeof(req),
                 "GET /v1/connection/websocket HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
                 "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                 port);
        if (send_all(c, req, strlen(req)) < 0)
                return conn_fail(c, "cannot send the handshake");
        c->state = C_HANDSHAKE;
        (void) epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void on_readable(Conn *c) {
        for (;;) {
                ssize_t n = recv(c->fd, c->rbuf + c->rlen, RBUF - c->rlen, MSG_DONTWAIT);
                uint64_t t = now_usec();  /* the stamp of what this recv brought */
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return;
                if (n <= 0)
                        return conn_fail(c, n == 0 ? "the proxy closed the connection" : "recv failed");
                c->rlen += (size_t) n;
                if (c->state == C_HANDSHAKE) {
                        uint8_t *e = memmem(c->rbuf, c->rlen, "\r\n\r\n", 4);
                        size_t h;
                        if (!e) {
                                if (c->rlen == RBUF)
                                        return conn_fail(c, "handshake answer too long");
                                continue;
                        }
                        if (c->rlen < 12 || memcmp(c->rbuf + 9, "101", 3) != 0) {
                                char why[96];
                                snprintf(why, sizeof(why), "handshake refused: %.40s",
                                         (const char *) c->rbuf);
                                for (char *p = why; *p; p++)
                                        if (*p == '\r' || *p == '\n')
                                                *p = ' ';
                                return conn_fail(c, why);
                        }
                        h = (size_t) (e + 4 - c->rbuf);
                        memmove(c->rbuf, c->rbuf + h, c->rlen - h);
                        c->rlen -= h;
                        if (send_text(c, "{\"connect\":{},\"id\":1}") < 0)
                                return conn_fail(c, "cannot send connect");
                        c->state = C_CONNECT_SENT;
                }
                parse_frames(c, t);
                if (c->state == C_FAILED)
                        return;
        }
}

static unsigned in_setup(void) {
        unsigned k = 0;
        for (unsigned i = 0; i < n_conns; i++)
                if (conns[i].state >= C_CONNECTING && conns[i].state < C_SUBSCRIBED)
                        k++;
        return k;
}

static void handle_command(char *line) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strncmp(line, "dump ", 5) == 0) {
                FILE *f = fopen(line + 5, "w");
                if (!f) {
                        printf("error %s\n", strerror(errno));
                        return;
                }
                for (size_t i = 0; i < n_pubs; i++)
                        fprintf(f, "%llu %u %s %s %llu\n", (unsigned long long) pubs[i].usec, pubs[i].slot,
                                pubs[i].type[0] ? pubs[i].type : "-", pubs[i].alloc[0] ? pubs[i].alloc : "-",
                                (unsigned long long) pubs[i].offset);
                fclose(f);
                printf("dumped %zu\n", n_pubs);
        } else if (strncmp(line, "subs ", 5) == 0) {
                FILE *f = fopen(line + 5, "w");
                if (!f) {
                        printf("error %s\n", strerror(errno));
                        return;
                }
                for (unsigned i = 0; i < n_conns; i++)
                        if (conns[i].t_subscribed)
                                fprintf(f, "%llu %u\n", (unsigned long long) conns[i].t_subscribed, conns[i].slot);
                fclose(f);
                printf("dumped %u\n", n_subscribed);
        } else if (strcmp(line, "stats") == 0)
                printf("stats open=%u subscribed=%u pubs=%zu pings=%u closed=%u\n", n_open, n_subscribed,
                       n_pubs, n_pings, n_closed);
        else
                printf("error unknown command\n");
}

int main(int argc, char **argv) {
        struct epoll_event evs[256], sev = { .events = EPOLLIN, .data.ptr = NULL };
        unsigned first, next = 0;
        uint64_t t0, deadline_setup, deadline_life;
        int ready = 0;
        char cmd[8192];
        size_t cmd_len = 0;

        if (argc != 4 && argc != 6) {
                fprintf(stderr, "usage: ws-sub PORT FIRST COUNT [SLOT_CGROUP_FMT HOME_CGROUP]\n");
                return 2;
        }
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
                return 1;
        signal(SIGPIPE, SIG_IGN);
        setvbuf(stdout, NULL, _IOLBF, 0);
        port = (unsigned) strtoul(argv[1], NULL, 10);
        first = (unsigned) strtoul(argv[2], NULL, 10);
        n_conns = (unsigned) strtoul(argv[3], NULL, 10);
        if (argc == 6) {
                cg_fmt = argv[4];
                cg_home = argv[5];
        }
        conns = calloc(n_conns ? n_conns : 1, sizeof(Conn));
        epfd = epoll_create1(EPOLL_CLOEXEC);
        if (!conns || epfd < 0)
                die("set-up failed");
        for (unsigned i = 0; i < n_conns; i++)
                conns[i] = (Conn){ .slot = first + i, .fd = -1, .state = C_NEW };
        (void) fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
        t0 = now_usec();
        deadline_setup = t0 + SETUP_TIMEOUT_USEC;
        deadline_life = t0 + LIFETIME_USEC;

        for (;;) {
                uint64_t t = now_usec();
                int n;

                if (!ready) {
                        unsigned busy = in_setup();
                        while (next < n_conns && busy < MAX_SETUP) {
                                start_conn(&conns[next++]);
                                busy++;
                        }
                        if (next == n_conns && n_subscribed + n_failed == n_conns) {
                                ready = 1;
                                printf("ready subscribed=%u failed=%u usec=%llu\n", n_subscribed, n_failed,
                                       (unsigned long long) (now_usec() - t0));
                                if (epoll_ctl(epfd, EPOLL_CTL_ADD, 0, &sev) < 0)
                                        die("cannot watch stdin: %s", strerror(errno));
                        } else if (t > deadline_setup) {
                                for (unsigned i = 0; i < n_conns; i++)
                                        if (conns[i].state != C_SUBSCRIBED)
                                                conn_fail(&conns[i], "not subscribed within the set-up time");
                                continue;
                        }
                }
                if (t > deadline_life)
                        break;
                n = epoll_wait(epfd, evs, 256, 1000);
                if (n < 0 && errno != EINTR)
                        die("epoll_wait: %s", strerror(errno));
                t = now_usec();
                for (int i = 0; i < n; i++) {
                        Conn *c = evs[i].data.ptr;
                        if (!c) {
                                ssize_t k = read(0, cmd + cmd_len, sizeof(cmd) - 1 - cmd_len);
                                if (k == 0)
                                        goto out;
                                if (k < 0)
                                        continue;
                                cmd_len += (size_t) k;
                                cmd[cmd_len] = '\0';
                                for (char *nl; (nl = strchr(cmd, '\n'));) {
                                        *nl = '\0';
                                        if (strcmp(cmd, "quit") == 0)
                                                goto out;
                                        handle_command(cmd);
                                        memmove(cmd, nl + 1, cmd_len - (size_t) (nl + 1 - cmd) + 1);
                                        cmd_len -= (size_t) (nl + 1 - cmd);
                                }
                                if (cmd_len == sizeof(cmd) - 1)
                                        cmd_len = 0;
                                continue;
                        }
                        if (c->state == C_FAILED)
                                continue;
                        if (c->state == C_CONNECTING && (evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
                                on_writable(c);
                        else if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                                on_readable(c);
                }
        }
out:
        for (unsigned i = 0; i < n_conns; i++)
                if (conns[i].fd >= 0)
                        close(conns[i].fd);
        return 0;
}
