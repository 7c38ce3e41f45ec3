/* SPDX-License-Identifier: MIT */
/* SQP ChallengeResponse and QueryResponse parsers. The input is one reply datagram. The
 * challenge the query parser expects is taken from the reply's own bytes 1-4, so that the
 * fuzzer gets past the challenge check; any other challenge must then be refused. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "sqp.h"

static uint32_t be32(const uint8_t *p) {
        return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
}

static void assert_info_clean(const SqpInfo *info) {
        FUZZ_ASSERT_CLEAN_STRING(info->name);
        FUZZ_ASSERT_CLEAN_STRING(info->game_type);
        FUZZ_ASSERT_CLEAN_STRING(info->build_id);
        FUZZ_ASSERT_CLEAN_STRING(info->map);
}

static bool info_equal(const SqpInfo *a, const SqpInfo *b) {
        return a->players == b->players && a->max_players == b->max_players &&
               a->port == b->port && strcmp(a->name, b->name) == 0 &&
               strcmp(a->game_type, b->game_type) == 0 && strcmp(a->build_id, b->build_id) == 0 &&
               strcmp(a->map, b->map) == 0;
}

static void fuzz_challenge(const uint8_t *data, size_t size) {
        uint32_t challenge = 0xa5a5a5a5;
        int r;

        r = sqp_parse_challenge(data, size, &challenge);
        FUZZ_ASSERT(r == 0 || r == -EBADMSG);
        if (r < 0) {
                FUZZ_ASSERT(challenge == 0xa5a5a5a5);
                return;
        }
        FUZZ_ASSERT(size >= 5 && data[0] == 0x00 && challenge == be32(data + 1));
}

static void fuzz_query(const uint8_t *data, size_t size) {
        SqpInfo info, again, untouched;
        uint8_t buf[2048];
        uint32_t challenge;
        uint16_t version;
        int r, n;

        if (size < 7)
                return;
        challenge = be32(data + 1);
        version = (uint16_t) (data[5] << 8 | data[6]);

        memset(&info, 0x5a, sizeof(info));
        memcpy(&untouched, &info, sizeof(info));
        r = sqp_parse_query(data, size, challenge, &info);
        FUZZ_ASSERT(r == 0 || r == -EBADMSG);
        if (r < 0) {
                FUZZ_ASSERT(memcmp(&info, &untouched, sizeof(info)) == 0);
                return;
        }
        assert_info_clean(&info);

        /* The challenge guards against spoofed and late replies: another one never matches
         * (a well-formed answer to another challenge is stale, -ESTALE). */
        FUZZ_ASSERT(sqp_parse_query(data, size, challenge + 1, &again) == -ESTALE);

        /* Encoding what was parsed and parsing that again gives the same ServerInfo. */
        n = sqp_encode_info_response(challenge, version, &info, buf, sizeof(buf));
        FUZZ_ASSERT(n > 0 && (size_t) n <= sizeof(buf));
        r = sqp_parse_query(buf, (size_t) n, challenge, &again);
        FUZZ_ASSERT(r == 0);
        FUZZ_ASSERT(info_equal(&info, &again));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        fuzz_challenge(data, size);
        fuzz_query(data, size);
        return 0;
}
