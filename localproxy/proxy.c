/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "ipc.h"
#include "log.h"
#include "macro.h"
#include "proxy-limits.h"
#include "proxy.h"

/* IPC messages handled in one wake-up before the rest of the loop gets a turn. */
#define IPC_BATCH 64
/* File descriptors kept for what is not a connection: IPC, epoll, timers, listeners. */
#define FDS_RESERVED 64

struct Pending {
        Proxy *proxy;
        LIST_FIELDS(Pending, pending);
        uint64_t id;
        char key[24];
        sd_event_source *timer;
        pending_handler_t handler;
        void *userdata;
};

/* jansson's own cleanup helper. */
#define _cleanup_json_ _cleanup_(json_decrefp)

void proxy_kick(Proxy *p) {
        mhd_event_kick(p->mhd_event);
}

/* The control queue: "conn" and "close" must reach slotd even when its socket is full for a
 * moment, and in order; requests are not queued (their callers get 503 instead). */
static void update_ipc_events(Proxy *p) {
        uint32_t events = EPOLLIN;

        if (!p->ipc_source)
                return;
        if (json_array_size(p->control_queue) > 0)
                events |= EPOLLOUT;
        (void) sd_event_source_set_io_events(p->ipc_source, events);
}

static void flush_control_queue(Proxy *p) {
        while (json_array_size(p->control_queue) > 0) {
                int r = ipc_send(p->ipc_fd, json_array_get(p->control_queue, 0));

                if (r == -EAGAIN)
                        break;
                if (r < 0)
                        log_debug_errno(r, "Failed to send a control message, dropping: %m");
                (void) json_array_remove(p->control_queue, 0);
        }
        update_ipc_events(p);
}

/* Takes the reference to 'message'. */
static int send_control(Proxy *p, json_t *message) {
        _cleanup_json_ json_t *m = message;

        if (!m)
                return log_oom();
        if (p->ipc_fd < 0)
                return -ENOTCONN; /* told again when a slotd attaches */
        if (json_array_size(p->control_queue) >= PROXY_CONTROL_QUEUE_MAX) {
                log_warning("slotd reads nothing: control queue full, dropping a message");
                return -ENOBUFS;
        }
        if (json_array_append(p->control_queue, m) < 0)
                return log_oom();
        flush_control_queue(p);
        return 0;
}

/* Requests waiting for slotd. */
static void pending_free(Pending *pend) {
        hashmap_remove(&pend->proxy->pending, pend->key, pend);
        LIST_REMOVE(pending, pend->proxy->pending_list, pend);
        sd_event_source_disable_unref(pend->timer);
        free(pend);
}

static void pending_finish(Pending *pend, json_t *reply) {
        pending_handler_t handler = pend->handler;
        void *userdata = pend->userdata;
        Proxy *p = pend->proxy;

        /* Freed first: the handler's owner forgets its pointer and may go away itself. */
        pending_free(pend);
        handler(p, userdata, reply);
}

void pending_cancel(Proxy *p, Pending *pend) {
        if (pend)
                pending_free(pend);
}

static int on_pending_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Pending *pend = userdata;

        log_debug("slotd did not answer request %" PRIu64 " in time", pend->id);
        pending_finish(pend, NULL);
        return 0;
}

int proxy_request(Proxy *p, Conn *c, json_t *message, pending_handler_t handler,
                  void *userdata, Pending **ret) {
        _cleanup_free_ Pending *pend = NULL;
        int r;

        if (p->ipc_fd < 0)
                return -ENOTCONN;
        pend = new0(Pending, 1);
        if (!pend)
                return -ENOMEM;
        *pend = (Pending){ .proxy = p, .id = ++p->next_request_id, .handler = handler,
                           .userdata = userdata };
        snprintf(pend->key, sizeof(pend->key), "%" PRIu64, pend->id);
        if (json_object_set_new(message, "type", json_string("request")) < 0 ||
            json_object_set_new(message, "id", json_integer((json_int_t) pend->id)) < 0 ||
            json_object_set_new(message, "conn", json_integer((json_int_t) c->id)) < 0)
                return -ENOMEM;
        /* A request never overtakes a queued control message. */
        if (json_array_size(p->control_queue) > 0)
                return -EAGAIN;
        r = sd_event_add_time_relative(p->event, &pend->timer, CLOCK_MONOTONIC,
                                       PROXY_REPLY_TIMEOUT_USEC, 0, on_pending_timeout, pend);
        if (r < 0)
                return r;
        r = hashmap_put(&p->pending, pend->key, pend);
        if (r >= 0) {
                r = ipc_send(p->ipc_fd, message);
                if (r < 0)
                        hashmap_remove(&p->pending, pend->key, pend);
        }
        if (r < 0) {
                sd_event_source_disable_unref(pend->timer);
                return r;
        }
        LIST_PREPEND(pending, p->pending_list, pend);
        *ret = TAKE_PTR(pend);
        return 0;
}

/* Connections. */
Conn *conn_of(struct MHD_Connection *connection) {
        const union MHD_ConnectionInfo *info =
                MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return info ? info->socket_context : NULL;
}

bool conn_take_token(Conn *c) {
        return token_bucket_take(&c->limits->bucket, PROXY_RATE_PER_SEC, PROXY_RATE_BURST,
                                 now_usec(CLOCK_MONOTONIC));
}

static int sockaddr_text(const struct sockaddr_storage *sa, char *buf, size_t size,
                         unsigned *ret_port) {
        const void *addr;

        if (sa->ss_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
                addr = &in->sin_addr;
                *ret_port = ntohs(in->sin_port);
        } else if (sa->ss_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
                addr = &in6->sin6_addr;
                *ret_port = ntohs(in6->sin6_port);
        } else
                return -EAFNOSUPPORT;
        if (!inet_ntop(sa->ss_family, addr, buf, (socklen_t) size))
                return negative_errno();
        return 0;
}

static int conn_announce(Conn *c) {
        struct sockaddr_storage local = {}, peer = {};
        socklen_t ll = sizeof(local), pl = sizeof(peer);
        char ls[INET6_ADDRSTRLEN], ps[INET6_ADDRSTRLEN];
        unsigned lport, pport;
        int r;

        if (getsockname(c->fd, (struct sockaddr *) &local, &ll) < 0 ||
            getpeername(c->fd, (struct sockaddr *) &peer, &pl) < 0)
                return negative_errno();
        r = sockaddr_text(&local, ls, sizeof(ls), &lport);
        if (r >= 0)
                r = sockaddr_text(&peer, ps, sizeof(ps), &pport);
        if (r < 0)
                return r;
        r = send_control(c->proxy,
                         json_pack("{s:s,s:I,s:s,s:I,s:s,s:I}", "type", "conn", "conn",
                                   (json_int_t) c->id, "local", ls, "local_port",
                                   (json_int_t) lport, "peer", ps, "peer_port",
                                   (json_int_t) pport));
        if (r < 0)
                return r;
        c->announced = true;
        return 0;
}

static Conn *conn_new(Proxy *p, struct MHD_Connection *connection) {
        const union MHD_ConnectionInfo *info;
        _cleanup_free_ Conn *c = NULL;
        int r;

        info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        c = new0(Conn, 1);
        if (!c || !info) {
                log_oom();
                return NULL;
        }
        *c = (Conn){ .proxy = p, .id = ++p->next_conn_id, .fd = info->connect_fd };
        snprintf(c->key, sizeof(c->key), "%" PRIu64, c->id);
        if (hashmap_put(&p->conns, c->key, c) < 0) {
                log_oom();
                return NULL;
        }
        LIST_PREPEND(conns, p->conns_list, c);
        p->n_conns++;
        control_orphan_update(p);
        /* Without "conn", slotd would refuse every request of it: its requests get 503. Without
         * a slotd, it is announced when one attaches; its requests wait for that meanwhile. */
        r = conn_announce(c);
        if (r < 0)
                log_debug_errno(r, "Failed to announce connection %" PRIu64 ": %m", c->id);
        return TAKE_PTR(c);
}

static void conn_free(Conn *c) {
        Proxy *p = c->proxy;

        if (c->announced)
                (void) send_control(p, json_pack("{s:s,s:I}", "type", "close", "conn",
                                                 (json_int_t) c->id));
        if (c->limits)
                c->limits->n_conns--;
        c->grace = sd_event_source_disable_unref(c->grace);
        http_conn_forget(c);
        hashmap_remove(&p->conns, c->key, c);
        LIST_REMOVE(conns, p->conns_list, c);
        p->n_conns--;
        free(c->unavailable);
        free(c);
        control_orphan_update(p);
}

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
        Proxy *p = cls;

        if (toe == MHD_CONNECTION_NOTIFY_STARTED)
                *socket_context = conn_new(p, connection);
        else if (*socket_context) {
                conn_free(*socket_context);
                *socket_context = NULL;
        }
}

static SlotLimits *slot_limits(Proxy *p, bool in_slot, unsigned slot) {
        char key[16];
        SlotLimits *l;

        if (!in_slot)
                return &p->outside;
        snprintf(key, sizeof(key), "%u", slot);
        l = hashmap_get(&p->slots, key);
        if (l)
                return l;
        l = new0(SlotLimits, 1);
        if (!l)
                return NULL;
        strcpy(l->key, key);
        if (hashmap_put(&p->slots, l->key, l) < 0)
                return mfree(l);
        return l;
}

/* Ends the connection: microhttpd sees the shutdown on its next turn, then frees it. */
static void conn_shut(Conn *c) {
        c->grace = sd_event_source_disable_unref(c->grace);
        (void) shutdown(c->fd, SHUT_RDWR);
        proxy_kick(c->proxy);
}

static int on_over_limit_grace(sd_event_source *s, uint64_t usec, void *userdata) {
        Conn *c = userdata;

        log_debug("Connection %" PRIu64 " over its slot's limit asked nothing: closing it",
                  c->id);
        conn_shut(c);
        return 0;
}

/* Over the limit: a request waiting or still on its way is answered 429 (http.c); one that
 * asks nothing within the grace is closed. */
static void conn_over_limit(Conn *c, unsigned limit) {
        int r;

        c->over_limit = true;
        log_debug("Connection %" PRIu64 " is over its slot's limit of %u", c->id, limit);
        if (c->waiters)
                return;
        r = sd_event_add_time_relative(c->proxy->event, &c->grace, CLOCK_MONOTONIC,
                                       PROXY_OVER_LIMIT_GRACE_USEC, 0, on_over_limit_grace, c);
        if (r < 0) {
                log_debug_errno(r, "Failed to arm a timer, closing connection %" PRIu64 ": %m",
                                c->id);
                conn_shut(c);
        }
}

/* {"type":"conn","conn":C,"slot":N or null,"admin":B[,"unavailable":"…"]} */
static void handle_conn_reply(Proxy *p, json_t *m) {
        json_t *id = json_object_get(m, "conn"), *slot = json_object_get(m, "slot");
        const char *unavailable = json_string_value(json_object_get(m, "unavailable"));
        unsigned limit;
        char key[24];
        Conn *c;

        if (!json_is_integer(id) || !(json_is_null(slot) || json_is_integer(slot))) {
                log_warning("slotd sent a malformed \"conn\" answer, ignoring");
                return;
        }
        snprintf(key, sizeof(key), "%" JSON_INTEGER_FORMAT, json_integer_value(id));
        c = hashmap_get(&p->conns, key);
        if (!c || c->identified)
                return;  /* gone meanwhile */
        c->in_slot = json_is_integer(slot);
        if (c->in_slot && (json_integer_value(slot) < 0 || json_integer_value(slot) >= UINT_MAX)) {
                log_warning("slotd named slot %" JSON_INTEGER_FORMAT ", ignoring",
                            json_integer_value(slot));
                return;
        }
        c->slot = c->in_slot ? (unsigned) json_integer_value(slot) : 0;
        c->admin = json_is_true(json_object_get(m, "admin"));
        if (unavailable && free_and_strdup(&c->unavailable, unavailable) < 0) {
                log_oom();
                return;
        }
        c->limits = slot_limits(p, c->in_slot, c->slot);
        if (!c->limits) {
                log_oom();
                return;
        }
        c->identified = true;
        c->limits->n_conns++;
        limit = c->in_slot ? PROXY_CONNECTIONS_PER_SLOT : PROXY_CONNECTIONS_OUTSIDE;
        if (c->limits->n_conns > limit)
                conn_over_limit(c, limit);
        http_conn_identified(c);
}

static void handle_reply(Proxy *p, json_t *m) {
        json_t *id = json_object_get(m, "id");
        Pending *pend;
        char key[24];

        if (!json_is_integer(id)) {
                log_warning("slotd sent a reply without an id, ignoring");
                return;
        }
        snprintf(key, sizeof(key), "%" JSON_INTEGER_FORMAT, json_integer_value(id));
        pend = hashmap_get(&p->pending, key);
        if (!pend) {
                log_debug("Reply to request %s that is no longer waiting", key);
                return;
        }
        pending_finish(pend, m);
}

static void handle_message(Proxy *p, json_t *m) {
        const char *type = json_string_value(json_object_get(m, "type"));

        if (streq(type, "conn"))
                handle_conn_reply(p, m);
        else if (streq(type, "reply"))
                handle_reply(p, m);
        else if (streq(type, "event"))
                ws_event(p, m);
        else if (streq(type, "metrics"))
                metrics_on_message(p, m);
        else
                log_debug("Unknown IPC message type \"%s\", ignoring", type);
}

static int on_ipc(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Proxy *p = userdata;
        int r;

        if (revents & EPOLLOUT)
                flush_control_queue(p);
        for (unsigned i = 0; i < IPC_BATCH; i++) {
                _cleanup_json_ json_t *m = NULL;
                int passed = -EBADF;

                r = ipc_receive_fd(p->ipc_fd, &m, &passed);
                if (r == -EAGAIN)
                        break;
                if (r == -ECONNRESET)
                        return control_ipc_lost(p);
                if (r < 0) {
                        log_warning_errno(r, "Bad IPC message from slotd, ignoring: %m");
                        continue;
                }
                if (streq(json_string_value(json_object_get(m, "type")), "metrics_listen"))
                        metrics_on_listen(p, m, passed);
                else {
                        safe_close(passed);
                        handle_message(p, m);
                }
        }
        return 0;
}

void proxy_ipc_detach(Proxy *p) {
        p->ipc_source = sd_event_source_disable_unref(p->ipc_source);
        p->ipc_fd = safe_close(p->ipc_fd);
        (void) json_array_clear(p->control_queue);
        /* What waited for this slotd's answer gets its failure now (503, a Centrifuge error
         * the client retries), not after PROXY_REPLY_TIMEOUT_USEC. */
        while (p->pending_list)
                pending_finish(p->pending_list, NULL);
        for (Conn *c = p->conns_list; c; c = c->conns_next)
                c->announced = false;
}

int proxy_ipc_attach(Proxy *p, int fd) {
        int r;

        if (p->ipc_fd >= 0)
                proxy_ipc_detach(p);
        r = sd_event_add_io(p->event, &p->ipc_source, fd, EPOLLIN, on_ipc, p);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        p->ipc_fd = fd;
        control_orphan_update(p);
        r = control_send_hello(p);
        if (r < 0)
                return r;
        /* The connections, before any request that names them. */
        for (Conn *c = p->conns_list; c; c = c->conns_next)
                if (!c->announced && conn_announce(c) < 0)
                        log_debug("Failed to announce connection %" PRIu64 " again", c->id);
        ws_resync(p);
        return 0;
}

/* The API's paths have no escapes: a path with one then matches no route instead of being
 * decoded into one (and "%00" into a shorter one). */
static size_t no_unescape(void *cls, struct MHD_Connection *connection, char *s) {
        return strlen(s);
}

static int daemon_start(Proxy *p, ProxyDaemon *d, int listen_fd, unsigned max_conns) {
        d->proxy = p;
        d->mhd = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE, 0, NULL, NULL,
                http_handler, p,
                MHD_OPTION_LISTEN_SOCKET, (MHD_socket) listen_fd,
                MHD_OPTION_NOTIFY_CONNECTION, on_connection, p,
                MHD_OPTION_NOTIFY_COMPLETED, http_request_completed, p,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) PROXY_IDLE_TIMEOUT_SEC,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t) PROXY_CONNECTION_MEMORY,
                MHD_OPTION_CONNECTION_LIMIT, max_conns,
                MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
                MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1,
                MHD_OPTION_END);
        if (!d->mhd)
                return log_error_errno(EINVAL, "Failed to start microhttpd on fd %d", listen_fd);
        return proxy_daemon_watch(p, d);
}

int proxy_daemon_watch(Proxy *p, ProxyDaemon *d) {
        int r;

        d->proxy = p;
        r = mhd_event_add_daemon(p->mhd_event, d->mhd);
        if (r < 0)
                return log_error_errno(r, "Failed to watch microhttpd: %m");
        return 0;
}

/* Each connection is a file descriptor: within RLIMIT_NOFILE (slotd may raise it for us),
 * shared by the listeners. */
static unsigned connections_per_daemon(size_t n_listen) {
        unsigned max = PROXY_CONNECTIONS_MAX;
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) >= 0 && rl.rlim_cur != RLIM_INFINITY &&
            rl.rlim_cur < (rlim_t) max + FDS_RESERVED)
                max = rl.rlim_cur > 2 * FDS_RESERVED ? (unsigned) rl.rlim_cur - FDS_RESERVED
                                                     : FDS_RESERVED;
        return MAX(max / (unsigned) n_listen, 1u);
}

int proxy_new(sd_event *event, int ipc_fd, int control_fd, const int *listen_fds,
              size_t n_listen, int metrics_fd, Proxy **ret) {
        Proxy *p;
        int r;

        p = new0(Proxy, 1);
        if (!p)
                return log_oom();
        p->event = sd_event_ref(event);
        p->ipc_fd = ipc_fd;
        p->control_fd = control_fd;
        p->listen_fds = listen_fds;
        p->n_listen = n_listen;
        p->metrics_fd = metrics_fd;
        p->control_queue = json_array();
        p->daemons = new0(ProxyDaemon, MAX(n_listen, (size_t) 1));
        if (!p->control_queue || !p->daemons) {
                proxy_free(p);
                return log_oom();
        }
        r = sd_event_add_io(event, &p->ipc_source, ipc_fd, EPOLLIN, on_ipc, p);
        if (r >= 0)
                r = control_start(p);
        if (r >= 0)
                r = mhd_event_new(event, &p->mhd_event);
        if (r < 0) {
                proxy_free(p);
                return log_error_errno(r, "Failed to set up the event loop: %m");
        }
        for (size_t i = 0; i < n_listen; i++, p->n_daemons++) {
                r = daemon_start(p, &p->daemons[i], listen_fds[i],
                                 connections_per_daemon(n_listen));
                if (r < 0) {
                        if (p->daemons[i].mhd)
                                p->n_daemons++;
                        proxy_free(p);
                        return r;
                }
        }
        if (metrics_fd >= 0) {
                r = metrics_daemon_start(p, &p->metrics_daemon, metrics_fd);
                if (r < 0) {
                        proxy_free(p);
                        return r;
                }
        }
        *ret = p;
        return 0;
}

static void free_value(void *v) {
        free(v);
}

Proxy *proxy_free(Proxy *p) {
        if (!p)
                return NULL;
        /* microhttpd refuses to stop with connections suspended or upgraded: end the sessions,
         * then fail whatever waits, which resumes it. */
        ws_done(p);
        metrics_done(p);
        control_done(p);
        while (p->pending_list)
                pending_finish(p->pending_list, NULL);
        for (Conn *c = p->conns_list; c; c = c->conns_next)
                http_conn_identified(c);
        p->mhd_event = mhd_event_free(p->mhd_event);
        for (size_t i = 0; i < p->n_daemons; i++)
                MHD_stop_daemon(p->daemons[i].mhd);
        if (p->metrics_daemon.mhd)
                MHD_stop_daemon(p->metrics_daemon.mhd);
        free(p->daemons);
        sd_event_source_disable_unref(p->ipc_source);
        hashmap_done(&p->conns);
        hashmap_done(&p->pending);
        hashmap_done_free(&p->slots, free_value);
        hashmap_done(&p->channels);
        json_decref(p->control_queue);
        sd_event_unref(p->event);
        return mfree(p);
}
