/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The JWT the local proxy's GET /token hands to a game server's SDK: JWS compact
 * serialization (RFC 7515), HS256 (HMAC-SHA256, RFC 7518 §3.2), base64url without padding.
 * Header {"alg":"HS256","typ":"JWT"}; claims, in this order:
 *   {"sub":"<server id>","iss":"slotd","aud":"multiplay-local-proxy","iat":<s>,
 *    "exp":<iat + lifetime>,"server_id":<n>,"machine_id":"…","jti":"<uuid v4>"}
 * The key lives as long as slotd: a restart makes every token handed out before invalid. No
 * logging here. */

#define TOKEN_KEY_SIZE 32
#define TOKEN_SIZE_MAX 4096 /* longer tokens are refused by token_verify() */
#define TOKEN_ISSUER "slotd"
#define TOKEN_AUDIENCE "multiplay-local-proxy"
#define TOKEN_LIFETIME_SEC 300 /* what the local proxy hands out (ops_token()) */

typedef struct TokenKey {
        uint8_t bytes[TOKEN_KEY_SIZE];
} TokenKey;

/* 32 bytes from getrandom(). -errno (never blocks once the pool is ready at boot). */
int token_key_new(TokenKey *ret);

/* Signs the claims for server_id, issued at now_sec (CLOCK_REALTIME seconds), valid for
 * lifetime_sec (> 0). machine_id: valid UTF-8. -EINVAL, -ERANGE (exp past INT64_MAX),
 * -ENOMEM, -EIO (libcrypto). */
int token_sign(const TokenKey *key, unsigned server_id, const char *machine_id, uint64_t now_sec,
               uint64_t lifetime_sec, char **ret);

/* Checks a token made by token_sign() with this key: the signature (constant-time compare),
 * then alg HS256, iss, aud, sub matching server_id, and now_sec < exp. 0 and the server id;
 * -EBADMSG malformed; -EKEYREJECTED wrong signature or wrong claims; -EKEYEXPIRED expired. */
int token_verify(const TokenKey *key, const char *token, uint64_t now_sec, unsigned *ret_server_id);

/* The layers below, for tests. */

/* RFC 4648 §5 without padding. Decoding refuses '=', other characters, a length of 4n+1 and
 * nonzero bits left over in the last character (so one signature has one spelling). */
int token_base64url_encode(const void *data, size_t size, char **ret);
int token_base64url_decode(const char *s, size_t len, uint8_t **ret, size_t *ret_size);

int token_hmac_sha256(const void *key, size_t key_size, const void *data, size_t size,
                      uint8_t ret[static 32]);

/* BASE64URL(header) "." BASE64URL(payload) "." BASE64URL(HMAC-SHA256(key, those two)), with
 * header and payload taken as the exact bytes given. */
int token_jws_hs256(const void *key, size_t key_size, const void *header, size_t header_size,
                    const void *payload, size_t payload_size, char **ret);
