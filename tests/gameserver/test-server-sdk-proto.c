/* SPDX-License-Identifier: MIT */
/*
 * Centrifuge's client protocol version 1 in JSON, as centrifuge-go 0.8 (the
 * Go SDK's client) speaks it, and the Multiplay events it carries.  Pure: no
 * I/O, no logging.
 *
 * Commands are {"id":N,"method":M,"params":{...}}, with method 0 (connect)
 * left out as Go's omitempty does.  Replies are {"id":N,"result":{...}} or
 * {"id":N,"error":{...}}; pushes are replies without an id whose result is
 * {"type":T,"channel":C,"data":{...}}, type 0 (a publication) left out.  A
 * frame may hold several of them, one per line.  What is read is read
 * liberally: a publication without an offset, an event where the publication
 * should be, and protocol version 2's {"push":{"channel":C,"pub":{...}}}.
 */

#include "test-server-sdk.h"

enum {
        CENTRIFUGE_METHOD_SUBSCRIBE = 1,
        CENTRIFUGE_METHOD_PING = 7,
        CENTRIFUGE_PUSH_PUBLICATION = 0,
        CENTRIFUGE_PUSH_UNSUB = 3,
};

/* Compact and in insertion order: byte for byte what Go's encoding/json writes. */
static char *dump(json_t *v)
{
        char *text;

        if (!v)
                return NULL;
        text = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(v);
        return text;
}

/* centrifuge-go 0.8 names itself "go" in every connect. */
char *centrifuge_connect_command(uint32_t id, const char *token)
{
        json_t *params = json_object();

        if (!params)
                return NULL;
        if (token && *token)
                (void) json_object_set_new(params, "token", json_string(token));
        (void) json_object_set_new(params, "name", json_string("go"));
        return dump(json_pack("{s:I,s:o}", "id", (json_int_t) id, "params", params));
}

/* Recovery as centrifuge-go 0.8 asks for it: an offset of 0 and an empty epoch are left out. */
char *centrifuge_subscribe_command(uint32_t id, const char *channel,
                                   const struct sdk_position *recover)
{
        json_t *params = json_pack("{s:s}", "channel", channel);

        if (!params)
                return NULL;
        if (recover) {
                (void) json_object_set_new(params, "recover", json_true());
                if (recover->epoch[0] != '\0')
                        (void) json_object_set_new(params, "epoch", json_string(recover->epoch));
                if (recover->offset > 0)
                        (void) json_object_set_new(params, "offset",
                                                   json_integer((json_int_t) recover->offset));
        }
        return dump(json_pack("{s:I,s:i,s:o}", "id", (json_int_t) id, "method",
                              CENTRIFUGE_METHOD_SUBSCRIBE, "params", params));
}

char *centrifuge_ping_command(uint32_t id)
{
        return dump(json_pack("{s:I,s:i}", "id", (json_int_t) id, "method",
                              CENTRIFUGE_METHOD_PING));
}

/* Calls fn for each JSON object in the frame; stops at the first thing that is not one. */
int centrifuge_frame_split(const char *buf, size_t len, centrifuge_message_fn fn, void *userdata)
{
        size_t off = 0;

        for (;;) {
                json_error_t error;
                json_t *message;

                while (off < len && buf[off] != '\0' && strchr(" \t\r\n", buf[off]))
                        off++;
                if (off >= len)
                        return 0;
                message = json_loadb(buf + off, len - off, JSON_DISABLE_EOF_CHECK, &error);
                if (!message)
                        return -EBADMSG;
                /* With JSON_DISABLE_EOF_CHECK, position is what the value took. */
                off += (size_t) error.position;
                if (json_is_object(message))
                        fn(userdata, message);
                json_decref(message);
        }
}

bool centrifuge_reply(json_t *message, uint32_t *ret_id, json_t **ret_result, json_t **ret_error)
{
        json_int_t id = json_integer_value(json_object_get(message, "id"));

        if (id <= 0 || id > UINT32_MAX)
                return false;
        *ret_id = (uint32_t) id;
        *ret_result = json_object_get(message, "result");
        *ret_error = json_object_get(message, "error");
        return true;
}

/* A push's type: a number, or its name as the protocol's JSON decoder also accepts. */
static int push_type(json_t *result)
{
        json_t *type = json_object_get(result, "type");

        if (!type)
                return CENTRIFUGE_PUSH_PUBLICATION;
        if (json_is_integer(type))
                return (int) json_integer_value(type);
        if (json_is_string(type) && strcasecmp(json_string_value(type), "publication") == 0)
                return CENTRIFUGE_PUSH_PUBLICATION;
        if (json_is_string(type) && strcasecmp(json_string_value(type), "unsub") == 0)
                return CENTRIFUGE_PUSH_UNSUB;
        return -1;
}

/* The v1 push wrapper: a result without an id. */
static json_t *push_v1(json_t *message)
{
        json_t *result = json_object_get(message, "result");

        if (json_integer_value(json_object_get(message, "id")) != 0 || !json_is_object(result))
                return NULL;
        return result;
}

bool centrifuge_publication(json_t *message, const char **ret_channel, json_t **ret_pub)
{
        json_t *push = push_v1(message), *v2 = json_object_get(message, "push");
        json_t *channel, *pub;

        if (push && push_type(push) == CENTRIFUGE_PUSH_PUBLICATION) {
                channel = json_object_get(push, "channel");
                pub = json_object_get(push, "data");
        } else if (json_is_object(v2)) {
                channel = json_object_get(v2, "channel");
                pub = json_object_get(v2, "pub");
        } else
                return false;
        if (!json_is_string(channel) || !pub)
                return false;
        *ret_channel = json_string_value(channel);
        *ret_pub = pub;
        return true;
}

/* v1's Unsub says whether to subscribe again; v2's unsubscribe push is final. */
bool centrifuge_unsubscribed(json_t *message, const char **ret_channel, bool *ret_resubscribe)
{
        json_t *push = push_v1(message), *v2 = json_object_get(message, "push");
        json_t *channel;

        *ret_resubscribe = false;
        if (push && push_type(push) == CENTRIFUGE_PUSH_UNSUB) {
                channel = json_object_get(push, "channel");
                *ret_resubscribe = json_is_true(json_object_get(json_object_get(push, "data"),
                                                                "resubscribe"));
        } else if (json_is_object(v2) && json_object_get(v2, "unsubscribe"))
                channel = json_object_get(v2, "channel");
        else
                return false;
        *ret_channel = json_is_string(channel) ? json_string_value(channel) : "";
        return true;
}

void centrifuge_subscribe_result(json_t *result, struct sdk_position *position,
                                 bool *ret_recovered, json_t **ret_publications)
{
        json_t *epoch = json_object_get(result, "epoch");
        json_t *publications = json_object_get(result, "publications");

        position->recoverable = json_is_true(json_object_get(result, "recoverable"));
        copy_string(position->epoch, sizeof(position->epoch),
                    json_is_string(epoch) ? json_string_value(epoch) : "");
        /* With publications the position moves as each of them is handled. */
        if (json_array_size(publications) == 0)
                position->offset = (uint64_t) json_integer_value(json_object_get(result,
                                                                                 "offset"));
        *ret_recovered = json_is_true(json_object_get(result, "recovered"));
        *ret_publications = json_is_array(publications) ? publications : NULL;
}

/* A Publication's data and offset (0 when it has none), or the event itself where a proxy
 * pushed the data without the Publication around it. */
json_t *centrifuge_publication_data(json_t *pub, uint64_t *ret_offset)
{
        json_t *data = json_object_get(pub, "data");

        *ret_offset = 0;
        if (!data || json_object_get(pub, "EventType"))
                return pub;
        *ret_offset = (uint64_t) json_integer_value(json_object_get(pub, "offset"));
        return data;
}

/* A string, or a number as Go writes ServerID; too long is an error, not a truncation. */
static int json_text(json_t *v, char *out, size_t size)
{
        int n;

        out[0] = '\0';
        if (!v || json_is_null(v))
                return 0;
        if (json_is_string(v))
                n = snprintf(out, size, "%s", json_string_value(v));
        else if (json_is_integer(v))
                n = snprintf(out, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        else
                return -EINVAL;
        return n >= 0 && (size_t) n < size ? 0 : -E2BIG;
}

static int event_fields(json_t *event, struct multiplay_event *ret)
{
        struct multiplay_event ev = {};
        int r = 0;

        r = r ?: json_text(json_object_get(event, "EventType"), ev.type, sizeof(ev.type));
        r = r ?: json_text(json_object_get(event, "EventID"), ev.event_id, sizeof(ev.event_id));
        r = r ?: json_text(json_object_get(event, "ServerID"), ev.server_id,
                           sizeof(ev.server_id));
        r = r ?: json_text(json_object_get(event, "AllocationID"), ev.allocation_id,
                           sizeof(ev.allocation_id));
        if (r < 0)
                return r;
        if (ev.type[0] == '\0')
                return -EINVAL;
        *ret = ev;
        return 0;
}

/* The Go SDK unmarshals the publication's data as the event; data that is a JSON string
 * holding the event is taken too. */
int multiplay_event_parse(json_t *data, struct multiplay_event *ret)
{
        json_t *inner;
        int r;

        if (json_is_object(data))
                return event_fields(data, ret);
        if (!json_is_string(data))
                return -EINVAL;
        inner = json_loads(json_string_value(data), 0, NULL);
        if (!json_is_object(inner)) {
                json_decref(inner);
                return -EINVAL;
        }
        r = event_fields(inner, ret);
        json_decref(inner);
        return r;
}
