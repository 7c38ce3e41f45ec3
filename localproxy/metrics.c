/* SPDX-License-Identifier: MIT */
/* metrics.listen (SPEC §14): GET /metrics for Prometheus, in the unprivileged proxy rather
 * than in root's slotd, since it may face the network. slotd makes the text; it arrives in
 * parts over the IPC socket (ipc.h). Scrapes that come while slotd is being asked wait for
 * the same answer. Anything but GET /metrics is 404. */
#include <fcntl.h>
#include <inttypes.h>
#include <sys/socket.h>

#include "ipc.h"
#include "log.h"
#include "macro.h"
#include "prom-text.h"
#include "proxy-limits.h"
#include "proxy.h"

struct Scrape {
        Proxy *proxy;
        LIST_FIELDS(Scrape, waiting);
        bool suspended;                /* in proxy->metrics.waiting */
        bool responded;
        struct MHD_Connection *connection;
        struct MHD_Response *response; /* made when slotd answered, queued once resumed */
        unsigned status;
        size_t body;                   /* bytes of a body, which GET has no use for */
};

static struct MHD_Response *text_response(const char *text, size_t size, const char *type) {
        struct MHD_Response *r = MHD_create_response_from_buffer(size, (void *) text,
                                                                 MHD_RESPMEM_MUST_COPY);

        if (r)
                (void) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        return r;
}

static enum MHD_Result respond(Scrape *sc, unsigned status, struct MHD_Response *response) {
        enum MHD_Result ret;

        sc->responded = true;
        if (!response)
                return MHD_NO;
        ret = MHD_queue_response(sc->connection, status, response);
        MHD_destroy_response(response);
        return ret;
}

static enum MHD_Result respond_text(Scrape *sc, unsigned status, const char *message) {
        return respond(sc, status, text_response(message, strlen(message), "text/plain"));
}

/* The fetch is over: each waiting scrape gets the text (status 200) or the message. */
static void fetch_finish(Proxy *p, unsigned status, const char *message) {
        MetricsFetch *f = &p->metrics;

        f->id = 0;
        f->timer = sd_event_source_disable_unref(f->timer);
        while (f->waiting) {
                Scrape *sc = f->waiting;

                LIST_REMOVE(waiting, f->waiting, sc);
                sc->suspended = false;
                sc->status = status;
                sc->response = status == 200
                                       ? text_response(f->text ?: "", f->size, PROM_CONTENT_TYPE)
                                       : text_response(message, strlen(message), "text/plain");
                MHD_resume_connection(sc->connection);
        }
        f->text = mfree(f->text);
        f->size = f->allocated = 0;
        proxy_kick(p);
}

static int on_fetch_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        log_debug("slotd did not send its metrics in time");
        fetch_finish(userdata, 503, "slotd did not send its metrics in time\n");
        return 0;
}

/* Asks slotd for the text, unless it is being asked already. */
static int fetch_start(Proxy *p) {
        MetricsFetch *f = &p->metrics;
        _cleanup_(json_decrefp) json_t *m = NULL;
        int r;

        if (f->id != 0)
                return 0;
        /* Behind queued control messages, whose order counts, a scrape is not sent. */
        if (json_array_size(p->control_queue) > 0)
                return -EAGAIN;
        m = json_pack("{s:s, s:I}", "type", "metrics", "id", (json_int_t) (f->next_id + 1));
        if (!m)
                return -ENOMEM;
        r = sd_event_add_time_relative(p->event, &f->timer, CLOCK_MONOTONIC,
                                       PROXY_REPLY_TIMEOUT_USEC, 0, on_fetch_timeout, p);
        if (r < 0)
                return r;
        r = ipc_send(p->ipc_fd, m);
        if (r < 0) {
                f->timer = sd_event_source_disable_unref(f->timer);
                return r;
        }
        f->id = ++f->next_id;
        return 0;
}

static int fetch_append(MetricsFetch *f, const char *text, size_t n) {
        if (n > PROXY_METRICS_TEXT_MAX - f->size)
                return -EFBIG;
        if (f->size + n + 1 > f->allocated) {
                size_t want = MAX(f->allocated * 2, f->size + n + 1);
                char *t = realloc(f->text, want);

                if (!t)
                        return -ENOMEM;
                f->text = t;
                f->allocated = want;
        }
        memcpy(f->text + f->size, text, n);
        f->size += n;
        f->text[f->size] = '\0';
        return 0;
}

void metrics_on_message(Proxy *p, json_t *m) {
        MetricsFetch *f = &p->metrics;
        json_t *id = json_object_get(m, "id"), *text = json_object_get(m, "text");
        const char *error = json_string_value(json_object_get(m, "error"));

        if (!json_is_integer(id) || f->id == 0 || (uint64_t) json_integer_value(id) != f->id) {
                log_debug("Metrics from slotd for a scrape no longer waiting, ignoring");
                return;
        }
        if (error) {
                log_warning("slotd sent no metrics: %s", error);
                return fetch_finish(p, 503, "slotd could not make its metrics\n");
        }
        if (!json_is_string(text) || fetch_append(f, json_string_value(text),
                                                  json_string_length(text)) < 0) {
                log_warning("slotd sent malformed or oversized metrics, dropping them");
                return fetch_finish(p, 500, "slotd sent malformed metrics\n");
        }
        if (!json_is_true(json_object_get(m, "more")))
                fetch_finish(p, 200, NULL);
}

static enum MHD_Result scrape_begin(Proxy *p, Scrape *sc) {
        char m[96];
        int r;

        if (!token_bucket_take(&p->metrics.bucket, PROXY_METRICS_RATE_PER_SEC,
                               PROXY_METRICS_BURST, now_usec(CLOCK_MONOTONIC))) {
                (void) snprintf(m, sizeof(m), "too many scrapes: at most %u a second (bursts "
                                "of %u)\n", PROXY_METRICS_RATE_PER_SEC, PROXY_METRICS_BURST);
                return respond_text(sc, 429, m);
        }
        r = fetch_start(p);
        if (r < 0) {
                log_debug_errno(r, "Failed to ask slotd for its metrics: %m");
                return respond_text(sc, 503, "slotd is not reachable\n");
        }
        LIST_PREPEND(waiting, p->metrics.waiting, sc);
        sc->suspended = true;
        MHD_suspend_connection(sc->connection);
        return MHD_YES;
}

static enum MHD_Result metrics_handler(void *cls, struct MHD_Connection *connection,
                                       const char *url, const char *method, const char *version,
                                       const char *upload_data, size_t *upload_data_size,
                                       void **con_cls) {
        Scrape *sc = *con_cls;

        if (!sc) {
                sc = new0(Scrape, 1);
                if (!sc)
                        return MHD_NO;
                *sc = (Scrape){ .proxy = cls, .connection = connection };
                *con_cls = sc;
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                sc->body += *upload_data_size;
                *upload_data_size = 0;
                return sc->body <= PROXY_BODY_MAX ? MHD_YES : MHD_NO;
        }
        if (sc->responded)
                return MHD_YES;
        if (sc->status != 0) /* resumed with slotd's answer */
                return respond(sc, sc->status, TAKE_PTR(sc->response));
        if (!streq(method, MHD_HTTP_METHOD_GET) || !streq(url, "/metrics"))
                return respond_text(sc, 404, "not found: this address serves GET /metrics\n");
        return scrape_begin(cls, sc);
}

static void metrics_request_completed(void *cls, struct MHD_Connection *connection,
                                      void **con_cls, enum MHD_RequestTerminationCode toe) {
        Proxy *p = cls;
        Scrape *sc = *con_cls;

        if (!sc)
                return;
        if (sc->suspended)
                LIST_REMOVE(waiting, p->metrics.waiting, sc);
        if (sc->response)
                MHD_destroy_response(sc->response);
        free(sc);
        *con_cls = NULL;
}

/* Paths are compared as sent: "/metric%73" is not "/metrics". */
static size_t no_unescape(void *cls, struct MHD_Connection *connection, char *s) {
        return strlen(s);
}

int metrics_daemon_start(Proxy *p, ProxyDaemon *d, int listen_fd) {
        d->proxy = p;
        d->mhd = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, metrics_handler, p,
                MHD_OPTION_LISTEN_SOCKET, (MHD_socket) listen_fd,
                MHD_OPTION_NOTIFY_COMPLETED, metrics_request_completed, p,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) PROXY_IDLE_TIMEOUT_SEC,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t) PROXY_CONNECTION_MEMORY,
                MHD_OPTION_CONNECTION_LIMIT, (unsigned) PROXY_METRICS_CONNECTIONS,
                MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned) PROXY_METRICS_CONNECTIONS_PER_IP,
                MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
                MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1,
                MHD_OPTION_END);
        if (!d->mhd)
                return log_error_errno(EINVAL, "Failed to start microhttpd on fd %d (metrics)",
                                       listen_fd);
        return proxy_daemon_watch(p, d);
}

void metrics_daemon_stop(Proxy *p) {
        struct MHD_Daemon *mhd = p->metrics_daemon.mhd;

        if (!mhd)
                return;
        /* microhttpd stops with no connection suspended: the waiting scrapes resume with
         * their 503 first. */
        if (p->metrics.waiting)
                fetch_finish(p, 503, "metrics.listen is moving\n");
        mhd_event_remove_daemon(p->mhd_event, mhd);
        MHD_stop_daemon(mhd); /* closes the listening socket and the connections */
        p->metrics_daemon.mhd = NULL;
        p->metrics_fd = -1;
}

/* The socket slotd passed: a listening TCP socket, set up as main.c does for its own. */
static int check_listen_fd(int fd) {
        int v = 0, flags;
        socklen_t l = sizeof(v);

        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) < 0 || v != SOCK_STREAM)
                return -ENOTSOCK;
        l = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || !v)
                return -EINVAL;
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return negative_errno();
        return 0;
}

void metrics_on_listen(Proxy *p, json_t *m, int fd) {
        const char *address = json_string_value(json_object_get(m, "address"));
        json_int_t port = json_integer_value(json_object_get(m, "port"));
        int r;

        if ((fd >= 0) != (address != NULL)) {
                log_warning("slotd sent metrics_listen %s a socket, ignoring it",
                            fd >= 0 ? "with" : "without");
                safe_close(fd);
                return;
        }
        if (fd >= 0 && (r = check_listen_fd(fd)) < 0) {
                log_warning_errno(r, "slotd sent metrics_listen with a socket that does not "
                                  "listen, ignoring it: %m");
                safe_close(fd);
                return;
        }
        metrics_daemon_stop(p);
        if (fd < 0) {
                log_info("Not serving metrics any more (metrics.listen is off)");
                return;
        }
        r = metrics_daemon_start(p, &p->metrics_daemon, fd);
        if (r < 0) {
                if (p->metrics_daemon.mhd)
                        MHD_stop_daemon(p->metrics_daemon.mhd);
                else
                        safe_close(fd);
                p->metrics_daemon.mhd = NULL;
                return;
        }
        p->metrics_fd = fd;
        log_info("Serving metrics on %s port %" JSON_INTEGER_FORMAT " (metrics.listen)", address,
                 port);
}

void metrics_done(Proxy *p) {
        if (p->metrics.waiting)
                fetch_finish(p, 503, "slotd-proxy is stopping\n");
        p->metrics.timer = sd_event_source_disable_unref(p->metrics.timer);
        p->metrics.text = mfree(p->metrics.text);
}
