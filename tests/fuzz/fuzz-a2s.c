/* SPDX-License-Identifier: MIT */
/* A2S reply parser. The input is one reply datagram (S2C_CHALLENGE or A2S_INFO). */
#include <errno.h>
#include <string.h>

#include "a2s.h"
#include "fuzz.h"

static void assert_info_clean(const A2sInfo *info) {
        FUZZ_ASSERT_CLEAN_STRING(info->name);
        FUZZ_ASSERT_CLEAN_STRING(info->map);
        FUZZ_ASSERT_CLEAN_STRING(info->folder);
        FUZZ_ASSERT_CLEAN_STRING(info->game);
        FUZZ_ASSERT_CLEAN_STRING(info->version);
        FUZZ_ASSERT_CLEAN_STRING(info->keywords);
}

static bool info_equal(const A2sInfo *a, const A2sInfo *b) {
        return a->protocol == b->protocol && a->players == b->players &&
               a->max_players == b->max_players && a->bots == b->bots &&
               a->server_type == b->server_type && a->environment == b->environment &&
               a->visibility == b->visibility && a->vac == b->vac && a->appid == b->appid &&
               a->has_port == b->has_port && (!a->has_port || a->port == b->port) &&
               a->steam_id == b->steam_id && a->game_id == b->game_id &&
               strcmp(a->name, b->name) == 0 && strcmp(a->map, b->map) == 0 &&
               strcmp(a->folder, b->folder) == 0 && strcmp(a->game, b->game) == 0 &&
               strcmp(a->version, b->version) == 0 && strcmp(a->keywords, b->keywords) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const uint8_t sentinel[A2S_CHALLENGE_SIZE] = { 0xa5, 0xa5, 0xa5, 0xa5 };
        uint8_t challenge[A2S_CHALLENGE_SIZE], buf[4096];
        A2sInfo info, untouched, again;
        A2sReplyKind kind = (A2sReplyKind) 0x5a, kind2;
        int r, n;

        memcpy(challenge, sentinel, sizeof(challenge));
        memset(&info, 0x5a, sizeof(info));
        memcpy(&untouched, &info, sizeof(info));

        r = a2s_parse_reply(data, size, &kind, challenge, &info);
        FUZZ_ASSERT(r == 0 || r == -EBADMSG);
        if (r < 0) {
                /* Nothing is written on failure. */
                FUZZ_ASSERT(kind == (A2sReplyKind) 0x5a);
                FUZZ_ASSERT(memcmp(challenge, sentinel, sizeof(challenge)) == 0);
                FUZZ_ASSERT(memcmp(&info, &untouched, sizeof(info)) == 0);
                return 0;
        }
        FUZZ_ASSERT(size >= 5 && memcmp(data, "\xff\xff\xff\xff", 4) == 0);

        if (kind == A2S_REPLY_CHALLENGE) {
                FUZZ_ASSERT(size >= 9 && data[4] == 0x41);
                FUZZ_ASSERT(memcmp(challenge, data + 5, sizeof(challenge)) == 0);
                FUZZ_ASSERT(memcmp(&info, &untouched, sizeof(info)) == 0);
                return 0;
        }
        FUZZ_ASSERT(kind == A2S_REPLY_INFO && data[4] == 0x49);
        FUZZ_ASSERT(memcmp(challenge, sentinel, sizeof(challenge)) == 0);
        assert_info_clean(&info);

        /* Encoding what was parsed and parsing that again gives the same info. */
        n = a2s_encode_info(&info, buf, sizeof(buf));
        FUZZ_ASSERT(n > 0 && (size_t) n <= sizeof(buf));
        r = a2s_parse_reply(buf, (size_t) n, &kind2, challenge, &again);
        FUZZ_ASSERT(r == 0 && kind2 == A2S_REPLY_INFO);
        FUZZ_ASSERT(info_equal(&info, &again));
        return 0;
}
