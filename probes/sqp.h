/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Unity's Server Query Protocol, ServerInfo only. All integers are big-endian. Pure: no I/O,
 * no logging; every reply byte is treated as hostile. */

#define SQP_STR_MAX 256                 /* a wire string is at most 255 bytes, plus our NUL */
#define SQP_CHALLENGE_REQUEST_SIZE 5
#define SQP_QUERY_REQUEST_SIZE 8
#define SQP_QUERY_HEADER_SIZE 11        /* type, challenge, version, packet, last packet, length */
#define SQP_VERSION 1
#define SQP_CHUNK_SERVER_INFO 0x01

typedef struct SqpInfo {
        uint16_t players;
        uint16_t max_players;
        uint16_t port;
        /* NUL-terminated; bytes < 0x20 and 0x7f replaced by '?', other bytes kept as sent
         * (so not necessarily valid UTF-8) */
        char name[SQP_STR_MAX];
        char game_type[SQP_STR_MAX];
        char build_id[SQP_STR_MAX];
        char map[SQP_STR_MAX];
} SqpInfo;

/* Writes the 5-byte ChallengeRequest; returns its size. */
size_t sqp_challenge_request(uint8_t buf[static SQP_CHALLENGE_REQUEST_SIZE]);

/* A ChallengeResponse: type 0 and a 4-byte challenge; trailing bytes are ignored. */
int sqp_parse_challenge(const uint8_t *buf, size_t len, uint32_t *ret_challenge);

/* Writes the 8-byte QueryRequest (version 1, ServerInfo chunk only); returns its size. */
size_t sqp_query_request(uint32_t challenge, uint8_t buf[static SQP_QUERY_REQUEST_SIZE]);

/* A single-packet QueryResponse to the given challenge whose payload starts with a ServerInfo
 * chunk. Any version is accepted: Unity's own responder answers with version 0. -ESTALE: a
 * query answer's header with another challenge (an answer to an earlier query); -EBADMSG on
 * anything malformed or a multi-packet reply. */
int sqp_parse_query(const uint8_t *buf, size_t len, uint32_t challenge, SqpInfo *ret);

/* Encodes a QueryResponse carrying info as its ServerInfo chunk (for tests and fixtures).
 * Returns the length written, -ENOBUFS if size is too small, -EINVAL if a string in info is
 * not NUL-terminated. Strings are written as they are, control bytes included. */
int sqp_encode_info_response(uint32_t challenge, uint16_t version, const SqpInfo *info,
                             uint8_t *buf, size_t size);
