/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "macro.h"
#include "sqp.h"

/* Written out by hand from the protocol description, not produced by the encoder: a reply to
 * challenge 0xDEADBEEF, version 1, one packet, ServerInfo with 3/16 players, "Test Server",
 * "dm", "1.0", "dust", port 7777. */
static const uint8_t info_reply[] = {
        0x01, 0xde, 0xad, 0xbe, 0xef,   /* type, challenge */
        0x00, 0x01,                     /* version */
        0x00, 0x00,                     /* current packet, last packet */
        0x00, 0x22,                     /* payload length 34 */
        0x00, 0x00, 0x00, 0x1e,         /* chunk length 30 */
        0x00, 0x03,                     /* players */
        0x00, 0x10,                     /* max players */
        0x0b, 'T', 'e', 's', 't', ' ', 'S', 'e', 'r', 'v', 'e', 'r',
        0x02, 'd', 'm',
        0x03, '1', '.', '0',
        0x04, 'd', 'u', 's', 't',
        0x1e, 0x61,                     /* port 7777 */
};
#define OFF_VERSION 5
#define OFF_PACKET 7
#define OFF_LAST_PACKET 8
#define OFF_PAYLOAD_LEN 9
#define OFF_CHUNK_LEN 11
#define OFF_NAME_LEN 19
#define OFF_MAP_LEN 38

#define CHALLENGE UINT32_C(0xdeadbeef)

/* Failure must leave the output exactly as it was. */
static void assert_query_fails_with(const uint8_t *buf, size_t len, uint32_t challenge, int error) {
        SqpInfo info, before;

        memset(&info, 0xa5, sizeof(info));
        before = info;
        assert_int_equal(sqp_parse_query(buf, len, challenge, &info), error);
        assert_memory_equal(&info, &before, sizeof(info));
}

static void assert_query_fails(const uint8_t *buf, size_t len, uint32_t challenge) {
        assert_query_fails_with(buf, len, challenge, -EBADMSG);
}

static void assert_info_equal(const SqpInfo *a, const SqpInfo *b) {
        assert_int_equal(a->players, b->players);
        assert_int_equal(a->max_players, b->max_players);
        assert_int_equal(a->port, b->port);
        assert_string_equal(a->name, b->name);
        assert_string_equal(a->game_type, b->game_type);
        assert_string_equal(a->build_id, b->build_id);
        assert_string_equal(a->map, b->map);
}

static void assert_clean_string(const char *s, size_t size) {
        size_t n = strnlen(s, size);

        assert_true(n < size);
        for (size_t i = 0; i < n; i++)
                assert_true((unsigned char) s[i] >= 0x20 && (unsigned char) s[i] != 0x7f);
}

static void test_challenge_request(_unused_ void **state) {
        static const uint8_t expect[] = { 0x00, 0x00, 0x00, 0x00, 0x00 };
        uint8_t buf[SQP_CHALLENGE_REQUEST_SIZE + 1];

        memset(buf, 0xa5, sizeof(buf));
        assert_int_equal(sqp_challenge_request(buf), sizeof(expect));
        assert_memory_equal(buf, expect, sizeof(expect));
        assert_int_equal(buf[sizeof(expect)], 0xa5);
}

static void test_query_request(_unused_ void **state) {
        static const uint8_t expect[] = { 0x01, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x01, 0x01 };
        uint8_t buf[SQP_QUERY_REQUEST_SIZE + 1];

        memset(buf, 0xa5, sizeof(buf));
        assert_int_equal(sqp_query_request(CHALLENGE, buf), sizeof(expect));
        assert_memory_equal(buf, expect, sizeof(expect));
        assert_int_equal(buf[sizeof(expect)], 0xa5);
}

static void test_parse_challenge(_unused_ void **state) {
        static const uint8_t reply[] = { 0x00, 0x12, 0x34, 0x56, 0x78 };
        static const uint8_t longer[] = { 0x00, 0xff, 0xff, 0xff, 0xfe, 0x01, 0x02 };
        static const uint8_t wrong_type[] = { 0x01, 0x12, 0x34, 0x56, 0x78 };
        uint32_t c = 0;

        assert_int_equal(sqp_parse_challenge(reply, sizeof(reply), &c), 0);
        assert_int_equal(c, 0x12345678);
        /* Trailing bytes are ignored. */
        assert_int_equal(sqp_parse_challenge(longer, sizeof(longer), &c), 0);
        assert_int_equal(c, 0xfffffffe);

        c = 42;
        for (size_t len = 0; len < sizeof(reply); len++)
                assert_int_equal(sqp_parse_challenge(reply, len, &c), -EBADMSG);
        assert_int_equal(sqp_parse_challenge(NULL, 0, &c), -EBADMSG);
        assert_int_equal(sqp_parse_challenge(wrong_type, sizeof(wrong_type), &c), -EBADMSG);
        assert_int_equal(c, 42);
}

static void test_parse_query(_unused_ void **state) {
        uint8_t buf[sizeof(info_reply) + 3];
        SqpInfo info;

        assert_int_equal(sqp_parse_query(info_reply, sizeof(info_reply), CHALLENGE, &info), 0);
        assert_int_equal(info.players, 3);
        assert_int_equal(info.max_players, 16);
        assert_string_equal(info.name, "Test Server");
        assert_string_equal(info.game_type, "dm");
        assert_string_equal(info.build_id, "1.0");
        assert_string_equal(info.map, "dust");
        assert_int_equal(info.port, 7777);

        /* Unity's own responder answers with version 0; other versions are not ours to judge. */
        memcpy(buf, info_reply, sizeof(info_reply));
        buf[OFF_VERSION] = 0x00;
        buf[OFF_VERSION + 1] = 0x00;
        memset(&info, 0, sizeof(info));
        assert_int_equal(sqp_parse_query(buf, sizeof(info_reply), CHALLENGE, &info), 0);
        assert_string_equal(info.name, "Test Server");
        assert_int_equal(info.port, 7777);
        buf[OFF_VERSION] = 0xff;
        buf[OFF_VERSION + 1] = 0xff;
        assert_int_equal(sqp_parse_query(buf, sizeof(info_reply), CHALLENGE, &info), 0);

        /* Bytes after the announced payload are ignored. */
        memcpy(buf, info_reply, sizeof(info_reply));
        memset(buf + sizeof(info_reply), 0xff, 3);
        memset(&info, 0, sizeof(info));
        assert_int_equal(sqp_parse_query(buf, sizeof(buf), CHALLENGE, &info), 0);
        assert_string_equal(info.map, "dust");
        assert_int_equal(info.port, 7777);
}

/* Every prefix of the reply is incomplete: the payload length always runs past it. */
static void test_query_truncated(_unused_ void **state) {
        for (size_t len = 0; len < sizeof(info_reply); len++)
                assert_query_fails(info_reply, len, CHALLENGE);
        assert_query_fails(NULL, 0, CHALLENGE);
}

static void test_query_header_hostile(_unused_ void **state) {
        uint8_t buf[sizeof(info_reply)];

        /* An answer to another challenge: an earlier query's, answered late (stale). */
        assert_query_fails_with(info_reply, sizeof(info_reply), CHALLENGE - 1, -ESTALE);
        assert_query_fails_with(info_reply, sizeof(info_reply), 0, -ESTALE);

        for (unsigned type = 0; type < 256; type++) {
                if (type == 0x01)
                        continue;
                memcpy(buf, info_reply, sizeof(buf));
                buf[0] = (uint8_t) type;
                assert_query_fails(buf, sizeof(buf), CHALLENGE);
        }

        /* Multi-packet replies are not reassembled. */
        memcpy(buf, info_reply, sizeof(buf));
        buf[OFF_LAST_PACKET] = 0x01;
        assert_query_fails(buf, sizeof(buf), CHALLENGE);
        memcpy(buf, info_reply, sizeof(buf));
        buf[OFF_PACKET] = 0x01;
        assert_query_fails(buf, sizeof(buf), CHALLENGE);
}

static void set_be16(uint8_t *p, uint16_t v) {
        p[0] = (uint8_t) (v >> 8);
        p[1] = (uint8_t) v;
}

static void set_be32(uint8_t *p, uint32_t v) {
        set_be16(p, (uint16_t) (v >> 16));
        set_be16(p + 2, (uint16_t) v);
}

static void test_query_lying_lengths(_unused_ void **state) {
        uint8_t buf[sizeof(info_reply) + 4];
        SqpInfo info;

        /* Payload length one past the bytes present, and at its maximum. */
        memcpy(buf, info_reply, sizeof(info_reply));
        set_be16(buf + OFF_PAYLOAD_LEN, 0x23);
        assert_query_fails(buf, sizeof(info_reply), CHALLENGE);
        set_be16(buf + OFF_PAYLOAD_LEN, 0xffff);
        assert_query_fails(buf, sizeof(info_reply), CHALLENGE);

        /* Payload too short for the chunk header, or for the chunk it carries. */
        for (uint16_t payload = 0; payload < 0x22; payload++) {
                set_be16(buf + OFF_PAYLOAD_LEN, payload);
                assert_query_fails(buf, sizeof(info_reply), CHALLENGE);
        }

        /* Chunk length past the payload (which is payload length - 4). */
        memcpy(buf, info_reply, sizeof(info_reply));
        set_be32(buf + OFF_CHUNK_LEN, 0x1f);
        assert_query_fails(buf, sizeof(info_reply), CHALLENGE);
        set_be32(buf + OFF_CHUNK_LEN, 0xffffffff);
        assert_query_fails(buf, sizeof(info_reply), CHALLENGE);
        set_be32(buf + OFF_CHUNK_LEN, 0x80000000);
        assert_query_fails(buf, sizeof(info_reply), CHALLENGE);

        /* Chunk too short for its fixed fields: every length below 30 cuts something off. */
        for (uint32_t chunk = 0; chunk < 0x1e; chunk++) {
                set_be32(buf + OFF_CHUNK_LEN, chunk);
                assert_query_fails(buf, sizeof(info_reply), CHALLENGE);
        }

        /* A string length past the end of everything. */
        memcpy(buf, info_reply, sizeof(info_reply));
        buf[OFF_NAME_LEN] = 0xff;
        assert_query_fails(buf, sizeof(info_reply), CHALLENGE);

        /* The map runs past the chunk into payload bytes that belong to no chunk: with the
         * payload bounding the read this would parse, so the chunk length must bound it. */
        memcpy(buf, info_reply, sizeof(info_reply));
        memset(buf + sizeof(info_reply), 0x00, 4);
        set_be16(buf + OFF_PAYLOAD_LEN, 0x26);
        assert_int_equal(sqp_parse_query(buf, sizeof(buf), CHALLENGE, &info), 0);
        buf[OFF_MAP_LEN] = 0x06;
        assert_query_fails(buf, sizeof(buf), CHALLENGE);
        /* ...and the same once the chunk length covers it. */
        set_be32(buf + OFF_CHUNK_LEN, 0x20);
        assert_int_equal(sqp_parse_query(buf, sizeof(buf), CHALLENGE, &info), 0);
        assert_string_equal(info.map, "dust?a");  /* 0x1e 0x61 was the port */
        assert_int_equal(info.port, 0);
}

/* Builds a reply around one chunk the way the protocol describes, independent of the encoder. */
static size_t build_reply(uint8_t *buf, const uint8_t *chunk, size_t chunk_len) {
        static const uint8_t header[] = { 0x01, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x01, 0x00, 0x00 };

        memcpy(buf, header, sizeof(header));
        set_be16(buf + OFF_PAYLOAD_LEN, (uint16_t) (chunk_len + 4));
        set_be32(buf + OFF_CHUNK_LEN, (uint32_t) chunk_len);
        memcpy(buf + OFF_CHUNK_LEN + 4, chunk, chunk_len);
        return OFF_CHUNK_LEN + 4 + chunk_len;
}

static void test_query_long_strings(_unused_ void **state) {
        uint8_t chunk[4 + 4 * 256 + 2], buf[SQP_QUERY_HEADER_SIZE + 4 + sizeof(chunk)];
        uint8_t *p = chunk + 4;
        SqpInfo info;
        char expect[256];
        size_t len;

        memset(chunk, 0, 4);
        for (int i = 0; i < 4; i++) {
                *p++ = 0xff;
                memset(p, 'a' + i, 255);
                p += 255;
        }
        set_be16(p, 0xffff);
        len = build_reply(buf, chunk, sizeof(chunk));
        assert_int_equal(sqp_parse_query(buf, len, CHALLENGE, &info), 0);

        memset(expect, 'a', 255);
        expect[255] = '\0';
        assert_string_equal(info.name, expect);
        memset(expect, 'd', 255);
        assert_string_equal(info.map, expect);
        assert_int_equal(info.port, 0xffff);

        for (size_t l = 0; l < len; l++)
                assert_query_fails(buf, l, CHALLENGE);
}

static void test_query_sanitized(_unused_ void **state) {
        static const uint8_t chunk[] = {
                0x00, 0x01, 0x00, 0x02,
                0x08, 'a', 0x01, 'b', 0x7f, 0x1f, 0x0a, 0xc3, 0xa9,  /* UTF-8 é kept */
                0x03, 0x00, 'x', 0x00,                              /* NULs in the middle */
                0x00,                                               /* empty */
                0x01, 0x1b,
                0x00, 0x00,
        };
        uint8_t buf[SQP_QUERY_HEADER_SIZE + 4 + sizeof(chunk)];
        SqpInfo info;
        size_t len;

        len = build_reply(buf, chunk, sizeof(chunk));
        assert_int_equal(sqp_parse_query(buf, len, CHALLENGE, &info), 0);
        assert_int_equal(info.players, 1);
        assert_int_equal(info.max_players, 2);
        assert_string_equal(info.name, "a?b???\xc3\xa9");
        assert_string_equal(info.game_type, "?x?");
        assert_string_equal(info.build_id, "");
        assert_string_equal(info.map, "?");
        assert_int_equal(info.port, 0);
}

static void test_encode(_unused_ void **state) {
        SqpInfo info = {
                .players = 3,
                .max_players = 16,
                .port = 7777,
                .name = "Test Server",
                .game_type = "dm",
                .build_id = "1.0",
                .map = "dust",
        };
        uint8_t buf[sizeof(info_reply) + 8];

        assert_int_equal(sqp_encode_info_response(CHALLENGE, 1, &info, buf, sizeof(buf)),
                         sizeof(info_reply));
        assert_memory_equal(buf, info_reply, sizeof(info_reply));

        assert_int_equal(sqp_encode_info_response(CHALLENGE, 1, &info, buf, sizeof(info_reply)),
                         sizeof(info_reply));
        for (size_t size = 0; size < sizeof(info_reply); size++)
                assert_int_equal(sqp_encode_info_response(CHALLENGE, 1, &info, buf, size),
                                 -ENOBUFS);

        memset(info.build_id, 'x', sizeof(info.build_id));
        assert_int_equal(sqp_encode_info_response(CHALLENGE, 1, &info, buf, sizeof(buf)),
                         -EINVAL);
}

static void test_round_trip(_unused_ void **state) {
        SqpInfo in[3] = {
                { .players = 0, .max_players = 0, .port = 0 },
                { .players = 65535, .max_players = 65535, .port = 65535, .name = "n",
                  .game_type = "g", .build_id = "b", .map = "m" },
                { .players = 7, .max_players = 64, .port = 9000, .name = "Srv \xe2\x98\x83",
                  .game_type = "ctf", .build_id = "2024.1-rc3", .map = "de_inferno" },
        };
        uint8_t buf[SQP_QUERY_HEADER_SIZE + 4 + 6 + 4 * SQP_STR_MAX];
        SqpInfo out;
        int n;

        memset(in[0].name, 'N', 255);
        memset(in[0].game_type, 'G', 255);
        memset(in[0].build_id, 'B', 255);
        memset(in[0].map, 'M', 255);

        for (size_t i = 0; i < ELEMENTSOF(in); i++)
                for (uint16_t version = 0; version < 3; version++) {
                        uint32_t c = (uint32_t) (i * 0x9e3779b9u);

                        n = sqp_encode_info_response(c, version, &in[i], buf, sizeof(buf));
                        assert_true(n > 0);
                        assert_int_equal(sqp_parse_query(buf, (size_t) n, c, &out), 0);
                        assert_info_equal(&out, &in[i]);
                }
}

/* xorshift64: fixed, libc-independent, so a failure reproduces everywhere. */
static uint64_t rng_next(uint64_t *s) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

static void check_fuzz_result(const uint8_t *buf, size_t len, uint32_t challenge) {
        SqpInfo info, before;
        int r;

        memset(&info, 0x5a, sizeof(info));
        before = info;
        r = sqp_parse_query(buf, len, challenge, &info);
        if (r < 0) {
                assert_int_equal(r, -EBADMSG);
                assert_memory_equal(&info, &before, sizeof(info));
                return;
        }
        assert_int_equal(r, 0);
        assert_clean_string(info.name, sizeof(info.name));
        assert_clean_string(info.game_type, sizeof(info.game_type));
        assert_clean_string(info.build_id, sizeof(info.build_id));
        assert_clean_string(info.map, sizeof(info.map));
}

static void test_fuzz_random(_unused_ void **state) {
        uint64_t seed = UINT64_C(0x5eed5eed5eed5eed);
        uint8_t buf[1500];
        uint32_t c;

        for (int iter = 0; iter < 100000; iter++) {
                size_t len = rng_next(&seed) % (sizeof(buf) + 1);

                for (size_t i = 0; i < len; i++)
                        buf[i] = (uint8_t) rng_next(&seed);
                /* Half of them get a header that passes, so the chunk parser sees them too. */
                if (iter % 2 == 0 && len >= SQP_QUERY_HEADER_SIZE) {
                        buf[0] = 0x01;
                        buf[OFF_PACKET] = buf[OFF_LAST_PACKET];
                        set_be16(buf + OFF_PAYLOAD_LEN,
                                 (uint16_t) (rng_next(&seed) % (len - SQP_QUERY_HEADER_SIZE + 1)));
                }
                c = len >= 5 ? (uint32_t) buf[1] << 24 | buf[2] << 16 | buf[3] << 8 | buf[4] : 0;
                check_fuzz_result(buf, len, c);
                (void) sqp_parse_challenge(buf, len, &c);
        }
}

static void test_fuzz_mutate(_unused_ void **state) {
        uint64_t seed = UINT64_C(0x0123456789abcdef);
        uint8_t buf[sizeof(info_reply)];

        for (int iter = 0; iter < 100000; iter++) {
                size_t len = sizeof(buf) - rng_next(&seed) % 4;
                unsigned flips = 1 + rng_next(&seed) % 4;

                memcpy(buf, info_reply, sizeof(buf));
                for (unsigned f = 0; f < flips; f++) {
                        /* Keep the challenge, so the damage lands past the header. */
                        size_t at = 9 + rng_next(&seed) % (sizeof(buf) - 9);
                        buf[at] = (uint8_t) rng_next(&seed);
                }
                check_fuzz_result(buf, len, CHALLENGE);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_challenge_request),
                cmocka_unit_test(test_query_request),
                cmocka_unit_test(test_parse_challenge),
                cmocka_unit_test(test_parse_query),
                cmocka_unit_test(test_query_truncated),
                cmocka_unit_test(test_query_header_hostile),
                cmocka_unit_test(test_query_lying_lengths),
                cmocka_unit_test(test_query_long_strings),
                cmocka_unit_test(test_query_sanitized),
                cmocka_unit_test(test_encode),
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_fuzz_random),
                cmocka_unit_test(test_fuzz_mutate),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
