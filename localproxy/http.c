/* SPDX-License-Identifier: MIT */

#include "digest.h"
#include "log.h"
#include "macro.h"
#include "proxy-limits.h"
#include "proxy.h"
#include "request.h"

/* One REST request of a Multiplay SDK: read the body, wait until slotd has said who the
 * caller is, check the caller's limits, ask slotd, and turn slotd's reply into what the SDK
 * reads. Every wait is a microhttpd suspension with a deadline. */

typedef enum RequestState {
        REQUEST_READING,       /* headers and body arriving, or resumed to be dispatched */
        REQUEST_WAIT_CONN,     /* suspended until slotd identifies the caller */
        REQUEST_WAIT_REPLY,    /* suspended until slotd answers */
        REQUEST_ANSWERED,      /* resumed with slotd's reply, or with why none came */
        REQUEST_TOO_LARGE,     /* a chunked body grew too large: skipped, then 413 */
        REQUEST_RESPONDED,     /* a response is queued; microhttpd may still pass data */
} RequestState;

/* microhttpd takes a response only before the body or after all of it: a chunked body past
 * PROXY_BODY_MAX is read and dropped up to this, then the connection is. */
#define BODY_SKIP_MAX (64 * 1024)

struct Request {
        Proxy *proxy;
        struct MHD_Connection *connection;
        LIST_FIELDS(Request, waiters);
        Conn *waiting_on;
        sd_event_source *timer;
        Pending *pending;
        RequestState state;
        int route_r;
        ProxyRoute route;
        json_t *reply;
        const char *no_reply;
        char *body;
        size_t body_size;
        size_t skipped;
};

static enum MHD_Result respond(struct MHD_Connection *connection, unsigned status,
                               json_t *body, const char *allow, bool close) {
        struct MHD_Response *response;
        enum MHD_Result ret;
        char *text = NULL;

        if (body) {
                text = json_dumps(body, JSON_COMPACT);
                json_decref(body);
                if (!text)
                        return MHD_NO;
        }
        response = MHD_create_response_from_buffer(text ? strlen(text) : 0, text,
                                                   MHD_RESPMEM_MUST_FREE);
        if (!response) {
                free(text);
                return MHD_NO;
        }
        if (text)
                (void) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                                               "application/json");
        if (allow)
                (void) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allow);
        if (close)
                (void) MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
        ret = MHD_queue_response(connection, status, response);
        MHD_destroy_response(response);
        return ret;
}

enum MHD_Result http_respond_error(struct MHD_Connection *connection, unsigned status,
                                   const char *message, bool close) {
        json_t *body = json_pack("{s:s}", "error", message);

        if (!body)
                return MHD_NO;
        return respond(connection, status, body, NULL, close);
}

static void request_resume(Request *req) {
        MHD_resume_connection(req->connection);
        proxy_kick(req->proxy);
}

static void request_stop_waiting(Request *req) {
        if (req->waiting_on)
                LIST_REMOVE(waiters, req->waiting_on->waiters, req);
        req->waiting_on = NULL;
        req->timer = sd_event_source_disable_unref(req->timer);
}

static int on_identity_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Request *req = userdata;

        request_stop_waiting(req);
        req->state = REQUEST_ANSWERED;
        req->no_reply = "slotd did not identify the caller in time";
        request_resume(req);
        return 0;
}

void http_conn_identified(Conn *c) {
        while (c->waiters) {
                Request *req = c->waiters;

                request_stop_waiting(req);
                req->state = REQUEST_READING;
                request_resume(req);
        }
}

void http_conn_forget(Conn *c) {
        while (c->waiters)
                request_stop_waiting(c->waiters);
}

static enum MHD_Result wait_for_identity(Request *req, Conn *c) {
        int r;

        r = sd_event_add_time_relative(req->proxy->event, &req->timer, CLOCK_MONOTONIC,
                                       PROXY_REPLY_TIMEOUT_USEC, 0, on_identity_timeout, req);
        if (r < 0)
                return http_respond_error(req->connection, 503, "slotd-proxy is out of resources",
                                          false);
        LIST_PREPEND(waiters, c->waiters, req);
        req->waiting_on = c;
        req->state = REQUEST_WAIT_CONN;
        MHD_suspend_connection(req->connection);
        return MHD_YES;
}

static void on_reply(Proxy *p, void *userdata, json_t *reply) {
        Request *req = userdata;

        req->pending = NULL;
        req->reply = json_incref(reply);
        req->no_reply = "slotd did not answer in time";
        req->state = REQUEST_ANSWERED;
        request_resume(req);
}

static int body_error(const char **ret_error, const char *message) {
        *ret_error = message;
        return -EBADMSG;
}

/* The IPC request for the route (ipc.h), from the path and the body. */
static int request_message(Request *req, json_t *m, const char **ret_error) {
        const ProxyRoute *rt = &req->route;
        const char *body = req->body ?: "";
        usec_t timeout;
        bool ready;
        int r;

        switch (rt->op) {
        case PROXY_OP_READY:
                if (request_parse_ready(body, req->body_size, &ready) < 0)
                        return body_error(ret_error, "body must be {\"ready\":true|false}");
                return json_object_set_new(m, "allocation", json_string(rt->allocation)) < 0 ||
                                       json_object_set_new(m, "ready", json_boolean(ready)) < 0
                               ? -ENOMEM
                               : 0;
        case PROXY_OP_HOLD:
                r = request_parse_hold(body, req->body_size, &timeout);
                if (r == -ERANGE)
                        return body_error(ret_error, "hold timeout beyond a year");
                if (r < 0)
                        return body_error(ret_error, "body must be {\"timeout\":\"DURATION\"} "
                                                     "(like 90s, 2m, 1h30m)");
                return json_object_set_new(m, "timeout_usec", json_integer((json_int_t) timeout));
        case PROXY_OP_RESERVE:
                if (request_parse_reserve(body, req->body_size) < 0)
                        return body_error(ret_error, "body must be a JSON object");
                return 0;
        case PROXY_OP_PAYLOAD:
                return json_object_set_new(m, "allocation", json_string(rt->allocation));
        default:
                return 0;
        }
}

static enum MHD_Result ask_slotd(Request *req, Conn *c) {
        const ProxyRoute *rt = &req->route;
        const char *error = NULL;
        json_t *m;
        int r;

        m = json_pack("{s:s}", "op", proxy_op_to_string(rt->op));
        if (!m)
                return MHD_NO;
        if (rt->op != PROXY_OP_PAYLOAD && rt->op != PROXY_OP_TOKEN)
                r = json_object_set_new(m, "server", json_integer(rt->server));
        else
                r = 0;
        if (r >= 0)
                r = request_message(req, m, &error);
        if (r >= 0)
                r = proxy_request(req->proxy, c, m, on_reply, req, &req->pending);
        json_decref(m);
        if (r == -EBADMSG)
                return http_respond_error(req->connection, 400, error, false);
        if (r < 0) {
                log_debug_errno(r, "Failed to pass a request to slotd: %m");
                return http_respond_error(req->connection, 503, "slotd is not reachable", false);
        }
        req->state = REQUEST_WAIT_REPLY;
        MHD_suspend_connection(req->connection);
        return MHD_YES;
}

static enum MHD_Result route_request(Request *req, Conn *c) {
        switch (req->route_r) {
        case -ENOENT:
                return http_respond_error(req->connection, 404, "no such endpoint", false);
        case -EOPNOTSUPP:
                return respond(req->connection, 405,
                               json_pack("{s:s}", "error", "method not allowed on this endpoint"),
                               req->route.allow, false);
        case -EINVAL:
                return http_respond_error(req->connection, 400,
                                          "malformed server or allocation ID in the path", false);
        }
        if (req->route.op == PROXY_OP_WEBSOCKET)
                return ws_upgrade(req->proxy, req->connection);
        /* slotd could not name the caller (sock_diag): 503, never the 403 of a stranger. The
         * connection goes: its identity is asked once, so a retry needs a new one. */
        if (c->unavailable)
                return http_respond_error(req->connection, 503, c->unavailable, true);
        return ask_slotd(req, c);
}

/* Matchmaker's payloads are JSON, which the SDKs' samples read from UnityWebRequest's text;
 * the bytes go out as slotd has them either way, only the Content-Type tells. */
static bool payload_is_json(const unsigned char *bytes, size_t len) {
        json_error_t error;
        json_t *j = json_loadb((const char *) bytes, len, JSON_DECODE_ANY, &error);

        json_decref(j);
        return j != NULL;
}

static enum MHD_Result respond_payload(struct MHD_Connection *connection, const json_t *result) {
        const char *b64 = json_string_value(json_object_get(result, "payload"));
        struct MHD_Response *response;
        _cleanup_free_ unsigned char *bytes = NULL;
        enum MHD_Result ret;
        bool json;
        ssize_t n;
        size_t len;

        if (!b64)
                return http_respond_error(connection, 500, "slotd sent a malformed reply", false);
        /* Within an IPC message, so well inside an int. */
        len = strlen(b64);
        bytes = malloc(len / 4 * 3 + 3);
        if (!bytes)
                return MHD_NO;
        n = base64_decode(b64, len, bytes);
        if (n < 0)
                return http_respond_error(connection, 500, "slotd sent a malformed payload", false);
        len = (size_t) n;
        json = payload_is_json(bytes, len);
        response = MHD_create_response_from_buffer(len, TAKE_PTR(bytes), MHD_RESPMEM_MUST_FREE);
        if (!response)
                return MHD_NO;
        (void) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                                       json ? "application/json" : "application/octet-stream");
        ret = MHD_queue_response(connection, 200, response);
        MHD_destroy_response(response);
        return ret;
}

static enum MHD_Result respond_answer(Request *req) {
        json_t *error, *result;
        json_t *body;

        if (!req->reply)
                return http_respond_error(req->connection, 503, req->no_reply, false);
        error = json_object_get(req->reply, "error");
        if (json_is_object(error)) {
                const char *code = json_string_value(json_object_get(error, "code")),
                           *message = json_string_value(json_object_get(error, "message"));
                return http_respond_error(req->connection, request_error_status(code),
                                          message ?: code ?: "failed", false);
        }
        result = json_object_get(req->reply, "result");
        if (!json_is_object(result))
                return http_respond_error(req->connection, 500, "slotd sent a malformed reply",
                                          false);
        switch (req->route.op) {
        case PROXY_OP_HOLD:
        case PROXY_OP_HOLD_STATUS:
                body = request_hold_body(result);
                break;
        case PROXY_OP_RESERVE:
                body = request_reservation_body(result);
                break;
        case PROXY_OP_TOKEN:
                body = request_token_body(result);
                break;
        case PROXY_OP_PAYLOAD:
                return respond_payload(req->connection, result);
        default:
                return respond(req->connection, 204, NULL, NULL, false);
        }
        if (!body)
                return http_respond_error(req->connection, 500, "slotd sent a malformed reply",
                                          false);
        return respond(req->connection, 200, body, NULL, false);
}

static enum MHD_Result request_dispatch(Request *req) {
        Conn *c = conn_of(req->connection);
        char m[128];

        if (req->state == REQUEST_ANSWERED) {
                req->state = REQUEST_RESPONDED;
                return respond_answer(req);
        }
        req->state = REQUEST_RESPONDED;
        if (!c || !c->announced)
                return http_respond_error(req->connection, 503,
                                          "slotd-proxy could not tell slotd of this connection",
                                          true);
        if (!c->identified)
                return wait_for_identity(req, c);
        if (c->over_limit) {
                snprintf(m, sizeof(m), "connection limit: at most %u open connections %s",
                         c->in_slot ? PROXY_CONNECTIONS_PER_SLOT : PROXY_CONNECTIONS_OUTSIDE,
                         c->in_slot ? "per slot" : "from outside the slots");
                return http_respond_error(req->connection, 429, m, true);
        }
        if (!conn_take_token(c)) {
                snprintf(m, sizeof(m),
                         "rate limit: at most %u requests a second per slot (bursts of %u)",
                         PROXY_RATE_PER_SEC, PROXY_RATE_BURST);
                return http_respond_error(req->connection, 429, m, false);
        }
        return route_request(req, c);
}

static bool content_length_too_large(struct MHD_Connection *connection) {
        const char *v = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                    MHD_HTTP_HEADER_CONTENT_LENGTH);
        char *end;
        unsigned long long n;

        if (!v)
                return false;
        errno = 0;
        n = strtoull(v, &end, 10);
        return errno != 0 || *end != '\0' || n > PROXY_BODY_MAX;
}

static enum MHD_Result respond_too_large(Request *req) {
        char m[64];

        req->state = REQUEST_RESPONDED;
        snprintf(m, sizeof(m), "request body larger than %u bytes", PROXY_BODY_MAX);
        return http_respond_error(req->connection, 413, m, true);
}

static Request *request_new(Proxy *p, struct MHD_Connection *connection, const char *method,
                            const char *url) {
        Request *req = new0(Request, 1);

        if (!req)
                return NULL;
        *req = (Request){ .proxy = p, .connection = connection };
        req->route_r = request_route(method, url, &req->route);
        return req;
}

static enum MHD_Result request_append(Request *req, const char *data, size_t *size) {
        size_t n = *size;

        *size = 0;
        if (req->state == REQUEST_RESPONDED)
                return MHD_YES;
        if (req->state == REQUEST_TOO_LARGE || n > PROXY_BODY_MAX - req->body_size) {
                req->state = REQUEST_TOO_LARGE;
                req->skipped += n;
                return req->skipped <= BODY_SKIP_MAX ? MHD_YES : MHD_NO;
        }
        if (!req->body) {
                req->body = malloc(PROXY_BODY_MAX);
                if (!req->body)
                        return MHD_NO;
        }
        memcpy(req->body + req->body_size, data, n);
        req->body_size += n;
        return MHD_YES;
}

enum MHD_Result http_handler(void *cls, struct MHD_Connection *connection, const char *url,
                             const char *method, const char *version, const char *upload_data,
                             size_t *upload_data_size, void **con_cls) {
        Request *req = *con_cls;

        if (!req) {
                req = request_new(cls, connection, method, url);
                if (!req)
                        return MHD_NO;
                *con_cls = req;
                if (content_length_too_large(connection))
                        return respond_too_large(req);
                return MHD_YES;
        }
        if (*upload_data_size > 0)
                return request_append(req, upload_data, upload_data_size);
        if (req->state == REQUEST_RESPONDED)
                return MHD_YES;
        if (req->state == REQUEST_TOO_LARGE)
                return respond_too_large(req);
        return request_dispatch(req);
}

void http_request_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                            enum MHD_RequestTerminationCode toe) {
        Request *req = *con_cls;

        if (!req)
                return;
        request_stop_waiting(req);
        pending_cancel(req->proxy, req->pending);
        json_decref(req->reply);
        free(req->body);
        free(req);
        *con_cls = NULL;
}
