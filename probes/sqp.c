/* SPDX-License-Identifier: MIT */
#include "macro.h"
#include "sqp.h"

#define SQP_TYPE_CHALLENGE 0x00
#define SQP_TYPE_QUERY 0x01

/* A bounded cursor over a reply: every read checks what is left first, so no length a server
 * sends can move it past the end. */
typedef struct SqpReader {
        const uint8_t *p;
        size_t left;
} SqpReader;

static bool read_u8(SqpReader *rd, uint8_t *ret) {
        if (rd->left < 1)
                return false;
        *ret = rd->p[0];
        rd->p++;
        rd->left--;
        return true;
}

static bool read_be16(SqpReader *rd, uint16_t *ret) {
        if (rd->left < 2)
                return false;
        *ret = (uint16_t) (rd->p[0] << 8 | rd->p[1]);
        rd->p += 2;
        rd->left -= 2;
        return true;
}

static bool read_be32(SqpReader *rd, uint32_t *ret) {
        if (rd->left < 4)
                return false;
        *ret = (uint32_t) rd->p[0] << 24 | (uint32_t) rd->p[1] << 16 |
               (uint32_t) rd->p[2] << 8 | (uint32_t) rd->p[3];
        rd->p += 4;
        rd->left -= 4;
        return true;
}

/* A u8 length and that many bytes. 255 bytes always fit, so nothing is ever cut. */
static bool read_str(SqpReader *rd, char dst[static SQP_STR_MAX]) {
        uint8_t n;

        if (!read_u8(rd, &n) || rd->left < n)
                return false;
        for (size_t i = 0; i < n; i++)
                dst[i] = (rd->p[i] < 0x20 || rd->p[i] == 0x7f) ? '?' : (char) rd->p[i];
        dst[n] = '\0';
        rd->p += n;
        rd->left -= n;
        return true;
}

static uint8_t *put_be16(uint8_t *p, uint16_t v) {
        p[0] = (uint8_t) (v >> 8);
        p[1] = (uint8_t) v;
        return p + 2;
}

static uint8_t *put_be32(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t) (v >> 24);
        p[1] = (uint8_t) (v >> 16);
        p[2] = (uint8_t) (v >> 8);
        p[3] = (uint8_t) v;
        return p + 4;
}

static uint8_t *put_str(uint8_t *p, const char *s, size_t n) {
        *p++ = (uint8_t) n;
        memcpy(p, s, n);
        return p + n;
}

size_t sqp_challenge_request(uint8_t buf[static SQP_CHALLENGE_REQUEST_SIZE]) {
        buf[0] = SQP_TYPE_CHALLENGE;
        (void) put_be32(buf + 1, 0);
        return SQP_CHALLENGE_REQUEST_SIZE;
}

int sqp_parse_challenge(const uint8_t *buf, size_t len, uint32_t *ret_challenge) {
        SqpReader rd = { buf, len };
        uint32_t challenge;
        uint8_t type;

        if (!read_u8(&rd, &type) || type != SQP_TYPE_CHALLENGE || !read_be32(&rd, &challenge))
                return -EBADMSG;
        *ret_challenge = challenge;
        return 0;
}

size_t sqp_query_request(uint32_t challenge, uint8_t buf[static SQP_QUERY_REQUEST_SIZE]) {
        uint8_t *p = buf;

        *p++ = SQP_TYPE_QUERY;
        p = put_be32(p, challenge);
        p = put_be16(p, SQP_VERSION);
        /* Unity's C# responder stays silent unless this byte is exactly ServerInfo. */
        *p = SQP_CHUNK_SERVER_INFO;
        return SQP_QUERY_REQUEST_SIZE;
}

int sqp_parse_query(const uint8_t *buf, size_t len, uint32_t challenge, SqpInfo *ret) {
        SqpReader rd = { buf, len }, chunk;
        SqpInfo info = {};
        uint32_t got_challenge, chunk_len;
        uint16_t version, payload_len;
        uint8_t type, packet, last_packet;

        if (!read_u8(&rd, &type) || !read_be32(&rd, &got_challenge) || !read_be16(&rd, &version) ||
            !read_u8(&rd, &packet) || !read_u8(&rd, &last_packet) || !read_be16(&rd, &payload_len))
                return -EBADMSG;
        if (type != SQP_TYPE_QUERY)
                return -EBADMSG;
        /* A query answer, but to another challenge: an earlier probe's, answered late. */
        if (got_challenge != challenge)
                return -ESTALE;
        /* A ServerInfo chunk always fits one datagram; reassembling fragments is not worth
         * the state it needs. */
        if (packet != last_packet)
                return -EBADMSG;
        if (payload_len > rd.left)
                return -EBADMSG;
        rd.left = payload_len;  /* bytes after the payload are not ours to read */

        if (!read_be32(&rd, &chunk_len) || chunk_len > rd.left)
                return -EBADMSG;
        chunk = (SqpReader) { rd.p, chunk_len };

        /* Fields a later protocol version may append after the port are ignored. */
        if (!read_be16(&chunk, &info.players) || !read_be16(&chunk, &info.max_players) ||
            !read_str(&chunk, info.name) || !read_str(&chunk, info.game_type) ||
            !read_str(&chunk, info.build_id) || !read_str(&chunk, info.map) ||
            !read_be16(&chunk, &info.port))
                return -EBADMSG;

        *ret = info;
        return 0;
}

int sqp_encode_info_response(uint32_t challenge, uint16_t version, const SqpInfo *info,
                             uint8_t *buf, size_t size) {
        const char *strs[] = { info->name, info->game_type, info->build_id, info->map };
        size_t lens[ELEMENTSOF(strs)], chunk_len = 2 + 2 + 2, total;
        uint8_t *p = buf;

        for (size_t i = 0; i < ELEMENTSOF(strs); i++) {
                lens[i] = strnlen(strs[i], SQP_STR_MAX);
                if (lens[i] >= SQP_STR_MAX)
                        return -EINVAL;
                chunk_len += 1 + lens[i];
        }
        /* At most 6 + 4 * 256 bytes, so the u16 payload length cannot overflow. */
        total = SQP_QUERY_HEADER_SIZE + 4 + chunk_len;
        if (total > size)
                return -ENOBUFS;

        *p++ = SQP_TYPE_QUERY;
        p = put_be32(p, challenge);
        p = put_be16(p, version);
        *p++ = 0;  /* current packet */
        *p++ = 0;  /* last packet */
        p = put_be16(p, (uint16_t) (4 + chunk_len));
        p = put_be32(p, (uint32_t) chunk_len);
        p = put_be16(p, info->players);
        p = put_be16(p, info->max_players);
        for (size_t i = 0; i < ELEMENTSOF(strs); i++)
                p = put_str(p, strs[i], lens[i]);
        (void) put_be16(p, info->port);
        return (int) total;
}
