/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "digest.h"

static inline uint32_t rol32(uint32_t x, unsigned n) {
        return x << n | x >> (32 - n);
}

static inline uint32_t ror32(uint32_t x, unsigned n) {
        return x >> n | x << (32 - n);
}

static inline uint32_t load_be32(const uint8_t *p) {
        return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
}

static inline void store_be32(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t) (v >> 24);
        p[1] = (uint8_t) (v >> 16);
        p[2] = (uint8_t) (v >> 8);
        p[3] = (uint8_t) v;
}

static const uint32_t sha256_k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
};

static void sha256_block(uint32_t h[static 8], const uint8_t *p) {
        uint32_t w[64], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6],
                        k = h[7];

        for (unsigned i = 0; i < 16; i++)
                w[i] = load_be32(p + 4 * i);
        for (unsigned i = 16; i < 64; i++) {
                uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ w[i - 15] >> 3;
                uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ w[i - 2] >> 10;
                w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        for (unsigned i = 0; i < 64; i++) {
                uint32_t t1 = k + (ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25)) +
                              ((e & f) ^ (~e & g)) + sha256_k[i] + w[i];
                uint32_t t2 = (ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22)) +
                              ((a & b) ^ (a & c) ^ (b & c));
                k = g;
                g = f;
                f = e;
                e = d + t1;
                d = c;
                c = b;
                b = a;
                a = t1 + t2;
        }
        h[0] += a;
        h[1] += b;
        h[2] += c;
        h[3] += d;
        h[4] += e;
        h[5] += f;
        h[6] += g;
        h[7] += k;
}

void sha256_init(Sha256 *c) {
        *c = (Sha256){ .h = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f,
                              0x9b05688c, 0x1f83d9ab, 0x5be0cd19 } };
}

void sha256_update(Sha256 *c, const void *data, size_t size) {
        const uint8_t *p = data;

        c->length += size;
        while (size > 0) {
                size_t n = SHA256_BLOCK_SIZE - c->used;

                if (n > size)
                        n = size;
                memcpy(c->block + c->used, p, n);
                c->used += n;
                p += n;
                size -= n;
                if (c->used == SHA256_BLOCK_SIZE) {
                        sha256_block(c->h, c->block);
                        c->used = 0;
                }
        }
}

/* The padding of both hashes: 0x80, zeros, the length in bits big-endian in the last 8. */
static void md_pad(uint8_t block[static 64], size_t *used, uint64_t length,
                   void (*compress)(uint32_t *h, const uint8_t *p), uint32_t *h) {
        uint64_t bits = length * 8;

        block[(*used)++] = 0x80;
        if (*used > 56) {
                memset(block + *used, 0, 64 - *used);
                compress(h, block);
                *used = 0;
        }
        memset(block + *used, 0, 56 - *used);
        for (unsigned i = 0; i < 8; i++)
                block[56 + i] = (uint8_t) (bits >> (56 - 8 * i));
        compress(h, block);
        *used = 0;
}

static void sha256_compress(uint32_t *h, const uint8_t *p) {
        sha256_block(h, p);
}

void sha256_final(Sha256 *c, uint8_t ret[static SHA256_DIGEST_SIZE]) {
        md_pad(c->block, &c->used, c->length, sha256_compress, c->h);
        for (unsigned i = 0; i < 8; i++)
                store_be32(ret + 4 * i, c->h[i]);
        memset(c, 0, sizeof(*c));
}

void sha256(const void *data, size_t size, uint8_t ret[static SHA256_DIGEST_SIZE]) {
        Sha256 c;

        sha256_init(&c);
        sha256_update(&c, data, size);
        sha256_final(&c, ret);
}

static void sha1_compress(uint32_t *h, const uint8_t *p) {
        uint32_t w[80], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];

        for (unsigned i = 0; i < 16; i++)
                w[i] = load_be32(p + 4 * i);
        for (unsigned i = 16; i < 80; i++)
                w[i] = rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
        for (unsigned i = 0; i < 80; i++) {
                uint32_t f, k, t;

                if (i < 20) {
                        f = (b & c) | (~b & d);
                        k = 0x5a827999;
                } else if (i < 40) {
                        f = b ^ c ^ d;
                        k = 0x6ed9eba1;
                } else if (i < 60) {
                        f = (b & c) | (b & d) | (c & d);
                        k = 0x8f1bbcdc;
                } else {
                        f = b ^ c ^ d;
                        k = 0xca62c1d6;
                }
                t = rol32(a, 5) + f + e + k + w[i];
                e = d;
                d = c;
                c = rol32(b, 30);
                b = a;
                a = t;
        }
        h[0] += a;
        h[1] += b;
        h[2] += c;
        h[3] += d;
        h[4] += e;
}

void sha1(const void *data, size_t size, uint8_t ret[static SHA1_DIGEST_SIZE]) {
        uint32_t h[5] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0 };
        const uint8_t *p = data;
        uint8_t block[64];
        size_t used, left = size;

        for (; left >= 64; left -= 64, p += 64)
                sha1_compress(h, p);
        used = left;
        if (left > 0)
                memcpy(block, p, left);
        md_pad(block, &used, size, sha1_compress, h);
        for (unsigned i = 0; i < 5; i++)
                store_be32(ret + 4 * i, h[i]);
}

void hmac_sha256(const void *key, size_t key_size, const void *data, size_t size,
                 uint8_t ret[static SHA256_DIGEST_SIZE]) {
        uint8_t k[SHA256_BLOCK_SIZE] = {}, pad[SHA256_BLOCK_SIZE], inner[SHA256_DIGEST_SIZE];
        Sha256 c;

        if (key_size > SHA256_BLOCK_SIZE)
                sha256(key, key_size, k);
        else if (key_size > 0)
                memcpy(k, key, key_size);
        for (unsigned i = 0; i < SHA256_BLOCK_SIZE; i++)
                pad[i] = k[i] ^ 0x36;
        sha256_init(&c);
        sha256_update(&c, pad, sizeof(pad));
        sha256_update(&c, data, size);
        sha256_final(&c, inner);
        for (unsigned i = 0; i < SHA256_BLOCK_SIZE; i++)
                pad[i] = k[i] ^ 0x5c;
        sha256_init(&c);
        sha256_update(&c, pad, sizeof(pad));
        sha256_update(&c, inner, sizeof(inner));
        sha256_final(&c, ret);
        memset(k, 0, sizeof(k));
        memset(pad, 0, sizeof(pad));
}

bool digest_equal(const void *a, const void *b, size_t n) {
        const volatile uint8_t *x = a, *y = b;
        uint8_t d = 0;

        for (size_t i = 0; i < n; i++)
                d |= x[i] ^ y[i];
        return d == 0;
}

static const char base64_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encode(const void *data, size_t size, char *ret) {
        const uint8_t *in = data;
        char *o = ret;

        for (size_t i = 0; i < size; i += 3) {
                size_t left = size - i;
                uint32_t v = (uint32_t) in[i] << 16 | (left > 1 ? (uint32_t) in[i + 1] << 8 : 0) |
                             (left > 2 ? in[i + 2] : 0);

                *o++ = base64_alphabet[v >> 18 & 63];
                *o++ = base64_alphabet[v >> 12 & 63];
                *o++ = left > 1 ? base64_alphabet[v >> 6 & 63] : '=';
                *o++ = left > 2 ? base64_alphabet[v & 63] : '=';
        }
        *o = '\0';
        return (size_t) (o - ret);
}

static int base64_value(char c) {
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        return c == '+' ? 62 : c == '/' ? 63 : -EINVAL;
}

ssize_t base64_decode(const char *s, size_t len, uint8_t *ret) {
        uint32_t acc = 0;
        unsigned bits = 0, chars = 0, pad = 0;
        size_t n = 0;

        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                int v;

                if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
                        continue;
                if (c == '=') {
                        pad++;
                        continue;
                }
                v = base64_value(c);
                if (v < 0 || pad > 0) /* nothing but padding after padding */
                        return -EINVAL;
                chars++;
                acc = acc << 6 | (uint32_t) v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        ret[n++] = (uint8_t) (acc >> bits);
                        acc &= (1u << bits) - 1;
                }
        }
        /* A lone character in a group, or padding that does not complete the last group, is
         * not base64. Bits set past the last byte are ignored, as OpenSSL's decoder did. */
        if (chars % 4 == 1 || pad > 2 || (pad > 0 && (chars + pad) % 4 != 0))
                return -EINVAL;
        return (ssize_t) n;
}
