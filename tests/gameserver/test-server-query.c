/* SPDX-License-Identifier: MIT */
/*
 * The query responders: SQP and A2S_INFO on the UDP query port.
 *
 * SQP, in every mode, and A2S in SDK mode keep their challenges as Unity's Go SDK v0.5.4
 * does (proto/base.go's QueryBase, proto/sqp/sqp.go, proto/a2s/a2s.go): one per client
 * address (ip:port), a new random one on each challenge request, taken by the next query
 * from that address whether it matches or not (LoadAndDelete), so that a challenge is good
 * for one query only.  The SDK answers a refused query with nothing and the game logs
 * "query: error responding: <error>"; so does this server, naming the client.  The SDK
 * reads each datagram into a zeroed buffer of 1024 bytes and parses that, so a short
 * datagram reads as if padded with zeros: a lone 00 asks for a challenge, 01 and a
 * challenge is a query of version 0 with no chunk wanted.
 */

#include "test-server.h"

/* The SDK's read buffer (DefaultReadBufferSizeBytes), zeroed before each read. */
#define SDK_READ_MAX       1024
/* GenerateChallenge's expiry; stale challenges are purged only when a new one is made. */
#define CHALLENGE_TTL_USEC (60 * USEC_PER_SEC)
/* sqp.go: newer versions than it knows are refused (the v0.5.4 binary takes 0, 1 and 2). */
#define SQP_VERSION_MAX    2

static uint32_t random_u32(void)
{
        uint32_t v;

        if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == sizeof(v))
                return v;
        /* Only predictable challenges are at stake, and only if getrandom() is unavailable. */
        v = (uint32_t) now_usec(CLOCK_MONOTONIC) * 2654435761u ^ (uint32_t) getpid();
        return v;
}

static void peer_name(const struct sockaddr_in *addr, char *buf, size_t size)
{
        char ip[INET_ADDRSTRLEN] = "?";

        (void) inet_ntop(AF_INET, &addr->sin_addr, ip, sizeof(ip));
        snprintf(buf, size, "%s:%u", ip, ntohs(addr->sin_port));
}

/* What the game logs for each query the SDK refuses; nothing is sent back. */
static void __attribute__((format(printf, 3, 4)))
query_refused(struct server *s, const struct sockaddr_in *from, const char *fmt, ...)
{
        char error[128], who[INET_ADDRSTRLEN + 8];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(error, sizeof(error), fmt, ap);
        va_end(ap);
        peer_name(from, who, sizeof(who));
        log_line("query: error responding: %s (%s)", error, who);
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

/* GenerateChallenge's purge: challenges past their minute go, whatever their address. */
static void challenges_purge(struct server *s, usec_t now)
{
        for (size_t i = 0; i < PEERS_MAX; i++) {
                struct peer *p = &s->peers[i];

                if (p->has_sqp && p->sqp_expiry < now)
                        p->has_sqp = false;
                if (p->has_a2s && p->a2s_expiry < now)
                        p->has_a2s = false;
                if (!p->has_sqp && !p->has_a2s)
                        p->in_use = false;
        }
}

static struct peer *challenge_issue(struct server *s, const struct sockaddr_in *from,
                                    usec_t *ret_expiry)
{
        usec_t now = now_usec(CLOCK_MONOTONIC);

        challenges_purge(s, now);
        *ret_expiry = now + CHALLENGE_TTL_USEC;
        return peer_get(s, from, true);
}

/* ChallengeMatchesForClient: LoadAndDelete, so the challenge is gone either way.  Its
 * expiry is not looked at: only a purge ends a challenge nobody used. */
static const char *sqp_challenge_take(struct server *s, const struct sockaddr_in *from,
                                      uint32_t challenge)
{
        struct peer *peer = peer_get(s, from, false);

        if (!peer || !peer->has_sqp)
                return "no challenge";
        peer->has_sqp = false;
        return peer->sqp_challenge == challenge ? NULL : "challenge mismatch";
}

static const char *a2s_challenge_take(struct server *s, const struct sockaddr_in *from,
                                      const uint8_t challenge[static 4])
{
        struct peer *peer = peer_get(s, from, false);

        if (!peer || !peer->has_a2s)
                return "no challenge";
        peer->has_a2s = false;
        return memcmp(peer->a2s_challenge, challenge, 4) == 0 ? NULL : "challenge mismatch";
}

static void sqp_server_info(struct server *s, struct packet *out)
{
        char namebuf[VALUE_MAX + 16];
        size_t chunk_at = out->len;

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

/* sqp.go's Respond on the zero-padded datagram: 00000000 00 is a challenge request, 01 a
 * query; the challenge is taken before the version is looked at. */
static void sqp_handle(struct server *s, const struct sockaddr_in *from,
                       const uint8_t in[static SDK_READ_MAX], struct packet *out)
{
        static const uint8_t challenge_request[5];
        struct peer *peer;
        const char *error;
        uint32_t challenge;
        uint16_t version;
        usec_t expiry;

        if (memcmp(in, challenge_request, sizeof(challenge_request)) == 0) {
                peer = challenge_issue(s, from, &expiry);
                peer->sqp_challenge = random_u32();
                peer->sqp_expiry = expiry;
                peer->has_sqp = true;
                put_u8(out, 0x00);
                put_u32be(out, peer->sqp_challenge);
                return;
        }
        if (in[0] != 0x01) {
                query_refused(s, from, "unsupported query");
                return;
        }
        challenge = get_u32be(in + 1);
        error = sqp_challenge_take(s, from, challenge);
        if (error) {
                query_refused(s, from, "%s", error);
                return;
        }
        version = (uint16_t) (in[5] << 8 | in[6]);
        if (version > SQP_VERSION_MAX) {
                query_refused(s, from, "unsupported sqp version: %u", version);
                return;
        }
        put_u8(out, 0x01);
        put_u32be(out, challenge);
        put_u16be(out, 1);
        put_u8(out, 0);
        put_u8(out, 0);
        put_u16be(out, 0);
        if (in[7] & SQP_CHUNK_SERVER_INFO)
                sqp_server_info(s, out);
        if (!out->overflow)
                patch_u16be(out, 9, (uint16_t) (out->len - 11));
}

static uint8_t clamp_u8(unsigned v)
{
        return v > 255 ? 255 : (uint8_t) v;
}

static void a2s_info(struct server *s, struct packet *out)
{
        char namebuf[VALUE_MAX + 16];

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

/* The plain mode's A2S_INFO: the challenge round only with --a2s-challenge, and then one
 * challenge per client for good, as many Source servers keep it. */
static void a2s_handle(struct server *s, const struct sockaddr_in *from, const uint8_t *in,
                       size_t n, struct packet *out)
{
        static const uint8_t info_request[25] = "\xff\xff\xff\xff" "TSource Engine Query";

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
                        peer->a2s_expiry = UINT64_MAX;
                        peer->has_a2s = true;
                }
                if (n < sizeof(info_request) + 4 ||
                    memcmp(in + sizeof(info_request), peer->a2s_challenge, 4) != 0) {
                        put_bytes(out, "\xff\xff\xff\xff\x41", 5);
                        put_bytes(out, peer->a2s_challenge, 4);
                        return;
                }
        }
        a2s_info(s, out);
}

/*
 * a2s.go's Respond on the zero-padded datagram: FFFFFFFF 54, any payload up to a NUL, then
 * a little-endian challenge.  A challenge of 0 (or none) gets a new one; any other value
 * must be the one given, and is taken: 0xFFFFFFFF, which Valve's clients send to ask for a
 * challenge, is "no challenge" to the SDK.
 */
static void a2s_sdk_handle(struct server *s, const struct sockaddr_in *from,
                           const uint8_t in[static SDK_READ_MAX], struct packet *out)
{
        static const uint8_t info_header[5] = "\xff\xff\xff\xff\x54";
        uint8_t challenge[4] = {};
        struct peer *peer;
        const char *error;
        usec_t expiry;
        size_t at = 5;

        if (memcmp(in, info_header, sizeof(info_header)) != 0) {
                query_refused(s, from, "unsupported query: %02x%02x%02x%02x%02x", in[0], in[1],
                              in[2], in[3], in[4]);
                return;
        }
        while (at < SDK_READ_MAX && in[at] != 0)
                at++;
        at++;
        if (at + sizeof(challenge) <= SDK_READ_MAX)
                memcpy(challenge, in + at, sizeof(challenge));
        else if (at < SDK_READ_MAX) {
                query_refused(s, from, "unexpected EOF");
                return;
        }
        if (memcmp(challenge, "\0\0\0\0", 4) == 0) {
                uint32_t v;

                peer = challenge_issue(s, from, &expiry);
                do {
                        v = random_u32();
                } while (v == 0);
                memcpy(peer->a2s_challenge, &v, 4);
                peer->a2s_expiry = expiry;
                peer->has_a2s = true;
                put_bytes(out, "\xff\xff\xff\xff\x41", 5);
                put_bytes(out, peer->a2s_challenge, 4);
                return;
        }
        error = a2s_challenge_take(s, from, challenge);
        if (error) {
                query_refused(s, from, "%s", error);
                return;
        }
        a2s_info(s, out);
}

static void query_respond(struct server *s, const struct sockaddr_in *from, const uint8_t *in,
                          size_t n, struct packet *out)
{
        uint8_t view[SDK_READ_MAX] = {};

        memcpy(view, in, n < sizeof(view) ? n : sizeof(view));
        switch (s->query_protocol) {
        case QUERY_PROTOCOL_SQP:
                sqp_handle(s, from, view, out);
                break;
        case QUERY_PROTOCOL_A2S:
                a2s_sdk_handle(s, from, view, out);
                break;
        default:
                if (view[0] == 0x00 || view[0] == 0x01)
                        sqp_handle(s, from, view, out);
                else if (in[0] == 0xff)
                        a2s_handle(s, from, in, n, out);
                break;
        }
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
                if (!s->query_enabled || fromlen < sizeof(from)) {
                        s->queries_dropped++;
                        s->counters_dirty = true;
                        continue;
                }
                query_respond(s, &from, in, (size_t) n, &out);
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
