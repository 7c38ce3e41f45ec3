/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <stdio.h>
#include <sys/random.h>

#include <jansson.h>
#include <systemd/sd-id128.h>

#include "digest.h"
#include "macro.h"
#include "token.h"
#include "utf8.h"

#define HS256_SIZE 32

/* Fixed bytes, so that every token of a run starts the same way. */
static const char token_header[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";

static const char base64url_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int token_key_new(TokenKey *ret) {
        TokenKey k;
        size_t done = 0;

        if (!ret)
                return -EINVAL;
        while (done < sizeof(k.bytes)) {
                ssize_t n = getrandom(k.bytes + done, sizeof(k.bytes) - done, 0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                done += (size_t) n;
        }
        *ret = k;
        explicit_bzero(&k, sizeof(k));
        return 0;
}

int token_base64url_encode(const void *data, size_t size, char **ret) {
        const uint8_t *in = data;
        char *out, *o;

        if (size > SIZE_MAX / 4 - 1)
                return -ENOMEM;
        out = malloc((size * 4 + 2) / 3 + 1);
        if (!out)
                return -ENOMEM;
        o = out;
        for (size_t i = 0; i < size; i += 3) {
                size_t left = size - i;
                uint32_t v = (uint32_t) in[i] << 16;

                if (left > 1)
                        v |= (uint32_t) in[i + 1] << 8;
                if (left > 2)
                        v |= in[i + 2];
                *o++ = base64url_alphabet[v >> 18 & 63];
                *o++ = base64url_alphabet[v >> 12 & 63];
                if (left > 1)
                        *o++ = base64url_alphabet[v >> 6 & 63];
                if (left > 2)
                        *o++ = base64url_alphabet[v & 63];
        }
        *o = '\0';
        *ret = out;
        return 0;
}

static int base64url_value(char c) {
        const char *p = c != '\0' ? strchr(base64url_alphabet, c) : NULL;

        return p ? (int) (p - base64url_alphabet) : -EINVAL;
}

int token_base64url_decode(const char *s, size_t len, uint8_t **ret, size_t *ret_size) {
        _cleanup_free_ uint8_t *out = NULL;
        uint32_t acc = 0;
        unsigned bits = 0;
        size_t n = 0;

        if (len % 4 == 1)
                return -EINVAL;
        out = malloc(len / 4 * 3 + 3);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len; i++) {
                int v = base64url_value(s[i]);

                if (v < 0)
                        return -EINVAL;
                acc = acc << 6 | (uint32_t) v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[n++] = (uint8_t) (acc >> bits);
                        acc &= (1u << bits) - 1;
                }
        }
        if (acc != 0)
                return -EINVAL;
        *ret = TAKE_PTR(out);
        *ret_size = n;
        return 0;
}

int token_hmac_sha256(const void *key, size_t key_size, const void *data, size_t size,
                      uint8_t ret[static 32]) {
        if (key_size > INT_MAX)
                return -EINVAL;
        hmac_sha256(key_size > 0 ? key : "", key_size, size > 0 ? data : "", size, ret);
        return 0;
}

int token_jws_hs256(const void *key, size_t key_size, const void *header, size_t header_size,
                    const void *payload, size_t payload_size, char **ret) {
        _cleanup_free_ char *h = NULL, *p = NULL, *input = NULL, *sig = NULL;
        uint8_t mac[HS256_SIZE];
        char *token;
        int r;

        r = token_base64url_encode(header, header_size, &h);
        if (r < 0)
                return r;
        r = token_base64url_encode(payload, payload_size, &p);
        if (r < 0)
                return r;
        if (asprintf(&input, "%s.%s", h, p) < 0)
                return -ENOMEM;
        r = token_hmac_sha256(key, key_size, input, strlen(input), mac);
        if (r < 0)
                return r;
        r = token_base64url_encode(mac, sizeof(mac), &sig);
        if (r < 0)
                return r;
        if (asprintf(&token, "%s.%s", input, sig) < 0)
                return -ENOMEM;
        *ret = token;
        return 0;
}

static int claims_format(unsigned server_id, const char *machine_id, uint64_t iat, uint64_t exp,
                         char **ret) {
        json_auto_t *claims = NULL;
        char sub[16], jti[SD_ID128_UUID_STRING_MAX];
        sd_id128_t id;
        char *text;
        int r;

        r = sd_id128_randomize(&id); /* a v4 UUID */
        if (r < 0)
                return r;
        (void) sd_id128_to_uuid_string(id, jti);
        (void) snprintf(sub, sizeof(sub), "%u", server_id);
        claims = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:s}",
                           "sub", sub, "iss", TOKEN_ISSUER, "aud", TOKEN_AUDIENCE,
                           "iat", (json_int_t) iat, "exp", (json_int_t) exp,
                           "server_id", (json_int_t) server_id, "machine_id", machine_id,
                           "jti", jti);
        if (!claims)
                return -ENOMEM;
        text = json_dumps(claims, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!text)
                return -ENOMEM;
        *ret = text;
        return 0;
}

int token_sign(const TokenKey *key, unsigned server_id, const char *machine_id, uint64_t now_sec,
               uint64_t lifetime_sec, char **ret) {
        _cleanup_free_ char *claims = NULL, *clean = NULL;
        char *token;
        int r;

        if (!key || !machine_id || !ret || lifetime_sec == 0)
                return -EINVAL;
        if (now_sec > INT64_MAX || lifetime_sec > (uint64_t) INT64_MAX - now_sec)
                return -ERANGE;
        /* jansson takes valid UTF-8 only; say so rather than fail like an allocation. */
        clean = strdup(machine_id);
        if (!clean)
                return -ENOMEM;
        utf8_sanitize(clean);
        if (!streq(clean, machine_id))
                return -EINVAL;

        r = claims_format(server_id, machine_id, now_sec, now_sec + lifetime_sec, &claims);
        if (r < 0)
                return r;
        r = token_jws_hs256(key->bytes, sizeof(key->bytes), token_header, strlen(token_header),
                            claims, strlen(claims), &token);
        if (r < 0)
                return r;
        *ret = token;
        return 0;
}

typedef struct TokenParts {
        const char *header, *payload, *signature;
        size_t header_len, payload_len, signature_len;
} TokenParts;

static int token_split(const char *token, TokenParts *ret) {
        size_t len = strnlen(token, TOKEN_SIZE_MAX + 1);
        const char *dot1, *dot2, *end = token + len;

        if (len > TOKEN_SIZE_MAX)
                return -EBADMSG;
        dot1 = memchr(token, '.', len);
        if (!dot1)
                return -EBADMSG;
        dot2 = memchr(dot1 + 1, '.', (size_t) (end - dot1 - 1));
        if (!dot2 || memchr(dot2 + 1, '.', (size_t) (end - dot2 - 1)))
                return -EBADMSG;
        *ret = (TokenParts) {
                .header = token,
                .header_len = (size_t) (dot1 - token),
                .payload = dot1 + 1,
                .payload_len = (size_t) (dot2 - dot1 - 1),
                .signature = dot2 + 1,
                .signature_len = (size_t) (end - dot2 - 1),
        };
        if (ret->header_len == 0 || ret->payload_len == 0 || ret->signature_len == 0)
                return -EBADMSG;
        return 0;
}

static int check_signature(const TokenKey *key, const char *token, const TokenParts *t) {
        _cleanup_free_ uint8_t *sig = NULL;
        uint8_t mac[HS256_SIZE];
        size_t sig_size;
        int r;

        r = token_base64url_decode(t->signature, t->signature_len, &sig, &sig_size);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || sig_size != sizeof(mac))
                return -EBADMSG;
        /* The signing input is everything before the second dot, exactly as received. */
        r = token_hmac_sha256(key->bytes, sizeof(key->bytes), token,
                              (size_t) (t->signature - 1 - token), mac);
        if (r < 0)
                return r;
        return digest_equal(mac, sig, sizeof(mac)) ? 0 : -EKEYREJECTED;
}

static int decode_object(const char *s, size_t len, json_t **ret) {
        _cleanup_free_ uint8_t *raw = NULL;
        json_t *j;
        size_t n;
        int r;

        r = token_base64url_decode(s, len, &raw, &n);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return -EBADMSG;
        j = json_loadb((const char *) raw, n, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(j)) {
                json_decref(j);
                return -EBADMSG;
        }
        *ret = j;
        return 0;
}

static int check_header(const json_t *h) {
        const json_t *typ = json_object_get(h, "typ");

        /* Only HS256: never "none", never a key-confusion with another algorithm. */
        if (!streq_ptr(json_string_value(json_object_get(h, "alg")), "HS256"))
                return -EKEYREJECTED;
        if (typ && !streq_ptr(json_string_value(typ), "JWT"))
                return -EKEYREJECTED;
        return 0;
}

static int check_claims(const json_t *c, uint64_t now_sec, unsigned *ret_server_id) {
        const json_t *exp = json_object_get(c, "exp"), *id = json_object_get(c, "server_id");
        const char *sub = json_string_value(json_object_get(c, "sub"));
        json_int_t server_id;
        char want_sub[16];

        if (!json_is_integer(exp) || !json_is_integer(id) || !sub)
                return -EBADMSG;
        if (!streq_ptr(json_string_value(json_object_get(c, "iss")), TOKEN_ISSUER) ||
            !streq_ptr(json_string_value(json_object_get(c, "aud")), TOKEN_AUDIENCE))
                return -EKEYREJECTED;
        server_id = json_integer_value(id);
        if (server_id < 0 || server_id > UINT_MAX)
                return -EKEYREJECTED;
        (void) snprintf(want_sub, sizeof(want_sub), "%u", (unsigned) server_id);
        if (!streq(sub, want_sub))
                return -EKEYREJECTED;
        /* RFC 7519 §4.1.4: valid only before exp. */
        if (json_integer_value(exp) < 0 || (uint64_t) json_integer_value(exp) <= now_sec)
                return -EKEYEXPIRED;
        *ret_server_id = (unsigned) server_id;
        return 0;
}

int token_verify(const TokenKey *key, const char *token, uint64_t now_sec, unsigned *ret_server_id) {
        json_auto_t *header = NULL, *claims = NULL;
        unsigned server_id;
        TokenParts t;
        int r;

        if (!key || !token)
                return -EINVAL;
        r = token_split(token, &t);
        if (r < 0)
                return r;
        /* Authenticate before parsing any JSON. */
        r = check_signature(key, token, &t);
        if (r < 0)
                return r;
        r = decode_object(t.header, t.header_len, &header);
        if (r < 0)
                return r;
        r = check_header(header);
        if (r < 0)
                return r;
        r = decode_object(t.payload, t.payload_len, &claims);
        if (r < 0)
                return r;
        r = check_claims(claims, now_sec, &server_id);
        if (r < 0)
                return r;
        if (ret_server_id)
                *ret_server_id = server_id;
        return 0;
}
