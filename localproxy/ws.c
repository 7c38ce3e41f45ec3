/* SPDX-License-Identifier: MIT */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <inttypes.h>
#include <limits.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <wslay/wslay.h>

#include "digest.h"
#include "centrifuge.h"
#include "log.h"
#include "macro.h"
#include "proxy-limits.h"
#include "proxy.h"

/* Centrifuge over WebSocket: microhttpd answers the RFC 6455 handshake and hands over the
 * socket; wslay does the framing, driven by an sd-event io source; centrifuge.h parses and
 * encodes the commands. Slotd's allocation events reach every session subscribed to the
 * server's channel "server#<N>" through a map of channels, so a fan-out costs the channel's
 * subscribers only. */

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_KEY_LEN 24          /* base64 of the 16 random bytes RFC 6455 asks for */
#define WS_ACCEPT_LEN 28       /* base64 of a SHA-1 */
/* Close codes: RFC 6455's "unsupported data", and Centrifuge's "bad request" disconnect, on
 * which its clients do not reconnect. */
#define WS_CLOSE_UNSUPPORTED 1003
#define WS_CLOSE_BAD_REQUEST 3501
/* Centrifuge's "internal server error" disconnect, after which its clients reconnect. */
#define WS_CLOSE_SERVER_ERROR 3004

typedef struct Subscription Subscription;

typedef struct Channel {
        char key[16];
        char name[24];
        unsigned server;
        Subscription *subscribers;
} Channel;

struct Subscription {
        Session *session;
        Channel *channel;
        LIST_FIELDS(Subscription, channel);
        LIST_FIELDS(Subscription, session);
        Pending *pending;              /* slotd's answer to the subscribe is awaited */
        uint32_t command_id;
        bool recover;
        char epoch[CENTRIFUGE_EPOCH_MAX + 1];
        uint64_t offset;               /* before the answer: the client's; then: the last sent */
        json_t *held;                  /* events that came before the answer */
};

struct Session {
        Proxy *proxy;
        LIST_FIELDS(Session, sessions);
        Conn *conn;
        int fd;
        struct MHD_UpgradeResponseHandle *urh;
        wslay_event_context_ptr ctx;
        sd_event_source *io;
        sd_event_source *timer;
        sd_event_source *flush;
        char *extra;                   /* bytes microhttpd read past the handshake */
        size_t extra_size, extra_pos;
        CentrifugeVersion version;
        bool connected;
        Subscription *subscriptions;
        unsigned n_subscriptions;
        usec_t last_rx, last_ping, ping_sent;
        usec_t ws_ping_at;             /* the last WebSocket ping (PROXY_WS_KEEPALIVE_USEC) */
        const char *close_reason;      /* set: the session ends at the next flush */
        bool refused;                  /* its connect was refused: closed once that is out */
};

static void session_schedule(Session *s) {
        (void) sd_event_source_set_enabled(s->flush, SD_EVENT_ONESHOT);
}

static void session_fail(Session *s, const char *reason) {
        if (!s->close_reason)
                s->close_reason = reason;
        session_schedule(s);
}

/* A close frame first, then the end once it is out. */
static void session_disconnect(Session *s, uint16_t code, const char *reason) {
        if (wslay_event_queue_close(s->ctx, code, (const uint8_t *) reason, strlen(reason)) != 0)
                session_fail(s, reason);
        (void) wslay_event_shutdown_read(s->ctx);
        session_schedule(s);
}

static void session_queue(Session *s, const char *text) {
        struct wslay_event_msg msg;

        if (s->close_reason)
                return;
        if (!text) {
                session_fail(s, "out of memory");
                return;
        }
        msg = (struct wslay_event_msg){ .opcode = WSLAY_TEXT_FRAME, .msg = (const uint8_t *) text,
                                        .msg_length = strlen(text) };
        if (wslay_event_queue_msg(s->ctx, &msg) != 0)
                return;  /* a close is queued already: nothing more goes out */
        if (wslay_event_get_queued_msg_length(s->ctx) > PROXY_WS_QUEUE_MAX) {
                session_fail(s, "client does not read what it is sent");
                return;
        }
        session_schedule(s);
}

/* Takes 'text'. */
static void session_send(Session *s, char *text) {
        session_queue(s, text);
        free(text);
}

static void session_flush(Session *s) {
        uint32_t events = 0;

        if (s->extra_pos < s->extra_size && wslay_event_recv(s->ctx) != 0)
                s->close_reason = s->close_reason ?: "read failed";
        if (!s->close_reason && wslay_event_want_write(s->ctx) && wslay_event_send(s->ctx) != 0)
                s->close_reason = "write failed";
        /* Only now: wslay sends a queued close before queued messages. */
        if (!s->close_reason && s->refused && wslay_event_get_queued_msg_count(s->ctx) == 0 &&
            !wslay_event_get_close_sent(s->ctx))
                return session_disconnect(s, WS_CLOSE_SERVER_ERROR, "connect refused, retry");
        if (!s->close_reason && wslay_event_get_close_sent(s->ctx) &&
            !wslay_event_want_write(s->ctx))
                s->close_reason = "closed";
        if (!s->close_reason && !wslay_event_want_read(s->ctx) && !wslay_event_want_write(s->ctx))
                s->close_reason = "closed";
        if (s->close_reason) {
                log_debug("WebSocket of connection %" PRIu64 " ends: %s",
                          s->conn ? s->conn->id : 0, s->close_reason);
                ws_session_close(s);
                return;
        }
        if (wslay_event_want_read(s->ctx))
                events |= EPOLLIN;
        if (wslay_event_want_write(s->ctx))
                events |= EPOLLOUT;
        (void) sd_event_source_set_io_events(s->io, events);
}

static int on_session_flush(sd_event_source *src, void *userdata) {
        session_flush(userdata);
        return 0;
}

static int on_session_io(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Session *s = userdata;

        if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) && wslay_event_want_read(s->ctx) &&
            wslay_event_recv(s->ctx) != 0)
                s->close_reason = s->close_reason ?: "read failed";
        session_flush(s);
        return 0;
}

/* A WebSocket ping, answered by the client's library (its pong sets last_rx). */
static void session_ws_ping(Session *s) {
        static const uint8_t none[1];
        struct wslay_event_msg msg = { .opcode = WSLAY_PING, .msg = none, .msg_length = 0 };

        s->ws_ping_at = now_usec(CLOCK_MONOTONIC);
        if (wslay_event_queue_msg(s->ctx, &msg) == 0)
                session_schedule(s);
}

static void session_rearm_timer(Session *s) {
        usec_t next = s->last_rx + PROXY_IDLE_TIMEOUT_SEC * USEC_PER_SEC;

        if (s->ws_ping_at < s->last_rx) /* none sent since the client's last bytes */
                next = MIN(next, s->last_rx + PROXY_WS_KEEPALIVE_USEC);
        if (s->ping_sent)
                next = MIN(next, s->ping_sent + PROXY_WS_PONG_TIMEOUT_USEC);
        else if (s->connected && s->version == CENTRIFUGE_V2)
                next = MIN(next, s->last_ping + PROXY_WS_PING_INTERVAL_SEC * USEC_PER_SEC);
        (void) sd_event_source_set_time(s->timer, next);
        (void) sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
}

static int on_session_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        Session *s = userdata;
        usec_t now = now_usec(CLOCK_MONOTONIC);

        if (now >= s->last_rx + PROXY_IDLE_TIMEOUT_SEC * USEC_PER_SEC) {
                session_fail(s, "idle");
                return 0;
        }
        if (s->ws_ping_at < s->last_rx && now >= s->last_rx + PROXY_WS_KEEPALIVE_USEC)
                session_ws_ping(s);
        if (s->ping_sent && now >= s->ping_sent + PROXY_WS_PONG_TIMEOUT_USEC)
                session_fail(s, "no pong to the server's ping");
        else if (!s->ping_sent && s->connected && s->version == CENTRIFUGE_V2 &&
                 now >= s->last_ping + PROXY_WS_PING_INTERVAL_SEC * USEC_PER_SEC) {
                session_send(s, centrifuge_server_ping(s->version));
                s->ping_sent = s->last_ping = now;
        }
        if (!s->close_reason)
                session_rearm_timer(s);
        return 0;
}

/* Channels and subscriptions. */
static Channel *channel_get(Proxy *p, unsigned server, bool create) {
        char key[16];
        Channel *ch;

        snprintf(key, sizeof(key), "%u", server);
        ch = hashmap_get(&p->channels, key);
        if (ch || !create)
                return ch;
        ch = new0(Channel, 1);
        if (!ch)
                return NULL;
        strcpy(ch->key, key);
        snprintf(ch->name, sizeof(ch->name), "server#%u", server);
        ch->server = server;
        if (hashmap_put(&p->channels, ch->key, ch) < 0)
                return mfree(ch);
        return ch;
}

static void subscription_free(Subscription *sub) {
        Session *s = sub->session;
        Channel *ch = sub->channel;

        LIST_REMOVE(channel, ch->subscribers, sub);
        if (!ch->subscribers) {
                hashmap_remove(&s->proxy->channels, ch->key, ch);
                free(ch);
        }
        LIST_REMOVE(session, s->subscriptions, sub);
        s->n_subscriptions--;
        pending_cancel(s->proxy, sub->pending);
        json_decref(sub->held);
        free(sub);
}

/* The publication data of an event (ipc.h "event", or a subscribe answer's "last"): exactly
 * the four fields the Multiplay SDKs read. */
static int event_data(const json_t *ev, char **ret_data, uint64_t *ret_offset,
                      bool *ret_allocate) {
        const char *type = json_string_value(json_object_get(ev, "event_type")),
                   *id = json_string_value(json_object_get(ev, "event_id")),
                   *allocation = json_string_value(json_object_get(ev, "allocation"));
        json_t *server = json_object_get(ev, "server"), *offset = json_object_get(ev, "offset");
        json_t *data;
        char *text;

        if (!type || !id || !allocation || !json_is_integer(server) ||
            json_integer_value(server) < 0 || !json_is_integer(offset) ||
            json_integer_value(offset) < 0)
                return -EBADMSG;
        data = json_pack("{s:s,s:s,s:I,s:s}", "EventType", type, "EventID", id, "ServerID",
                         json_integer_value(server), "AllocationID", allocation);
        text = data ? json_dumps(data, JSON_COMPACT) : NULL;
        json_decref(data);
        if (!text)
                return -ENOMEM;
        *ret_data = text;
        *ret_offset = (uint64_t) json_integer_value(offset);
        if (ret_allocate)
                *ret_allocate = streq(type, "AllocateEventType");
        return 0;
}

static void subscription_push(Subscription *sub, const char *data, uint64_t offset) {
        CentrifugePublication pub = { .data_json = data, .offset = offset };

        session_send(sub->session,
                     centrifuge_publication_push(sub->session->version, sub->channel->name, &pub));
        sub->offset = offset;
}

/* Events that came while slotd's answer was awaited, minus what the answer covered. */
static void subscription_release_held(Subscription *sub) {
        size_t i;
        json_t *ev;

        json_array_foreach(sub->held, i, ev) {
                _cleanup_free_ char *data = NULL;
                const char *epoch = json_string_value(json_object_get(ev, "epoch"));
                uint64_t offset;

                if (event_data(ev, &data, &offset, NULL) < 0)
                        continue;
                if (streq_ptr(epoch, sub->epoch) && offset <= sub->offset)
                        continue;
                subscription_push(sub, data, offset);
        }
        sub->held = (json_decref(sub->held), NULL);
}

static void subscription_answer(Subscription *sub, const char *epoch, uint64_t offset,
                                const json_t *last) {
        CentrifugeSubscribeResult res = { .recoverable = true, .epoch = epoch, .offset = offset,
                                          .was_recovering = sub->recover };
        _cleanup_free_ char *last_data = NULL;
        CentrifugePublication pub = {};
        bool last_allocate = false, same_epoch = streq(sub->epoch, epoch);
        uint64_t last_offset = 0;

        if (json_is_object(last) && event_data(last, &last_data, &last_offset, &last_allocate) < 0)
                log_debug("slotd's last event of server %u is malformed, ignoring",
                          sub->channel->server);
        if (sub->recover && same_epoch && sub->offset >= offset)
                res.recovered = true;
        else if (sub->recover) {
                if (last_data && (!same_epoch || last_offset > sub->offset)) {
                        pub = (CentrifugePublication){ .data_json = last_data,
                                                       .offset = last_offset };
                        res.publications = &pub;
                        res.n_publications = 1;
                }
                /* Only the newest event is kept: the client missed nothing else if it was one
                 * behind. */
                res.recovered = same_epoch && res.n_publications == 1 &&
                                offset - sub->offset == 1;
        }
        session_send(sub->session,
                     centrifuge_subscribe_reply(sub->session->version, sub->command_id, &res));
        strcpy(sub->epoch, epoch);
        sub->offset = offset;
        /* A server that subscribes after its slot was allocated still learns of it. */
        if (!sub->recover && last_data && last_allocate)
                subscription_push(sub, last_data, last_offset);
        subscription_release_held(sub);
}

static unsigned subscribe_error_code(const char *code) {
        if (streq_ptr(code, "access-denied"))
                return CENTRIFUGE_ERROR_PERMISSION_DENIED;
        if (streq_ptr(code, "no-such-slot"))
                return CENTRIFUGE_ERROR_UNKNOWN_CHANNEL;
        if (streq_ptr(code, "unavailable"))
                return CENTRIFUGE_ERROR_NOT_AVAILABLE;
        return CENTRIFUGE_ERROR_INTERNAL;
}

static void on_subscribe_reply(Proxy *p, void *userdata, json_t *reply) {
        Subscription *sub = userdata;
        Session *s = sub->session;
        json_t *result = json_object_get(reply, "result"), *error = json_object_get(reply, "error");
        const char *epoch = json_string_value(json_object_get(result, "epoch"));
        json_t *offset = json_object_get(result, "offset");
        unsigned code = CENTRIFUGE_ERROR_INTERNAL;
        const char *message = "slotd sent a malformed reply";

        sub->pending = NULL;
        if (!reply) {
                code = CENTRIFUGE_ERROR_NOT_AVAILABLE;
                message = "slotd did not answer in time";
        } else if (json_is_object(error)) {
                code = subscribe_error_code(json_string_value(json_object_get(error, "code")));
                message = json_string_value(json_object_get(error, "message")) ?: "refused";
        } else if (epoch && strlen(epoch) <= CENTRIFUGE_EPOCH_MAX && json_is_integer(offset) &&
                   json_integer_value(offset) >= 0) {
                subscription_answer(sub, epoch, (uint64_t) json_integer_value(offset),
                                    json_object_get(result, "last"));
                return;
        }
        session_send(s, centrifuge_error_reply(s->version, sub->command_id, code, message));
        subscription_free(sub);
}

static Subscription *session_find(Session *s, unsigned server) {
        for (Subscription *sub = s->subscriptions; sub; sub = sub->session_next)
                if (sub->channel->server == server)
                        return sub;
        return NULL;
}

static void session_error(Session *s, uint32_t id, unsigned code, const char *message) {
        session_send(s, centrifuge_error_reply(s->version, id, code, message));
}

static void session_subscribe(Session *s, const CentrifugeCommand *cmd) {
        Subscription *sub;
        unsigned server;
        Channel *ch;
        json_t *m;
        int r;

        if (request_parse_channel(cmd->channel, &server) < 0)
                return session_error(s, cmd->id, CENTRIFUGE_ERROR_UNKNOWN_CHANNEL,
                                     "unknown channel: only server#<id> exists");
        if (session_find(s, server))
                return session_error(s, cmd->id, CENTRIFUGE_ERROR_ALREADY_SUBSCRIBED,
                                     "already subscribed");
        if (s->n_subscriptions >= PROXY_WS_SUBSCRIPTIONS_MAX || !conn_take_token(s->conn))
                return session_error(s, cmd->id, CENTRIFUGE_ERROR_LIMIT_EXCEEDED,
                                     "limit exceeded: subscriptions or request rate");
        sub = new0(Subscription, 1);
        ch = channel_get(s->proxy, server, true);
        if (!sub || !ch) {
                free(sub);
                return session_fail(s, "out of memory");
        }
        *sub = (Subscription){ .session = s, .channel = ch, .command_id = cmd->id,
                               .recover = cmd->recover, .offset = cmd->offset };
        strcpy(sub->epoch, cmd->epoch);
        LIST_PREPEND(channel, ch->subscribers, sub);
        LIST_PREPEND(session, s->subscriptions, sub);
        s->n_subscriptions++;
        m = json_pack("{s:s,s:I}", "op", "subscribe", "server", (json_int_t) server);
        r = m ? proxy_request(s->proxy, s->conn, m, on_subscribe_reply, sub, &sub->pending)
              : -ENOMEM;
        json_decref(m);
        if (r < 0) {
                subscription_free(sub);
                session_error(s, cmd->id, CENTRIFUGE_ERROR_NOT_AVAILABLE, "slotd is not reachable");
        }
}

static void session_unsubscribe(Session *s, const CentrifugeCommand *cmd) {
        Subscription *sub;
        unsigned server;

        if (request_parse_channel(cmd->channel, &server) >= 0 && (sub = session_find(s, server))) {
                if (sub->pending)
                        session_error(s, sub->command_id, CENTRIFUGE_ERROR_NOT_AVAILABLE,
                                      "unsubscribed before slotd answered");
                subscription_free(sub);
        }
        session_send(s, centrifuge_empty_reply(s->version, cmd->id, CENTRIFUGE_UNSUBSCRIBE));
}

static int random_uuid(char ret[static 37]) {
        uint8_t b[16];

        if (getrandom(b, sizeof(b), GRND_NONBLOCK) != (ssize_t) sizeof(b))
                return negative_errno();
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        snprintf(ret, 37,
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14], b[15]);
        return 0;
}

static void session_connect(Session *s, const CentrifugeCommand *cmd) {
        char client[37];

        if (s->connected)
                return session_error(s, cmd->id, CENTRIFUGE_ERROR_BAD_REQUEST,
                                     "already connected");
        /* slotd could not name the caller (sock_diag): an error the client retries, on a new
         * connection, which slotd identifies anew; 5.x takes "temporary", 2.x retries any. */
        if (s->conn && s->conn->unavailable) {
                session_send(s, centrifuge_temporary_error_reply(s->version, cmd->id,
                                                                 CENTRIFUGE_ERROR_INTERNAL,
                                                                 s->conn->unavailable));
                s->refused = true;
                return;
        }
        if (random_uuid(client) < 0)
                return session_error(s, cmd->id, CENTRIFUGE_ERROR_INTERNAL,
                                     "no random bytes for a client ID");
        session_send(s, centrifuge_connect_reply(s->version, cmd->id, client,
                                                 PROXY_WS_PING_INTERVAL_SEC));
        s->connected = true;
        s->last_ping = now_usec(CLOCK_MONOTONIC);
        session_rearm_timer(s);
}

static void session_command(Session *s, const CentrifugeCommand *cmd) {
        switch (cmd->method) {
        case CENTRIFUGE_CONNECT:
                return session_connect(s, cmd);
        case CENTRIFUGE_PONG:
                s->ping_sent = 0;
                return;
        case CENTRIFUGE_PING:
                return session_send(s, centrifuge_empty_reply(s->version, cmd->id,
                                                              CENTRIFUGE_PING));
        default:
                break;
        }
        if (!s->connected)
                return session_error(s, cmd->id, CENTRIFUGE_ERROR_UNAUTHORIZED,
                                     "connect comes first");
        if (cmd->method == CENTRIFUGE_SUBSCRIBE)
                session_subscribe(s, cmd);
        else if (cmd->method == CENTRIFUGE_UNSUBSCRIBE)
                session_unsubscribe(s, cmd);
        else if (cmd->id != 0)  /* without an id, a "send": no reply expected */
                session_error(s, cmd->id, CENTRIFUGE_ERROR_METHOD_NOT_FOUND,
                              "method not served by slotd-proxy");
}

/* wslay's callbacks. */
static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags,
                       void *userdata) {
        Session *s = userdata;
        ssize_t n;

        if (s->extra_pos < s->extra_size) {
                size_t k = MIN(len, s->extra_size - s->extra_pos);
                memcpy(buf, s->extra + s->extra_pos, k);
                s->extra_pos += k;
                return (ssize_t) k;
        }
        do
                n = recv(s->fd, buf, len, MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n > 0) {
                s->last_rx = now_usec(CLOCK_MONOTONIC);
                return n;
        }
        wslay_event_set_error(ctx, n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
                                           ? WSLAY_ERR_WOULDBLOCK
                                           : WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *userdata) {
        Session *s = userdata;
        ssize_t n;

        do
                n = send(s->fd, data, len,
                         MSG_NOSIGNAL | MSG_DONTWAIT | (flags & WSLAY_MSG_MORE ? MSG_MORE : 0));
        while (n < 0 && errno == EINTR);
        if (n >= 0)
                return n;
        wslay_event_set_error(ctx, errno == EAGAIN || errno == EWOULDBLOCK
                                           ? WSLAY_ERR_WOULDBLOCK
                                           : WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
}

static void ws_on_message(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                          void *userdata) {
        CentrifugeCommand cmds[CENTRIFUGE_COMMANDS_MAX];
        Session *s = userdata;
        size_t n;

        if (wslay_is_ctrl_frame(arg->opcode))
                return;  /* wslay answers pings and closes itself */
        if (arg->opcode != WSLAY_TEXT_FRAME)
                return session_disconnect(s, WS_CLOSE_UNSUPPORTED,
                                          "Centrifuge JSON comes in text frames");
        if (centrifuge_parse((const char *) arg->msg, arg->msg_length, &s->version, cmds,
                             ELEMENTSOF(cmds), &n) < 0)
                return session_disconnect(s, WS_CLOSE_BAD_REQUEST, "bad request");
        for (size_t i = 0; i < n && !s->close_reason; i++)
                session_command(s, &cmds[i]);
}

static const struct wslay_event_callbacks ws_callbacks = {
        .recv_callback = ws_recv,
        .send_callback = ws_send,
        .on_msg_recv_callback = ws_on_message,
};

/* Sessions end only here, outside wslay's callbacks and outside any walk of a channel. */
void ws_session_close(Session *s) {
        Proxy *p = s->proxy;

        while (s->subscriptions)
                subscription_free(s->subscriptions);
        LIST_REMOVE(sessions, p->sessions, s);
        sd_event_source_disable_unref(s->io);
        sd_event_source_disable_unref(s->timer);
        sd_event_source_disable_unref(s->flush);
        if (s->ctx)
                wslay_event_context_free(s->ctx);
        if (s->conn)
                s->conn->session = NULL;
        /* microhttpd closes the socket and then ends the connection ("close" to slotd). */
        (void) MHD_upgrade_action(s->urh, MHD_UPGRADE_ACTION_CLOSE);
        proxy_kick(p);
        free(s->extra);
        free(s);
}

static int session_new(Proxy *p, Conn *c, int fd, struct MHD_UpgradeResponseHandle *urh,
                       const char *extra, size_t extra_size) {
        Session *s;
        int one = 1, r;

        /* microhttpd hands the upgraded socket over with Nagle on: a frame sent while the
         * previous one is unacknowledged would wait for the client's delayed ACK (40 ms; the
         * benchmark saw it for the allocation pushed right after a subscribe reply). wslay
         * sends each frame in one write, so no tiny segments come of this. */
        (void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        s = new0(Session, 1);
        if (!s)
                return -ENOMEM;
        *s = (Session){ .proxy = p, .conn = c, .fd = fd, .urh = urh,
                        .last_rx = now_usec(CLOCK_MONOTONIC) };
        LIST_PREPEND(sessions, p->sessions, s);
        if (c)
                c->session = s;
        if (extra_size > 0) {
                s->extra = malloc(extra_size);
                if (!s->extra)
                        goto fail;
                memcpy(s->extra, extra, extra_size);
                s->extra_size = extra_size;
        }
        if (wslay_event_context_server_init(&s->ctx, &ws_callbacks, s) != 0)
                goto fail;
        wslay_event_config_set_max_recv_msg_length(s->ctx, PROXY_WS_MESSAGE_MAX);
        r = sd_event_add_io(p->event, &s->io, fd, EPOLLIN, on_session_io, s);
        if (r >= 0)
                r = sd_event_add_time(p->event, &s->timer, CLOCK_MONOTONIC, USEC_INFINITY, 0,
                                      on_session_timer, s);
        if (r >= 0)
                r = sd_event_add_defer(p->event, &s->flush, on_session_flush, s);
        if (r < 0)
                goto fail;
        session_rearm_timer(s);
        return 0;
fail:
        ws_session_close(s);
        return -ENOMEM;
}

static void on_upgraded(void *cls, struct MHD_Connection *connection, void *con_cls,
                        const char *extra_in, size_t extra_in_size, MHD_socket sock,
                        struct MHD_UpgradeResponseHandle *urh) {
        Conn *c = conn_of(connection);
        int r;

        r = c ? session_new(cls, c, sock, urh, extra_in, extra_in_size) : -ENOTCONN;
        if (r < 0) {
                log_warning_errno(r, "Failed to start a WebSocket session: %m");
                if (r == -ENOTCONN)
                        (void) MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        }
}

/* A token of a comma-separated header, case-insensitively ("keep-alive, Upgrade"). */
static bool header_has_token(const char *value, const char *token) {
        size_t n = strlen(token);

        while (value && *value) {
                value += strspn(value, " \t,");
                size_t len = strcspn(value, ",");
                size_t trimmed = len;

                while (trimmed > 0 && (value[trimmed - 1] == ' ' || value[trimmed - 1] == '\t'))
                        trimmed--;
                if (trimmed == n && strncasecmp(value, token, n) == 0)
                        return true;
                value += len;
        }
        return false;
}

/* Sec-WebSocket-Accept: base64(SHA-1(key + GUID)), the key being base64 of 16 bytes. */
static int ws_accept(const char *key, char ret[static WS_ACCEPT_LEN + 1]) {
        uint8_t decoded[WS_KEY_LEN], md[SHA1_DIGEST_SIZE];
        char buf[WS_KEY_LEN + sizeof(WS_GUID)];

        if (strlen(key) != WS_KEY_LEN || !streq(key + WS_KEY_LEN - 2, "==") ||
            base64_decode(key, WS_KEY_LEN, decoded) != 16)
                return -EINVAL;
        memcpy(buf, key, WS_KEY_LEN);
        memcpy(buf + WS_KEY_LEN, WS_GUID, sizeof(WS_GUID));
        sha1(buf, strlen(buf), md);
        if (base64_encode(md, sizeof(md), ret) != WS_ACCEPT_LEN)
                return -EIO;
        return 0;
}

static enum MHD_Result respond_version_required(struct MHD_Connection *connection) {
        static const char body[] = "{\"error\":\"WebSocket version 13 only\"}";
        struct MHD_Response *response;
        enum MHD_Result ret;

        response = MHD_create_response_from_buffer(strlen(body), (void *) body,
                                                   MHD_RESPMEM_PERSISTENT);
        if (!response)
                return MHD_NO;
        (void) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                                       "application/json");
        (void) MHD_add_response_header(response, "Sec-WebSocket-Version", "13");
        ret = MHD_queue_response(connection, MHD_HTTP_UPGRADE_REQUIRED, response);
        MHD_destroy_response(response);
        return ret;
}

enum MHD_Result ws_upgrade(Proxy *p, struct MHD_Connection *connection) {
#define HEADER(name) MHD_lookup_connection_value(connection, MHD_HEADER_KIND, name)
        const char *key = HEADER("Sec-WebSocket-Key"), *version = HEADER("Sec-WebSocket-Version");
        struct MHD_Response *response;
        char accept[WS_ACCEPT_LEN + 1];
        enum MHD_Result ret;

        if (!header_has_token(HEADER(MHD_HTTP_HEADER_UPGRADE), "websocket") ||
            !header_has_token(HEADER(MHD_HTTP_HEADER_CONNECTION), "upgrade"))
                return http_respond_error(connection, 400, "expected a WebSocket upgrade", false);
#undef HEADER
        if (!streq_ptr(version, "13"))
                return respond_version_required(connection);
        if (!key || ws_accept(key, accept) < 0)
                return http_respond_error(connection, 400, "malformed Sec-WebSocket-Key", false);
        response = MHD_create_response_for_upgrade(on_upgraded, p);
        if (!response)
                return MHD_NO;
        /* microhttpd adds "Connection: Upgrade" itself. */
        (void) MHD_add_response_header(response, MHD_HTTP_HEADER_UPGRADE, "websocket");
        (void) MHD_add_response_header(response, "Sec-WebSocket-Accept", accept);
        ret = MHD_queue_response(connection, MHD_HTTP_SWITCHING_PROTOCOLS, response);
        MHD_destroy_response(response);
        return ret;
}

void ws_event(Proxy *p, json_t *ev) {
        const char *epoch = json_string_value(json_object_get(ev, "epoch"));
        json_t *server = json_object_get(ev, "server");
        _cleanup_free_ char *data = NULL;
        char *cache[CENTRIFUGE_V2 + 1] = {};
        CentrifugePublication pub;
        uint64_t offset;
        Channel *ch;

        if (!epoch || strlen(epoch) > CENTRIFUGE_EPOCH_MAX || !json_is_integer(server) ||
            json_integer_value(server) < 0 || json_integer_value(server) >= UINT_MAX ||
            event_data(ev, &data, &offset, NULL) < 0) {
                log_warning("slotd sent a malformed event, ignoring");
                return;
        }
        ch = channel_get(p, (unsigned) json_integer_value(server), false);
        if (!ch)
                return;
        pub = (CentrifugePublication){ .data_json = data, .offset = offset };
        for (Subscription *sub = ch->subscribers; sub; sub = sub->channel_next) {
                Session *s = sub->session;

                if (sub->pending) {
                        if (!sub->held)
                                sub->held = json_array();
                        if (json_array_size(sub->held) >= PROXY_WS_HELD_EVENTS_MAX ||
                            json_array_append(sub->held, ev) < 0)
                                session_fail(s, "too many events before slotd answered");
                        continue;
                }
                if (streq(sub->epoch, epoch) && offset <= sub->offset)
                        continue;
                strcpy(sub->epoch, epoch);
                sub->offset = offset;
                if (!cache[s->version])
                        cache[s->version] = centrifuge_publication_push(s->version, ch->name, &pub);
                session_queue(s, cache[s->version]);
        }
        for (size_t i = 0; i < ELEMENTSOF(cache); i++)
                free(cache[i]);
}

static void on_resync_reply(Proxy *p, void *userdata, json_t *reply) {
        json_t *last = json_object_get(json_object_get(reply, "result"), "last");

        /* ws_event passes it to the subscribers that have not had it, by its offset. */
        if (json_is_object(last))
                ws_event(p, last);
}

void ws_resync(Proxy *p) {
        for (Session *s = p->sessions; s; s = s->sessions_next)
                for (Subscription *sub = s->subscriptions; sub; sub = sub->session_next) {
                        json_t *m;
                        Pending *pend;
                        int r;

                        if (sub->pending)
                                continue;
                        m = json_pack("{s:s,s:I}", "op", "subscribe", "server",
                                      (json_int_t) sub->channel->server);
                        r = m ? proxy_request(p, s->conn, m, on_resync_reply, NULL, &pend)
                              : -ENOMEM;
                        json_decref(m);
                        if (r < 0)
                                log_debug_errno(r, "Failed to ask slotd for server %u's last "
                                                "event: %m", sub->channel->server);
                }
}

void ws_done(Proxy *p) {
        while (p->sessions)
                ws_session_close(p->sessions);
}
