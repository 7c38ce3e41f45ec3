/* SPDX-License-Identifier: MIT */
/*
 * The SDK's Centrifuge connection to {localProxyUrl}/v1/connection/websocket,
 * kept the way centrifuge-go 0.8 keeps it: a token from GET /token, connect,
 * subscribe to server#<serverID>, a ping after 25 s without a message and an
 * answer within 5 s, and on any loss a reconnect with back-off that
 * subscribes again recovering from the last offset seen.  libwebsockets does
 * the framing; its service loop runs on the SDK thread, and every callback
 * and timer here runs there.
 *
 * Like Unity's Go SDK v0.5.4, it hears nothing more once it has subscribed a
 * second time.  centrifuge-go 0.8 runs every event handler in turn on one
 * goroutine (client.go: runHandler pushes onto cbQueue, which one dispatch()
 * drains), and the SDK's OnSubscribeSuccess (internal/localproxy/client.go)
 * sends on an unbuffered channel that only Start() reads, once: the second
 * success blocks that goroutine for good, and every publication after it
 * waits behind it.  The connection itself lives on (pings, reconnects and
 * resubscriptions are the client's, not the handlers'), and the offset, which
 * moves only once a publication's handler has run, stays where it was.
 * --sdk-recovering-client models clients that do recover (centrifuge-js).
 */

#include "test-server-sdk.h"

static int ws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                       size_t len);

static const struct lws_protocols protocols[] = {
        { .name = "slotd-test-server-sdk", .callback = ws_callback },
        {}
};

static void ws_log(int level, const char *line)
{
        log_line("sdk: lws: %.*s", (int) strcspn(line, "\n"), line);
}

int sdk_ws_context(struct sdk *sdk)
{
        struct lws_context_creation_info info = {
                .port = CONTEXT_PORT_NO_LISTEN,
                .protocols = protocols,
                .gid = -1,
                .uid = -1,
                .user = sdk,
                /* lws sizes its tables by the fd limit, which can be a million in a slot. */
                .fd_limit_per_thread = 64,
        };

        lws_set_log_level(LLL_ERR, ws_log);
        sdk->context = lws_create_context(&info);
        return sdk->context ? 0 : -ENOMEM;
}

static void ws_phase(struct sdk *sdk, const char *phase)
{
        copy_string(sdk->st.phase, sizeof(sdk->st.phase), phase);
        sdk_report(sdk);
}

/* Takes the frame; it goes out at the next writable callback. */
static void ws_send(struct sdk *sdk, char *frame)
{
        if (!frame) {
                log_line("sdk: cannot encode a command");
                return;
        }
        if (!sdk->wsi || sdk->n_out == SDK_OUT_MAX) {
                free(frame);
                return;
        }
        sdk->out[sdk->n_out++] = frame;
        lws_callback_on_writable(sdk->wsi);
}

/* lws closes a connection when its callback returns -1, so the close waits for one. */
static void ws_close(struct sdk *sdk, const char *why)
{
        if (!sdk->wsi || sdk->closing)
                return;
        log_line("sdk: closing the connection: %s", why);
        sdk->closing = true;
        lws_callback_on_writable(sdk->wsi);
}

static void connect_cb(lws_sorted_usec_list_t *sul);

static void retry_later(struct sdk *sdk, const char *why)
{
        log_line("sdk: %s, reconnecting in %" PRIu64 " ms", why,
                 (uint64_t) (sdk->backoff / USEC_PER_MSEC));
        ws_phase(sdk, "reconnecting");
        lws_sul_schedule(sdk->context, 0, &sdk->sul_connect, connect_cb,
                         (lws_usec_t) sdk->backoff);
        sdk->backoff = sdk->backoff * 2 < SDK_BACKOFF_MAX_USEC ? sdk->backoff * 2 :
                                                                 SDK_BACKOFF_MAX_USEC;
}

/* Once per connection, whether it failed to open, was refused, or closed. */
static void ws_lost(struct sdk *sdk, const char *why)
{
        if (!sdk->ws_open)
                return;
        sdk->ws_open = false;
        sdk->wsi = NULL;
        sdk->closing = false;
        for (size_t i = 0; i < sdk->n_out; i++)
                free(sdk->out[i]);
        sdk->n_out = 0;
        sdk->in_len = 0;
        sdk->connect_id = sdk->subscribe_id = sdk->ping_id = 0;
        lws_sul_cancel(&sdk->sul_ping);
        lws_sul_cancel(&sdk->sul_pong);
        lws_sul_cancel(&sdk->sul_subscribe);
        retry_later(sdk, why);
}

static void ws_open(struct sdk *sdk)
{
        struct lws_client_connect_info info = {
                .context = sdk->context,
                .address = sdk->proxy.host,
                .port = sdk->proxy.port,
                .path = sdk->proxy.ws_path,
                .host = sdk->proxy.host_header,
                .ietf_version_or_minus_one = -1,
                .pwsi = &sdk->wsi,
                .local_protocol_name = protocols[0].name,
        };

        ws_phase(sdk, "connecting");
        sdk->ws_open = true;
        sdk->closing = false;
        /* A failure may or may not have come through the callback already. */
        if (!lws_client_connect_via_info(&info))
                ws_lost(sdk, "cannot open the WebSocket");
}

/* Each attempt starts from the token, as the proxy may have restarted and forgotten it. */
static void connect_cb(lws_sorted_usec_list_t *sul)
{
        struct sdk *sdk = lws_container_of(sul, struct sdk, sul_connect);
        int r;

        if (sdk->hold_usec > 0 && !sdk->hold_done) {
                r = sdk_http_hold(sdk);
                if (r < 0) {
                        retry_later(sdk, "no answer to the hold");
                        return;
                }
                sdk->hold_done = true;
                sdk->st.hold_status = r;
        }
        ws_phase(sdk, "token");
        if (sdk_http_token(sdk) < 0) {
                retry_later(sdk, "no token");
                return;
        }
        ws_open(sdk);
}

void sdk_ws_begin(struct sdk *sdk)
{
        sdk->backoff = SDK_BACKOFF_MIN_USEC;
        lws_sul_schedule(sdk->context, 0, &sdk->sul_connect, connect_cb, 1);
}

static void pong_cb(lws_sorted_usec_list_t *sul)
{
        ws_close(lws_container_of(sul, struct sdk, sul_pong), "no answer to a ping in 5 s");
}

static void ping_cb(lws_sorted_usec_list_t *sul)
{
        struct sdk *sdk = lws_container_of(sul, struct sdk, sul_ping);

        if (!sdk->wsi || sdk->closing)
                return;
        sdk->ping_id = ++sdk->next_id;
        ws_send(sdk, centrifuge_ping_command(sdk->ping_id));
        lws_sul_schedule(sdk->context, 0, &sdk->sul_pong, pong_cb, SDK_PONG_USEC);
        lws_sul_schedule(sdk->context, 0, &sdk->sul_ping, ping_cb, SDK_PING_USEC);
}

/* Recovery is asked for once a subscription has said it is recoverable. */
static void subscribe(struct sdk *sdk)
{
        const struct sdk_position *recover = NULL;

        if (sdk->subscribed_once && sdk->position.recoverable)
                recover = &sdk->position;
        sdk->subscribe_id = ++sdk->next_id;
        ws_send(sdk, centrifuge_subscribe_command(sdk->subscribe_id, sdk->channel, recover));
}

static void resubscribe_cb(lws_sorted_usec_list_t *sul)
{
        struct sdk *sdk = lws_container_of(sul, struct sdk, sul_subscribe);

        if (sdk->wsi && !sdk->closing)
                subscribe(sdk);
}

static const char *error_text(json_t *error, char *buf, size_t size)
{
        json_t *message = json_object_get(error, "message");

        snprintf(buf, size, "%" JSON_INTEGER_FORMAT " %s",
                 json_integer_value(json_object_get(error, "code")),
                 json_is_string(message) ? json_string_value(message) : "");
        return buf;
}

static void on_connected(struct sdk *sdk, json_t *result, json_t *error)
{
        json_t *client = json_object_get(result, "client");
        char text[256];

        sdk->connect_id = 0;
        if (error) {
                log_line("sdk: connect error %s", error_text(error, text, sizeof(text)));
                ws_close(sdk, "connect refused");
                return;
        }
        sdk->backoff = SDK_BACKOFF_MIN_USEC;
        sdk->st.connects++;
        log_line("sdk: connected client=%s", json_is_string(client) ? json_string_value(client) :
                                                                       "");
        ws_phase(sdk, "connected");
        subscribe(sdk);
        lws_sul_schedule(sdk->context, 0, &sdk->sul_ping, ping_cb, SDK_PING_USEC);
}

static void on_publication(struct sdk *sdk, json_t *pub)
{
        struct multiplay_event ev;
        uint64_t offset;
        json_t *data = centrifuge_publication_data(pub, &offset);

        if (sdk->st.deaf) {
                log_line("sdk: deaf: a publication (offset %" PRIu64 ") not handled", offset);
                return;
        }
        if (multiplay_event_parse(data, &ev) < 0)
                log_line("sdk: a publication that is not a Multiplay event, ignored");
        else
                sdk_event(sdk, &ev);
        /* As centrifuge-go 0.8: the position moves once the handler has run. */
        if (offset > 0) {
                sdk->position.offset = offset;
                sdk->st.offset = offset;
                sdk_report(sdk);
        }
}

static void on_subscribed(struct sdk *sdk, json_t *result, json_t *error)
{
        json_t *publications;
        char text[256];
        bool recovered, resubscribed;
        size_t i;
        json_t *pub;

        sdk->subscribe_id = 0;
        if (error) {
                /* The Go SDK tries again after a second: the proxy may not know us yet. */
                log_line("sdk: subscribe error %s, again in 1 s",
                         error_text(error, text, sizeof(text)));
                lws_sul_schedule(sdk->context, 0, &sdk->sul_subscribe, resubscribe_cb,
                                 SDK_RESUBSCRIBE_USEC);
                return;
        }
        centrifuge_subscribe_result(result, &sdk->position, &recovered, &publications);
        resubscribed = sdk->subscribed_once;
        sdk->subscribed_once = true;
        sdk->st.offset = sdk->position.offset;
        log_line("sdk: subscribed %s recoverable=%d epoch=%s offset=%" PRIu64
                 " recovered=%d publications=%zu", sdk->channel, sdk->position.recoverable,
                 sdk->position.epoch, sdk->position.offset, recovered,
                 json_array_size(publications));
        ws_phase(sdk, "subscribed");
        if (resubscribed && !sdk->recovering_client && !sdk->st.deaf) {
                log_line("sdk: resubscribed: deaf to events from now on "
                         "(as Unity's Go SDK v0.5.4)");
                sdk->st.deaf = true;
                sdk_report(sdk);
        }
        json_array_foreach(publications, i, pub)
                on_publication(sdk, pub);
}

static void on_message(void *userdata, json_t *message)
{
        struct sdk *sdk = userdata;
        json_t *result, *error, *pub;
        const char *channel;
        bool resubscribe;
        uint32_t id;

        if (centrifuge_reply(message, &id, &result, &error)) {
                if (id == sdk->connect_id)
                        on_connected(sdk, result, error);
                else if (id == sdk->subscribe_id)
                        on_subscribed(sdk, result, error);
                else if (id == sdk->ping_id) {
                        sdk->ping_id = 0;
                        lws_sul_cancel(&sdk->sul_pong);
                }
        } else if (centrifuge_publication(message, &channel, &pub)) {
                if (strcmp(channel, sdk->channel) == 0)
                        on_publication(sdk, pub);
        } else if (centrifuge_unsubscribed(message, &channel, &resubscribe) &&
                   strcmp(channel, sdk->channel) == 0) {
                log_line("sdk: unsubscribed from %s by the proxy%s", channel,
                         resubscribe ? ", subscribing again" : "");
                ws_phase(sdk, "unsubscribed");
                if (resubscribe)
                        subscribe(sdk);
        }
        /* Anything else (joins, leaves, a v2 server's ping) gets no answer, as in the SDK. */
}

static int ws_receive(struct sdk *sdk, struct lws *wsi, const char *in, size_t len)
{
        char *buf;

        if (sdk->in_len + len > SDK_MESSAGE_MAX) {
                log_line("sdk: a message over %d bytes, closing", SDK_MESSAGE_MAX);
                return -1;
        }
        buf = realloc(sdk->in, sdk->in_len + len + 1);
        if (!buf)
                return -1;
        memcpy(buf + sdk->in_len, in, len);
        sdk->in = buf;
        sdk->in_len += len;
        if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi) > 0)
                return 0;

        /* centrifuge-go pings only after 25 s in which nothing came. */
        if (sdk->st.connects > 0 && sdk->connect_id == 0)
                lws_sul_schedule(sdk->context, 0, &sdk->sul_ping, ping_cb, SDK_PING_USEC);
        if (!lws_frame_is_binary(wsi) &&
            centrifuge_frame_split(sdk->in, sdk->in_len, on_message, sdk) < 0)
                log_line("sdk: a message that is not JSON, ignored");
        sdk->in_len = 0;
        return 0;
}

static int ws_writeable(struct sdk *sdk, struct lws *wsi)
{
        unsigned char *buf;
        size_t len;
        int n;

        if (sdk->closing)
                return -1;
        if (sdk->n_out == 0)
                return 0;
        len = strlen(sdk->out[0]);
        buf = malloc(LWS_PRE + len);
        if (!buf)
                return -1;
        memcpy(buf + LWS_PRE, sdk->out[0], len);
        n = lws_write(wsi, buf + LWS_PRE, len, LWS_WRITE_TEXT);
        free(buf);
        free(sdk->out[0]);
        memmove(sdk->out, sdk->out + 1, --sdk->n_out * sizeof(sdk->out[0]));
        if (n < (int) len)
                return -1;
        if (sdk->n_out > 0)
                lws_callback_on_writable(wsi);
        return 0;
}

static int ws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                       size_t len)
{
        struct sdk *sdk = lws_context_user(lws_get_context(wsi));

        switch (reason) {
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
                sdk->connect_id = ++sdk->next_id;
                ws_send(sdk, centrifuge_connect_command(sdk->connect_id, sdk->token));
                break;
        case LWS_CALLBACK_CLIENT_RECEIVE:
                return ws_receive(sdk, wsi, in, len);
        case LWS_CALLBACK_CLIENT_WRITEABLE:
                return ws_writeable(sdk, wsi);
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
                ws_lost(sdk, in ? (const char *) in : "cannot connect");
                break;
        case LWS_CALLBACK_CLIENT_CLOSED:
                ws_lost(sdk, "connection closed");
                break;
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
                sdk_requests_run(sdk);
                break;
        default:
                break;
        }
        return 0;
}
