/* SPDX-License-Identifier: MIT */
/* The probe engine against real UDP responders on loopback, in one sd-event loop: answers,
 * silence, refusal, garbage, answers from the wrong port, and a thousand targets at once,
 * all through one hub socket. */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "a2s.h"
#include "macro.h"
#include "probe.h"
#include "sqp.h"

/* BACKLOG: a server that was stopped answers what it kept before the current request: an
 * earlier query's answer and an earlier challenge, then the current challenge. */
typedef enum Mode { ANSWER, SILENT, GARBAGE, OTHER_PORT, BACKLOG } Mode;

typedef struct Responder {
        int fd;
        int other_fd; /* OTHER_PORT: answers go out from this socket instead */
        struct sockaddr_in addr;
        Mode mode;
        bool a2s_challenge;
        /* SQP as Unity's Go SDK keeps it (proto.QueryBase): a new challenge per challenge
         * request, good for one query, which takes it; any other query gets no answer. */
        bool single_use;
        bool outstanding;
        uint32_t issued;
        unsigned answered, challenges, queries, refused;
} Responder;

typedef struct Run {
        unsigned done, ok;
        int last_error;
        ProbeResult last;
} Run;

#define CHALLENGE 0x12345678u

/* An SQP challenge response: 00 and the challenge, big-endian. */
static int put_challenge(uint8_t out[static 5], uint32_t c) {
        out[0] = 0x00;
        out[1] = (uint8_t) (c >> 24), out[2] = (uint8_t) (c >> 16);
        out[3] = (uint8_t) (c >> 8), out[4] = (uint8_t) c;
        return 5;
}

static int on_request(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Responder *r = userdata;
        uint8_t buf[1500], out[1500];
        struct sockaddr_in peer;
        socklen_t plen = sizeof(peer);
        ssize_t n;
        int len = 0;

        while ((n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *) &peer, &plen)) >= 0) {
                if (r->mode == SILENT)
                        continue;
                if (r->mode == GARBAGE) {
                        len = 7;
                        memcpy(out, "\x01garbag", 7);
                } else if (n == 5 && buf[0] == 0x00) {
                        if (r->mode == BACKLOG) {
                                SqpInfo old = { .players = 1, .max_players = 2 };
                                uint8_t stale[1500];
                                int k = sqp_encode_info_response(0xdead0001u, 1, &old, stale,
                                                                 sizeof(stale));

                                assert_true(k > 0);
                                (void) sendto(fd, stale, (size_t) k, 0, (struct sockaddr *) &peer,
                                              plen);
                                k = put_challenge(stale, 0xdead0002u);
                                (void) sendto(fd, stale, (size_t) k, 0, (struct sockaddr *) &peer,
                                              plen);
                        }
                        r->issued = r->single_use ? CHALLENGE + r->challenges * 7919u : CHALLENGE;
                        r->outstanding = true;
                        len = put_challenge(out, r->issued);
                        r->challenges++;
                } else if (n == 8 && buf[0] == 0x01) {
                        uint32_t got = (uint32_t) buf[1] << 24 | (uint32_t) buf[2] << 16 |
                                       (uint32_t) buf[3] << 8 | buf[4];
                        SqpInfo info = { .players = 5, .max_players = 24, .port = 7777 };
                        r->queries++;
                        if (r->single_use && (!r->outstanding || got != r->issued)) {
                                r->refused++;  /* the SDK: "no challenge", no answer */
                                continue;
                        }
                        r->outstanding = !r->single_use;
                        strcpy(info.name, "loop");
                        strcpy(info.map, "arena");
                        len = sqp_encode_info_response(got, 1, &info, out, sizeof(out));
                } else if (n >= 25 && buf[0] == 0xff && buf[4] == 0x54) {
                        if (r->a2s_challenge && n != 29) {
                                memcpy(out, "\xff\xff\xff\xff\x41\x01\x02\x03\x04", 9);
                                len = 9;
                        } else {
                                A2sInfo info = { .protocol = 17, .players = 2, .max_players = 8,
                                                 .server_type = 'd', .environment = 'l' };
                                strcpy(info.name, "a2s");
                                strcpy(info.map, "de_test");
                                len = a2s_encode_info(&info, out, sizeof(out));
                        }
                } else
                        continue;
                assert_true(len > 0);
                (void) sendto(r->mode == OTHER_PORT ? r->other_fd : fd, out, (size_t) len, 0,
                              (struct sockaddr *) &peer, plen);
                r->answered++;
                plen = sizeof(peer);
        }
        return 0;
}

static void responder_open(sd_event *e, Responder *r, Mode mode) {
        socklen_t len = sizeof(r->addr);

        r->mode = mode;
        r->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        assert_true(r->fd >= 0);
        r->addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        assert_int_equal(bind(r->fd, (struct sockaddr *) &r->addr, sizeof(r->addr)), 0);
        assert_int_equal(getsockname(r->fd, (struct sockaddr *) &r->addr, &len), 0);
        /* A thousand requests at once must not overflow the receive buffer. */
        int size = 4 << 20;
        (void) setsockopt(r->fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size));
        assert_true(sd_event_add_io(e, NULL, r->fd, EPOLLIN, on_request, r) >= 0);
        if (mode == OTHER_PORT) {
                r->other_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                assert_true(r->other_fd >= 0);
        }
}

static void on_done(Probe *p, int result, const ProbeResult *info, void *userdata) {
        Run *run = userdata;

        run->done++;
        if (result == 0) {
                run->ok++;
                run->last = *info;
        } else
                run->last_error = result;
        probe_free(p);
}

static void run_until(sd_event *e, Run *run, unsigned want) {
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + 20 * USEC_PER_SEC;

        while (run->done < want) {
                assert_true(now_usec(CLOCK_MONOTONIC) < deadline);
                assert_true(sd_event_run(e, 100 * USEC_PER_MSEC) >= 0);
        }
}

/* Every probe asks for its own challenge: against a responder that keeps challenges as Unity's
 * Go SDK does (one query each), every probe is answered and no query is refused. slotd used to
 * send the last probe's challenge, which such a server never answers. */
static void test_sqp_challenge_single_use(void **state) {
        sd_event *e = NULL;
        ProbeHub *hub = NULL;
        Responder r = { .single_use = true };
        Run run = {};
        Probe *p;

        assert_true(sd_event_new(&e) >= 0);
        assert_int_equal(probe_hub_new(e, &hub), 0);
        responder_open(e, &r, ANSWER);
        for (unsigned i = 1; i <= 5; i++) {
                usec_t t0 = now_usec(CLOCK_MONOTONIC);

                assert_int_equal(probe_start(hub, QUERY_SQP, &r.addr, 2 * USEC_PER_SEC, on_done,
                                             &run, &p), 0);
                run_until(e, &run, i);
                assert_int_equal(run.ok, i);
                assert_string_equal(run.last.map, "arena");
                /* An answer, not a fall-back after part of the timeout. */
                assert_true(now_usec(CLOCK_MONOTONIC) - t0 < USEC_PER_SEC);
        }
        assert_int_equal(r.challenges, 5);
        assert_int_equal(r.queries, 5);
        assert_int_equal(r.refused, 0);

        /* Silent altogether: the whole timeout, then -ETIMEDOUT. */
        r.mode = SILENT;
        assert_int_equal(probe_start(hub, QUERY_SQP, &r.addr, 200 * USEC_PER_MSEC, on_done, &run,
                                     &p), 0);
        run_until(e, &run, 6);
        assert_int_equal(run.ok, 5);
        assert_int_equal(run.last_error, -ETIMEDOUT);

        close(r.fd);
        probe_hub_free(hub);
        sd_event_unref(e);
}

static void test_sqp_answer(void **state) {
        sd_event *e = NULL;
        ProbeHub *hub = NULL;
        Responder r = {};
        Run run = {};
        Probe *p;

        assert_true(sd_event_new(&e) >= 0);
        assert_int_equal(probe_hub_new(e, &hub), 0);
        responder_open(e, &r, ANSWER);
        assert_int_equal(probe_start(hub, QUERY_SQP, &r.addr, USEC_PER_SEC, on_done, &run, &p), 0);
        run_until(e, &run, 1);
        assert_int_equal(run.ok, 1);
        assert_int_equal(run.last.players, 5);
        assert_int_equal(run.last.max_players, 24);
        assert_string_equal(run.last.name, "loop");
        assert_string_equal(run.last.map, "arena");
        assert_int_equal(r.answered, 2); /* challenge, then query */
        close(r.fd);
        probe_hub_free(hub);
        sd_event_unref(e);
}

/* A server stopped for a while answers its backlog when it runs again: an earlier probe's
 * query answer (another challenge) and an earlier challenge reach the current probe before its
 * own challenge. Neither is a garbled answer: the first is dropped, the second taken until the
 * current challenge follows it, with which the query is asked again. */
static void test_sqp_backlog(void **state) {
        sd_event *e = NULL;
        ProbeHub *hub = NULL;
        Responder r = { .single_use = true };
        Run run = {};
        Probe *p;

        assert_true(sd_event_new(&e) >= 0);
        assert_int_equal(probe_hub_new(e, &hub), 0);
        responder_open(e, &r, BACKLOG);
        assert_int_equal(probe_start(hub, QUERY_SQP, &r.addr, 2 * USEC_PER_SEC, on_done, &run,
                                     &p), 0);
        run_until(e, &run, 1);
        assert_int_equal(run.ok, 1);
        assert_string_equal(run.last.map, "arena");
        assert_int_equal(r.challenges, 1);
        assert_int_equal(r.queries, 2);      /* with the stale challenge, then the current */
        assert_int_equal(r.refused, 1);
        close(r.fd);
        probe_hub_free(hub);
        sd_event_unref(e);
}

static void test_a2s_with_challenge(void **state) {
        sd_event *e = NULL;
        ProbeHub *hub = NULL;
        Responder r = { .a2s_challenge = true };
        Run run = {};
        Probe *p;

        assert_true(sd_event_new(&e) >= 0);
        assert_int_equal(probe_hub_new(e, &hub), 0);
        responder_open(e, &r, ANSWER);
        assert_int_equal(probe_start(hub, QUERY_A2S, &r.addr, USEC_PER_SEC, on_done, &run, &p), 0);
        run_until(e, &run, 1);
        assert_int_equal(run.ok, 1);
        assert_int_equal(run.last.players, 2);
        assert_int_equal(run.last.max_players, 8);
        assert_string_equal(run.last.map, "de_test");
        assert_int_equal(r.answered, 2); /* the challenge round, then the info */
        close(r.fd);
        probe_hub_free(hub);
        sd_event_unref(e);
}

static void test_failures(void **state) {
        sd_event *e = NULL;
        ProbeHub *hub = NULL;
        Responder silent = {}, garbage = {};
        struct sockaddr_in closed = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        Run run = {};
        Probe *p;
        usec_t start;
        int fd;
        socklen_t len = sizeof(closed);

        assert_true(sd_event_new(&e) >= 0);
        assert_int_equal(probe_hub_new(e, &hub), 0);
        responder_open(e, &silent, SILENT);
        responder_open(e, &garbage, GARBAGE);
        /* A port nobody listens on: bind, learn the port, close. */
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        assert_int_equal(bind(fd, (struct sockaddr *) &closed, sizeof(closed)), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *) &closed, &len), 0);
        close(fd);

        start = now_usec(CLOCK_MONOTONIC);
        assert_int_equal(probe_start(hub, QUERY_SQP, &silent.addr, 200 * USEC_PER_MSEC, on_done, &run, &p), 0);
        run_until(e, &run, 1);
        assert_int_equal(run.last_error, -ETIMEDOUT);
        assert_true(now_usec(CLOCK_MONOTONIC) - start >= 190 * USEC_PER_MSEC);

        assert_int_equal(probe_start(hub, QUERY_SQP, &garbage.addr, USEC_PER_SEC, on_done, &run, &p), 0);
        run_until(e, &run, 2);
        assert_int_equal(run.last_error, -EBADMSG);

        assert_int_equal(probe_start(hub, QUERY_A2S, &closed, USEC_PER_SEC, on_done, &run, &p), 0);
        run_until(e, &run, 3);
        assert_int_equal(run.last_error, -ECONNREFUSED);
        assert_int_equal(run.ok, 0);
        close(silent.fd);
        close(garbage.fd);
        probe_hub_free(hub);
        sd_event_unref(e);
}

static void test_thousand_at_once(void **state) {
        static Responder r[1000];
        struct rlimit rl;
        sd_event *e = NULL;
        ProbeHub *hub = NULL;
        Run run = {};
        Probe *p;

        assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
        if (rl.rlim_max < 1200)
                skip();
        rl.rlim_cur = rl.rlim_max;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
        assert_true(sd_event_new(&e) >= 0);
        assert_int_equal(probe_hub_new(e, &hub), 0);
        for (int i = 0; i < 1000; i++)
                responder_open(e, &r[i], ANSWER);
        /* A thousand targets, one socket: every answer reaches its own probe. The second
         * half is sent corked, as a sweep sends: 64 datagrams a system call. */
        for (int i = 0; i < 1000; i++) {
                if (i == 500)
                        probe_hub_cork(hub);
                assert_int_equal(probe_start(hub, QUERY_SQP, &r[i].addr, 5 * USEC_PER_SEC, on_done, &run, &p), 0);
        }
        probe_hub_uncork(hub);
        run_until(e, &run, 1000);
        assert_int_equal(run.ok, 1000);
        for (int i = 0; i < 1000; i++) {
                assert_int_equal(r[i].answered, 2);
                close(r[i].fd);
        }
        probe_hub_free(hub);
        sd_event_unref(e);
}

static bool datagram_waiting(int fd) {
        uint8_t b;

        return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
}

/* Corked, datagrams wait until the last uncork and then all leave; one whose probe was
 * freed meanwhile does not; one the kernel refuses fails its own probe, from the probe's
 * timer and at once, and the datagrams after it still leave. */
static void test_corked(void **state) {
        sd_event *e = NULL;
        ProbeHub *hub = NULL;
        Responder r[3] = {};
        struct sockaddr_in broadcast = {
                .sin_family = AF_INET,
                .sin_port = htons(9),
                .sin_addr.s_addr = htonl(INADDR_BROADCAST),
        };
        Run run = {};
        Probe *p[4];
        usec_t start;

        assert_true(sd_event_new(&e) >= 0);
        assert_int_equal(probe_hub_new(e, &hub), 0);
        for (int i = 0; i < 3; i++)
                responder_open(e, &r[i], ANSWER);
        probe_hub_cork(hub);
        probe_hub_cork(hub);
        assert_int_equal(probe_start(hub, QUERY_SQP, &r[0].addr, 5 * USEC_PER_SEC, on_done, &run, &p[0]), 0);
        assert_int_equal(probe_start(hub, QUERY_SQP, &broadcast, 5 * USEC_PER_SEC, on_done, &run, &p[1]), 0);
        assert_int_equal(probe_start(hub, QUERY_A2S, &r[1].addr, 5 * USEC_PER_SEC, on_done, &run, &p[2]), 0);
        assert_int_equal(probe_start(hub, QUERY_SQP, &r[2].addr, 5 * USEC_PER_SEC, on_done, &run, &p[3]), 0);
        probe_free(p[3]);
        probe_hub_uncork(hub);
        for (int i = 0; i < 3; i++)
                assert_false(datagram_waiting(r[i].fd));
        start = now_usec(CLOCK_MONOTONIC);
        probe_hub_uncork(hub);
        assert_true(datagram_waiting(r[0].fd));
        assert_true(datagram_waiting(r[1].fd));
        assert_false(datagram_waiting(r[2].fd));
        run_until(e, &run, 3);
        assert_true(now_usec(CLOCK_MONOTONIC) - start < 4 * USEC_PER_SEC);
        assert_int_equal(run.ok, 2);
        assert_int_equal(run.last_error, -EACCES);
        assert_int_equal(r[0].answered, 2);
        assert_int_equal(r[1].answered, 1);
        assert_int_equal(r[2].answered, 0);
        for (int i = 0; i < 3; i++)
                close(r[i].fd);
        probe_hub_free(hub);
        sd_event_unref(e);
}

static void test_one_per_target_and_strangers(void **state) {
        sd_event *e = NULL;
        ProbeHub *hub = NULL;
        Responder other = {};
        Run run = {};
        Probe *p, *q = NULL;

        assert_true(sd_event_new(&e) >= 0);
        assert_int_equal(probe_hub_new(e, &hub), 0);
        responder_open(e, &other, OTHER_PORT);
        assert_int_equal(probe_start(hub, QUERY_SQP, &other.addr, 300 * USEC_PER_MSEC, on_done, &run, &p), 0);
        /* One probe per target at a time. */
        assert_int_equal(probe_start(hub, QUERY_SQP, &other.addr, USEC_PER_SEC, on_done, &run, &q), -EBUSY);
        assert_null(q);
        /* The answer comes from another port than the one probed: it is not the target's. */
        run_until(e, &run, 1);
        assert_int_equal(run.last_error, -ETIMEDOUT);
        assert_int_equal(other.answered, 1);
        assert_int_equal(run.ok, 0);
        /* Once that probe is gone the target can be probed again. */
        assert_int_equal(probe_start(hub, QUERY_SQP, &other.addr, 100 * USEC_PER_MSEC, on_done, &run, &p), 0);
        run_until(e, &run, 2);
        assert_int_equal(run.last_error, -ETIMEDOUT);
        close(other.fd);
        close(other.other_fd);
        probe_hub_free(hub);
        sd_event_unref(e);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sqp_challenge_single_use),
                cmocka_unit_test(test_sqp_answer),
                cmocka_unit_test(test_sqp_backlog),
                cmocka_unit_test(test_a2s_with_challenge),
                cmocka_unit_test(test_failures),
                cmocka_unit_test(test_thousand_at_once),
                cmocka_unit_test(test_one_per_target_and_strangers),
                cmocka_unit_test(test_corked),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
