/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Valve's A2S_INFO query (Source engine), single-packet replies only. All integers are
 * little-endian. Pure: no I/O, no logging; every reply byte is treated as hostile. */

#define A2S_STR_MAX 256
#define A2S_CHALLENGE_SIZE 4
#define A2S_INFO_REQUEST_SIZE 25
#define A2S_INFO_REQUEST_MAX (A2S_INFO_REQUEST_SIZE + A2S_CHALLENGE_SIZE)

typedef struct A2sInfo {
        uint8_t protocol;
        uint8_t players;
        uint8_t max_players;
        uint8_t bots;
        uint8_t server_type;    /* 'd', 'l', 'p' as sent, not checked */
        uint8_t environment;    /* 'l', 'w', 'm', 'o' as sent, not checked */
        uint8_t visibility;
        uint8_t vac;
        uint16_t appid;
        uint16_t port;          /* from the extra data, valid when has_port */
        bool has_port;
        /* NUL-terminated, cut at A2S_STR_MAX - 1 bytes; bytes < 0x20 and 0x7f replaced by
         * '?', other bytes kept as sent (so not necessarily valid UTF-8). keywords is "" and
         * steam_id, game_id 0 when the reply does not carry them. */
        char name[A2S_STR_MAX];
        char map[A2S_STR_MAX];
        char folder[A2S_STR_MAX];
        char game[A2S_STR_MAX];
        char version[A2S_STR_MAX];
        char keywords[A2S_STR_MAX];
        uint64_t steam_id;
        uint64_t game_id;
} A2sInfo;

typedef enum A2sReplyKind {
        A2S_REPLY_CHALLENGE,    /* resend the request with the challenge appended */
        A2S_REPLY_INFO,
} A2sReplyKind;

/* Writes the A2S_INFO request, with the 4-byte challenge appended unless challenge is NULL.
 * Returns its size (25 or 29). */
size_t a2s_info_request(const uint8_t *challenge, uint8_t buf[static A2S_INFO_REQUEST_MAX]);

/* Parses an S2C_CHALLENGE or an A2S_INFO reply and sets *ret_kind. For a challenge only
 * ret_challenge is filled, for an info reply only *ret_info. -EBADMSG for anything else,
 * split packets (FE FF FF FF) included. Nothing is written on failure. */
int a2s_parse_reply(const uint8_t *buf, size_t len, A2sReplyKind *ret_kind,
                    uint8_t ret_challenge[static A2S_CHALLENGE_SIZE], A2sInfo *ret_info);

/* Encodes an A2S_INFO reply from info (for tests and fixtures). The extra data flag byte is
 * written only when there is extra data: has_port, a non-zero steam_id or game_id, non-empty
 * keywords. Returns the length written, -ENOBUFS if size is too small, -EINVAL if a string in
 * info is not NUL-terminated. */
int a2s_encode_info(const A2sInfo *info, uint8_t *buf, size_t size);
