/* SPDX-License-Identifier: MIT */
/* The query responders: SQP and A2S_INFO on the UDP query port. */

#include "test-server.h"

static uint32_t random_u32(void)
{
        uint32_t v;

        if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == sizeof(v))
                return v;
        /* Only predictable challenges are at stake, and only if getrandom() is unavailable. */
        v = (uint32_t) now_usec(CLOCK_MONOTONIC) * 2654435761u ^ (uint32_t) getpid();
        return v;
}

static struct peer *peer_get(struct server *s, const struct sockaddr_in *addr, bool create)
{
        struct peer *oldest = &s->peers[0];

        for (size_t i = 0; i < PEERS_MAX; i++) {
                struct peer *p = &s->peers[i];

                if (p->in_use && p->addr.sin_addr.s_addr == addr->sin_addr.s_addr &&
                    p->addr.sin_port == addr->sin_port) {
                        p->last_used = now_usec(CLOCK_MONOTONIC);
                        return p;
                }
                if (!p->in_use || (oldest->in_use && p->last_used < oldest->last_used))
                        oldest = p;
        }
        if (!create)
                return NULL;
        *oldest = (struct peer) {
                .in_use = true,
                .addr = *addr,
                .last_used = now_usec(CLOCK_MONOTONIC),
        };
        return oldest;
}

struct packet {
        uint8_t data[PACKET_MAX];
        size_t len;
        bool overflow;
};

static void put_bytes(struct packet *p, const void *data, size_t n)
{
        if (p->overflow || n > sizeof(p->data) - p->len) {
                p->overflow = true;
                return;
        }
        memcpy(p->data + p->len, data, n);
        p->len += n;
}

static void put_u8(struct packet *p, uint8_t v)
{
        put_bytes(p, &v, 1);
}

static void put_u16be(struct packet *p, uint16_t v)
{
        uint8_t b[2] = { (uint8_t) (v >> 8), (uint8_t) v };

        put_bytes(p, b, 2);
}

static void put_u16le(struct packet *p, uint16_t v)
{
        uint8_t b[2] = { (uint8_t) v, (uint8_t) (v >> 8) };

        put_bytes(p, b, 2);
}

static void put_u32be(struct packet *p, uint32_t v)
{
        uint8_t b[4] = {
                (uint8_t) (v >> 24), (uint8_t) (v >> 16), (uint8_t) (v >> 8), (uint8_t) v,
        };

        put_bytes(p, b, 4);
}

static void patch_u16be(struct packet *p, size_t at, uint16_t v)
{
        p->data[at] = (uint8_t) (v >> 8);
        p->data[at + 1] = (uint8_t) v;
}

static void patch_u32be(struct packet *p, size_t at, uint32_t v)
{
        p->data[at] = (uint8_t) (v >> 24);
        p->data[at + 1] = (uint8_t) (v >> 16);
        p->data[at + 2] = (uint8_t) (v >> 8);
        p->data[at + 3] = (uint8_t) v;
}

/* SQP strings are a length byte and the bytes, so anything past 255 is cut. */
static void put_str8(struct packet *p, const char *str)
{
        size_t n = strlen(str);

        if (n > 255)
                n = 255;
        put_u8(p, (uint8_t) n);
        put_bytes(p, str, n);
}

static void put_cstr(struct packet *p, const char *str)
{
        put_bytes(p, str, strlen(str) + 1);
}

static uint32_t get_u32be(const uint8_t *b)
{
        return (uint32_t) b[0] << 24 | (uint32_t) b[1] << 16 | (uint32_t) b[2] << 8 | b[3];
}

const char *server_name(struct server *s, char *buf, size_t size)
{
        if (s->name[0] != '\0')
                return s->name;
        snprintf(buf, size, "slotd-test-%s", s->server_id);
        return buf;
}

static void sqp_handle(struct server *s, const struct sockaddr_in *from, const uint8_t *in,
                       size_t n, struct packet *out)
{
        char namebuf[VALUE_MAX + 16];
        struct peer *peer;
        uint32_t challenge;
        size_t chunk_at;

        if (in[0] == 0x00) {
                if (n < 5)
                        return;
                peer = peer_get(s, from, true);
                do {
                        peer->sqp_challenge = random_u32();
                } while (peer->sqp_challenge == 0);
                peer->has_sqp = true;
                put_u8(out, 0x00);
                put_u32be(out, peer->sqp_challenge);
                return;
        }

        /* A query: 01, challenge, version, requested chunks. */
        if (n < 8)
                return;
        challenge = get_u32be(in + 1);
        peer = peer_get(s, from, false);
        if (!peer || !peer->has_sqp || peer->sqp_challenge != challenge)
                return;

        put_u8(out, 0x01);
        put_u32be(out, challenge);
        put_u16be(out, 1);
        put_u8(out, 0);
        put_u8(out, 0);
        put_u16be(out, 0);
        if (in[7] & SQP_CHUNK_SERVER_INFO) {
                chunk_at = out->len;
                put_u32be(out, 0);
                put_u16be(out, (uint16_t) s->players);
                put_u16be(out, (uint16_t) s->max_players);
                put_str8(out, server_name(s, namebuf, sizeof(namebuf)));
                put_str8(out, "test");
                put_str8(out, s->build_id);
                put_str8(out, s->map);
                put_u16be(out, s->port);
                if (!out->overflow)
                        patch_u32be(out, chunk_at, (uint32_t) (out->len - chunk_at - 4));
        }
        if (!out->overflow)
                patch_u16be(out, 9, (uint16_t) (out->len - 11));
}

static uint8_t clamp_u8(unsigned v)
{
        return v > 255 ? 255 : (uint8_t) v;
}

static void a2s_handle(struct server *s, const struct sockaddr_in *from, const uint8_t *in,
                       size_t n, struct packet *out)
{
        static const uint8_t info_request[25] = "\xff\xff\xff\xff" "TSource Engine Query";
        char namebuf[VALUE_MAX + 16];

        if (n < sizeof(info_request) || memcmp(in, info_request, sizeof(info_request)) != 0)
                return;

        if (s->a2s_challenge) {
                struct peer *peer = peer_get(s, from, true);

                if (!peer->has_a2s) {
                        uint32_t v;

                        /* 0xFFFFFFFF is what clients send to ask for a challenge. */
                        do {
                                v = random_u32();
                        } while (v == 0 || v == UINT32_MAX);
                        memcpy(peer->a2s_challenge, &v, 4);
                        peer->has_a2s = true;
                }
                if (n < sizeof(info_request) + 4 ||
                    memcmp(in + sizeof(info_request), peer->a2s_challenge, 4) != 0) {
                        put_bytes(out, "\xff\xff\xff\xff\x41", 5);
                        put_bytes(out, peer->a2s_challenge, 4);
                        return;
                }
        }

        put_bytes(out, "\xff\xff\xff\xff\x49", 5);
        put_u8(out, 17);
        put_cstr(out, server_name(s, namebuf, sizeof(namebuf)));
        put_cstr(out, s->map);
        put_cstr(out, "slotd");
        put_cstr(out, "slotd test");
        put_u16le(out, 0);
        put_u8(out, clamp_u8(s->players));
        put_u8(out, clamp_u8(s->max_players));
        put_u8(out, 0);
        put_u8(out, 'd');
        put_u8(out, 'l');
        put_u8(out, 0);
        put_u8(out, 0);
        put_cstr(out, "1.0.0.0");
        put_u8(out, 0x80);
        put_u16le(out, s->port);
}

void query_handle(struct server *s)
{
        /* Bounded per wake-up so a flood cannot starve signals and the control file. */
        for (int i = 0; i < 64; i++) {
                struct sockaddr_in from;
                socklen_t fromlen = sizeof(from);
                uint8_t in[PACKET_MAX];
                struct packet out = {};
                ssize_t n;

                n = recvfrom(s->query_fd, in, sizeof(in), 0, (struct sockaddr *) &from, &fromlen);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return;
                if (n == 0 || !s->query_enabled || fromlen < sizeof(from)) {
                        s->queries_dropped++;
                        s->counters_dirty = true;
                        continue;
                }
                if (in[0] == 0x00 || in[0] == 0x01)
                        sqp_handle(s, &from, in, (size_t) n, &out);
                else if (in[0] == 0xff)
                        a2s_handle(s, &from, in, (size_t) n, &out);
                if (out.len == 0 || out.overflow) {
                        s->queries_dropped++;
                        s->counters_dirty = true;
                        continue;
                }
                (void) sendto(s->query_fd, out.data, out.len, MSG_DONTWAIT,
                              (struct sockaddr *) &from, fromlen);
                s->queries_answered++;
                s->counters_dirty = true;
        }
}

int query_open(struct server *s)
{
        struct sockaddr_in addr = {
                .sin_family = AF_INET,
                .sin_port = htons(s->query_port),
                .sin_addr.s_addr = htonl(INADDR_ANY),
        };
        int fd, r;

        /* No SO_REUSEADDR: two servers sharing a query port must show up as a bind failure. */
        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &addr, sizeof(addr)) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        s->query_fd = fd;
        return 0;
}
