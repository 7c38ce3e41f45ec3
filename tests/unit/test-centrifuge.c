/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "centrifuge.h"
#include "macro.h"

/* The frames marked "real" are what centrifuge-js 2.8.5 and 5.8.0 sent to
 * tests/integration/node/check-wire.mjs, byte for byte; the rest are written by hand from
 * client.proto and the clients' source. The expected replies are written out by hand, never
 * produced by the encoders. */

#define REAL_TOKEN "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIzIn0.c2lnbmF0dXJl"

static CentrifugeCommand cmds[CENTRIFUGE_COMMANDS_MAX + 1];

/* Parses a frame that must be accepted under *version and returns how many commands. */
static size_t parse_ok(const char *frame, CentrifugeVersion *version) {
        size_t n = 0;

        memset(cmds, 0, sizeof(cmds));
        assert_int_equal(centrifuge_parse(frame, strlen(frame), version, cmds,
                                          CENTRIFUGE_COMMANDS_MAX, &n), 0);
        assert_true(n >= 1);
        return n;
}

/* One command, parsed with the version unknown: the version it pinned must be `expected`. */
static const CentrifugeCommand *parse_one(const char *frame, CentrifugeVersion expected) {
        CentrifugeVersion v = CENTRIFUGE_UNKNOWN;

        assert_int_equal(parse_ok(frame, &v), 1);
        assert_int_equal(v, expected);
        return &cmds[0];
}

/* The frame is refused under `version`, and nothing is written. */
static void assert_refused_len(const char *frame, size_t len, CentrifugeVersion version) {
        CentrifugeCommand untouched[CENTRIFUGE_COMMANDS_MAX + 1];
        CentrifugeVersion v = version;
        size_t n = 12345;

        memset(cmds, 0xa5, sizeof(cmds));
        memcpy(untouched, cmds, sizeof(cmds));
        assert_int_equal(centrifuge_parse(frame, len, &v, cmds, CENTRIFUGE_COMMANDS_MAX, &n),
                         -EBADMSG);
        assert_int_equal(v, version);
        assert_int_equal(n, 12345);
        assert_memory_equal(cmds, untouched, sizeof(cmds));
}

static void assert_refused(const char *frame, CentrifugeVersion version) {
        assert_refused_len(frame, strlen(frame), version);
}

static void assert_text(char *got, const char *expected) {
        assert_non_null(got);
        assert_string_equal(got, expected);
        free(got);
}

static void test_v1_connect(void **state) {
        const CentrifugeCommand *c;

        /* centrifuge-js 2.x without a token */
        c = parse_one("{\"params\":{\"name\":\"js\"},\"id\":1}", CENTRIFUGE_V1);
        assert_int_equal(c->method, CENTRIFUGE_CONNECT);
        assert_int_equal(c->id, 1);
        assert_false(c->has_token);

        /* real: centrifuge-js 2.x with a token */
        c = parse_one("{\"params\":{\"token\":\"" REAL_TOKEN "\",\"name\":\"js\"},\"id\":1}",
                      CENTRIFUGE_V1);
        assert_int_equal(c->method, CENTRIFUGE_CONNECT);
        assert_true(c->has_token);

        /* centrifuge-go 0.8: params always, method 0 omitted */
        c = parse_one("{\"id\":1,\"params\":{}}", CENTRIFUGE_V1);
        assert_int_equal(c->method, CENTRIFUGE_CONNECT);
        assert_false(c->has_token);

        c = parse_one("{\"id\":7,\"method\":0,\"params\":{\"token\":\"t\",\"data\":{\"a\":[1,2]},"
                      "\"name\":\"go\",\"version\":\"0.8.2\",\"subs\":{}}}", CENTRIFUGE_V1);
        assert_int_equal(c->method, CENTRIFUGE_CONNECT);
        assert_int_equal(c->id, 7);
        assert_true(c->has_token);

        /* an empty token is no token; no params at all is a connect too */
        c = parse_one("{\"id\":1,\"params\":{\"token\":\"\"}}", CENTRIFUGE_V1);
        assert_false(c->has_token);
        c = parse_one("{\"id\":4294967295}", CENTRIFUGE_V1);
        assert_int_equal(c->method, CENTRIFUGE_CONNECT);
        assert_int_equal(c->id, UINT32_MAX);

        /* method names, as centrifuge's Go decoder takes them */
        c = parse_one("{\"id\":1,\"method\":\"connect\"}", CENTRIFUGE_V1);
        assert_int_equal(c->method, CENTRIFUGE_CONNECT);
}

static void test_v1_subscribe(void **state) {
        const CentrifugeCommand *c;

        /* real: centrifuge-js 2.x */
        c = parse_one("{\"method\":1,\"params\":{\"channel\":\"server#3\"},\"id\":2}", CENTRIFUGE_V1);
        assert_int_equal(c->method, CENTRIFUGE_SUBSCRIBE);
        assert_int_equal(c->id, 2);
        assert_string_equal(c->channel, "server#3");
        assert_false(c->recover);
        assert_string_equal(c->epoch, "");
        assert_int_equal(c->offset, 0);

        /* real: centrifuge-js 2.x resubscribing after a reconnect */
        c = parse_one("{\"method\":1,\"params\":{\"channel\":\"server#3\",\"recover\":true,"
                      "\"offset\":1,\"epoch\":\"e-1700000000\"},\"id\":6}", CENTRIFUGE_V1);
        assert_int_equal(c->method, CENTRIFUGE_SUBSCRIBE);
        assert_int_equal(c->id, 6);
        assert_true(c->recover);
        assert_string_equal(c->epoch, "e-1700000000");
        assert_int_equal(c->offset, 1);

        /* legacy seq/gen win over the offset, packed as the centrifuge server did */
        c = parse_one("{\"id\":2,\"method\":1,\"params\":{\"channel\":\"c\",\"recover\":true,"
                      "\"seq\":5,\"gen\":2,\"offset\":9,\"epoch\":\"x\"}}", CENTRIFUGE_V1);
        assert_int_equal(c->offset, 2ULL * 4294967295ULL + 5);
        c = parse_one("{\"id\":2,\"method\":1,\"params\":{\"channel\":\"c\",\"recover\":true,"
                      "\"seq\":0,\"gen\":0,\"offset\":9}}", CENTRIFUGE_V1);
        assert_int_equal(c->offset, 9);

        /* without recover, epoch and offset mean nothing */
        c = parse_one("{\"id\":2,\"method\":1,\"params\":{\"channel\":\"c\",\"recover\":false,"
                      "\"offset\":9,\"epoch\":\"x\",\"token\":\"sub-token\",\"data\":null}}",
                      CENTRIFUGE_V1);
        assert_false(c->recover);
        assert_string_equal(c->epoch, "");
        assert_int_equal(c->offset, 0);

        /* limits, exactly */
        c = parse_one("{\"id\":2,\"method\":\"SUBSCRIBE\",\"params\":{\"channel\":"
                      "\"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
                      "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\","
                      "\"recover\":true,\"offset\":9223372036854775807,\"epoch\":"
                      "\"eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee\"}}",
                      CENTRIFUGE_V1);
        assert_int_equal(strlen(c->channel), CENTRIFUGE_CHANNEL_MAX);
        assert_int_equal(strlen(c->epoch), CENTRIFUGE_EPOCH_MAX);
        assert_int_equal(c->offset, INT64_MAX);

        /* UTF-8 is fine in a channel */
        c = parse_one("{\"id\":2,\"method\":1,\"params\":{\"channel\":\"k\\u00e4se\"}}", CENTRIFUGE_V1);
        assert_string_equal(c->channel, "k\xc3\xa4se");
}

static void test_v1_other_methods(void **state) {
        const CentrifugeCommand *c;
        CentrifugeVersion v = CENTRIFUGE_V1;

        /* real: centrifuge-js 2.x */
        c = parse_one("{\"method\":2,\"params\":{\"channel\":\"server#3\"},\"id\":7}", CENTRIFUGE_V1);
        assert_int_equal(c->method, CENTRIFUGE_UNSUBSCRIBE);
        assert_int_equal(c->id, 7);
        assert_string_equal(c->channel, "server#3");

        /* real: centrifuge-js 2.x ping */
        assert_int_equal(parse_ok("{\"method\":7,\"id\":3}", &v), 1);
        assert_int_equal(cmds[0].method, CENTRIFUGE_PING);
        assert_int_equal(cmds[0].id, 3);
        assert_int_equal(parse_ok("{\"method\":\"ping\",\"id\":3,\"params\":{}}", &v), 1);
        assert_int_equal(cmds[0].method, CENTRIFUGE_PING);

        /* publish, presence, presence stats, history, send, rpc, refresh, sub refresh, and
         * numbers from a later protocol */
        for (unsigned m = 3; m <= 20; m++) {
                char frame[64];

                if (m == 7)
                        continue;
                snprintf(frame, sizeof(frame), "{\"id\":9,\"method\":%u,\"params\":{}}", m);
                assert_int_equal(parse_ok(frame, &v), 1);
                assert_int_equal(cmds[0].method, CENTRIFUGE_UNSUPPORTED);
                assert_int_equal(cmds[0].id, 9);
        }
        /* send has no id: the proxy must not answer it */
        assert_int_equal(parse_ok("{\"method\":8,\"params\":{\"data\":{\"x\":1}}}", &v), 1);
        assert_int_equal(cmds[0].method, CENTRIFUGE_UNSUPPORTED);
        assert_int_equal(cmds[0].id, 0);
        assert_int_equal(parse_ok("{\"id\":1,\"method\":\"Presence_Stats\"}", &v), 1);
        assert_int_equal(cmds[0].method, CENTRIFUGE_UNSUPPORTED);
        assert_int_equal(v, CENTRIFUGE_V1);
}

static void test_v2_commands(void **state) {
        const CentrifugeCommand *c;
        CentrifugeVersion v = CENTRIFUGE_V2;

        c = parse_one("{\"connect\":{\"name\":\"js\"},\"id\":1}", CENTRIFUGE_V2);
        assert_int_equal(c->method, CENTRIFUGE_CONNECT);
        assert_int_equal(c->id, 1);
        assert_false(c->has_token);
        c = parse_one("{\"connect\":{\"token\":\"tok\",\"name\":\"js\",\"headers\":{\"a\":\"b\"},"
                      "\"flag\":1},\"id\":1}", CENTRIFUGE_V2);
        assert_true(c->has_token);
        c = parse_one("{\"id\":1,\"connect\":{}}", CENTRIFUGE_V2);
        assert_int_equal(c->method, CENTRIFUGE_CONNECT);

        /* real: centrifuge-js 5.x, with its channel compaction flag */
        c = parse_one("{\"subscribe\":{\"channel\":\"server#3\",\"flag\":1},\"id\":2}", CENTRIFUGE_V2);
        assert_int_equal(c->method, CENTRIFUGE_SUBSCRIBE);
        assert_int_equal(c->id, 2);
        assert_string_equal(c->channel, "server#3");
        assert_false(c->recover);

        /* real: centrifuge-js 5.x resubscribing after a reconnect */
        c = parse_one("{\"subscribe\":{\"channel\":\"server#3\",\"flag\":1,\"recover\":true,"
                      "\"offset\":1,\"epoch\":\"e-1700000000\"},\"id\":4}", CENTRIFUGE_V2);
        assert_true(c->recover);
        assert_int_equal(c->offset, 1);
        assert_string_equal(c->epoch, "e-1700000000");

        /* seq and gen are not v2's: ignored like any unknown field */
        c = parse_one("{\"id\":2,\"subscribe\":{\"channel\":\"c\",\"recover\":true,\"seq\":5,"
                      "\"offset\":3}}", CENTRIFUGE_V2);
        assert_int_equal(c->offset, 3);

        /* real: centrifuge-js 5.x */
        c = parse_one("{\"unsubscribe\":{\"channel\":\"server#3\"},\"id\":5}", CENTRIFUGE_V2);
        assert_int_equal(c->method, CENTRIFUGE_UNSUBSCRIBE);
        assert_string_equal(c->channel, "server#3");

        /* real: the 5.x pong */
        assert_int_equal(parse_ok("{}", &v), 1);
        assert_int_equal(cmds[0].method, CENTRIFUGE_PONG);
        assert_int_equal(cmds[0].id, 0);

        assert_int_equal(parse_ok("{\"id\":4,\"ping\":{}}", &v), 1);
        assert_int_equal(cmds[0].method, CENTRIFUGE_PING);
        assert_int_equal(cmds[0].id, 4);

        assert_int_equal(parse_ok("{\"id\":5,\"rpc\":{\"method\":\"x\",\"data\":{}}}", &v), 1);
        assert_int_equal(cmds[0].method, CENTRIFUGE_UNSUPPORTED);
        assert_int_equal(cmds[0].id, 5);
        assert_int_equal(parse_ok("{\"send\":{\"data\":{}}}", &v), 1);
        assert_int_equal(cmds[0].method, CENTRIFUGE_UNSUPPORTED);
        assert_int_equal(cmds[0].id, 0);
        /* a request key of a later protocol; {"id":N} alone is no v2 connect */
        assert_int_equal(parse_ok("{\"id\":6,\"presence_watch\":{\"channel\":\"c\"}}", &v), 1);
        assert_int_equal(cmds[0].method, CENTRIFUGE_UNSUPPORTED);
        assert_int_equal(parse_ok("{\"id\":6}", &v), 1);
        assert_int_equal(cmds[0].method, CENTRIFUGE_UNSUPPORTED);
        assert_int_equal(v, CENTRIFUGE_V2);
}

static void test_several_commands(void **state) {
        static const char two[] = "{\"method\":7,\"id\":1}\n{\"method\":7,\"id\":2}";
        static const char one[] = "{\"method\":7,\"id\":1}";
        CentrifugeVersion v = CENTRIFUGE_UNKNOWN;
        char frame[2048] = "";
        size_t n = 0;

        /* as the clients batch: joined by \n, no trailing newline */
        assert_int_equal(parse_ok("{\"params\":{\"name\":\"js\"},\"id\":1}\n"
                                  "{\"method\":1,\"params\":{\"channel\":\"a\"},\"id\":2}\n"
                                  "{\"method\":1,\"params\":{\"channel\":\"b\"},\"id\":3}", &v), 3);
        assert_int_equal(v, CENTRIFUGE_V1);
        assert_int_equal(cmds[0].method, CENTRIFUGE_CONNECT);
        assert_int_equal(cmds[1].method, CENTRIFUGE_SUBSCRIBE);
        assert_string_equal(cmds[1].channel, "a");
        assert_int_equal(cmds[2].id, 3);
        assert_string_equal(cmds[2].channel, "b");

        /* a trailing newline (the Go encoders end every command with one), blank lines, CRLF */
        v = CENTRIFUGE_UNKNOWN;
        assert_int_equal(parse_ok("\n{\"connect\":{},\"id\":1}\r\n \t\r\n"
                                  "{\"subscribe\":{\"channel\":\"a\"},\"id\":2}\n\n", &v), 2);
        assert_int_equal(v, CENTRIFUGE_V2);
        assert_int_equal(cmds[1].method, CENTRIFUGE_SUBSCRIBE);

        /* real: centrifuge-js 5.x sends its connect and subscribe in one frame */
        v = CENTRIFUGE_UNKNOWN;
        assert_int_equal(parse_ok("{\"connect\":{\"token\":\"" REAL_TOKEN "\",\"name\":\"js\"},"
                                  "\"id\":1}\n{\"subscribe\":{\"channel\":\"server#3\",\"flag\":1},"
                                  "\"id\":2}", &v), 2);
        assert_int_equal(v, CENTRIFUGE_V2);
        assert_int_equal(cmds[0].method, CENTRIFUGE_CONNECT);
        assert_true(cmds[0].has_token);
        assert_int_equal(cmds[1].method, CENTRIFUGE_SUBSCRIBE);
        assert_string_equal(cmds[1].channel, "server#3");

        /* exactly CENTRIFUGE_COMMANDS_MAX; one more is refused */
        for (unsigned i = 0; i < CENTRIFUGE_COMMANDS_MAX; i++)
                snprintf(frame + strlen(frame), sizeof(frame) - strlen(frame),
                         "{\"method\":7,\"id\":%u}\n", i + 1);
        v = CENTRIFUGE_V1;
        assert_int_equal(parse_ok(frame, &v), CENTRIFUGE_COMMANDS_MAX);
        assert_int_equal(cmds[CENTRIFUGE_COMMANDS_MAX - 1].id, CENTRIFUGE_COMMANDS_MAX);
        strcat(frame, "{\"method\":7,\"id\":99}");
        assert_refused(frame, CENTRIFUGE_V1);

        /* the caller's max counts too, and is never written past */
        v = CENTRIFUGE_V1;
        memset(cmds, 0x5a, sizeof(cmds));
        assert_int_equal(centrifuge_parse(two, strlen(two), &v, cmds, 1, &n), -EBADMSG);
        assert_int_equal(centrifuge_parse(one, strlen(one), &v, cmds, 1, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(((unsigned char *) &cmds[1])[0], 0x5a);
        assert_int_equal(centrifuge_parse(one, strlen(one), &v, cmds, 0, &n), -EBADMSG);

        /* one bad command spoils the frame */
        assert_refused("{\"method\":7,\"id\":1}\n{\"method\":7}", CENTRIFUGE_V1);
        assert_refused("{\"method\":7,\"id\":1}\nnull", CENTRIFUGE_V1);
}

static void test_version_pinning(void **state) {
        CentrifugeVersion v;

        /* the other version's shape, once one is pinned */
        assert_refused("{\"connect\":{},\"id\":1}", CENTRIFUGE_V1);
        assert_refused("{\"subscribe\":{\"channel\":\"a\"},\"id\":2}", CENTRIFUGE_V1);
        assert_refused("{}", CENTRIFUGE_V1);
        assert_refused("{\"method\":1,\"params\":{\"channel\":\"a\"},\"id\":2}", CENTRIFUGE_V2);
        assert_refused("{\"params\":{},\"id\":1}", CENTRIFUGE_V2);
        assert_refused("{\"method\":7,\"id\":1}", CENTRIFUGE_V2);

        /* within one frame, the first command decides */
        assert_refused("{\"params\":{},\"id\":1}\n{}", CENTRIFUGE_UNKNOWN);
        assert_refused("{\"connect\":{},\"id\":1}\n{\"method\":7,\"id\":2}", CENTRIFUGE_UNKNOWN);

        /* {} cannot open a connection; {"id":N} opens a v1 one */
        assert_refused("{}", CENTRIFUGE_UNKNOWN);
        v = CENTRIFUGE_UNKNOWN;
        parse_ok("{\"id\":1}", &v);
        assert_int_equal(v, CENTRIFUGE_V1);
        assert_int_equal(cmds[0].method, CENTRIFUGE_CONNECT);

        /* a pinned version stays through frames of either kind of command */
        v = CENTRIFUGE_V2;
        parse_ok("{}\n{\"id\":9,\"unsubscribe\":{\"channel\":\"a\"}}", &v);
        assert_int_equal(v, CENTRIFUGE_V2);
        assert_int_equal(cmds[0].method, CENTRIFUGE_PONG);
        assert_int_equal(cmds[1].method, CENTRIFUGE_UNSUBSCRIBE);
}

/* Refused whatever the version: not a command of either kind, or broken in both. */
static const char *const refused_any[] = {
        "", "\n", " \r\n\t", "x", "{", "}", "{\"id\":1", "[]", "[{\"id\":1}]", "null",
        "1", "\"connect\"", "true",
        "{\"id\":1} x", "{\"id\":1}{\"id\":2}", "{\"id\":1},",
        "{\"id\":1,\"id\":2}",                              /* duplicate keys */
        "{\"id\":1,\"params\":{\"name\":\"a\",\"name\":\"b\"}}",
        "{'id':1}", "{id:1}", "{\"id\":01}", "{\"id\":0x1}", "{\"id\":+1}",
        "{\"id\":1,}", "{\"id\":NaN}", "{\"id\":Infinity}",
        /* ids */
        "{\"id\":-1}", "{\"id\":1.5}", "{\"id\":1.0}", "{\"id\":1e2}", "{\"id\":\"1\"}",
        "{\"id\":4294967296}", "{\"id\":true}", "{\"id\":null}", "{\"id\":[1]}",
        "{\"id\":99999999999999999999999}",
        /* connect, subscribe, unsubscribe, ping without an id */
        "{\"params\":{}}", "{\"id\":0,\"params\":{}}", "{\"method\":0}",
        "{\"method\":1,\"params\":{\"channel\":\"a\"}}",
        "{\"id\":0,\"method\":1,\"params\":{\"channel\":\"a\"}}",
        "{\"method\":2,\"params\":{\"channel\":\"a\"}}", "{\"method\":7}",
        "{\"connect\":{}}", "{\"id\":0,\"connect\":{}}",
        "{\"subscribe\":{\"channel\":\"a\"}}", "{\"unsubscribe\":{\"channel\":\"a\"}}",
        "{\"ping\":{}}",
        /* both shapes, two requests */
        "{\"id\":1,\"method\":1,\"subscribe\":{\"channel\":\"a\"}}",
        "{\"id\":1,\"params\":{},\"connect\":{}}",
        "{\"id\":1,\"connect\":{},\"subscribe\":{\"channel\":\"a\"}}",
        /* NUL, bad UTF-8, control characters outside strings */
        "{\"id\":1,\"params\":{\"name\":\"a\\u0000b\"}}",
        "{\"id\":1,\"params\":{\"name\":\"\xff\"}}",
        "{\"id\":1,\"params\":{\"name\":\"\xc3\"}}",
        "{\"id\":1,\"params\":{\"name\":\"\xed\xa0\x80\"}}",   /* a surrogate */
        "{\"id\":1,\"params\":{\"name\":\"\\ud800\"}}",
        "\xef\xbb\xbf{\"id\":1}",                             /* a BOM */
        "{\"id\":1,\"params\":{\"name\":\"a\tb\"}}",          /* raw tab in a string */
        "\x01{\"id\":1}",
};
/* Refused as v1 (and as a first frame). */
static const char *const refused_v1[] = {
        /* methods */
        "{\"id\":1,\"method\":-1}", "{\"id\":1,\"method\":1.0}",
        "{\"id\":1,\"method\":4294967296}", "{\"id\":1,\"method\":\"bogus\"}",
        "{\"id\":1,\"method\":\"\"}", "{\"id\":1,\"method\":\"7\"}",
        "{\"id\":1,\"method\":\"SUBSCRIBE \"}", "{\"id\":1,\"method\":null}",
        "{\"id\":1,\"method\":{}}", "{\"id\":1,\"method\":true}",
        /* params */
        "{\"id\":1,\"params\":null}", "{\"id\":1,\"params\":[]}", "{\"id\":1,\"params\":\"\"}",
        "{\"id\":1,\"params\":1}", "{\"id\":1,\"method\":7,\"params\":[]}",
        "{\"id\":1,\"method\":3,\"params\":\"x\"}",
        /* connect */
        "{\"id\":1,\"params\":{\"token\":1}}", "{\"id\":1,\"params\":{\"token\":null}}",
        "{\"id\":1,\"params\":{\"name\":[]}}", "{\"id\":1,\"params\":{\"version\":2}}",
        "{\"id\":1,\"params\":{\"subs\":[]}}", "{\"id\":1,\"params\":{\"subs\":\"a\"}}",
        /* subscribe */
        "{\"id\":1,\"method\":1}", "{\"id\":1,\"method\":1,\"params\":{}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"\"}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":null}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":3}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\\nb\"}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\\u0001\"}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\\u007f\"}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\",\"recover\":1}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\",\"recover\":\"true\"}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\",\"epoch\":5}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\",\"epoch\":\"\\t\"}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\",\"offset\":-1}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\",\"offset\":\"5\"}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\",\"offset\":1.5}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\",\"offset\":9223372036854775808}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\",\"seq\":-1}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\",\"gen\":4294967296}}",
        "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\",\"token\":7}}",
        /* unsubscribe */
        "{\"id\":1,\"method\":2}", "{\"id\":1,\"method\":2,\"params\":{}}",
        "{\"id\":1,\"method\":2,\"params\":{\"channel\":\"\"}}",
};
/* Refused as v2. */
static const char *const refused_v2[] = {
        "{\"id\":1,\"connect\":null}", "{\"id\":1,\"connect\":[]}", "{\"id\":1,\"connect\":1}",
        "{\"id\":1,\"connect\":{\"token\":false}}",
        "{\"id\":1,\"subscribe\":{}}", "{\"id\":1,\"subscribe\":null}",
        "{\"id\":1,\"subscribe\":{\"channel\":\"\"}}",
        "{\"id\":1,\"subscribe\":{\"channel\":\"a\",\"offset\":-5}}",
        "{\"id\":1,\"subscribe\":{\"channel\":\"a\",\"recover\":null}}",
        "{\"id\":1,\"unsubscribe\":{}}", "{\"id\":1,\"ping\":null}",
        "{\"id\":1,\"rpc\":\"x\"}", "{\"id\":-1}",
};

static void test_refused_frames(void **state) {
        for (size_t i = 0; i < ELEMENTSOF(refused_any); i++) {
                assert_refused(refused_any[i], CENTRIFUGE_UNKNOWN);
                assert_refused(refused_any[i], CENTRIFUGE_V1);
        }
        for (size_t i = 0; i < ELEMENTSOF(refused_v1); i++) {
                assert_refused(refused_v1[i], CENTRIFUGE_UNKNOWN);
                assert_refused(refused_v1[i], CENTRIFUGE_V1);
        }
        for (size_t i = 0; i < ELEMENTSOF(refused_v2); i++)
                assert_refused(refused_v2[i], CENTRIFUGE_V2);

        /* a NUL byte inside the length */
        assert_refused_len("{\"id\":1}\0", 9, CENTRIFUGE_UNKNOWN);
        assert_refused_len("{\"id\":1,\"params\":{\"name\":\"a\0b\"}}", 33, CENTRIFUGE_UNKNOWN);
        /* len, not the NUL, ends the frame: a cut command is refused */
        assert_refused_len("{\"id\":1}", 7, CENTRIFUGE_UNKNOWN);
        assert_refused_len("{\"id\":1}\n{\"id\":2}", 15, CENTRIFUGE_V1);
        assert_refused_len(NULL, 0, CENTRIFUGE_UNKNOWN);
}

static void test_refused_limits(void **state) {
        char *big;

        /* strings one byte over their limits */
        big = malloc(CENTRIFUGE_FRAME_MAX + 64);
        assert_non_null(big);
        snprintf(big, 256, "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"%0129d\"}}", 0);
        assert_refused(big, CENTRIFUGE_V1);
        snprintf(big, 256, "{\"id\":1,\"method\":1,\"params\":{\"channel\":\"a\",\"recover\":true,"
                 "\"epoch\":\"%065d\"}}", 0);
        assert_refused(big, CENTRIFUGE_V1);
        snprintf(big, CENTRIFUGE_FRAME_MAX, "{\"id\":1,\"params\":{\"token\":\"%04097d\"}}", 0);
        assert_refused(big, CENTRIFUGE_V1);
        snprintf(big, CENTRIFUGE_FRAME_MAX, "{\"id\":1,\"params\":{\"token\":\"%04096d\"}}", 0);
        assert_int_equal(parse_one(big, CENTRIFUGE_V1)->has_token, true);
        snprintf(big, CENTRIFUGE_FRAME_MAX, "{\"id\":1,\"params\":{\"name\":\"%0257d\"}}", 0);
        assert_refused(big, CENTRIFUGE_V1);

        /* the frame itself: CENTRIFUGE_FRAME_MAX bytes are parsed, one more is not */
        memset(big, ' ', CENTRIFUGE_FRAME_MAX + 1);
        memcpy(big, "{\"id\":1}", 8);
        assert_int_equal(centrifuge_parse(big, CENTRIFUGE_FRAME_MAX, &(CentrifugeVersion) {
                                                  CENTRIFUGE_UNKNOWN }, cmds, 1,
                                          &(size_t) { 0 }), 0);
        assert_refused_len(big, CENTRIFUGE_FRAME_MAX + 1, CENTRIFUGE_UNKNOWN);
        free(big);
}

static void test_depth(void **state) {
        char frame[512];
        int depth;

        /* The command object and params take two levels; data the rest. Brackets inside
         * strings do not count. */
        for (depth = 1; depth <= CENTRIFUGE_DEPTH_MAX + 1; depth++) {
                size_t n = 0;

                n += snprintf(frame + n, sizeof(frame) - n,
                              "{\"id\":1,\"params\":{\"name\":\"[[[[{{{{\",\"data\":");
                for (int i = 2; i < depth; i++)
                        n += snprintf(frame + n, sizeof(frame) - n, "[");
                n += snprintf(frame + n, sizeof(frame) - n, "1");
                for (int i = 2; i < depth; i++)
                        n += snprintf(frame + n, sizeof(frame) - n, "]");
                snprintf(frame + n, sizeof(frame) - n, "}}");
                if (depth <= CENTRIFUGE_DEPTH_MAX)
                        parse_one(frame, CENTRIFUGE_V1);
                else
                        assert_refused(frame, CENTRIFUGE_UNKNOWN);
        }
        /* an escaped quote does not end a string */
        parse_one("{\"id\":1,\"params\":{\"name\":\"\\\"{{{{{{{{{{{{{{{{{{{{\"}}", CENTRIFUGE_V1);
}

static void test_connect_reply(void **state) {
        assert_text(centrifuge_connect_reply(CENTRIFUGE_V1, 1, "c-1", 25),
                    "{\"id\":1,\"result\":{\"client\":\"c-1\",\"version\":\"slotd\"}}");
        assert_text(centrifuge_connect_reply(CENTRIFUGE_V2, 1, "c-1", 25),
                    "{\"id\":1,\"connect\":{\"client\":\"c-1\",\"version\":\"slotd\",\"ping\":25,"
                    "\"pong\":true}}");
        assert_text(centrifuge_connect_reply(CENTRIFUGE_V2, 4294967295u, "c-1", 0),
                    "{\"id\":4294967295,\"connect\":{\"client\":\"c-1\",\"version\":\"slotd\"}}");
        /* escaping: quotes, backslashes, control characters; UTF-8 stays as it is */
        assert_text(centrifuge_connect_reply(CENTRIFUGE_V1, 2, "a\"b\\c\nd\xc3\xa4/", 0),
                    "{\"id\":2,\"result\":{\"client\":\"a\\\"b\\\\c\\nd\xc3\xa4/\","
                    "\"version\":\"slotd\"}}");
        assert_null(centrifuge_connect_reply(CENTRIFUGE_UNKNOWN, 1, "c", 25));
        assert_null(centrifuge_connect_reply(CENTRIFUGE_V1, 1, NULL, 25));
        assert_null(centrifuge_connect_reply(CENTRIFUGE_V2, 1, "\xff", 25));
}

static void test_subscribe_reply(void **state) {
        const CentrifugePublication pubs[] = {
                { "{\"EventType\":\"AllocateEventType\",\"ServerID\":3}", 6 },
                { "{ \"EventType\" : \"DeallocateEventType\",\n \"ServerID\" : 3 }", 7 },
        };
        CentrifugeSubscribeResult r = {};

        /* a channel without a stream */
        assert_text(centrifuge_subscribe_reply(CENTRIFUGE_V1, 2, &r), "{\"id\":2,\"result\":{}}");
        assert_text(centrifuge_subscribe_reply(CENTRIFUGE_V2, 2, &r), "{\"id\":2,\"subscribe\":{}}");

        /* a fresh subscription to a recoverable channel */
        r = (CentrifugeSubscribeResult) { .recoverable = true, .epoch = "e-42", .offset = 5 };
        assert_text(centrifuge_subscribe_reply(CENTRIFUGE_V1, 2, &r),
                    "{\"id\":2,\"result\":{\"recoverable\":true,\"epoch\":\"e-42\",\"offset\":5}}");
        assert_text(centrifuge_subscribe_reply(CENTRIFUGE_V2, 2, &r),
                    "{\"id\":2,\"subscribe\":{\"recoverable\":true,\"epoch\":\"e-42\",\"offset\":5,"
                    "\"positioned\":true}}");

        /* offset 0 and an empty epoch are left out */
        r = (CentrifugeSubscribeResult) { .recoverable = true, .epoch = "" };
        assert_text(centrifuge_subscribe_reply(CENTRIFUGE_V1, 2, &r),
                    "{\"id\":2,\"result\":{\"recoverable\":true}}");

        /* a recovery, with what the client missed; pretty data goes out compact */
        r = (CentrifugeSubscribeResult) {
                .recoverable = true, .epoch = "e-42", .offset = 7, .recovered = true,
                .publications = pubs, .n_publications = 2, .was_recovering = true,
        };
        assert_text(centrifuge_subscribe_reply(CENTRIFUGE_V1, 9, &r),
                    "{\"id\":9,\"result\":{\"recoverable\":true,\"epoch\":\"e-42\",\"publications\":["
                    "{\"data\":{\"EventType\":\"AllocateEventType\",\"ServerID\":3},\"offset\":6},"
                    "{\"data\":{\"EventType\":\"DeallocateEventType\",\"ServerID\":3},\"offset\":7}],"
                    "\"recovered\":true,\"offset\":7}}");
        assert_text(centrifuge_subscribe_reply(CENTRIFUGE_V2, 9, &r),
                    "{\"id\":9,\"subscribe\":{\"recoverable\":true,\"epoch\":\"e-42\",\"publications\":["
                    "{\"data\":{\"EventType\":\"AllocateEventType\",\"ServerID\":3},\"offset\":6},"
                    "{\"data\":{\"EventType\":\"DeallocateEventType\",\"ServerID\":3},\"offset\":7}],"
                    "\"recovered\":true,\"offset\":7,\"positioned\":true,\"was_recovering\":true}}");

        /* a recovery that failed: no publications, recovered left out */
        r = (CentrifugeSubscribeResult) { .recoverable = true, .epoch = "e-43", .offset = 1,
                                          .was_recovering = true };
        assert_text(centrifuge_subscribe_reply(CENTRIFUGE_V2, 3, &r),
                    "{\"id\":3,\"subscribe\":{\"recoverable\":true,\"epoch\":\"e-43\",\"offset\":1,"
                    "\"positioned\":true,\"was_recovering\":true}}");
        assert_text(centrifuge_subscribe_reply(CENTRIFUGE_V1, 3, &r),
                    "{\"id\":3,\"result\":{\"recoverable\":true,\"epoch\":\"e-43\",\"offset\":1}}");

        /* what cannot be encoded */
        assert_null(centrifuge_subscribe_reply(CENTRIFUGE_UNKNOWN, 2, &r));
        assert_null(centrifuge_subscribe_reply(CENTRIFUGE_V1, 2, NULL));
        r = (CentrifugeSubscribeResult) { .n_publications = 1 };
        assert_null(centrifuge_subscribe_reply(CENTRIFUGE_V1, 2, &r));
        r = (CentrifugeSubscribeResult) { .publications = &(CentrifugePublication) { "[1]", 1 },
                                          .n_publications = 1 };
        assert_null(centrifuge_subscribe_reply(CENTRIFUGE_V1, 2, &r));
        r = (CentrifugeSubscribeResult) { .recoverable = true, .offset = UINT64_MAX };
        assert_null(centrifuge_subscribe_reply(CENTRIFUGE_V2, 2, &r));
}

static void test_empty_and_error_replies(void **state) {
        assert_text(centrifuge_empty_reply(CENTRIFUGE_V1, 3, CENTRIFUGE_UNSUBSCRIBE),
                    "{\"id\":3,\"result\":{}}");
        assert_text(centrifuge_empty_reply(CENTRIFUGE_V1, 3, CENTRIFUGE_PING), "{\"id\":3}");
        assert_text(centrifuge_empty_reply(CENTRIFUGE_V2, 3, CENTRIFUGE_UNSUBSCRIBE),
                    "{\"id\":3,\"unsubscribe\":{}}");
        assert_text(centrifuge_empty_reply(CENTRIFUGE_V2, 3, CENTRIFUGE_PING),
                    "{\"id\":3,\"ping\":{}}");
        assert_null(centrifuge_empty_reply(CENTRIFUGE_V1, 3, CENTRIFUGE_CONNECT));
        assert_null(centrifuge_empty_reply(CENTRIFUGE_V2, 3, CENTRIFUGE_SUBSCRIBE));
        assert_null(centrifuge_empty_reply(CENTRIFUGE_V2, 3, CENTRIFUGE_PONG));
        assert_null(centrifuge_empty_reply(CENTRIFUGE_V1, 3, CENTRIFUGE_UNSUPPORTED));
        assert_null(centrifuge_empty_reply(CENTRIFUGE_UNKNOWN, 3, CENTRIFUGE_PING));

        assert_text(centrifuge_error_reply(CENTRIFUGE_V1, 4, CENTRIFUGE_ERROR_METHOD_NOT_FOUND,
                                           "method not found"),
                    "{\"id\":4,\"error\":{\"code\":104,\"message\":\"method not found\"}}");
        assert_text(centrifuge_error_reply(CENTRIFUGE_V2, 4, CENTRIFUGE_ERROR_PERMISSION_DENIED,
                                           "permission denied"),
                    "{\"id\":4,\"error\":{\"code\":103,\"message\":\"permission denied\"}}");
        assert_text(centrifuge_error_reply(CENTRIFUGE_V2, 0, CENTRIFUGE_ERROR_BAD_REQUEST, "\"x\""),
                    "{\"error\":{\"code\":107,\"message\":\"\\\"x\\\"\"}}");
        assert_null(centrifuge_error_reply(CENTRIFUGE_UNKNOWN, 4, 100, "x"));
        assert_null(centrifuge_error_reply(CENTRIFUGE_V1, 4, 100, NULL));
        assert_text(centrifuge_temporary_error_reply(CENTRIFUGE_V2, 1, CENTRIFUGE_ERROR_INTERNAL,
                                                     "later"),
                    "{\"id\":1,\"error\":{\"code\":100,\"message\":\"later\","
                    "\"temporary\":true}}");
        assert_text(centrifuge_temporary_error_reply(CENTRIFUGE_V1, 1, CENTRIFUGE_ERROR_INTERNAL,
                                                     "later"),
                    "{\"id\":1,\"error\":{\"code\":100,\"message\":\"later\","
                    "\"temporary\":true}}");
        assert_null(centrifuge_temporary_error_reply(CENTRIFUGE_UNKNOWN, 1, 100, "x"));
}

static void test_publication_push(void **state) {
        static const char event[] =
                "{\"EventType\":\"AllocateEventType\",\"EventID\":\"6f4b2a34-1c3e-4b8e-9d59-"
                "0c2a5e7d9f10\",\"ServerID\":3,\"AllocationID\":\"9d1b4c8e-2f6a-4e3b-8a7d-"
                "5c9e0f1a2b3c\"}";
        static const char *const bad[] = { "[]", "1", "\"s\"", "null", "{", "{} {}", "",
                                           "{\"a\":1,\"a\":2}" };
        CentrifugePublication p = { event, 12 };

        assert_text(centrifuge_publication_push(CENTRIFUGE_V1, "server#3", &p),
                    "{\"result\":{\"channel\":\"server#3\",\"data\":{\"data\":{\"EventType\":"
                    "\"AllocateEventType\",\"EventID\":\"6f4b2a34-1c3e-4b8e-9d59-0c2a5e7d9f10\","
                    "\"ServerID\":3,\"AllocationID\":\"9d1b4c8e-2f6a-4e3b-8a7d-5c9e0f1a2b3c\"},"
                    "\"offset\":12}}}");
        assert_text(centrifuge_publication_push(CENTRIFUGE_V2, "server#3", &p),
                    "{\"push\":{\"channel\":\"server#3\",\"pub\":{\"data\":{\"EventType\":"
                    "\"AllocateEventType\",\"EventID\":\"6f4b2a34-1c3e-4b8e-9d59-0c2a5e7d9f10\","
                    "\"ServerID\":3,\"AllocationID\":\"9d1b4c8e-2f6a-4e3b-8a7d-5c9e0f1a2b3c\"},"
                    "\"offset\":12}}}");

        /* offset 0 is left out; the data's newlines and spaces do not reach the frame */
        p = (CentrifugePublication) { "{\n  \"a\": [1, 2],\n  \"b\": \"x\\ny\"\n}", 0 };
        assert_text(centrifuge_publication_push(CENTRIFUGE_V1, "c", &p),
                    "{\"result\":{\"channel\":\"c\",\"data\":{\"data\":{\"a\":[1,2],\"b\":\"x\\ny\"}}}}");
        assert_text(centrifuge_publication_push(CENTRIFUGE_V2, "c", &p),
                    "{\"push\":{\"channel\":\"c\",\"pub\":{\"data\":{\"a\":[1,2],\"b\":\"x\\ny\"}}}}");

        /* data that is no JSON object, duplicate keys, a NULL anything */
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                p = (CentrifugePublication) { bad[i], 1 };
                assert_null(centrifuge_publication_push(CENTRIFUGE_V1, "c", &p));
                assert_null(centrifuge_publication_push(CENTRIFUGE_V2, "c", &p));
        }
        p = (CentrifugePublication) { NULL, 1 };
        assert_null(centrifuge_publication_push(CENTRIFUGE_V2, "c", &p));
        p = (CentrifugePublication) { "{}", UINT64_MAX };
        assert_null(centrifuge_publication_push(CENTRIFUGE_V2, "c", &p));
        p = (CentrifugePublication) { "{}", 1 };
        assert_null(centrifuge_publication_push(CENTRIFUGE_V2, NULL, &p));
        assert_null(centrifuge_publication_push(CENTRIFUGE_V1, "c", NULL));
        assert_null(centrifuge_publication_push(CENTRIFUGE_UNKNOWN, "c", &p));
}

static void test_server_ping(void **state) {
        assert_text(centrifuge_server_ping(CENTRIFUGE_V2), "{}");
        assert_null(centrifuge_server_ping(CENTRIFUGE_V1));
        assert_null(centrifuge_server_ping(CENTRIFUGE_UNKNOWN));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_v1_connect),
                cmocka_unit_test(test_v1_subscribe),
                cmocka_unit_test(test_v1_other_methods),
                cmocka_unit_test(test_v2_commands),
                cmocka_unit_test(test_several_commands),
                cmocka_unit_test(test_version_pinning),
                cmocka_unit_test(test_refused_frames),
                cmocka_unit_test(test_refused_limits),
                cmocka_unit_test(test_depth),
                cmocka_unit_test(test_connect_reply),
                cmocka_unit_test(test_subscribe_reply),
                cmocka_unit_test(test_empty_and_error_replies),
                cmocka_unit_test(test_publication_push),
                cmocka_unit_test(test_server_ping),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
