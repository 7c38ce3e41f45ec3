/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>

#include "macro.h"
#include "token.h"

#define NOW UINT64_C(1700000000)

static void assert_hex(const uint8_t *p, size_t n, const char *hex) {
        char buf[2 * 64 + 1] = "";

        assert_true(n <= 64);
        for (size_t i = 0; i < n; i++)
                sprintf(buf + 2 * i, "%02x", p[i]);
        assert_string_equal(buf, hex);
}

/* RFC 4231 §4.2 and §4.3: test cases 1 and 2, HMAC-SHA-256. */
static void test_hmac_rfc4231(_unused_ void **state) {
        uint8_t key1[20], mac[32];

        memset(key1, 0x0b, sizeof(key1));
        assert_int_equal(token_hmac_sha256(key1, sizeof(key1), "Hi There", 8, mac), 0);
        assert_hex(mac, sizeof(mac),
                   "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
        assert_int_equal(token_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, mac), 0);
        assert_hex(mac, sizeof(mac),
                   "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

/* RFC 7515 Appendix A.1: the exact JWS Protected Header and Payload octets (CRLF and all), the
 * JWK's "k", and the resulting compact serialization. */
static void test_jws_rfc7515_a1(_unused_ void **state) {
        static const char k[] = "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0i"
                                "PS4hcgUuTwjAzZr1Z9CAow";
        static const char header[] = "{\"typ\":\"JWT\",\r\n \"alg\":\"HS256\"}";
        static const char payload[] = "{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n "
                                      "\"http://example.com/is_root\":true}";
        static const char want[] =
                "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9"
                "."
                "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb"
                "290Ijp0cnVlfQ"
                "."
                "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        _cleanup_free_ uint8_t *key = NULL;
        _cleanup_free_ char *jws = NULL;
        size_t key_size;

        assert_int_equal(token_base64url_decode(k, strlen(k), &key, &key_size), 0);
        assert_int_equal(key_size, 64);
        assert_int_equal(key[0], 3);
        assert_int_equal(key[1], 35);
        assert_int_equal(key[63], 163);
        assert_int_equal(token_jws_hs256(key, key_size, header, strlen(header), payload,
                                         strlen(payload), &jws),
                         0);
        assert_string_equal(jws, want);
}

static void test_base64url(_unused_ void **state) {
        /* RFC 4648 §10, without the padding, and the two characters base64url changes. */
        static const struct {
                const char *plain, *encoded;
        } v[] = {
                { "", "" },           { "f", "Zg" },          { "fo", "Zm8" },
                { "foo", "Zm9v" },    { "foob", "Zm9vYg" },   { "fooba", "Zm9vYmE" },
                { "foobar", "Zm9vYmFy" }, { "\xfb\xff", "-_8" },
        };
        static const char *const bad[] = { "Zg==", "Z", "Zm9vY", "Zh", "Zm9!", "Zm+v", "Zm/v" };

        for (size_t i = 0; i < ELEMENTSOF(v); i++) {
                _cleanup_free_ char *e = NULL;
                _cleanup_free_ uint8_t *d = NULL;
                size_t n;

                assert_int_equal(token_base64url_encode(v[i].plain, strlen(v[i].plain), &e), 0);
                assert_string_equal(e, v[i].encoded);
                assert_int_equal(token_base64url_decode(e, strlen(e), &d, &n), 0);
                assert_int_equal(n, strlen(v[i].plain));
                assert_memory_equal(d, v[i].plain, n);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                uint8_t *d = (uint8_t *) "untouched";
                size_t n = 77;

                assert_int_equal(token_base64url_decode(bad[i], strlen(bad[i]), &d, &n), -EINVAL);
                assert_int_equal(n, 77);
        }
}

static void test_round_trip(_unused_ void **state) {
        _cleanup_free_ char *token = NULL;
        TokenKey key, other;
        unsigned id = 0;

        assert_int_equal(token_key_new(&key), 0);
        assert_int_equal(token_key_new(&other), 0);
        assert_memory_not_equal(&key, &other, sizeof(key));

        assert_int_equal(token_sign(&key, 4711, "b8c9a7e0-machine", NOW, 600, &token), 0);
        assert_int_equal(token_verify(&key, token, NOW, &id), 0);
        assert_int_equal(id, 4711);
        assert_int_equal(token_verify(&key, token, NOW + 599, NULL), 0);

        /* Expiry: valid strictly before exp. */
        id = 1;
        assert_int_equal(token_verify(&key, token, NOW + 600, &id), -EKEYEXPIRED);
        assert_int_equal(token_verify(&key, token, UINT64_MAX, &id), -EKEYEXPIRED);
        /* Another slotd run's key. */
        assert_int_equal(token_verify(&other, token, NOW, &id), -EKEYREJECTED);
        assert_int_equal(id, 1);
}

/* Replaces the payload segment of 'token' with the base64url of 'json', keeping the rest. */
static char *with_payload(const char *token, const char *json) {
        _cleanup_free_ char *p = NULL;
        const char *dot1 = strchr(token, '.'), *dot2 = strrchr(token, '.');
        char *t;

        assert_int_equal(token_base64url_encode(json, strlen(json), &p), 0);
        assert_true(asprintf(&t, "%.*s.%s%s", (int) (dot1 - token), token, p, dot2) > 0);
        return t;
}

static void test_tampered(_unused_ void **state) {
        _cleanup_free_ char *token = NULL, *forged = NULL, *none = NULL, *bad_iss = NULL;
        TokenKey key;
        unsigned id = 99;
        char *dot2, was;

        assert_int_equal(token_key_new(&key), 0);
        assert_int_equal(token_sign(&key, 7, "m", NOW, 600, &token), 0);

        /* Another server id in the payload, the signature left as it was. */
        forged = with_payload(token, "{\"sub\":\"8\",\"iss\":\"slotd\",\"aud\":"
                                     "\"multiplay-local-proxy\",\"iat\":1700000000,"
                                     "\"exp\":1700000600,\"server_id\":8}");
        assert_int_equal(token_verify(&key, forged, NOW, &id), -EKEYREJECTED);

        /* One character of the payload, one of the signature. */
        was = token[40];
        token[40] = was == 'A' ? 'B' : 'A';
        assert_int_equal(token_verify(&key, token, NOW, &id), -EKEYREJECTED);
        token[40] = was;
        assert_int_equal(token_verify(&key, token, NOW, &id), 0);
        assert_int_equal(id, 7);
        id = 99;
        dot2 = strrchr(token, '.');
        dot2[1] = dot2[1] == 'A' ? 'B' : 'A';
        assert_int_equal(token_verify(&key, token, NOW, &id), -EKEYREJECTED);
        /* A signature cut short, gone, or followed by a fourth segment. */
        dot2[1] = '\0';
        assert_int_equal(token_verify(&key, token, NOW, &id), -EBADMSG);
        dot2[0] = '\0';
        assert_int_equal(token_verify(&key, token, NOW, &id), -EBADMSG);
        assert_int_equal(token_verify(&key, "a.b.c.d", NOW, &id), -EBADMSG);
        assert_int_equal(token_verify(&key, "", NOW, &id), -EBADMSG);

        /* Signed with the right key, but alg "none" or another issuer. */
        static const char hdr_none[] = "{\"alg\":\"none\",\"typ\":\"JWT\"}";
        static const char claims[] = "{\"sub\":\"7\",\"iss\":\"slotd\",\"aud\":"
                                     "\"multiplay-local-proxy\",\"exp\":1700000600,"
                                     "\"server_id\":7}";
        assert_int_equal(token_jws_hs256(key.bytes, sizeof(key.bytes), hdr_none, strlen(hdr_none),
                                         claims, strlen(claims), &none),
                         0);
        assert_int_equal(token_verify(&key, none, NOW, &id), -EKEYREJECTED);
        static const char hdr[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
        static const char other_iss[] = "{\"sub\":\"7\",\"iss\":\"mallory\",\"aud\":"
                                        "\"multiplay-local-proxy\",\"exp\":1700000600,"
                                        "\"server_id\":7}";
        assert_int_equal(token_jws_hs256(key.bytes, sizeof(key.bytes), hdr, strlen(hdr),
                                         other_iss, strlen(other_iss), &bad_iss),
                         0);
        assert_int_equal(token_verify(&key, bad_iss, NOW, &id), -EKEYREJECTED);
        assert_int_equal(id, 99);
}

static void test_claims(_unused_ void **state) {
        static const char want_prefix[] =
                "{\"sub\":\"7\",\"iss\":\"slotd\",\"aud\":\"multiplay-local-proxy\","
                "\"iat\":1700000000,\"exp\":1700000600,\"server_id\":7,"
                "\"machine_id\":\"m\\\"1\",\"jti\":\"";
        _cleanup_free_ char *token = NULL, *a = NULL, *b = NULL;
        _cleanup_free_ uint8_t *header = NULL, *payload = NULL;
        json_auto_t *j = NULL;
        const char *dot1, *dot2, *jti;
        size_t header_size, payload_size;
        TokenKey key;

        assert_int_equal(token_key_new(&key), 0);
        assert_int_equal(token_sign(&key, 7, "m\"1", NOW, 600, &token), 0);
        dot1 = strchr(token, '.');
        dot2 = strrchr(token, '.');
        assert_int_equal(token_base64url_decode(token, (size_t) (dot1 - token), &header,
                                                &header_size),
                         0);
        assert_int_equal(header_size, strlen("{\"alg\":\"HS256\",\"typ\":\"JWT\"}"));
        assert_memory_equal(header, "{\"alg\":\"HS256\",\"typ\":\"JWT\"}", header_size);

        assert_int_equal(token_base64url_decode(dot1 + 1, (size_t) (dot2 - dot1 - 1), &payload,
                                                &payload_size),
                         0);
        /* The claims in their order, then a v4 UUID and the end of the object. */
        assert_true(payload_size == strlen(want_prefix) + 36 + 2);
        assert_memory_equal(payload, want_prefix, strlen(want_prefix));
        assert_memory_equal(payload + payload_size - 2, "\"}", 2);
        j = json_loadb((const char *) payload, payload_size, JSON_REJECT_DUPLICATES, NULL);
        assert_non_null(j);
        jti = json_string_value(json_object_get(j, "jti"));
        assert_non_null(jti);
        assert_int_equal(strlen(jti), 36);
        assert_int_equal(jti[8], '-');
        assert_int_equal(jti[14], '4');
        assert_non_null(strchr("89ab", jti[19]));
        assert_string_equal(json_string_value(json_object_get(j, "machine_id")), "m\"1");

        /* Every token gets its own jti. */
        assert_int_equal(token_sign(&key, 7, "m", NOW, 600, &a), 0);
        assert_int_equal(token_sign(&key, 7, "m", NOW, 600, &b), 0);
        assert_string_not_equal(a, b);
}

static void test_sign_invalid(_unused_ void **state) {
        char *token = (char *) "untouched";
        TokenKey key = {};

        assert_int_equal(token_sign(&key, 1, "m", NOW, 0, &token), -EINVAL);
        assert_int_equal(token_sign(&key, 1, NULL, NOW, 600, &token), -EINVAL);
        assert_int_equal(token_sign(NULL, 1, "m", NOW, 600, &token), -EINVAL);
        assert_int_equal(token_sign(&key, 1, "m\xff", NOW, 600, &token), -EINVAL);
        assert_int_equal(token_sign(&key, 1, "m", (uint64_t) INT64_MAX, 1, &token), -ERANGE);
        assert_int_equal(token_sign(&key, 1, "m", UINT64_MAX, 1, &token), -ERANGE);
        assert_string_equal(token, "untouched");

        /* The largest server id survives the round trip. */
        assert_int_equal(token_sign(&key, UINT_MAX, "m", NOW, 1, &token), 0);
        unsigned id = 0;
        assert_int_equal(token_verify(&key, token, NOW, &id), 0);
        assert_int_equal(id, UINT_MAX);
        free(token);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_hmac_rfc4231),
                cmocka_unit_test(test_jws_rfc7515_a1),
                cmocka_unit_test(test_base64url),
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_tampered),
                cmocka_unit_test(test_claims),
                cmocka_unit_test(test_sign_invalid),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
