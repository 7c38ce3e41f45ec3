/* SPDX-License-Identifier: MIT */
/* The allocator's HTTP side: microhttpd in external epoll mode on the allocator's sd-event
 * loop (common/mhd-event.c), HTTPS and mutual TLS through microhttpd's GnuTLS, the bearer
 * token, and the life of one request: read the body, route, hand it to the API, wait
 * (suspended, with a deadline: etcd's timeout) for the answer. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include <gnutls/gnutls.h>
#include <openssl/crypto.h>

#include "allocator-answer.h"
#include "allocator-http.h"
#include "allocator.h"
#include "log.h"
#include "mhd-event.h"

#define CONNECTIONS_MAX 4096
#define IDLE_TIMEOUT_SEC 60
/* microhttpd takes a response only before the body or after all of it: a body past
 * API_BODY_MAX is read and dropped up to this, then the connection is. */
#define BODY_SKIP_MAX (1024 * 1024)

typedef enum RequestState {
        REQUEST_READING,
        REQUEST_WAITING,  /* handed to the API, suspended until it answers */
        REQUEST_ANSWERED, /* the answer is ready, to be queued */
        REQUEST_TOO_LARGE,
        REQUEST_RESPONDED, /* queued; microhttpd may still pass data */
} RequestState;

struct ApiRequest {
        Allocator *allocator;
        struct MHD_Connection *connection;
        RequestState state;
        int route_r;
        const char *route_error;
        ApiRoute route;
        char *body;
        size_t body_size, skipped;
        usec_t started;
        bool suspended;
        unsigned status;
        char *answer;
        const char *content_type;
        void *op;
        void (*cancel)(void *op);
        sd_event_source *deadline;
        LIST_FIELDS(ApiRequest, requests);
};

Allocator *api_request_allocator(const ApiRequest *req) {
        return req->allocator;
}

const ApiRoute *api_request_route(const ApiRequest *req) {
        return &req->route;
}

const char *api_request_body(const ApiRequest *req, size_t *ret_size) {
        *ret_size = req->body_size;
        return req->body ?: "";
}

usec_t api_request_started(const ApiRequest *req) {
        return req->started;
}

void api_request_set_op(ApiRequest *req, void *op, void (*cancel)(void *op)) {
        req->op = op;
        req->cancel = cancel;
}

void api_request_clear_op(ApiRequest *req) {
        req->op = NULL;
        req->cancel = NULL;
}

static void request_cancel_op(ApiRequest *req) {
        void *op = req->op;
        void (*cancel)(void *op) = req->cancel;

        api_request_clear_op(req);
        if (op && cancel)
                cancel(op);
}

/* ---- answers ---- */

static enum MHD_Result queue_answer(ApiRequest *req) {
        struct MHD_Response *response;
        enum MHD_Result ret;
        size_t len = req->answer ? strlen(req->answer) : 0;

        req->state = REQUEST_RESPONDED;
        response = MHD_create_response_from_buffer(len, TAKE_PTR(req->answer),
                                                   MHD_RESPMEM_MUST_FREE);
        if (!response)
                return MHD_NO;
        if (len > 0)
                (void) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                                               req->content_type ?: "application/json");
        if (req->status == 405 && req->route.allow)
                (void) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, req->route.allow);
        if (req->status == 401)
                (void) MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                               "Bearer");
        ret = MHD_queue_response(req->connection, req->status, response);
        MHD_destroy_response(response);
        return ret;
}

void api_request_answer_text(ApiRequest *req, unsigned status, char *text,
                             const char *content_type) {
        if (req->state == REQUEST_ANSWERED || req->state == REQUEST_RESPONDED) {
                free(text);
                return;
        }
        api_request_clear_op(req);
        req->deadline = sd_event_source_disable_unref(req->deadline);
        free(req->answer);
        req->answer = text;
        req->status = text || status == 204 ? status : 500;
        req->content_type = content_type;
        req->state = REQUEST_ANSWERED;
        if (req->suspended) {
                req->suspended = false;
                MHD_resume_connection(req->connection);
                mhd_event_kick(req->allocator->mhd_event);
        }
}

void api_request_answer(ApiRequest *req, unsigned status, json_t *body) {
        char *text = NULL;

        if (body) {
                text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
                json_decref(body);
        }
        api_request_answer_text(req, status, text, NULL);
}

void api_request_error(ApiRequest *req, unsigned status, const char *fmt, ...) {
        va_list ap;
        json_t *j;

        va_start(ap, fmt);
        j = api_error_json_va(fmt, ap);
        va_end(ap);
        api_request_answer(req, status, j);
}

/* ---- authentication ---- */

static bool token_matches(const Allocator *a, const char *header) {
        size_t n;

        if (!header || strncasecmp(header, "Bearer ", 7) != 0)
                return false;
        header += 7;
        n = strlen(a->token);
        return strlen(header) == n && CRYPTO_memcmp(header, a->token, n) == 0;
}

/* With allocator.tls_client_ca, every request comes with a client certificate that the CA
 * signed (microhttpd asks for it; GnuTLS checks it against the trust list). */
static bool client_certificate_valid(struct MHD_Connection *connection) {
        const union MHD_ConnectionInfo *info =
                MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        unsigned status = 0, n = 0;
        gnutls_session_t session;

        if (!info || !info->tls_session)
                return false;
        session = (gnutls_session_t) info->tls_session;
        if (!gnutls_certificate_get_peers(session, &n) || n == 0)
                return false;
        return gnutls_certificate_verify_peers2(session, &status) == GNUTLS_E_SUCCESS &&
               status == 0;
}

/* NULL when the request may go on, else why not. */
static const char *request_unauthorized(const ApiRequest *req) {
        const Allocator *a = req->allocator;

        if (a->tls_ca_pem && !client_certificate_valid(req->connection))
                return "a client certificate signed by allocator.tls_client_ca is required";
        if (a->token && !(req->route_r >= 0 && req->route.op == API_METRICS) &&
            !token_matches(a, MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND,
                                                          MHD_HTTP_HEADER_AUTHORIZATION)))
                return "missing or wrong bearer token (Authorization: Bearer TOKEN)";
        return NULL;
}

/* ---- a request's life ---- */

/* A request's answer is due within twice etcd's timeout: each request to etcd fails within
 * one, and a request of the API makes a few in a row (a claim that lost its slot tries the
 * next). */
static usec_t request_deadline(const Allocator *a) {
        return 2 * a->config->etcd_timeout;
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        ApiRequest *req = userdata;
        usec_t t = request_deadline(req->allocator);

        req->deadline = sd_event_source_disable_unref(req->deadline);
        request_cancel_op(req);
        req->allocator->metrics.etcd_errors++;
        if (req->route_r >= 0 && req->route.op == API_ALLOCATE) {
                req->allocator->metrics.allocations[ALLOC_RESULT_UNAVAILABLE]++;
                allocator_metrics_observe_latency(&req->allocator->metrics,
                                                  now_usec(CLOCK_MONOTONIC) - req->started);
        }
        api_request_error(req, 503, "etcd unavailable: no answer within %" PRIu64 " ms (%s %s)",
                          t / USEC_PER_MSEC, api_op_to_string(req->route.op), req->route.fleet);
        return 0;
}

static enum MHD_Result request_route_error(ApiRequest *req) {
        switch (req->route_r) {
        case -EOPNOTSUPP:
                api_request_error(req, 405, "method not allowed here (allowed: %s)",
                                  req->route.allow);
                break;
        case -EINVAL:
                api_request_error(req, 400, "%s", req->route_error);
                break;
        default:
                api_request_error(req, 404, "no such endpoint");
        }
        return queue_answer(req);
}

static enum MHD_Result request_dispatch(ApiRequest *req) {
        Allocator *a = req->allocator;
        int r;

        if (req->route_r < 0)
                return request_route_error(req);
        if (a->stopping && req->route.op != API_METRICS && req->route.op != API_STATUS) {
                api_request_error(req, 503, "slotd-allocator is stopping");
                return queue_answer(req);
        }
        req->state = REQUEST_WAITING;
        a->api_dispatch(a, req);
        if (req->state == REQUEST_ANSWERED)
                return queue_answer(req);
        r = sd_event_add_time_relative(a->event, &req->deadline, CLOCK_MONOTONIC,
                                       request_deadline(a), USEC_PER_MSEC, on_deadline, req);
        if (r < 0) {
                request_cancel_op(req);
                api_request_error(req, 503, "slotd-allocator is out of resources");
                return queue_answer(req);
        }
        req->suspended = true;
        MHD_suspend_connection(req->connection);
        return MHD_YES;
}

static bool content_length_too_large(struct MHD_Connection *connection) {
        const char *v = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                    MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long n;
        char *end;

        if (!v)
                return false;
        errno = 0;
        n = strtoull(v, &end, 10);
        return errno != 0 || *end != '\0' || n > API_BODY_MAX;
}

static enum MHD_Result request_too_large(ApiRequest *req) {
        api_request_error(req, 413, "request body larger than %u bytes", API_BODY_MAX);
        return queue_answer(req);
}

static ApiRequest *request_new(Allocator *a, struct MHD_Connection *connection,
                               const char *method, const char *url) {
        ApiRequest *req = new0(ApiRequest, 1);

        if (!req)
                return NULL;
        *req = (ApiRequest){ .allocator = a, .connection = connection,
                             .started = now_usec(CLOCK_MONOTONIC) };
        LIST_PREPEND(requests, a->requests, req);
#define ARG(name) MHD_lookup_connection_value(connection, MHD_GET_ARGUMENT_KIND, name)
        req->route_r = api_route(method, url,
                                 &(const ApiQuery){ .status = ARG("status"), .age = ARG("age"),
                                                    .limit = ARG("limit"),
                                                    .offset = ARG("offset"),
                                                    .ids = ARG("ids") },
                                 &req->route, &req->route_error);
#undef ARG
        a->requests_in_flight++;
        return req;
}

static enum MHD_Result request_append(ApiRequest *req, const char *data, size_t *size) {
        size_t n = *size;

        *size = 0;
        if (req->state == REQUEST_RESPONDED)
                return MHD_YES;
        if (req->state == REQUEST_TOO_LARGE || n > API_BODY_MAX - req->body_size) {
                req->state = REQUEST_TOO_LARGE;
                req->skipped += n;
                return req->skipped <= BODY_SKIP_MAX ? MHD_YES : MHD_NO;
        }
        if (!req->body) {
                req->body = malloc(API_BODY_MAX + 1);
                if (!req->body)
                        return MHD_NO;
        }
        memcpy(req->body + req->body_size, data, n);
        req->body_size += n;
        req->body[req->body_size] = '\0';
        return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
        ApiRequest *req = *con_cls;
        const char *why;

        if (!req) {
                req = request_new(cls, connection, method, url);
                if (!req)
                        return MHD_NO;
                *con_cls = req;
                why = request_unauthorized(req);
                if (why) {
                        api_request_error(req, 401, "unauthorized: %s", why);
                        return queue_answer(req);
                }
                if (content_length_too_large(connection))
                        return request_too_large(req);
                return MHD_YES;
        }
        if (*upload_data_size > 0)
                return request_append(req, upload_data, upload_data_size);
        switch (req->state) {
        case REQUEST_RESPONDED:
                return MHD_YES;
        case REQUEST_TOO_LARGE:
                return request_too_large(req);
        case REQUEST_ANSWERED:
                return queue_answer(req);
        case REQUEST_WAITING:
                return MHD_YES; /* woken without an answer: nothing to do yet */
        default:
                return request_dispatch(req);
        }
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
        ApiRequest *req = *con_cls;
        Allocator *a;

        if (!req)
                return;
        a = req->allocator;
        request_cancel_op(req);
        sd_event_source_disable_unref(req->deadline);
        a->requests_in_flight--;
        LIST_REMOVE(requests, a->requests, req);
        free(req->answer);
        free(req->body);
        free(req);
        *con_cls = NULL;
        allocator_settled(a); /* a stop waits for the answers it gave to leave */
}

/* The API's paths have no escapes: a path with one then matches no route instead of being
 * decoded into one (and "%00" into a shorter one). */
static size_t no_unescape(void *cls, struct MHD_Connection *connection, char *s) {
        return strlen(s);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        _cleanup_free_ char *m = NULL;

        if (vasprintf(&m, fmt, ap) >= 0)
                log_debug("microhttpd: %s", m);
}

int http_start(Allocator *a, int listen_fd, ApiDispatch dispatch) {
        unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
        struct MHD_OptionItem tls[4] = {};
        size_t n = 0;
        int r;

        if (a->tls_cert_pem) {
                flags |= MHD_USE_TLS;
                tls[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0,
                                                    a->tls_cert_pem };
                tls[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, a->tls_key_pem };
                if (a->tls_ca_pem)
                        tls[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_TRUST, 0,
                                                            a->tls_ca_pem };
        }
        tls[n] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
        a->api_dispatch = dispatch;
        a->mhd = MHD_start_daemon(
                flags, 0, NULL, NULL, on_request, a,
                MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
                MHD_OPTION_LISTEN_SOCKET, (MHD_socket) listen_fd,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) IDLE_TIMEOUT_SEC,
                MHD_OPTION_CONNECTION_LIMIT, (unsigned) CONNECTIONS_MAX,
                MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
                MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1,
                MHD_OPTION_ARRAY, tls,
                MHD_OPTION_END);
        if (!a->mhd)
                return log_error_errno(EINVAL, "Failed to start microhttpd on %s%s",
                                       a->config->listen.text,
                                       a->tls_cert_pem ? " (check allocator.tls_cert and "
                                                         "allocator.tls_key)" : "");
        r = mhd_event_new(a->event, &a->mhd_event);
        if (r >= 0)
                r = mhd_event_add_daemon(a->mhd_event, a->mhd);
        if (r < 0)
                return log_error_errno(r, "Failed to run microhttpd from the event loop: %m");
        return 0;
}

void http_answer_waiting(Allocator *a, const char *why) {
        for (ApiRequest *req = a->requests; req; req = req->requests_next)
                if (req->state == REQUEST_WAITING) {
                        request_cancel_op(req);
                        api_request_error(req, 503, "%s", why);
                }
}

void http_stop(Allocator *a) {
        /* microhttpd refuses to stop with connections suspended: answer them first. */
        http_answer_waiting(a, "slotd-allocator is stopping");
        a->mhd_event = mhd_event_free(a->mhd_event);
        if (a->mhd) {
                MHD_quiesce_daemon(a->mhd);
                MHD_stop_daemon(a->mhd);
                a->mhd = NULL;
        }
}
