/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <assert.h>
#include <linux/errqueue.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "a2s.h"
#include "log.h"
#include "macro.h"
#include "probe.h"
#include "ratelimit.h"
#include "sqp.h"
#include "utf8.h"

/* A well-formed answer to an earlier probe of the same server (stopped, it answers its
 * backlog when it runs again): dropped as a stray datagram, and the probe waits on. */
#define PROBE_STALE 1
/* Later challenges an SQP probe takes (see probe_handle_sqp()). */
#define SQP_MAX_RECHALLENGES 2
/* A challenge round is allowed twice for A2S (a server may rotate its challenge once). */
#define A2S_MAX_CHALLENGES 2

typedef enum ProbeStep {
        PROBE_SQP_CHALLENGE,
        PROBE_SQP_QUERY,
        PROBE_A2S_INFO,
        PROBE_DONE,
} ProbeStep;

/* Every probe goes through one UDP socket: a thousand slots probed each second cost one
 * event source and as many datagrams per wake-up as are waiting, not a socket, a connect
 * and an event source each. Answers are matched by their source address; probes whose
 * datagram the kernel refused (ICMP port unreachable) are found through IP_RECVERR. */
#define HUB_PAGE 256
/* While the hub is corked (a sweep's chunk, a batch of answers), datagrams wait here and
 * leave together by one sendmmsg: a system call a chunk, not one a probe. */
#define HUB_QUEUE 64
#define HUB_DATAGRAM_MAX 32
typedef struct HubQueued {
        Probe *probe; /* NULL: freed while it waited, not sent */
        uint8_t len;
        uint8_t buf[HUB_DATAGRAM_MAX];
} HubQueued;

struct ProbeHub {
        sd_event *event;
        int fd;
        sd_event_source *io;
        Probe **pages[65536 / HUB_PAGE]; /* by the target's port */
        unsigned corked;
        unsigned n_queued;
        HubQueued queue[HUB_QUEUE];
        RateLimit stray_log;      /* datagrams that answer no probe: told once an interval */
        unsigned stray;           /* ... and counted */
};

struct Probe {
        ProbeHub *hub;
        struct sockaddr_in addr;
        QueryType type;
        ProbeStep step;
        sd_event_source *timer;
        uint32_t challenge;       /* SQP: the one this probe's challenge request got */
        unsigned a2s_challenges;
        unsigned sqp_rechallenges;
        int queued;               /* its index in the hub's queue, or -1 */
        int send_error;           /* a queued datagram the kernel refused: reported by the timer */
        bool sent_loopback_down;  /* a datagram left while the loopback interface was down */
        probe_done_t done;
        void *userdata;
};

static Probe **hub_slot(ProbeHub *h, uint16_t port, bool create) {
        Probe ***page = &h->pages[port / HUB_PAGE];

        if (!*page && create)
                *page = calloc(HUB_PAGE, sizeof(Probe *));
        return *page ? &(*page)[port % HUB_PAGE] : NULL;
}

Probe *probe_free(Probe *p) {
        if (!p)
                return NULL;
        if (p->hub) {
                Probe **slot = hub_slot(p->hub, ntohs(p->addr.sin_port), false);
                if (slot && *slot == p)
                        *slot = NULL;
                if (p->queued >= 0)
                        p->hub->queue[p->queued].probe = NULL;
        }
        sd_event_source_disable_unref(p->timer);
        free(p);
        return NULL;
}

static void probe_finish(Probe *p, int result, const ProbeResult *info) {
        if (p->step == PROBE_DONE)
                return;
        p->step = PROBE_DONE;
        (void) sd_event_source_set_enabled(p->timer, SD_EVENT_OFF);
        p->done(p, result, info, p->userdata);
}

static void copy_str(char dst[static PROBE_STR_MAX], const char *src) {
        snprintf(dst, PROBE_STR_MAX, "%s", src);
        utf8_sanitize(dst);
}

/* A valid answer, whichever protocol gave it. */
static int probe_answered(Probe *p, unsigned players, unsigned max_players, const char *name,
                          const char *map) {
        ProbeResult res = { .players = players, .max_players = max_players };

        copy_str(res.name, name);
        copy_str(res.map, map);
        probe_finish(p, 0, &res);
        return 0;
}

/* A datagram to a loopback address is sent all right while the loopback interface is down
 * (on recent kernels; older ones refuse it with ENETUNREACH), and then dropped: silence that
 * is the host's doing, not the server's. Probes look at lo when they send (once a batch)
 * and when they time out. */
static bool hub_loopback_down(ProbeHub *h) {
        struct ifreq ifr = { .ifr_name = "lo" };

        if (ioctl(h->fd, SIOCGIFFLAGS, &ifr) < 0)
                return false;
        return !(ifr.ifr_flags & IFF_UP);
}

static bool probe_to_loopback(const Probe *p) {
        return (ntohl(p->addr.sin_addr.s_addr) >> 24) == IN_LOOPBACKNET;
}

/* Sends what is queued. A datagram the kernel refuses fails its probe through the probe's
 * timer, in an event of its own: no probe's callback runs from within another's send. */
static void hub_flush(ProbeHub *h) {
        struct mmsghdr mm[HUB_QUEUE];
        struct iovec iov[HUB_QUEUE];
        Probe *probes[HUB_QUEUE];
        unsigned n = 0;

        for (unsigned i = 0; i < h->n_queued; i++) {
                HubQueued *q = &h->queue[i];
                Probe *p = q->probe;

                if (!p)
                        continue;
                p->queued = -1;
                probes[n] = p;
                iov[n] = (struct iovec){ q->buf, q->len };
                mm[n] = (struct mmsghdr){ .msg_hdr = {
                        .msg_name = &p->addr, .msg_namelen = sizeof(p->addr),
                        .msg_iov = &iov[n], .msg_iovlen = 1,
                } };
                n++;
        }
        h->n_queued = 0;
        if (n > 0 && hub_loopback_down(h))
                for (unsigned i = 0; i < n; i++)
                        probes[i]->sent_loopback_down |= probe_to_loopback(probes[i]);
        for (unsigned i = 0; i < n;) {
                int k = sendmmsg(h->fd, mm + i, n - i, MSG_DONTWAIT | MSG_NOSIGNAL);

                if (k > 0) {
                        i += (unsigned) k;
                        continue;
                }
                if (k < 0 && errno == EINTR)
                        continue;
                /* The first datagram left failed (the kernel reports a failure only there). */
                probes[i]->send_error = k < 0 ? -errno : -EIO;
                (void) sd_event_source_set_time(probes[i]->timer, 0);
                (void) sd_event_source_set_enabled(probes[i]->timer, SD_EVENT_ONESHOT);
                i++;
        }
}

void probe_hub_cork(ProbeHub *h) {
        h->corked++;
}

void probe_hub_uncork(ProbeHub *h) {
        assert(h->corked > 0);
        if (--h->corked == 0)
                hub_flush(h);
}

static int probe_send(Probe *p, const uint8_t *buf, size_t len) {
        ProbeHub *h = p->hub;
        ssize_t n;

        if (h->corked && len <= HUB_DATAGRAM_MAX) {
                if (p->queued >= 0) /* a second datagram before the first left: send both */
                        hub_flush(h);
                if (h->n_queued == HUB_QUEUE)
                        hub_flush(h);
                h->queue[h->n_queued] = (HubQueued){ .probe = p, .len = (uint8_t) len };
                memcpy(h->queue[h->n_queued].buf, buf, len);
                p->queued = (int) h->n_queued++;
                return 0;
        }
        if (probe_to_loopback(p) && hub_loopback_down(h))
                p->sent_loopback_down = true;
        n = sendto(h->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *) &p->addr,
                   sizeof(p->addr));
        if (n < 0)
                return negative_errno();
        return (size_t) n == len ? 0 : -EIO;
}

/* Every SQP probe asks for a challenge first, from the same address as its query: Unity's Go
 * SDK keeps one challenge per client address and takes it on the query it allows
 * (proto.QueryBase: LoadAndDelete), so a challenge is good for one query and a reused one
 * gets no answer at all, only "no challenge" in the server's log. */
static int probe_handle_sqp(Probe *p, const uint8_t *buf, size_t len) {
        uint8_t q[8];
        uint32_t challenge;
        SqpInfo info;
        int r;

        if (p->step == PROBE_SQP_CHALLENGE) {
                r = sqp_parse_challenge(buf, len, &challenge);
                if (r < 0)
                        /* An earlier probe's query answered late: not ours, not garbled. */
                        return sqp_parse_query(buf, len, 0, &info) == -ESTALE ? PROBE_STALE : r;
                p->challenge = challenge;
                p->step = PROBE_SQP_QUERY;
                return probe_send(p, q, sqp_query_request(p->challenge, q));
        }
        r = sqp_parse_query(buf, len, p->challenge, &info);
        if (r == -ESTALE)
                return PROBE_STALE;
        /* A challenge after ours: the server answered an earlier probe's request late, and the
         * one taken may have been that stale one (challenge requests carry no nonce). The
         * latest is the server's current one: the query again with it, at most twice. */
        if (r < 0 && sqp_parse_challenge(buf, len, &challenge) >= 0) {
                if (++p->sqp_rechallenges > SQP_MAX_RECHALLENGES)
                        return -EBADMSG;
                p->challenge = challenge;
                return probe_send(p, q, sqp_query_request(p->challenge, q));
        }
        if (r < 0)
                return r;
        return probe_answered(p, info.players, info.max_players, info.name, info.map);
}

static int probe_handle_a2s(Probe *p, const uint8_t *buf, size_t len) {
        A2sReplyKind kind;
        uint8_t challenge[4], req[29];
        A2sInfo info;
        int r = a2s_parse_reply(buf, len, &kind, challenge, &info);

        if (r < 0)
                return r;
        if (kind == A2S_REPLY_CHALLENGE) {
                if (++p->a2s_challenges > A2S_MAX_CHALLENGES)
                        return -EBADMSG;
                return probe_send(p, req, a2s_info_request(challenge, req));
        }
        return probe_answered(p, info.players, info.max_players, info.name, info.map);
}

static Probe *hub_find(ProbeHub *h, const struct sockaddr_in *from) {
        Probe **slot;

        if (from->sin_family != AF_INET)
                return NULL;
        slot = hub_slot(h, ntohs(from->sin_port), false);
        if (!slot || !*slot || (*slot)->step == PROBE_DONE ||
            (*slot)->addr.sin_addr.s_addr != from->sin_addr.s_addr)
                return NULL;
        return *slot;
}

/* Late answers, and whatever else reaches the socket: dropped, and told once an interval
 * (a flood must neither fill the log nor cost more than the reading). */
static void hub_stray(ProbeHub *h, const struct sockaddr_in *from) {
        char address[INET_ADDRSTRLEN] = "?";
        unsigned suppressed;

        h->stray++;
        if (!ratelimit_tell(&h->stray_log, now_usec(CLOCK_MONOTONIC), FLOOD_LOG_INTERVAL,
                            &suppressed))
                return;
        if (from->sin_family == AF_INET)
                (void) inet_ntop(AF_INET, &from->sin_addr, address, sizeof(address));
        log_notice("Dropping a datagram on the probe socket from %s:%u that answers no probe "
                   "(%u dropped so far, %u untold since the last such line; at most one line "
                   "every %u s)", address, from->sin_family == AF_INET ? ntohs(from->sin_port) : 0,
                   h->stray, suppressed, (unsigned) (FLOOD_LOG_INTERVAL / USEC_PER_SEC));
}

static void hub_datagram(ProbeHub *h, const struct sockaddr_in *from, const uint8_t *buf, size_t n,
                         size_t size) {
        Probe *p = hub_find(h, from);
        int r;

        if (!p) {
                hub_stray(h, from); /* late, unasked or from elsewhere */
                return;
        }
        if (n > size) {
                probe_finish(p, -EBADMSG, NULL);
                return;
        }
        r = p->type == QUERY_SQP ? probe_handle_sqp(p, buf, n) : probe_handle_a2s(p, buf, n);
        if (r == PROBE_STALE)
                hub_stray(h, from);
        else if (r < 0)
                probe_finish(p, r, NULL);
}

/* ICMP errors of the probes' datagrams: the target that refused is in msg_name. */
static void hub_errors(ProbeHub *h) {
        for (unsigned i = 0; i < 256; i++) {
                struct sockaddr_in to = {};
                uint8_t control[256], data[64];
                struct iovec iov = { data, sizeof(data) };
                struct msghdr mh = {
                        .msg_name = &to, .msg_namelen = sizeof(to),
                        .msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = control, .msg_controllen = sizeof(control),
                };
                Probe *p;

                if (recvmsg(h->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
                        return;
                p = hub_find(h, &to);
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); p && c; c = CMSG_NXTHDR(&mh, c))
                        if (c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR) {
                                const struct sock_extended_err *ee = (const void *) CMSG_DATA(c);
                                probe_finish(p, ee->ee_errno ? -(int) ee->ee_errno : -EIO, NULL);
                                break;
                        }
        }
}

/* At most this many datagrams a wake-up, so that a flood cannot hold the loop. */
#define HUB_BATCH 16
#define HUB_BATCHES 16

static void hub_receive(ProbeHub *h, int fd, uint32_t revents) {
        static uint8_t bufs[HUB_BATCH][1500];
        struct sockaddr_in from[HUB_BATCH];
        struct iovec iov[HUB_BATCH];
        struct mmsghdr mm[HUB_BATCH];

        if (revents & EPOLLERR)
                hub_errors(h);
        for (unsigned b = 0; b < HUB_BATCHES; b++) {
                int n;

                for (unsigned i = 0; i < HUB_BATCH; i++) {
                        iov[i] = (struct iovec){ bufs[i], sizeof(bufs[i]) };
                        mm[i] = (struct mmsghdr){ .msg_hdr = {
                                .msg_name = &from[i], .msg_namelen = sizeof(from[i]),
                                .msg_iov = &iov[i], .msg_iovlen = 1,
                        } };
                }
                n = recvmmsg(fd, mm, HUB_BATCH, MSG_DONTWAIT | MSG_TRUNC, NULL);
                if (n <= 0) {
                        if (n < 0 && errno != EAGAIN && errno != EINTR)
                                hub_errors(h);
                        return;
                }
                for (int i = 0; i < n; i++)
                        hub_datagram(h, &from[i], bufs[i], mm[i].msg_len, sizeof(bufs[i]));
                if (n < HUB_BATCH)
                        return;
        }
}

/* The datagrams the answers call for (an SQP query after a challenge) leave together. */
static int hub_on_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        ProbeHub *h = userdata;

        probe_hub_cork(h);
        hub_receive(h, fd, revents);
        probe_hub_uncork(h);
        return 0;
}

static int probe_on_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        Probe *p = userdata;

        if (p->send_error < 0) {
                probe_finish(p, p->send_error, NULL);
                return 0;
        }
        if (p->sent_loopback_down || (probe_to_loopback(p) && hub_loopback_down(p->hub)))
                probe_finish(p, -ENETDOWN, NULL);
        else
                probe_finish(p, -ETIMEDOUT, NULL);
        return 0;
}

/* Probes go to loopback addresses only: bound there, the socket is out of reach of other
 * machines, whose datagrams could otherwise flood it. */
static void hub_bind_loopback(ProbeHub *h) {
        struct sockaddr_in sa = {
                .sin_family = AF_INET,
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };

        if (bind(h->fd, (const struct sockaddr *) &sa, sizeof(sa)) < 0)
                log_warning_errno(errno, "Failed to bind the probe socket to 127.0.0.1, it takes "
                                         "datagrams from anywhere: %m");
}

int probe_hub_new(sd_event *event, ProbeHub **ret) {
        _cleanup_(probe_hub_freep) ProbeHub *h = calloc(1, sizeof(ProbeHub));
        int one = 1, r;

        if (!h)
                return -ENOMEM;
        h->event = sd_event_ref(event);
        h->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (h->fd < 0)
                return negative_errno();
        if (setsockopt(h->fd, SOL_IP, IP_RECVERR, &one, sizeof(one)) < 0)
                return negative_errno();
        hub_bind_loopback(h);
        /* Room for a thousand answers that arrive together (kernel memory, used only while
         * they wait); without CAP_NET_ADMIN, as much as net.core.rmem_max allows. */
        int size = 4 << 20;
        if (setsockopt(h->fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
                (void) setsockopt(h->fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
        r = sd_event_add_io(event, &h->io, h->fd, EPOLLIN, hub_on_io, h);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(h);
        return 0;
}

ProbeHub *probe_hub_free(ProbeHub *h) {
        if (!h)
                return NULL;
        /* Probes still out keep their timers; they must be freed first. */
        for (size_t i = 0; i < ELEMENTSOF(h->pages); i++)
                free(h->pages[i]);
        sd_event_source_disable_unref(h->io);
        safe_close(h->fd);
        sd_event_unref(h->event);
        free(h);
        return NULL;
}

int probe_start(ProbeHub *hub, QueryType type, const struct sockaddr_in *addr, usec_t timeout,
                probe_done_t done, void *userdata, Probe **ret) {
        _cleanup_(probe_freep) Probe *p = NULL;
        Probe **slot;
        uint8_t buf[29];
        size_t len;
        int r;

        if (type != QUERY_SQP && type != QUERY_A2S)
                return -EINVAL;
        if (addr->sin_family != AF_INET)
                return -EAFNOSUPPORT;
        slot = hub_slot(hub, ntohs(addr->sin_port), true);
        if (!slot)
                return -ENOMEM;
        if (*slot)
                return -EBUSY; /* one probe per target at a time */
        p = calloc(1, sizeof(Probe));
        if (!p)
                return -ENOMEM;
        p->type = type;
        p->queued = -1;
        p->done = done;
        p->userdata = userdata;
        p->addr = *addr;
        r = sd_event_add_time_relative(hub->event, &p->timer, CLOCK_MONOTONIC, timeout,
                                       USEC_PER_MSEC, probe_on_timeout, p);
        if (r < 0)
                return r;
        p->hub = hub;
        *slot = p;
        if (type == QUERY_SQP) {
                p->step = PROBE_SQP_CHALLENGE;
                len = sqp_challenge_request(buf);
        } else {
                p->step = PROBE_A2S_INFO;
                len = a2s_info_request(NULL, buf);
        }
        r = probe_send(p, buf, len);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}
