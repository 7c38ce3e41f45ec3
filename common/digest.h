/* SPDX-License-Identifier: MIT */
#pragma once

/* SHA-1 (FIPS 180-4; WebSocket's Sec-WebSocket-Accept only), SHA-256, HMAC-SHA256 (RFC 2104)
 * and base64 (RFC 4648 §4, with padding): the little slotd and slotd-proxy need of a
 * cryptographic library, in-tree so that neither loads one (libcrypto's relocations and
 * initialisation were most of their start-up time and private memory). Pure: no I/O, no
 * allocation. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SHA1_DIGEST_SIZE 20
#define SHA256_DIGEST_SIZE 32
#define SHA256_BLOCK_SIZE 64

typedef struct Sha256 {
        uint32_t h[8];
        uint64_t length; /* bytes hashed so far */
        uint8_t block[SHA256_BLOCK_SIZE];
        size_t used;
} Sha256;

void sha256_init(Sha256 *c);
void sha256_update(Sha256 *c, const void *data, size_t size);
void sha256_final(Sha256 *c, uint8_t ret[static SHA256_DIGEST_SIZE]);
void sha256(const void *data, size_t size, uint8_t ret[static SHA256_DIGEST_SIZE]);

void sha1(const void *data, size_t size, uint8_t ret[static SHA1_DIGEST_SIZE]);

void hmac_sha256(const void *key, size_t key_size, const void *data, size_t size,
                 uint8_t ret[static SHA256_DIGEST_SIZE]);

/* Whether a and b are equal, in a time that depends on n only (MACs are compared so). */
bool digest_equal(const void *a, const void *b, size_t n);

/* 4 * ceil(size / 3) characters and a NUL into ret; returns the characters written. */
#define BASE64_ENCODED_SIZE(n) (4 * (((n) + 2) / 3) + 1)
size_t base64_encode(const void *data, size_t size, char *ret);

/* Standard base64 of len characters, padded or not; whitespace between groups is skipped.
 * At most len / 4 * 3 + 2 bytes into ret; the number written, or -EINVAL when s is not
 * base64 (a character outside the alphabet, padding other than at the end or not completing
 * the last group, a group of one character). Bits past the last byte are ignored. */
ssize_t base64_decode(const char *s, size_t len, uint8_t *ret);
