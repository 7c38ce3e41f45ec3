/* SPDX-License-Identifier: MIT */
#include "a2s.h"
#include "macro.h"

#define A2S_HEADER_SIZE 5       /* FF FF FF FF and the type byte */
#define A2S_TYPE_INFO_REQUEST 0x54
#define A2S_TYPE_CHALLENGE 0x41
#define A2S_TYPE_INFO 0x49

#define A2S_EDF_PORT 0x80
#define A2S_EDF_STEAMID 0x10
#define A2S_EDF_SPECTATOR 0x40
#define A2S_EDF_KEYWORDS 0x20
#define A2S_EDF_GAMEID 0x01

/* The Ship (appid 2400) puts mode, witnesses and duration between VAC and the version. */
#define A2S_APPID_THE_SHIP 2400
#define A2S_THE_SHIP_FIELDS 3

static const uint8_t a2s_single_packet[4] = { 0xff, 0xff, 0xff, 0xff };
static const char a2s_info_payload[] = "Source Engine Query";  /* sent with its NUL */

/* A bounded cursor over a reply: every read checks what is left first, so nothing a server
 * sends can move it past the end. */
typedef struct A2sReader {
        const uint8_t *p;
        size_t left;
} A2sReader;

static bool read_bytes(A2sReader *rd, void *ret, size_t n) {
        if (rd->left < n)
                return false;
        if (ret)
                memcpy(ret, rd->p, n);
        rd->p += n;
        rd->left -= n;
        return true;
}

static bool read_u8(A2sReader *rd, uint8_t *ret) {
        return read_bytes(rd, ret, 1);
}

static bool read_le16(A2sReader *rd, uint16_t *ret) {
        uint8_t b[2];

        if (!read_bytes(rd, b, sizeof(b)))
                return false;
        *ret = (uint16_t) (b[0] | b[1] << 8);
        return true;
}

static bool read_le64(A2sReader *rd, uint64_t *ret) {
        uint8_t b[8];
        uint64_t v = 0;

        if (!read_bytes(rd, b, sizeof(b)))
                return false;
        for (size_t i = sizeof(b); i > 0; i--)
                v = v << 8 | b[i - 1];
        *ret = v;
        return true;
}

/* A NUL-terminated string that must end inside the reply. It is cut to fit dst (NULL skips
 * it), and control bytes become '?' so that it is safe to print or log. */
static bool read_str(A2sReader *rd, char *dst) {
        const uint8_t *nul;
        size_t n, len;

        if (rd->left == 0)
                return false;
        nul = memchr(rd->p, '\0', rd->left);
        if (!nul)
                return false;
        len = (size_t) (nul - rd->p);
        if (dst) {
                n = MIN(len, (size_t) A2S_STR_MAX - 1);
                for (size_t i = 0; i < n; i++)
                        dst[i] = (rd->p[i] < 0x20 || rd->p[i] == 0x7f) ? '?' : (char) rd->p[i];
                dst[n] = '\0';
        }
        rd->p += len + 1;
        rd->left -= len + 1;
        return true;
}

/* Writes that stop at the end of the buffer and remember that they had to. */
typedef struct A2sWriter {
        uint8_t *p;
        size_t left;
        bool overflow;
} A2sWriter;

static void put_bytes(A2sWriter *w, const void *b, size_t n) {
        if (w->overflow || w->left < n) {
                w->overflow = true;
                return;
        }
        memcpy(w->p, b, n);
        w->p += n;
        w->left -= n;
}

static void put_u8(A2sWriter *w, uint8_t v) {
        put_bytes(w, &v, 1);
}

static void put_le16(A2sWriter *w, uint16_t v) {
        uint8_t b[2] = { (uint8_t) v, (uint8_t) (v >> 8) };

        put_bytes(w, b, sizeof(b));
}

static void put_le64(A2sWriter *w, uint64_t v) {
        uint8_t b[8];

        for (size_t i = 0; i < sizeof(b); i++)
                b[i] = (uint8_t) (v >> (8 * i));
        put_bytes(w, b, sizeof(b));
}

static void put_str(A2sWriter *w, const char *s) {
        put_bytes(w, s, strlen(s) + 1);
}

size_t a2s_info_request(const uint8_t *challenge, uint8_t buf[static A2S_INFO_REQUEST_MAX]) {
        memcpy(buf, a2s_single_packet, sizeof(a2s_single_packet));
        buf[4] = A2S_TYPE_INFO_REQUEST;
        memcpy(buf + A2S_HEADER_SIZE, a2s_info_payload, sizeof(a2s_info_payload));
        if (!challenge)
                return A2S_INFO_REQUEST_SIZE;
        memcpy(buf + A2S_INFO_REQUEST_SIZE, challenge, A2S_CHALLENGE_SIZE);
        return A2S_INFO_REQUEST_MAX;
}

static int parse_info(A2sReader *rd, A2sInfo *ret) {
        A2sInfo info = {};
        uint8_t edf;

        if (!read_u8(rd, &info.protocol) || !read_str(rd, info.name) || !read_str(rd, info.map) ||
            !read_str(rd, info.folder) || !read_str(rd, info.game) ||
            !read_le16(rd, &info.appid) || !read_u8(rd, &info.players) ||
            !read_u8(rd, &info.max_players) || !read_u8(rd, &info.bots) ||
            !read_u8(rd, &info.server_type) || !read_u8(rd, &info.environment) ||
            !read_u8(rd, &info.visibility) || !read_u8(rd, &info.vac))
                return -EBADMSG;
        if (info.appid == A2S_APPID_THE_SHIP && !read_bytes(rd, NULL, A2S_THE_SHIP_FIELDS))
                return -EBADMSG;
        if (!read_str(rd, info.version))
                return -EBADMSG;

        /* Old servers end here. Once the flag byte is present every field it announces must
         * be complete; what follows them is ignored. */
        if (!read_u8(rd, &edf)) {
                *ret = info;
                return 0;
        }
        if (edf & A2S_EDF_PORT) {
                if (!read_le16(rd, &info.port))
                        return -EBADMSG;
                info.has_port = true;
        }
        if ((edf & A2S_EDF_STEAMID) && !read_le64(rd, &info.steam_id))
                return -EBADMSG;
        if ((edf & A2S_EDF_SPECTATOR) && (!read_bytes(rd, NULL, 2) || !read_str(rd, NULL)))
                return -EBADMSG;
        if ((edf & A2S_EDF_KEYWORDS) && !read_str(rd, info.keywords))
                return -EBADMSG;
        if ((edf & A2S_EDF_GAMEID) && !read_le64(rd, &info.game_id))
                return -EBADMSG;

        *ret = info;
        return 0;
}

int a2s_parse_reply(const uint8_t *buf, size_t len, A2sReplyKind *ret_kind,
                    uint8_t ret_challenge[static A2S_CHALLENGE_SIZE], A2sInfo *ret_info) {
        A2sReader rd = { buf, len };
        uint8_t header[A2S_HEADER_SIZE], challenge[A2S_CHALLENGE_SIZE];
        int r;

        /* A split reply starts FE FF FF FF; reassembly is not supported. */
        if (!read_bytes(&rd, header, sizeof(header)) ||
            memcmp(header, a2s_single_packet, sizeof(a2s_single_packet)) != 0)
                return -EBADMSG;

        switch (header[4]) {
        case A2S_TYPE_CHALLENGE:
                if (!read_bytes(&rd, challenge, sizeof(challenge)))
                        return -EBADMSG;
                memcpy(ret_challenge, challenge, sizeof(challenge));
                *ret_kind = A2S_REPLY_CHALLENGE;
                return 0;
        case A2S_TYPE_INFO:
                r = parse_info(&rd, ret_info);
                if (r < 0)
                        return r;
                *ret_kind = A2S_REPLY_INFO;
                return 0;
        default:
                return -EBADMSG;
        }
}

int a2s_encode_info(const A2sInfo *info, uint8_t *buf, size_t size) {
        const char *strs[] = { info->name, info->map, info->folder, info->game, info->version,
                               info->keywords };
        A2sWriter w = { buf, size };
        uint8_t edf = 0;

        for (size_t i = 0; i < ELEMENTSOF(strs); i++)
                if (strnlen(strs[i], A2S_STR_MAX) >= A2S_STR_MAX)
                        return -EINVAL;

        put_bytes(&w, a2s_single_packet, sizeof(a2s_single_packet));
        put_u8(&w, A2S_TYPE_INFO);
        put_u8(&w, info->protocol);
        put_str(&w, info->name);
        put_str(&w, info->map);
        put_str(&w, info->folder);
        put_str(&w, info->game);
        put_le16(&w, info->appid);
        put_u8(&w, info->players);
        put_u8(&w, info->max_players);
        put_u8(&w, info->bots);
        put_u8(&w, info->server_type);
        put_u8(&w, info->environment);
        put_u8(&w, info->visibility);
        put_u8(&w, info->vac);
        if (info->appid == A2S_APPID_THE_SHIP)
                put_bytes(&w, (const uint8_t[A2S_THE_SHIP_FIELDS]) {}, A2S_THE_SHIP_FIELDS);
        put_str(&w, info->version);

        edf |= info->has_port ? A2S_EDF_PORT : 0;
        edf |= info->steam_id != 0 ? A2S_EDF_STEAMID : 0;
        edf |= info->keywords[0] != '\0' ? A2S_EDF_KEYWORDS : 0;
        edf |= info->game_id != 0 ? A2S_EDF_GAMEID : 0;
        if (edf != 0) {
                put_u8(&w, edf);
                if (edf & A2S_EDF_PORT)
                        put_le16(&w, info->port);
                if (edf & A2S_EDF_STEAMID)
                        put_le64(&w, info->steam_id);
                if (edf & A2S_EDF_KEYWORDS)
                        put_str(&w, info->keywords);
                if (edf & A2S_EDF_GAMEID)
                        put_le64(&w, info->game_id);
        }

        if (w.overflow)
                return -ENOBUFS;
        return (int) (size - w.left);
}
