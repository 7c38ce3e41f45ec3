/* SPDX-License-Identifier: MIT */
/* An etcd endpoint's HTTP/2 connection for gRPC calls (etcd-h2.h), on nghttp2. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "endpoint-url.h"
#include "etcd-grpc.h"
#include "etcd-h2-internal.h"
#include "etcd-answer.h"
#include "etcd-resolve.h"
#include "etcd-tls.h"
#include "list.h"
#include "macro.h"

/* ---- calls ---- */

static void h2_flush(EtcdH2 *h);

static void call_free(EtcdH2Call *c) {
        sd_event_source_disable_unref(c->timer);
        free(c->path);
        free(c->detail);
        free(c->grpc_status);
        free(c->grpc_message);
        free(c->data);
        free(c->owned);
        free(c);
}


/* Whether any byte of c reached the socket: only then may etcd have applied it. */
static bool call_sent(const EtcdH2Call *c) {
        return c->queued && !c->refused && c->h->written > c->queued_at;
}

/* Ends c (once): out of h->calls into h->done, dispatched from the loop. */
void h2_call_end(EtcdH2Call *c) {
        EtcdH2 *h = c->h;

        if (c->done)
                return;
        c->done = true;
        c->answer.sent = call_sent(c);
        c->timer = sd_event_source_disable_unref(c->timer);
        if (c->stream > 0 && h->session)
                (void) nghttp2_session_set_stream_user_data(h->session, c->stream, NULL);
        LIST_REMOVE(calls, h->calls, c);
        c->calls_next = NULL;
        c->calls_prev = h->done_tail;
        if (h->done_tail)
                h->done_tail->calls_next = c;
        else
                h->done = c;
        h->done_tail = c;
        (void) sd_event_source_set_enabled(h->dispatch, SD_EVENT_ONESHOT);
}

void h2_call_fail(EtcdH2Call *c, int error, const char *fmt, ...) {
        va_list ap;

        if (c->done)
                return;
        va_start(ap, fmt);
        if (vasprintf(&c->detail, fmt, ap) < 0)
                c->detail = NULL;
        va_end(ap);
        c->answer.error = error;
        h2_call_end(c);
}

/* The call through the stream's user data, which a call that ended (timed out, cancelled)
 * no longer is: its body may be gone, and its stream is being reset. */
static ssize_t on_body_read(nghttp2_session *session, int32_t stream, uint8_t *buf,
                            size_t length, uint32_t *flags, nghttp2_data_source *source,
                            void *user_data) {
        EtcdH2Call *c = nghttp2_session_get_stream_user_data(session, stream);
        size_t n;

        if (!c || c->done)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        n = MIN(length, c->size - c->offset);
        /* an open stream waits for its next message (etcd_h2_stream_write resumes it) */
        if (n == 0 && c->open)
                return NGHTTP2_ERR_DEFERRED;

        memcpy(buf, c->body + c->offset, n);
        c->offset += n;
        if (c->offset == c->size && !c->open)
                *flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t) n;
}

#define NV(n, v) \
        { (uint8_t *) (n), (uint8_t *) (v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE }

/* Hands c to the session: from here on it counts as sent. */
static int call_submit(EtcdH2Call *c) {
        EtcdH2 *h = c->h;
        usec_t now = now_usec(CLOCK_MONOTONIC), left = c->timeout > now ? c->timeout - now : 0;
        nghttp2_data_provider data = { .read_callback = on_body_read };
        int32_t id;

        /* gRPC's deadline, in milliseconds: etcd gives the call's work up at that time. Ours
         * comes first, and resets the stream, which ends etcd's work at once; the deadline
         * is for when that reset does not reach etcd (a connection cut off). */
        (void) snprintf(c->grpc_timeout, sizeof(c->grpc_timeout), "%" PRIu64 "m",
                        (uint64_t) ((left + H2_DEADLINE_MARGIN + USEC_PER_MSEC - 1) /
                                    USEC_PER_MSEC));
        /* A stream has no deadline; it asks etcd to end it when its member loses the leader
         * (the "hasleader" metadata etcd's own clients send with a watch), so that a member cut
         * off from the quorum does not leave it silent. */
        const nghttp2_nv nva[] = {
                NV(":method", "POST"),
                NV(":scheme", h->tls ? "https" : "http"),
                NV(":authority", h->authority),
                NV(":path", c->path),
                NV("content-type", "application/grpc"),
                NV("te", "trailers"),
                NV("grpc-timeout", c->grpc_timeout),
        };
        const nghttp2_nv hasleader = NV("hasleader", "true");
        nghttp2_nv headers[ELEMENTSOF(nva)];

        memcpy(headers, nva, sizeof(nva));
        if (c->on_stream)
                headers[ELEMENTSOF(nva) - 1] = hasleader;
        id = nghttp2_submit_request(h->session, NULL, headers, ELEMENTSOF(headers), &data, c);
        /* A connection that is going (etcd's GOAWAY) or out of stream IDs takes no more: not
         * sent, the caller may go elsewhere; the connection closes once it is idle. */
        if (id == NGHTTP2_ERR_START_STREAM_NOT_ALLOWED || id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE)
                return -ECONNREFUSED;
        if (id < 0)
                return id == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EIO;
        c->stream = id;
        return 0;
}

static int on_call_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        EtcdH2Call *c = userdata;
        EtcdH2 *h = c->h;

        if (c->stream > 0 && h->session)
                (void) nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, c->stream,
                                                 NGHTTP2_CANCEL);
        h2_call_fail(c, -ETIMEDOUT, "no answer within %" PRIu64 " ms", c->timeout_ms);
        if (h->session)
                h2_flush(h); /* the reset */
        return 0;
}

/* ---- the connection ---- */

static void h2_update_events(EtcdH2 *h) {
        uint32_t events = EPOLLIN;

        if (h->state == H2_HANDSHAKE)
                events = gnutls_record_get_direction(h->tls_session) ? EPOLLOUT : EPOLLIN;
        else if (h->state == H2_CONNECTING || h->out_offset < h->out_size ||
            (h->session && nghttp2_session_want_write(h->session)))
                events |= EPOLLOUT;
        (void) sd_event_source_set_io_events(h->io, events);
}

static int h2_connect(EtcdH2 *h);

/* When on_h2_timer must look next: connecting's deadline; a PING's; or H2_PING_INTERVAL after
 * the last sign of life. */
static usec_t h2_deadline(const EtcdH2 *h) {
        if (h->state == H2_RESOLVING || h->state == H2_CONNECTING || h->state == H2_HANDSHAKE)
                return h->connecting_since + H2_CONNECT_TIMEOUT;
        if (h->ping_out)
                return h->ping_sent + H2_PING_TIMEOUT;
        return h->quiet_since + H2_PING_INTERVAL;
}

static void h2_timer_arm(EtcdH2 *h) {
        (void) sd_event_source_set_time(h->timer, h2_deadline(h));
        (void) sd_event_source_set_enabled(h->timer, SD_EVENT_ONESHOT);
}

/* The connection is gone. A call that reached the socket ends (-ECONNRESET: its outcome is
 * unknown). One that did not is not lost: when the connection was up (it died under the
 * call, as when etcd was killed just before) it goes once more on a new connection, as curl
 * does with a connection it finds dead; otherwise, or the second time, it ends with error,
 * unsent (the caller may go to another endpoint). */
static void h2_down(EtcdH2 *h, int error, const char *why) {
        bool was_up = h->state == H2_UP, again = false;
        EtcdH2Call *c, *next;
        int r;

        for (c = h->calls; c; c = next) {
                next = c->calls_next;
                if (call_sent(c))
                        h2_call_fail(c, -ECONNRESET, "%s", why);
                else if (was_up && !c->retried && !c->refused) {
                        c->retried = again = true;
                        c->stream = 0;
                        c->queued = false;
                        c->offset = 0; /* none of its body left: all of it goes again */
                } else
                        h2_call_fail(c, error, "%s", why);
        }
        if (h->session)
                nghttp2_session_del(h->session);
        h->session = NULL;
        if (h->tls_session)
                gnutls_deinit(h->tls_session);
        h->tls_session = NULL;
        /* read again for the next connection: a renewed certificate is taken then */
        if (h->creds)
                gnutls_certificate_free_credentials(h->creds);
        h->creds = NULL;
        etcd_resolve_cancel(h->resolver);
        h->io = sd_event_source_disable_unref(h->io);
        h->fd = safe_close(h->fd);
        h->out = mfree(h->out);
        h->out_size = h->out_offset = 0;
        h->queued = h->written = 0;
        h->state = H2_DOWN;
        (void) sd_event_source_set_enabled(h->timer, SD_EVENT_OFF);
        h->ping_out = false;
        if (!again || h->freed)
                return;
        r = h2_connect(h);
        if (r < 0)
                for (c = h->calls; c; c = next) {
                        next = c->calls_next;
                        h2_call_fail(c, -ECONNREFUSED, "connecting again: %s", strerror(-r));
                }
}

/* Bytes to etcd, through TLS for https://: how many were taken, -EAGAIN (none: the socket
 * is full; TLS then wants the same bytes again), or another negative errno with *why (to
 * free; NULL: errno's words). A TLS record counts once gnutls sent it whole: etcd cannot read
 * a part of one, so a call whose record did not all leave was never read. */
static ssize_t h2_send(EtcdH2 *h, const uint8_t *data, size_t size, char **why) {
        ssize_t w;

        if (h->tls_session)
                return etcd_tls_send(h->tls_session, data, size, why);
        /* MSG_NOSIGNAL: a connection etcd reset is an error here, not the SIGPIPE that would
         * end the process (the registry keeps the signal's default) */
        w = send(h->fd, data, size, MSG_NOSIGNAL);
        if (w < 0)
                return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
        return w;
}

/* Bytes from etcd, as h2_send: how many, 0 at the end, -EAGAIN, or an error with *why. */
static ssize_t h2_recv(EtcdH2 *h, uint8_t *buf, size_t size, char **why) {
        ssize_t n;

        if (h->tls_session)
                return etcd_tls_recv(h->tls_session, buf, size, why);
        n = read(h->fd, buf, size);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
        return n;
}

/* Writes what nghttp2 has to send until the socket takes no more. */
static void h2_flush(EtcdH2 *h) {
        for (;;) {
                const uint8_t *data;
                ssize_t n, w;

                if (h->out_offset < h->out_size) {
                        _cleanup_free_ char *why = NULL;

                        w = h2_send(h, h->out + h->out_offset, h->out_size - h->out_offset,
                                    &why);
                        if (w == -EAGAIN)
                                break;
                        if (w < 0) {
                                h2_down(h, -ECONNREFUSED, why ?: "writing to etcd failed");
                                return;
                        }
                        h->out_offset += (size_t) w;
                        h->written += (uint64_t) w;
                        continue;
                }
                n = nghttp2_session_mem_send(h->session, &data);
                if (n < 0) {
                        h2_down(h, -ECONNREFUSED, nghttp2_strerror((int) n));
                        return;
                }
                if (n == 0 && !nghttp2_session_want_read(h->session) &&
                    !nghttp2_session_want_write(h->session)) {
                        /* etcd's GOAWAY, and nothing left on the connection */
                        h2_down(h, -ECONNREFUSED, "etcd ended the connection");
                        return;
                }
                if (n == 0)
                        break;
                free(h->out);
                h->out = malloc((size_t) n);
                if (!h->out) {
                        h2_down(h, -ENOMEM, "out of memory");
                        return;
                }
                memcpy(h->out, data, (size_t) n);
                h->out_size = (size_t) n;
                h->out_offset = 0;
                h->queued += (uint64_t) n;
        }
        h2_update_events(h);
}

/* Connected: the session, and every call waiting for it. */
static void h2_up(EtcdH2 *h) {
        int r = h2_session_new(h);

        if (r < 0) {
                h2_down(h, r, "out of memory");
                return;
        }
        h->state = H2_UP;
        h->quiet_since = now_usec(CLOCK_MONOTONIC);
        h->ping_out = false;
        h2_timer_arm(h);
        for (EtcdH2Call *c = h->calls, *next; c; c = next) {
                next = c->calls_next;
                r = call_submit(c);
                if (r < 0)
                        h2_call_fail(c, r, "could not start the call: %s", strerror(-r));
        }
        h2_flush(h);
}

static void h2_read(EtcdH2 *h) {
        uint8_t buf[65536];
        bool got = false;

        for (;;) {
                _cleanup_free_ char *why = NULL;
                ssize_t n = h2_recv(h, buf, sizeof(buf), &why), m;

                if (n == -EAGAIN)
                        break;
                if (n <= 0) {
                        h2_down(h, -ECONNREFUSED, n == 0 ? "etcd closed the connection"
                                                  : why  ? why
                                                         : "reading from etcd failed");
                        return;
                }
                got = true;
                m = nghttp2_session_mem_recv(h->session, buf, (size_t) n);
                if (m < 0) {
                        h2_down(h, -ECONNREFUSED, nghttp2_strerror((int) m));
                        return;
                }
        }
        if (got) {
                /* any byte is life (a PING's ACK or not): on_h2_timer sees it when it fires,
                 * so that a read costs no re-arming */
                h->quiet_since = now_usec(CLOCK_MONOTONIC);
                h->ping_out = false;
        }
        h2_flush(h);
}

/* The connection's one timer: connecting's deadline, then, while calls are open, a PING after
 * H2_PING_INTERVAL without a byte read, and the connection's end when H2_PING_TIMEOUT more
 * passes without one. An idle connection is not pinged (etcd would answer with GOAWAY); its
 * next call arms the timer again. */
static int on_h2_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        EtcdH2 *h = userdata;
        usec_t now = now_usec(CLOCK_MONOTONIC);

        if (h->freed || h->state == H2_DOWN || (h->state == H2_UP && !h->calls))
                return 0;
        if (now < h2_deadline(h)) {
                h2_timer_arm(h); /* bytes came since it was armed: later */
                return 0;
        }
        /* -ECONNREFUSED, not -ETIMEDOUT, for the calls that sent nothing (the sent ones end
         * -ECONNRESET): as for any connection lost before they left, they may go to another
         * endpoint (etcd.c fails over on those two errors only). */
        if (h->state == H2_RESOLVING || h->state == H2_CONNECTING || h->state == H2_HANDSHAKE) {
                h2_down(h, -ECONNREFUSED, h->state == H2_RESOLVING ? "resolving: no answer within 5 s"
                                          : h->state == H2_CONNECTING
                                                  ? "connecting: no answer within 5 s"
                                                  : "TLS: no handshake within 5 s");
                return 0;
        }
        if (h->ping_out) {
                h2_down(h, -ECONNREFUSED, "etcd answered no PING within 5 s");
                return 0;
        }
        if (nghttp2_submit_ping(h->session, NGHTTP2_FLAG_NONE, NULL) != 0) {
                h2_down(h, -ENOMEM, "out of memory");
                return 0;
        }
        h->ping_out = true;
        h->ping_sent = now;
        h2_timer_arm(h);
        h2_flush(h);
        return 0;
}

static void h2_dispatch(EtcdH2 *h);
static int h2_connect_next(EtcdH2 *h, int r);

/* A step of TLS's handshake: on to HTTP/2 once it is done; the calls end with -EIO when it
 * fails (nothing of theirs was sent: they may go to another endpoint). */
static void h2_tls_step(EtcdH2 *h) {
        _cleanup_free_ char *why = NULL;
        int r = etcd_tls_handshake(h->tls_session, &why);

        if (r < 0)
                h2_down(h, r, why ?: "TLS: the handshake failed");
        else if (r > 0)
                h2_up(h);
        else
                h2_update_events(h);
}

/* Connected: TLS's handshake starts, with the credentials read for this connection (as the
 * process's user then), as libcurl did. */
static void h2_tls_start(EtcdH2 *h) {
        _cleanup_free_ char *why = NULL;
        int r = 0;

        if (!h->creds)
                r = etcd_tls_credentials_new(&h->creds, h->ca_file, h->cert_file, h->key_file,
                                             &why);
        if (r >= 0)
                r = etcd_tls_session_new(&h->tls_session, h->creds, h->fd, h->host);
        if (r < 0) {
                h2_down(h, r, why ?: "TLS: out of memory");
                return;
        }
        h->state = H2_HANDSHAKE;
        h2_tls_step(h);
}

static int on_h2_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        EtcdH2 *h = userdata;

        if (h->state == H2_CONNECTING) {
                int error = 0;
                socklen_t len = sizeof(error);

                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0)
                        error = errno;
                if (error != 0 && h2_connect_next(h, -error) < 0) {
                        char why[128];
                        (void) snprintf(why, sizeof(why), "connecting: %s", strerror(error));
                        h2_down(h, -ECONNREFUSED, why);
                } else if (error != 0)
                        return 0; /* the next address is being connected to */
                else if ((revents & EPOLLOUT) && h->tls)
                        h2_tls_start(h);
                else if (revents & EPOLLOUT)
                        h2_up(h);
                return 0;
        }
        if (h->state == H2_HANDSHAKE) {
                h2_tls_step(h);
                return 0;
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
                h2_read(h);
        if (h->state == H2_UP && (revents & EPOLLOUT))
                h2_flush(h);
        return 0;
}

/* A connect to h->addrs[h->addr_index]. */
static int h2_connect_addr(EtcdH2 *h) {
        int r;

        h->queued = h->written = 0;
        h->fd = socket(h->addrs[h->addr_index].ss_family,
                       SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (h->fd < 0)
                return -errno;
        /* A member gone silent while calls are open is noticed by the PINGs (on_h2_timer) 10
         * to 15 s after its last byte, hung or stopped (its kernel still acknowledges) or cut
         * off. The kernel's own backstop (as libcurl's was): data unacknowledged for
         * 15 s ends the connection (TCP_USER_TIMEOUT), and so do keepalive probes (after 5 s
         * idle, every 2 s) unanswered 15 s after the last segment received. */
        (void) setsockopt(h->fd, IPPROTO_TCP, TCP_NODELAY, &(int) { 1 }, sizeof(int));
        (void) setsockopt(h->fd, SOL_SOCKET, SO_KEEPALIVE, &(int) { 1 }, sizeof(int));
        (void) setsockopt(h->fd, IPPROTO_TCP, TCP_KEEPIDLE, &(int) { 5 }, sizeof(int));
        (void) setsockopt(h->fd, IPPROTO_TCP, TCP_KEEPINTVL, &(int) { 2 }, sizeof(int));
        (void) setsockopt(h->fd, IPPROTO_TCP, TCP_USER_TIMEOUT,
                          &(unsigned) { H2_TCP_USER_TIMEOUT_MS }, sizeof(unsigned));
        if (connect(h->fd, (struct sockaddr *) &h->addrs[h->addr_index],
                    h->lens[h->addr_index]) < 0 &&
            errno != EINPROGRESS) {
                r = -errno;
                h->fd = safe_close(h->fd);
                return r;
        }
        r = sd_event_add_io(h->event, &h->io, h->fd, EPOLLOUT, on_h2_io, h);
        if (r < 0) {
                h->fd = safe_close(h->fd);
                return r;
        }
        (void) sd_event_source_set_description(h->io, "etcd-h2-io");
        if (h->state != H2_RESOLVING && h->state != H2_CONNECTING)
                h->connecting_since = now_usec(CLOCK_MONOTONIC);
        h->state = H2_CONNECTING;
        h2_timer_arm(h);
        return 0;
}

/* A connect failed: the next address, if there is one; r < 0 when none takes it. */
static int h2_connect_next(EtcdH2 *h, int r) {
        h->io = sd_event_source_disable_unref(h->io);
        h->fd = safe_close(h->fd);
        while (h->addr_index + 1 < h->n_addrs) {
                h->addr_index++;
                r = h2_connect_addr(h);
                if (r >= 0)
                        return r;
        }
        return r;
}

static void on_resolved(EtcdResolver *resolver, int error, const struct sockaddr_storage *addrs,
                        const socklen_t *lens, size_t n, const char *detail, void *userdata) {
        EtcdH2 *h = userdata;
        char why[512];
        int r;

        if (h->state != H2_RESOLVING)
                return;
        if (error < 0) {
                (void) snprintf(why, sizeof(why), "resolving %s: %s", h->host, detail);
                h2_down(h, -ECONNREFUSED, why);
                return;
        }
        memcpy(h->addrs, addrs, n * sizeof(addrs[0]));
        memcpy(h->lens, lens, n * sizeof(lens[0]));
        h->n_addrs = n;
        h->addr_index = 0;
        r = h2_connect_addr(h);
        if (r < 0)
                r = h2_connect_next(h, r);
        if (r < 0) {
                (void) snprintf(why, sizeof(why), "connecting: %s", strerror(-r));
                h2_down(h, -ECONNREFUSED, why);
        }
}

/* A new connection: to the endpoint's address, or its name's looked up anew (c-ares, from the
 * loop: etcd-resolve.h); the calls wait meanwhile. */
static int h2_connect(EtcdH2 *h) {
        int r;

        if (!h->resolver) {
                h->addr_index = 0;
                return h2_connect_addr(h);
        }
        r = etcd_resolve(h->resolver, h->host, h->port, on_resolved, h);
        if (r < 0)
                return r;
        h->state = H2_RESOLVING;
        h->connecting_since = now_usec(CLOCK_MONOTONIC);
        h2_timer_arm(h);
        return 0;
}

/* ---- the loop's side: callbacks outside nghttp2 ---- */

static EtcdH2 *h2_unref(EtcdH2 *h);

static void pending_remove(EtcdH2Call *c) {
        if (!c->in_pending)
                return;
        LIST_REMOVE(pending, c->h->pending, c);
        c->in_pending = false;
}

/* Offers a streaming call's bytes to its on_stream, which takes what it can (whole messages).
 * false: the call was cancelled meanwhile, and is freed. */
static bool call_offer(EtcdH2Call *c) {
        size_t n;

        pending_remove(c);
        if (c->data_start >= c->data_size)
                return true;
        c->delivering = true;
        n = c->on_stream(c, c->data + c->data_start, c->data_size - c->data_start, c->userdata);
        c->delivering = false;
        if (c->cancelled) {
                call_free(c);
                return false;
        }
        c->data_start += MIN(n, c->data_size - c->data_start);
        return true;
}

static void h2_dispatch(EtcdH2 *h) {
        h->n_ref++;
        while (!h->freed && h->pending)
                (void) call_offer(h->pending);
        while (!h->freed && h->done) {
                EtcdH2Call *c = h->done;

                /* a stream's last messages before its end; what is left is the end's body */
                if (c->on_stream && c->answer.error == 0 && !call_offer(c))
                        continue;
                LIST_REMOVE(calls, h->done, c);
                if (h->done_tail == c)
                        h->done_tail = NULL;
                c->answer.detail = c->detail ?: "";
                c->answer.grpc_status = c->grpc_status;
                c->answer.grpc_message = c->grpc_message;
                c->answer.body = c->data ? c->data + c->data_start : NULL;
                c->answer.size = c->data_size - c->data_start;
                c->cb(c, &c->answer, c->userdata);
                call_free(c);
        }
        h2_unref(h);
}

static int on_h2_dispatch(sd_event_source *s, void *userdata) {
        h2_dispatch(userdata);
        return 0;
}

/* A call, unary (timeout_usec > 0) or streaming (on_stream; open: never half-closed), started
 * or waiting for the connection. */
static int call_new(EtcdH2 *h, const char *path, const uint8_t *body, size_t size,
                    usec_t timeout_usec, etcd_h2_stream_t on_stream, bool open,
                    etcd_h2_callback_t cb, void *userdata, EtcdH2Call **ret) {
        EtcdH2Call *c;
        bool idle;
        int r;

        if (!h || h->freed || !path || (!body && size > 0) || !cb)
                return -EINVAL;
        c = new0(EtcdH2Call, 1);
        if (!c || !(c->path = strdup(path))) {
                free(c);
                return -ENOMEM;
        }
        *c = (EtcdH2Call) { .h = h, .path = c->path, .body = body, .size = size, .cb = cb,
                            .on_stream = on_stream, .open = open, .userdata = userdata,
                            .timeout_ms = timeout_usec / USEC_PER_MSEC,
                            .timeout = now_usec(CLOCK_MONOTONIC) + timeout_usec };
        r = on_stream ? 0 : sd_event_add_time(h->event, &c->timer, CLOCK_MONOTONIC, c->timeout,
                                              0, on_call_timer, c);
        if (r < 0) {
                call_free(c);
                return r;
        }
        if (c->timer)
                (void) sd_event_source_set_description(c->timer, "etcd-h2-call-timer");
        idle = !h->calls;
        LIST_PREPEND(calls, h->calls, c);
        if (ret)
                *ret = c;
        if (h->state == H2_DOWN) {
                r = h2_connect(h);
                if (r < 0)
                        h2_call_fail(c, -ECONNREFUSED, "connecting: %s", strerror(-r));
        } else if (h->state == H2_UP) {
                if (idle) {
                        /* the PINGs start again: H2_PING_INTERVAL from now, not from the
                         * last read of an idle connection */
                        h->quiet_since = now_usec(CLOCK_MONOTONIC);
                        h->ping_out = false;
                        h2_timer_arm(h);
                }
                r = call_submit(c);
                if (r < 0)
                        h2_call_fail(c, r, "could not start the call: %s", strerror(-r));
                else
                        h2_flush(h);
        }
        return 0;
}

int etcd_h2_call(EtcdH2 *h, const char *path, const uint8_t *body, size_t size,
                 usec_t timeout_usec, etcd_h2_callback_t cb, void *userdata, EtcdH2Call **ret) {
        return call_new(h, path, body, size, timeout_usec, NULL, false, cb, userdata, ret);
}

int etcd_h2_stream(EtcdH2 *h, const char *path, const uint8_t *body, size_t size,
                   etcd_h2_stream_t on_stream, etcd_h2_callback_t cb, void *userdata,
                   EtcdH2Call **ret) {
        if (!on_stream)
                return -EINVAL;
        return call_new(h, path, body, size, 0, on_stream, false, cb, userdata, ret);
}

int etcd_h2_stream_open(EtcdH2 *h, const char *path, etcd_h2_stream_t on_stream,
                        etcd_h2_callback_t cb, void *userdata, EtcdH2Call **ret) {
        if (!on_stream || !ret)
                return -EINVAL;
        return call_new(h, path, NULL, 0, 0, on_stream, true, cb, userdata, ret);
}

/* The bytes that left are dropped once the stream counts as sent (a stream that sent nothing
 * may go again, whole, on a new connection: h2_down), when they are half the buffer. */
static int call_append(EtcdH2Call *c, const uint8_t *data, size_t size) {
        if (call_sent(c) && c->offset > 0 && c->offset >= c->size / 2) {
                memmove(c->owned, c->owned + c->offset, c->size - c->offset);
                c->size -= c->offset;
                c->offset = 0;
        }
        if (size > SIZE_MAX / 2 - c->size)
                return -ENOMEM;
        if (c->size + size > c->owned_allocated) {
                size_t m = MAX(MAX(c->owned_allocated * 2, c->size + size), (size_t) 256);
                uint8_t *d = realloc(c->owned, m);

                if (!d)
                        return -ENOMEM;
                c->owned = d;
                c->owned_allocated = m;
        }
        memcpy(c->owned + c->size, data, size);
        c->size += size;
        c->body = c->owned;
        return 0;
}

int etcd_h2_stream_write(EtcdH2Call *c, const uint8_t *data, size_t size) {
        EtcdH2 *h;
        int r;

        if (!c || !c->open || !data || size == 0)
                return -EINVAL;
        if (c->done || c->cancelled)
                return -EPIPE;
        h = c->h;
        r = call_append(c, data, size);
        if (r < 0)
                return r;
        /* a stream submitted already was deferred once it had sent everything */
        if (h->state == H2_UP && c->stream > 0 && h->session) {
                (void) nghttp2_session_resume_data(h->session, c->stream);
                h2_flush(h);
        }
        return 0;
}

void etcd_h2_call_cancel(EtcdH2Call *c) {
        EtcdH2 *h;

        if (!c)
                return;
        h = c->h;
        if (c->done) {
                if (h->done_tail == c)
                        h->done_tail = c->calls_prev;
                LIST_REMOVE(calls, h->done, c);
        } else {
                if (c->stream > 0 && h->session) {
                        (void) nghttp2_session_set_stream_user_data(h->session, c->stream, NULL);
                        (void) nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE,
                                                         c->stream, NGHTTP2_CANCEL);
                }
                LIST_REMOVE(calls, h->calls, c);
                if (h->session && !h->freed)
                        h2_flush(h);
        }
        pending_remove(c);
        if (c->delivering) {
                /* its on_stream is running: the dispatch frees it when that returns */
                c->cancelled = true;
                return;
        }
        call_free(c);
}

int etcd_h2_new(EtcdH2 **ret, sd_event *event, const char *url, const EtcdConfig *tls) {
        EtcdH2 *h = new0(EtcdH2, 1);
        EndpointURL u;
        int r;

        if (!h)
                return -ENOMEM;
        *h = (EtcdH2) { .n_ref = 1, .fd = -EBADF, .event = sd_event_ref(event) };
        r = endpoint_url_parse(url, &u);
        if (r >= 0) {
                memcpy(h->host, u.host, sizeof(h->host));
                h->port = u.port;
        }
        if (r >= 0 && u.tls) {
                h->tls = true;
                if ((tls->ca_file && !(h->ca_file = strdup(tls->ca_file))) ||
                    (tls->cert_file && !(h->cert_file = strdup(tls->cert_file))) ||
                    (tls->key_file && !(h->key_file = strdup(tls->key_file))))
                        r = -ENOMEM;
        }
        if (r >= 0) {
                /* a name's addresses are looked up at each connect */
                if (endpoint_url_sockaddr(&u, &h->addrs[0], &h->lens[0]) >= 0)
                        h->n_addrs = 1;
                else
                        r = etcd_resolver_new(&h->resolver, event);
        }
        if (r >= 0)
                r = endpoint_url_authority(&u, h->authority, sizeof(h->authority));
        if (r >= 0)
                r = sd_event_add_defer(event, &h->dispatch, on_h2_dispatch, h);
        if (r >= 0) {
                (void) sd_event_source_set_description(h->dispatch, "etcd-h2-dispatch");
                r = sd_event_source_set_enabled(h->dispatch, SD_EVENT_OFF);
        }
        if (r >= 0)
                r = sd_event_add_time(event, &h->timer, CLOCK_MONOTONIC, 0, 0, on_h2_timer, h);
        if (r >= 0) {
                (void) sd_event_source_set_description(h->timer, "etcd-h2-timer");
                r = sd_event_source_set_enabled(h->timer, SD_EVENT_OFF);
        }
        if (r < 0) {
                h2_unref(h);
                return r;
        }
        *ret = h;
        return 0;
}

static EtcdH2 *h2_unref(EtcdH2 *h) {
        if (!h || --h->n_ref > 0)
                return NULL;
        if (h->session)
                nghttp2_session_del(h->session);
        if (h->tls_session)
                gnutls_deinit(h->tls_session);
        if (h->creds)
                gnutls_certificate_free_credentials(h->creds);
        free(h->ca_file);
        free(h->cert_file);
        free(h->key_file);
        etcd_resolver_free(h->resolver);
        sd_event_source_disable_unref(h->io);
        sd_event_source_disable_unref(h->dispatch);
        sd_event_source_disable_unref(h->timer);
        safe_close(h->fd);
        free(h->out);
        sd_event_unref(h->event);
        free(h);
        return NULL;
}

EtcdH2 *etcd_h2_free(EtcdH2 *h) {
        if (!h || h->freed)
                return NULL;
        h->freed = true;
        while (h->calls)
                etcd_h2_call_cancel(h->calls);
        while (h->done)
                etcd_h2_call_cancel(h->done);
        return h2_unref(h);
}
