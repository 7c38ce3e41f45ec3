/* SPDX-License-Identifier: MIT */
/* The Centrifuge command parser and the encoders. The input is one WebSocket text message,
 * parsed three times: as a connection's first frame and as a later frame of a v1 and of a v2
 * connection. Every command parsed is then answered with each encoder, with its own hostile
 * strings as arguments, and the replies must be single lines of JSON that carry those strings
 * back. The input itself is also pushed as a publication's data. */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "centrifuge.h"
#include "fuzz.h"

/* An encoder's text: one line of JSON, an object. The caller owns the result. */
static json_t *reply_object(char *text) {
        json_t *o;

        FUZZ_ASSERT(text);
        FUZZ_ASSERT(!strchr(text, '\n'));
        o = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
        FUZZ_ASSERT(json_is_object(o));
        free(text);
        return o;
}

/* The object at path key1.key2 (key2 may be NULL) of a reply. */
static json_t *member(json_t *o, const char *key1, const char *key2) {
        json_t *m = json_object_get(o, key1);

        FUZZ_ASSERT(json_is_object(m));
        if (key2) {
                m = json_object_get(m, key2);
                FUZZ_ASSERT(json_is_object(m));
        }
        return m;
}

static void assert_id(json_t *o, uint32_t id) {
        json_t *j = json_object_get(o, "id");

        if (id == 0)
                FUZZ_ASSERT(!j);
        else
                FUZZ_ASSERT(json_is_integer(j) && json_integer_value(j) == id);
}

static void assert_string_member(json_t *o, const char *key, const char *expected) {
        FUZZ_ASSERT(strcmp(json_string_value(json_object_get(o, key)), expected) == 0);
}

static void assert_command_sane(const CentrifugeCommand *c, CentrifugeVersion v) {
        FUZZ_ASSERT_CLEAN_STRING(c->channel);
        FUZZ_ASSERT_CLEAN_STRING(c->epoch);
        switch (c->method) {
        case CENTRIFUGE_SUBSCRIBE:
        case CENTRIFUGE_UNSUBSCRIBE:
                FUZZ_ASSERT(c->channel[0] != '\0');
                FUZZ_ASSERT(c->id > 0);
                break;
        case CENTRIFUGE_CONNECT:
        case CENTRIFUGE_PING:
                FUZZ_ASSERT(c->channel[0] == '\0' && c->id > 0);
                break;
        case CENTRIFUGE_PONG:
                FUZZ_ASSERT(v == CENTRIFUGE_V2 && c->id == 0 && c->channel[0] == '\0');
                break;
        case CENTRIFUGE_UNSUPPORTED:
                FUZZ_ASSERT(c->channel[0] == '\0');
                break;
        default:
                FUZZ_ASSERT(!"unknown method");
        }
        if (c->method != CENTRIFUGE_CONNECT)
                FUZZ_ASSERT(!c->has_token);
        if (!c->recover)
                FUZZ_ASSERT(c->epoch[0] == '\0' && c->offset == 0);
        if (c->recover)
                FUZZ_ASSERT(c->method == CENTRIFUGE_SUBSCRIBE);
}

static void encode_connect(CentrifugeVersion v, const CentrifugeCommand *c) {
        json_t *o, *result;

        o = reply_object(centrifuge_connect_reply(v, c->id, c->channel, c->id % 60));
        assert_id(o, c->id);
        result = member(o, v == CENTRIFUGE_V1 ? "result" : "connect", NULL);
        assert_string_member(result, "client", c->channel);
        assert_string_member(result, "version", "slotd");
        FUZZ_ASSERT(!json_object_get(result, "ping") == (v == CENTRIFUGE_V1 || c->id % 60 == 0));
        json_decref(o);
}

/* The subscribe reply, with one publication whose data holds the channel. */
static void encode_subscribe(CentrifugeVersion v, const CentrifugeCommand *c) {
        CentrifugePublication pub = { .offset = c->offset };
        CentrifugeSubscribeResult r = {
                .recoverable = c->recover, .epoch = c->epoch, .offset = c->offset,
                .recovered = c->recover, .publications = &pub, .n_publications = 1,
                .was_recovering = c->recover,
        };
        json_t *data, *o, *result, *pubs;
        char *text;

        data = json_pack("{ss}", "channel", c->channel);
        FUZZ_ASSERT(data);
        pub.data_json = json_dumps(data, JSON_COMPACT);
        FUZZ_ASSERT(pub.data_json);

        text = centrifuge_subscribe_reply(v, c->id, &r);
        if (c->offset > INT64_MAX) {
                /* only a v1 seq and gen pack into an offset this large */
                FUZZ_ASSERT(!text && v == CENTRIFUGE_V1);
                goto finish;
        }
        o = reply_object(text);
        assert_id(o, c->id);
        result = member(o, v == CENTRIFUGE_V1 ? "result" : "subscribe", NULL);
        if (c->epoch[0] != '\0')
                assert_string_member(result, "epoch", c->epoch);
        else
                FUZZ_ASSERT(!json_object_get(result, "epoch"));
        pubs = json_object_get(result, "publications");
        FUZZ_ASSERT(json_is_array(pubs) && json_array_size(pubs) == 1);
        FUZZ_ASSERT(json_equal(json_object_get(json_array_get(pubs, 0), "data"), data));
        json_decref(o);
finish:
        json_decref(data);
        free((char *) pub.data_json);
}

static void encode_others(CentrifugeVersion v, const CentrifugeCommand *c) {
        char *text;
        json_t *o;

        text = centrifuge_empty_reply(v, c->id, c->method);
        if (c->method == CENTRIFUGE_UNSUBSCRIBE || c->method == CENTRIFUGE_PING) {
                o = reply_object(text);
                assert_id(o, c->id);
                /* the id, and a result but in a v1 ping reply */
                FUZZ_ASSERT(json_object_size(o) ==
                            (v == CENTRIFUGE_V1 && c->method == CENTRIFUGE_PING ? 1u : 2u));
                json_decref(o);
        } else
                FUZZ_ASSERT(!text);

        o = reply_object(centrifuge_error_reply(v, c->id, CENTRIFUGE_ERROR_METHOD_NOT_FOUND,
                                                c->channel));
        assert_id(o, c->id);
        assert_string_member(member(o, "error", NULL), "message", c->channel);
        json_decref(o);

        text = centrifuge_server_ping(v);
        FUZZ_ASSERT(v == CENTRIFUGE_V1 ? !text : strcmp(text, "{}") == 0);
        free(text);
}

/* The input as a publication's data: pushed exactly when it is one JSON object. */
static void encode_push(CentrifugeVersion v, const uint8_t *data, size_t size) {
        CentrifugePublication pub = { .offset = size };
        json_t *expected, *o, *got;
        char *copy;

        copy = strndup((const char *) data, size);
        FUZZ_ASSERT(copy);
        pub.data_json = copy;
        expected = json_loads(copy, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(expected)) {
                FUZZ_ASSERT(!centrifuge_publication_push(v, "server#1", &pub));
                goto finish;
        }
        o = reply_object(centrifuge_publication_push(v, "server#1", &pub));
        FUZZ_ASSERT(!json_object_get(o, "id"));
        got = member(o, v == CENTRIFUGE_V1 ? "result" : "push", NULL);
        assert_string_member(got, "channel", "server#1");
        got = member(got, v == CENTRIFUGE_V1 ? "data" : "pub", NULL);
        FUZZ_ASSERT(json_equal(json_object_get(got, "data"), expected));
        FUZZ_ASSERT(size == 0 ? !json_object_get(got, "offset") :
                    json_integer_value(json_object_get(got, "offset")) == (json_int_t) size);
        json_decref(o);
finish:
        json_decref(expected);
        free(copy);
}

/* Field by field: the structures' padding is whatever the stack held. */
static bool command_equal(const CentrifugeCommand *a, const CentrifugeCommand *b) {
        return a->id == b->id && a->method == b->method && a->recover == b->recover &&
               a->offset == b->offset && a->has_token == b->has_token &&
               strcmp(a->channel, b->channel) == 0 && strcmp(a->epoch, b->epoch) == 0;
}

static void fuzz_parse(const uint8_t *data, size_t size, CentrifugeVersion start) {
        CentrifugeCommand cmds[CENTRIFUGE_COMMANDS_MAX], untouched[CENTRIFUGE_COMMANDS_MAX];
        CentrifugeCommand again[CENTRIFUGE_COMMANDS_MAX];
        CentrifugeVersion v = start, v_again;
        size_t n = 777, n_again = 0;
        int r;

        memset(cmds, 0x5a, sizeof(cmds));
        memcpy(untouched, cmds, sizeof(cmds));
        r = centrifuge_parse((const char *) data, size, &v, cmds, CENTRIFUGE_COMMANDS_MAX, &n);
        FUZZ_ASSERT(r == 0 || r == -EBADMSG);
        if (r < 0) {
                FUZZ_ASSERT(v == start && n == 777);
                FUZZ_ASSERT(memcmp(cmds, untouched, sizeof(cmds)) == 0);
                return;
        }
        FUZZ_ASSERT(n >= 1 && n <= CENTRIFUGE_COMMANDS_MAX && size <= CENTRIFUGE_FRAME_MAX);
        FUZZ_ASSERT(v == CENTRIFUGE_V1 || v == CENTRIFUGE_V2);
        FUZZ_ASSERT(start == CENTRIFUGE_UNKNOWN || v == start);

        /* The version pinned, the same frame parses to the same commands. */
        v_again = v;
        FUZZ_ASSERT(centrifuge_parse((const char *) data, size, &v_again, again,
                                     CENTRIFUGE_COMMANDS_MAX, &n_again) == 0);
        FUZZ_ASSERT(v_again == v && n_again == n);
        for (size_t i = 0; i < n; i++) {
                FUZZ_ASSERT(command_equal(&again[i], &cmds[i]));
                assert_command_sane(&cmds[i], v);
                encode_connect(v, &cmds[i]);
                encode_subscribe(v, &cmds[i]);
                encode_others(v, &cmds[i]);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        fuzz_parse(data, size, CENTRIFUGE_UNKNOWN);
        fuzz_parse(data, size, CENTRIFUGE_V1);
        fuzz_parse(data, size, CENTRIFUGE_V2);
        if (size <= CENTRIFUGE_FRAME_MAX) {
                encode_push(CENTRIFUGE_V1, data, size);
                encode_push(CENTRIFUGE_V2, data, size);
        }
        return 0;
}
