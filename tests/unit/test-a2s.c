/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "a2s.h"
#include "macro.h"

/* The replies below are written out by hand from the protocol description, not produced by
 * the encoder. */

/* Protocol 17, "Test Server", "dust", "cstrike", "Counter-Strike", appid 240, 3/16 players,
 * 0 bots, dedicated, Linux, public, VAC, "1.0.0.0", then EDF 0x80 with port 27015. */
static const uint8_t info_port[] = {
        0xff, 0xff, 0xff, 0xff, 0x49,
        0x11,
        'T', 'e', 's', 't', ' ', 'S', 'e', 'r', 'v', 'e', 'r', 0x00,
        'd', 'u', 's', 't', 0x00,
        'c', 's', 't', 'r', 'i', 'k', 'e', 0x00,
        'C', 'o', 'u', 'n', 't', 'e', 'r', '-', 'S', 't', 'r', 'i', 'k', 'e', 0x00,
        0xf0, 0x00,                     /* appid 240 */
        0x03, 0x10, 0x00,               /* players, max players, bots */
        'd', 'l', 0x00, 0x01,           /* server type, environment, visibility, VAC */
        '1', '.', '0', '.', '0', '.', '0', 0x00,
        0x80,                           /* EDF: game port */
        0x87, 0x69,                     /* 27015 */
};
/* Where the version string ends: a reply cut exactly there is an old server without EDF. */
#define INFO_PORT_VERSION_END 63

/* Protocol 17, "srv", "map", "tf", "Team Fortress", appid 440, 0/24, 2 bots, listen, Windows,
 * private, no VAC, "7.1", then EDF 0x30: steam ID 0x0123456789abcdef, keywords "secure,mp". */
static const uint8_t info_steamid_keywords[] = {
        0xff, 0xff, 0xff, 0xff, 0x49,
        0x11,
        's', 'r', 'v', 0x00,
        'm', 'a', 'p', 0x00,
        't', 'f', 0x00,
        'T', 'e', 'a', 'm', ' ', 'F', 'o', 'r', 't', 'r', 'e', 's', 's', 0x00,
        0xb8, 0x01,                     /* appid 440 */
        0x00, 0x18, 0x02,
        'l', 'w', 0x01, 0x00,
        '7', '.', '1', 0x00,
        0x30,                           /* EDF: steam ID, keywords */
        0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01,
        's', 'e', 'c', 'u', 'r', 'e', ',', 'm', 'p', 0x00,
};
#define INFO_STEAMID_KEYWORDS_VERSION_END 44

/* Every EDF field: port 7777, steam ID 1, spectator port 27020 "SourceTV", keywords "k",
 * game ID 730; short strings everywhere else. */
static const uint8_t info_all_edf[] = {
        0xff, 0xff, 0xff, 0xff, 0x49,
        0x30,
        'n', 0x00, 'm', 0x00, 'f', 0x00, 'g', 0x00,
        0xda, 0x02,                     /* appid 730 */
        0x01, 0x02, 0x03,
        'p', 'o', 0x00, 0x01,
        'v', 0x00,
        0xf1,                           /* EDF: all of them */
        0x61, 0x1e,                     /* port 7777 */
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x8c, 0x69,                     /* spectator port 27020 */
        'S', 'o', 'u', 'r', 'c', 'e', 'T', 'V', 0x00,
        'k', 0x00,
        0xda, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};
#define INFO_ALL_EDF_VERSION_END 25

static const uint8_t challenge_reply[] = { 0xff, 0xff, 0xff, 0xff, 0x41, 0x0a, 0x0b, 0x0c, 0x0d };

static void assert_info_equal(const A2sInfo *a, const A2sInfo *b) {
        assert_int_equal(a->protocol, b->protocol);
        assert_int_equal(a->players, b->players);
        assert_int_equal(a->max_players, b->max_players);
        assert_int_equal(a->bots, b->bots);
        assert_int_equal(a->server_type, b->server_type);
        assert_int_equal(a->environment, b->environment);
        assert_int_equal(a->visibility, b->visibility);
        assert_int_equal(a->vac, b->vac);
        assert_int_equal(a->appid, b->appid);
        assert_int_equal(a->has_port, b->has_port);
        assert_int_equal(a->port, b->port);
        assert_string_equal(a->name, b->name);
        assert_string_equal(a->map, b->map);
        assert_string_equal(a->folder, b->folder);
        assert_string_equal(a->game, b->game);
        assert_string_equal(a->version, b->version);
        assert_string_equal(a->keywords, b->keywords);
        assert_true(a->steam_id == b->steam_id);
        assert_true(a->game_id == b->game_id);
}

/* Parses and returns the result; on failure checks that no output was touched. */
static int parse(const uint8_t *buf, size_t len, A2sReplyKind *ret_kind, uint8_t *ret_challenge,
                 A2sInfo *ret_info) {
        A2sReplyKind kind = (A2sReplyKind) 77;
        uint8_t challenge[A2S_CHALLENGE_SIZE] = { 0xa5, 0xa5, 0xa5, 0xa5 };
        A2sInfo info, before;
        int r;

        memset(&info, 0xa5, sizeof(info));
        before = info;
        r = a2s_parse_reply(buf, len, &kind, challenge, &info);
        if (r < 0) {
                assert_int_equal(r, -EBADMSG);
                assert_int_equal(kind, 77);
                assert_memory_equal(challenge, "\xa5\xa5\xa5\xa5", 4);
                assert_memory_equal(&info, &before, sizeof(info));
                return r;
        }
        assert_int_equal(r, 0);
        if (kind == A2S_REPLY_CHALLENGE)
                assert_memory_equal(&info, &before, sizeof(info));
        else {
                assert_int_equal(kind, A2S_REPLY_INFO);
                assert_memory_equal(challenge, "\xa5\xa5\xa5\xa5", 4);
        }
        if (ret_kind)
                *ret_kind = kind;
        if (ret_challenge)
                memcpy(ret_challenge, challenge, sizeof(challenge));
        if (ret_info)
                *ret_info = info;
        return r;
}

static int parse_info(const uint8_t *buf, size_t len, A2sInfo *ret) {
        A2sReplyKind kind;
        int r;

        r = parse(buf, len, &kind, NULL, ret);
        if (r == 0)
                assert_int_equal(kind, A2S_REPLY_INFO);
        return r;
}

static void test_info_request(_unused_ void **state) {
        static const uint8_t expect[] = {
                0xff, 0xff, 0xff, 0xff, 0x54,
                0x53, 0x6f, 0x75, 0x72, 0x63, 0x65, 0x20,               /* "Source " */
                0x45, 0x6e, 0x67, 0x69, 0x6e, 0x65, 0x20,               /* "Engine " */
                0x51, 0x75, 0x65, 0x72, 0x79, 0x00,                     /* "Query\0" */
                0x0a, 0x0b, 0x0c, 0x0d,
        };
        static const uint8_t challenge[] = { 0x0a, 0x0b, 0x0c, 0x0d };
        uint8_t buf[A2S_INFO_REQUEST_MAX + 1];

        memset(buf, 0xa5, sizeof(buf));
        assert_int_equal(a2s_info_request(NULL, buf), 25);
        assert_memory_equal(buf, expect, 25);
        assert_int_equal(buf[25], 0xa5);

        memset(buf, 0xa5, sizeof(buf));
        assert_int_equal(a2s_info_request(challenge, buf), 29);
        assert_memory_equal(buf, expect, 29);
        assert_int_equal(buf[29], 0xa5);
}

static void test_parse_challenge(_unused_ void **state) {
        uint8_t buf[sizeof(challenge_reply) + 2], challenge[4];
        A2sReplyKind kind;

        assert_int_equal(parse(challenge_reply, sizeof(challenge_reply), &kind, challenge, NULL),
                         0);
        assert_int_equal(kind, A2S_REPLY_CHALLENGE);
        assert_memory_equal(challenge, "\x0a\x0b\x0c\x0d", 4);

        /* Trailing bytes are ignored. */
        memcpy(buf, challenge_reply, sizeof(challenge_reply));
        buf[9] = buf[10] = 0xee;
        assert_int_equal(parse(buf, sizeof(buf), &kind, challenge, NULL), 0);
        assert_int_equal(kind, A2S_REPLY_CHALLENGE);

        for (size_t len = 0; len < sizeof(challenge_reply); len++)
                assert_int_equal(parse(challenge_reply, len, NULL, NULL, NULL), -EBADMSG);
        assert_int_equal(parse(NULL, 0, NULL, NULL, NULL), -EBADMSG);
}

static void test_parse_info_port(_unused_ void **state) {
        A2sInfo info;

        assert_int_equal(sizeof(info_port), INFO_PORT_VERSION_END + 3);
        assert_int_equal(parse_info(info_port, sizeof(info_port), &info), 0);
        assert_int_equal(info.protocol, 17);
        assert_string_equal(info.name, "Test Server");
        assert_string_equal(info.map, "dust");
        assert_string_equal(info.folder, "cstrike");
        assert_string_equal(info.game, "Counter-Strike");
        assert_int_equal(info.appid, 240);
        assert_int_equal(info.players, 3);
        assert_int_equal(info.max_players, 16);
        assert_int_equal(info.bots, 0);
        assert_int_equal(info.server_type, 'd');
        assert_int_equal(info.environment, 'l');
        assert_int_equal(info.visibility, 0);
        assert_int_equal(info.vac, 1);
        assert_string_equal(info.version, "1.0.0.0");
        assert_true(info.has_port);
        assert_int_equal(info.port, 27015);
        assert_string_equal(info.keywords, "");
        assert_true(info.steam_id == 0);
        assert_true(info.game_id == 0);
}

static void test_parse_info_steamid_keywords(_unused_ void **state) {
        A2sInfo info;

        assert_int_equal(sizeof(info_steamid_keywords), INFO_STEAMID_KEYWORDS_VERSION_END + 19);
        assert_int_equal(parse_info(info_steamid_keywords, sizeof(info_steamid_keywords), &info),
                         0);
        assert_int_equal(info.protocol, 17);
        assert_string_equal(info.name, "srv");
        assert_string_equal(info.map, "map");
        assert_string_equal(info.folder, "tf");
        assert_string_equal(info.game, "Team Fortress");
        assert_int_equal(info.appid, 440);
        assert_int_equal(info.players, 0);
        assert_int_equal(info.max_players, 24);
        assert_int_equal(info.bots, 2);
        assert_int_equal(info.server_type, 'l');
        assert_int_equal(info.environment, 'w');
        assert_int_equal(info.visibility, 1);
        assert_int_equal(info.vac, 0);
        assert_string_equal(info.version, "7.1");
        assert_false(info.has_port);
        assert_int_equal(info.port, 0);
        assert_true(info.steam_id == UINT64_C(0x0123456789abcdef));
        assert_string_equal(info.keywords, "secure,mp");
        assert_true(info.game_id == 0);
}

static void test_parse_info_all_edf(_unused_ void **state) {
        uint8_t buf[sizeof(info_all_edf) + 5];
        A2sInfo info;

        assert_int_equal(sizeof(info_all_edf), INFO_ALL_EDF_VERSION_END + 32);
        assert_int_equal(parse_info(info_all_edf, sizeof(info_all_edf), &info), 0);
        assert_int_equal(info.protocol, 0x30);
        assert_string_equal(info.name, "n");
        assert_string_equal(info.version, "v");
        assert_int_equal(info.appid, 730);
        assert_int_equal(info.players, 1);
        assert_int_equal(info.max_players, 2);
        assert_int_equal(info.bots, 3);
        assert_int_equal(info.server_type, 'p');
        assert_int_equal(info.environment, 'o');
        assert_true(info.has_port);
        assert_int_equal(info.port, 7777);
        assert_true(info.steam_id == 1);
        assert_string_equal(info.keywords, "k");
        assert_true(info.game_id == 730);

        /* Bytes after the last announced field are ignored. */
        memcpy(buf, info_all_edf, sizeof(info_all_edf));
        memset(buf + sizeof(info_all_edf), 0xee, 5);
        assert_int_equal(parse_info(buf, sizeof(buf), &info), 0);
        assert_true(info.game_id == 730);
}

/* Each prefix must fail, except the one that ends right after the version string: that is a
 * complete reply from a server that sends no extra data. */
static void check_truncations(const uint8_t *reply, size_t size, size_t version_end) {
        A2sInfo info;

        for (size_t len = 0; len < size; len++) {
                if (len != version_end) {
                        assert_int_equal(parse_info(reply, len, NULL), -EBADMSG);
                        continue;
                }
                assert_int_equal(parse_info(reply, len, &info), 0);
                assert_false(info.has_port);
                assert_int_equal(info.port, 0);
                assert_true(info.steam_id == 0);
                assert_true(info.game_id == 0);
                assert_string_equal(info.keywords, "");
        }
}

static void test_info_truncated(_unused_ void **state) {
        check_truncations(info_port, sizeof(info_port), INFO_PORT_VERSION_END);
        check_truncations(info_steamid_keywords, sizeof(info_steamid_keywords),
                          INFO_STEAMID_KEYWORDS_VERSION_END);
        check_truncations(info_all_edf, sizeof(info_all_edf), INFO_ALL_EDF_VERSION_END);
}

static void test_info_edf(_unused_ void **state) {
        uint8_t buf[INFO_PORT_VERSION_END + 16];
        A2sInfo info;

        memcpy(buf, info_port, INFO_PORT_VERSION_END);

        /* An EDF byte announcing nothing is complete on its own. */
        buf[INFO_PORT_VERSION_END] = 0x00;
        assert_int_equal(parse_info(buf, INFO_PORT_VERSION_END + 1, &info), 0);
        assert_false(info.has_port);

        /* Every announced field must be there in full. */
        buf[INFO_PORT_VERSION_END] = 0x80;
        buf[INFO_PORT_VERSION_END + 1] = 0x87;
        assert_int_equal(parse_info(buf, INFO_PORT_VERSION_END + 1, NULL), -EBADMSG);
        assert_int_equal(parse_info(buf, INFO_PORT_VERSION_END + 2, NULL), -EBADMSG);
        buf[INFO_PORT_VERSION_END] = 0x10;
        memset(buf + INFO_PORT_VERSION_END + 1, 0x11, 7);
        assert_int_equal(parse_info(buf, INFO_PORT_VERSION_END + 8, NULL), -EBADMSG);
        buf[INFO_PORT_VERSION_END] = 0x01;
        assert_int_equal(parse_info(buf, INFO_PORT_VERSION_END + 8, NULL), -EBADMSG);
        buf[INFO_PORT_VERSION_END] = 0x20;
        memcpy(buf + INFO_PORT_VERSION_END + 1, "kw", 2);  /* no NUL */
        assert_int_equal(parse_info(buf, INFO_PORT_VERSION_END + 3, NULL), -EBADMSG);
        buf[INFO_PORT_VERSION_END] = 0x40;
        memcpy(buf + INFO_PORT_VERSION_END + 1, "\x8c\x69tv", 4);  /* name without NUL */
        assert_int_equal(parse_info(buf, INFO_PORT_VERSION_END + 5, NULL), -EBADMSG);
        buf[INFO_PORT_VERSION_END + 5] = 0x00;
        assert_int_equal(parse_info(buf, INFO_PORT_VERSION_END + 6, &info), 0);

        /* Bits nobody defined carry no data here. */
        buf[INFO_PORT_VERSION_END] = 0x0e;
        assert_int_equal(parse_info(buf, INFO_PORT_VERSION_END + 1, &info), 0);
}

static void test_info_the_ship(_unused_ void **state) {
        static const uint8_t reply[] = {
                0xff, 0xff, 0xff, 0xff, 0x49,
                0x07,
                's', 0x00, 'm', 0x00, 'f', 0x00, 'g', 0x00,
                0x60, 0x09,                     /* appid 2400 */
                0x01, 0x02, 0x00,
                'd', 'w', 0x00, 0x00,
                0x01, 0x03, 0x3c,               /* mode, witnesses, duration */
                '1', 0x00,
        };
        A2sInfo info;

        assert_int_equal(parse_info(reply, sizeof(reply), &info), 0);
        assert_int_equal(info.appid, 2400);
        assert_string_equal(info.version, "1");
        for (size_t len = 0; len < sizeof(reply); len++)
                assert_int_equal(parse_info(reply, len, NULL), -EBADMSG);
}

static void test_reply_header_hostile(_unused_ void **state) {
        uint8_t buf[sizeof(info_port)];

        /* A split reply. */
        memcpy(buf, info_port, sizeof(buf));
        buf[0] = 0xfe;
        assert_int_equal(parse(buf, sizeof(buf), NULL, NULL, NULL), -EBADMSG);
        memcpy(buf, challenge_reply, sizeof(challenge_reply));
        buf[0] = 0xfe;
        assert_int_equal(parse(buf, sizeof(challenge_reply), NULL, NULL, NULL), -EBADMSG);

        for (size_t i = 0; i < 4; i++) {
                memcpy(buf, info_port, sizeof(buf));
                buf[i] = 0x00;
                assert_int_equal(parse(buf, sizeof(buf), NULL, NULL, NULL), -EBADMSG);
        }

        /* Every other reply type: GoldSrc info (0x6d), players (0x44), rules (0x45)... */
        for (unsigned type = 0; type < 256; type++) {
                if (type == 0x41 || type == 0x49)
                        continue;
                memcpy(buf, info_port, sizeof(buf));
                buf[4] = (uint8_t) type;
                assert_int_equal(parse(buf, sizeof(buf), NULL, NULL, NULL), -EBADMSG);
        }
}

/* Builds a reply whose name is n bytes of c and whose other strings are empty. */
static size_t build_named(uint8_t *buf, size_t size, char c, size_t n) {
        static const uint8_t tail[] = {
                0x00, 0x00, 0x00,               /* map, folder, game */
                0x00, 0x00, 0x00, 0x00, 0x00, 'd', 'l', 0x00, 0x00,
                0x00,                           /* version */
        };

        assert_true(6 + n + 1 + sizeof(tail) <= size);
        memcpy(buf, "\xff\xff\xff\xff\x49\x11", 6);
        memset(buf + 6, c, n);
        buf[6 + n] = 0x00;
        memcpy(buf + 6 + n + 1, tail, sizeof(tail));
        return 6 + n + 1 + sizeof(tail);
}

static void test_info_long_strings(_unused_ void **state) {
        uint8_t buf[2048];
        char expect[A2S_STR_MAX];
        A2sInfo info;
        size_t len;

        memset(expect, 'x', A2S_STR_MAX - 1);
        expect[A2S_STR_MAX - 1] = '\0';

        /* 255 bytes fit exactly; 256 and more are cut to 255. */
        len = build_named(buf, sizeof(buf), 'x', 255);
        assert_int_equal(parse_info(buf, len, &info), 0);
        assert_string_equal(info.name, expect);
        assert_string_equal(info.map, "");
        assert_int_equal(info.server_type, 'd');

        len = build_named(buf, sizeof(buf), 'x', 254);
        assert_int_equal(parse_info(buf, len, &info), 0);
        assert_int_equal(strlen(info.name), 254);

        for (size_t n = 256; n < 2000; n += 581) {
                len = build_named(buf, sizeof(buf), 'x', n);
                assert_int_equal(parse_info(buf, len, &info), 0);
                assert_string_equal(info.name, expect);
                /* The cut string is still skipped in full: what follows is read right. */
                assert_string_equal(info.map, "");
                assert_int_equal(info.server_type, 'd');
                assert_int_equal(info.environment, 'l');
        }

        /* A name that never ends. */
        memcpy(buf, "\xff\xff\xff\xff\x49\x11", 6);
        memset(buf + 6, 'x', sizeof(buf) - 6);
        assert_int_equal(parse_info(buf, sizeof(buf), NULL), -EBADMSG);
}

static void test_info_sanitized(_unused_ void **state) {
        static const uint8_t reply[] = {
                0xff, 0xff, 0xff, 0xff, 0x49,
                0x11,
                'a', '\t', 'b', 0x1b, '[', '3', '1', 'm', 0x7f, 0x01, 0xc3, 0xa9, 0x00,
                0x1f, 0x00,
                0x0a, 0x0d, 0x00,
                0x00,
                0x00, 0x00, 0x00, 0x00, 0x00, 'd', 'l', 0x00, 0x00,
                0x00,
                0x20,
                'a', 0x02, 'b', 0x00,
        };
        A2sInfo info;

        assert_int_equal(parse_info(reply, sizeof(reply), &info), 0);
        assert_string_equal(info.name, "a?b?[31m??\xc3\xa9");  /* UTF-8 é kept */
        assert_string_equal(info.map, "?");
        assert_string_equal(info.folder, "??");
        assert_string_equal(info.game, "");
        assert_string_equal(info.version, "");
        assert_string_equal(info.keywords, "a?b");
}

static void test_encode(_unused_ void **state) {
        A2sInfo info = {
                .protocol = 17,
                .name = "Test Server",
                .map = "dust",
                .folder = "cstrike",
                .game = "Counter-Strike",
                .appid = 240,
                .players = 3,
                .max_players = 16,
                .bots = 0,
                .server_type = 'd',
                .environment = 'l',
                .visibility = 0,
                .vac = 1,
                .version = "1.0.0.0",
                .has_port = true,
                .port = 27015,
        };
        uint8_t buf[sizeof(info_port) + 8];

        assert_int_equal(a2s_encode_info(&info, buf, sizeof(buf)), sizeof(info_port));
        assert_memory_equal(buf, info_port, sizeof(info_port));
        assert_int_equal(a2s_encode_info(&info, buf, sizeof(info_port)), sizeof(info_port));
        for (size_t size = 0; size < sizeof(info_port); size++)
                assert_int_equal(a2s_encode_info(&info, buf, size), -ENOBUFS);

        /* No extra data, no EDF byte. */
        info.has_port = false;
        assert_int_equal(a2s_encode_info(&info, buf, sizeof(buf)), INFO_PORT_VERSION_END);
        assert_memory_equal(buf, info_port, INFO_PORT_VERSION_END);

        memset(info.keywords, 'k', sizeof(info.keywords));
        assert_int_equal(a2s_encode_info(&info, buf, sizeof(buf)), -EINVAL);
}

static void test_round_trip(_unused_ void **state) {
        A2sInfo in[5] = {
                {},
                { .name = "only keywords", .keywords = "a,b" },
                { .protocol = 17, .name = "Srv \xe2\x98\x83", .map = "de_dust2", .folder = "csgo",
                  .game = "Counter-Strike: Global Offensive", .appid = 730, .players = 10,
                  .max_players = 10, .bots = 1, .server_type = 'd', .environment = 'l',
                  .visibility = 0, .vac = 1, .version = "1.38.7.9", .has_port = true,
                  .port = 27015, .steam_id = UINT64_C(90071992547409920),
                  .keywords = "empty,secure", .game_id = 730 },
                { .protocol = 255, .players = 255, .max_players = 255, .bots = 255,
                  .server_type = 0xff, .environment = 0xff, .visibility = 0xff, .vac = 0xff,
                  .appid = 0xffff, .has_port = true, .port = 0xffff, .steam_id = UINT64_MAX,
                  .game_id = UINT64_MAX },
                { .appid = 2400, .name = "ship", .version = "v" },
        };
        uint8_t buf[8 + 6 * A2S_STR_MAX + 32];
        A2sInfo out;
        int n;

        memset(in[3].name, 'N', 255);
        memset(in[3].map, 'M', 255);
        memset(in[3].folder, 'F', 255);
        memset(in[3].game, 'G', 255);
        memset(in[3].version, 'V', 255);
        memset(in[3].keywords, 'K', 255);

        for (size_t i = 0; i < ELEMENTSOF(in); i++) {
                n = a2s_encode_info(&in[i], buf, sizeof(buf));
                assert_true(n > 0);
                assert_int_equal(parse_info(buf, (size_t) n, &out), 0);
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

static void assert_clean_string(const char *s) {
        size_t n = strnlen(s, A2S_STR_MAX);

        assert_true(n < A2S_STR_MAX);
        for (size_t i = 0; i < n; i++)
                assert_true((unsigned char) s[i] >= 0x20 && (unsigned char) s[i] != 0x7f);
}

static void check_fuzz_result(const uint8_t *buf, size_t len) {
        A2sReplyKind kind;
        A2sInfo info;

        if (parse(buf, len, &kind, NULL, &info) < 0 || kind != A2S_REPLY_INFO)
                return;
        assert_clean_string(info.name);
        assert_clean_string(info.map);
        assert_clean_string(info.folder);
        assert_clean_string(info.game);
        assert_clean_string(info.version);
        assert_clean_string(info.keywords);
        assert_true(info.has_port || info.port == 0);
}

static void test_fuzz_random(_unused_ void **state) {
        uint64_t seed = UINT64_C(0x5eed5eed5eed5eed);
        uint8_t buf[1500];

        for (int iter = 0; iter < 100000; iter++) {
                size_t len = rng_next(&seed) % (sizeof(buf) + 1);
                /* Most get a valid header so the body parser sees them; NULs are made common
                 * so strings end inside the buffer often enough to reach the EDF fields. */
                unsigned mode = iter % 4;

                for (size_t i = 0; i < len; i++) {
                        uint64_t v = rng_next(&seed);
                        buf[i] = mode >= 2 && v % 16 == 0 ? 0x00 : (uint8_t) (v >> 8);
                }
                if (mode >= 1 && len >= 5) {
                        memset(buf, 0xff, 4);
                        buf[4] = iter % 8 == 1 ? 0x41 : 0x49;
                }
                check_fuzz_result(buf, len);
        }
}

static void test_fuzz_mutate(_unused_ void **state) {
        static const struct {
                const uint8_t *reply;
                size_t size;
        } seeds[] = {
                { info_port, sizeof(info_port) },
                { info_steamid_keywords, sizeof(info_steamid_keywords) },
                { info_all_edf, sizeof(info_all_edf) },
        };
        uint64_t seed = UINT64_C(0x0123456789abcdef);
        uint8_t buf[128];

        for (int iter = 0; iter < 100000; iter++) {
                const uint8_t *reply = seeds[iter % ELEMENTSOF(seeds)].reply;
                size_t size = seeds[iter % ELEMENTSOF(seeds)].size;
                size_t len = size - rng_next(&seed) % 4;
                unsigned flips = 1 + rng_next(&seed) % 4;

                memcpy(buf, reply, size);
                for (unsigned f = 0; f < flips; f++) {
                        size_t at = 5 + rng_next(&seed) % (size - 5);
                        uint64_t v = rng_next(&seed);
                        buf[at] = v % 4 == 0 ? 0x00 : (uint8_t) (v >> 8);
                }
                check_fuzz_result(buf, len);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_info_request),
                cmocka_unit_test(test_parse_challenge),
                cmocka_unit_test(test_parse_info_port),
                cmocka_unit_test(test_parse_info_steamid_keywords),
                cmocka_unit_test(test_parse_info_all_edf),
                cmocka_unit_test(test_info_truncated),
                cmocka_unit_test(test_info_edf),
                cmocka_unit_test(test_info_the_ship),
                cmocka_unit_test(test_reply_header_hostile),
                cmocka_unit_test(test_info_long_strings),
                cmocka_unit_test(test_info_sanitized),
                cmocka_unit_test(test_encode),
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_fuzz_random),
                cmocka_unit_test(test_fuzz_mutate),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
