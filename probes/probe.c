/* SPDX-License-Identifier: MIT */
#include <sys/socket.h>

#include "a2s.h"
#include "macro.h"
#include "probe.h"
#include "sqp.h"
#include "utf8.h"

/* A challenge round is allowed twice for A2S (a server may rotate its challenge once). */
#define A2S_MAX_CHALLENGES 2

typedef enum ProbeStep {
        PROBE_SQP_CHALLENGE,
        PROBE_SQP_QUERY,
        PROBE_A2S_INFO,
        PROBE_DONE,
} ProbeStep;

struct Probe {
        QueryType type;
        ProbeStep step;
        int fd;
        sd_event_source *io;
        sd_event_source *timer;
        uint32_t challenge;
        unsigned a2s_challenges;
        probe_done_t done;
        void *userdata;
};

Probe *probe_free(Probe *p) {
        if (!p)
                return NULL;
        sd_event_source_disable_unref(p->io);
        sd_event_source_disable_unref(p->timer);
        safe_close(p->fd);
        free(p);
        return NULL;
}

static void probe_finish(Probe *p, int result, const ProbeResult *info) {
        if (p->step == PROBE_DONE)
                return;
        p->step = PROBE_DONE;
        (void) sd_event_source_set_enabled(p->io, SD_EVENT_OFF);
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

static int probe_send(Probe *p, const uint8_t *buf, size_t len) {
        ssize_t n = send(p->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0)
                return negative_errno();
        return (size_t) n == len ? 0 : -EIO;
}

static int probe_handle_sqp(Probe *p, const uint8_t *buf, size_t len) {
        if (p->step == PROBE_SQP_CHALLENGE) {
                uint8_t q[8];
                int r = sqp_parse_challenge(buf, len, &p->challenge);
                if (r < 0)
                        return r;
                p->step = PROBE_SQP_QUERY;
                return probe_send(p, q, sqp_query_request(p->challenge, q));
        }
        SqpInfo info;
        int r = sqp_parse_query(buf, len, p->challenge, &info);
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

static int probe_on_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Probe *p = userdata;
        uint8_t buf[1500];
        ssize_t n;
        int r;

        n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                        return 0;
                /* ECONNREFUSED: the ICMP port-unreachable of a connected UDP socket. */
                probe_finish(p, negative_errno(), NULL);
                return 0;
        }
        if ((size_t) n > sizeof(buf)) {
                probe_finish(p, -EBADMSG, NULL);
                return 0;
        }
        r = p->type == QUERY_SQP ? probe_handle_sqp(p, buf, (size_t) n)
                                 : probe_handle_a2s(p, buf, (size_t) n);
        if (r < 0)
                probe_finish(p, r, NULL);
        return 0;
}

static int probe_on_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        probe_finish(userdata, -ETIMEDOUT, NULL);
        return 0;
}

int probe_start(sd_event *event, QueryType type, const struct sockaddr_in *addr, usec_t timeout,
                probe_done_t done, void *userdata, Probe **ret) {
        _cleanup_(probe_freep) Probe *p = NULL;
        uint8_t buf[29];
        size_t len;
        int r;

        if (type != QUERY_SQP && type != QUERY_A2S)
                return -EINVAL;
        p = calloc(1, sizeof(Probe));
        if (!p)
                return -ENOMEM;
        p->type = type;
        p->done = done;
        p->userdata = userdata;
        p->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (p->fd < 0)
                return negative_errno();
        if (connect(p->fd, (const struct sockaddr *) addr, sizeof(*addr)) < 0)
                return negative_errno();
        r = sd_event_add_io(event, &p->io, p->fd, EPOLLIN, probe_on_io, p);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(event, &p->timer, CLOCK_MONOTONIC, timeout, USEC_PER_MSEC,
                                       probe_on_timeout, p);
        if (r < 0)
                return r;
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
