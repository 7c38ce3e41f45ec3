/* SPDX-License-Identifier: MIT */
/* The local proxy's requests (localproxy/ipc.h), carried out by the operations (ops.h): the
 * proxy is a door like D-Bus, with the caller's identity from its socket. A request that
 * changes state is answered once the change is durable. */
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "digest.h"
#include "log.h"
#include "manager.h"
#include "manager-metrics.h"
#include "proxy-internal.h"
#include "token.h"

typedef struct PendingReply {
        ProxyDoor *door;             /* outlives the manager, and so its waiters */
        Proxy *proxy;
        uint64_t generation;
        json_int_t id;
        json_t *result;
        usec_t started;              /* a reservation the metrics time (CLOCK_MONOTONIC), 0: none */
} PendingReply;

static void send_result(Proxy *p, json_int_t id, json_t *result) {
        _cleanup_(json_decrefp) json_t *msg = json_pack("{s:s, s:I, s:O}", "type", "reply", "id",
                                                        id, "result", result ?: json_object());

        if (msg)
                (void) proxy_send(p, msg);
}

static void send_error(Proxy *p, json_int_t id, OpsErrorCode code, const char *message) {
        _cleanup_(json_decrefp) json_t *msg = json_pack(
                "{s:s, s:I, s:{s:s, s:s}}", "type", "reply", "id", id, "error", "code",
                ops_error_code_to_string(code), "message", message);

        if (msg)
                (void) proxy_send(p, msg);
}

static void pending_done(Manager *m, int error, void *userdata) {
        PendingReply *r = userdata;
        Proxy *p = r->door->proxy;

        /* The proxy that asked may have died meanwhile: its client is gone with it. */
        if (error <= 0 && p == r->proxy && p && proxy_generation(p) == r->generation) {
                if (error < 0)
                        send_error(p, r->id, OPS_ERROR_UNAVAILABLE,
                                   "Failed to make the change durable");
                else {
                        send_result(p, r->id, r->result);
                        if (r->started > 0)
                                manager_metrics_replied(m, METRICS_DOOR_LOCALPROXY,
                                                        METRICS_REQUEST_RESERVE, r->started);
                }
        }
        json_decref(r->result);
        free(r);
}

/* Takes result. The waiter is complete before it is registered: registering may commit at
 * once (a change left waiting too long is written on the spot) and so call it back. */
static void reply_durable_timed(Proxy *p, json_int_t id, json_t *result, usec_t started) {
        PendingReply *r = new0(PendingReply, 1);

        if (r)
                *r = (PendingReply){ proxy_door(p), p, proxy_generation(p), id, result, started };
        if (!r || manager_when_durable(proxy_manager(p), pending_done, r) < 0) {
                free(r);
                json_decref(result);
                send_error(p, id, OPS_ERROR_FAILED, "Out of memory");
        }
}

static void reply_durable(Proxy *p, json_int_t id, json_t *result) {
        reply_durable_timed(p, id, result, 0);
}

static void format_rfc3339(usec_t realtime, char ret[static 32]) {
        time_t t = (time_t) (realtime / USEC_PER_SEC);
        struct tm tm;

        if (!gmtime_r(&t, &tm) || strftime(ret, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                ret[0] = '\0';
}

typedef struct Request {
        Proxy *proxy;
        Manager *manager;
        json_t *msg;
        json_int_t id;
        OpsCaller caller;
        unsigned server;             /* "server", OPS_NO_SLOT when absent */
        usec_t arrived;              /* CLOCK_MONOTONIC */
} Request;

static void op_ready(Request *q, OpsStatus *st) {
        const char *uuid = json_string_value(json_object_get(q->msg, "allocation"));
        json_t *ready = json_object_get(q->msg, "ready");

        if (!json_is_boolean(ready)) {
                (void) ops_fail(st, OPS_ERROR_INVALID_ARGUMENT, -EINVAL, "'ready' must be true or false");
                return;
        }
        if (ops_set_ready(q->manager, &q->caller, q->server, uuid, json_is_true(ready), st) >= 0)
                reply_durable(q->proxy, q->id, json_object());
}

static json_t *hold_result(usec_t until) {
        return json_pack("{s:b, s:I}", "held", until > 0, "expires_at",
                         (json_int_t) (until / USEC_PER_SEC));
}

static void op_hold(Request *q, OpsStatus *st) {
        json_t *t = json_object_get(q->msg, "timeout_usec");
        usec_t until;

        if (!json_is_integer(t) || json_integer_value(t) < 0) {
                (void) ops_fail(st, OPS_ERROR_INVALID_ARGUMENT, -EINVAL, "Invalid hold timeout");
                return;
        }
        if (ops_hold(q->manager, &q->caller, q->server, (usec_t) json_integer_value(t), &until, st) >= 0)
                reply_durable(q->proxy, q->id, hold_result(until));
}

static void op_hold_status(Request *q, OpsStatus *st) {
        _cleanup_(json_decrefp) json_t *result = NULL;
        usec_t until;

        if (ops_hold_status(q->manager, &q->caller, q->server, &until, st) < 0)
                return;
        result = hold_result(until);
        send_result(q->proxy, q->id, result);
}

static void op_release_hold(Request *q, OpsStatus *st) {
        if (ops_release_hold(q->manager, &q->caller, q->server, st) >= 0)
                reply_durable(q->proxy, q->id, json_object());
}

static void op_reserve(Request *q, OpsStatus *st) {
        json_t *result;
        char now[32];
        Slot *s;

        if (ops_slot_reserve(q->manager, &q->caller, q->server, 0, &s, st) < 0)
                return;
        format_rfc3339(now_usec(CLOCK_REALTIME), now);
        result = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:s, s:s}", "reservation_id",
                           s->reservation_uuid, "build_configuration_id", s->build_configuration,
                           "game_port", (int) s->port, "ipv4", strempty(q->manager->ip), "ipv6",
                           strempty(q->manager->ipv6), "requested", now, "created", now,
                           "fulfilled", now);
        reply_durable_timed(q->proxy, q->id, result, q->arrived);
}

static void op_unreserve(Request *q, OpsStatus *st) {
        if (ops_slot_unreserve(q->manager, &q->caller, q->server, st) >= 0)
                reply_durable(q->proxy, q->id, json_object());
}

static void op_payload(Request *q, OpsStatus *st) {
        const char *uuid = json_string_value(json_object_get(q->msg, "allocation"));
        _cleanup_(json_decrefp) json_t *result = NULL;
        _cleanup_free_ char *text = NULL;
        const void *data;
        size_t size;

        if (ops_payload(q->manager, &q->caller, uuid, &data, &size, st) < 0)
                return;
        text = malloc(BASE64_ENCODED_SIZE(size));
        if (!text) {
                (void) ops_fail(st, OPS_ERROR_FAILED, -ENOMEM, "Out of memory");
                return;
        }
        (void) base64_encode(data, size, text);
        result = json_pack("{s:s}", "payload", text);
        send_result(q->proxy, q->id, result);
}

static void op_token(Request *q, OpsStatus *st) {
        _cleanup_(json_decrefp) json_t *result = NULL;
        _cleanup_free_ char *token = NULL;

        if (ops_token(q->manager, &q->caller, &token, st) < 0)
                return;
        result = json_pack("{s:s}", "token", token);
        send_result(q->proxy, q->id, result);
}

static void op_subscribe(Request *q, OpsStatus *st) {
        _cleanup_(json_decrefp) json_t *result = NULL;
        char epoch[24], event_id[37];
        json_t *last = json_null();
        AllocEvent e;
        Slot *s;

        if (ops_subscribe(q->manager, &q->caller, q->server, &s, st) < 0)
                return;
        (void) snprintf(epoch, sizeof(epoch), "%" PRIx64, q->manager->epoch);
        if (manager_last_event(q->manager, s, &e)) {
                alloc_event_id(q->manager->epoch, s->id, e.offset, event_id);
                last = json_pack("{s:I, s:s, s:I, s:s, s:s, s:s}", "server", (json_int_t) s->id,
                                 "epoch", epoch, "offset", (json_int_t) e.offset, "event_type",
                                 e.allocate ? "AllocateEventType" : "DeallocateEventType",
                                 "event_id", event_id, "allocation", e.uuid);
        }
        result = json_pack("{s:s, s:I, s:o}", "epoch", epoch, "offset", (json_int_t) s->events,
                           "last", last ?: json_null());
        send_result(q->proxy, q->id, result);
}

static const struct {
        const char *name;
        void (*run)(Request *q, OpsStatus *st);
        bool needs_server;
} ops_table[] = {
        { "ready", op_ready, true },
        { "hold", op_hold, true },
        { "hold_status", op_hold_status, true },
        { "release_hold", op_release_hold, true },
        { "reserve", op_reserve, true },
        { "unreserve", op_unreserve, true },
        { "payload", op_payload, false },
        { "token", op_token, false },
        { "subscribe", op_subscribe, true },
};

void proxy_handle_request(Proxy *p, json_t *msg) {
        Request q = { .proxy = p, .manager = proxy_manager(p), .msg = msg,
                      .id = json_integer_value(json_object_get(msg, "id")),
                      .server = OPS_NO_SLOT, .arrived = now_usec(CLOCK_MONOTONIC) };
        json_int_t conn = json_integer_value(json_object_get(msg, "conn"));
        const char *op = json_string_value(json_object_get(msg, "op"));
        json_t *server = json_object_get(msg, "server");
        ProxyConn *c = conn > 0 ? proxy_conn(p, (uint64_t) conn) : NULL;
        OpsStatus st = {};

        if (q.id <= 0)
                return;
        /* A caller sock_diag could not name is nobody we know, and no stranger either. */
        if (c && c->unavailable) {
                char why[256];

                proxy_conn_unavailable_message(c, why, sizeof(why));
                send_error(p, q.id, OPS_ERROR_UNAVAILABLE, why);
                return;
        }
        /* Unknown connection: nobody we can vouch for. */
        q.caller = (OpsCaller){ .slot_known = true, .slot_id = c ? c->slot_id : OPS_NO_SLOT,
                                .admin = c && c->admin, .door = "the local proxy" };
        if (json_is_integer(server) && json_integer_value(server) >= 0 &&
            json_integer_value(server) < UINT32_MAX)
                q.server = (unsigned) json_integer_value(server);
        for (size_t i = 0; i < ELEMENTSOF(ops_table); i++) {
                if (!streq_ptr(op, ops_table[i].name))
                        continue;
                if (ops_table[i].needs_server && q.server == OPS_NO_SLOT)
                        (void) ops_fail(&st, OPS_ERROR_INVALID_ARGUMENT, -EINVAL,
                                        "Request '%s' names no server", op);
                else
                        ops_table[i].run(&q, &st);
                if (st.code != OPS_OK)
                        send_error(p, q.id, st.code, st.message);
                return;
        }
        send_error(p, q.id, OPS_ERROR_INVALID_ARGUMENT, "Unknown request");
}
