/* SPDX-License-Identifier: MIT */
/* common/digest.c against the standards' own vectors (FIPS 180-4's examples, RFC 4231,
 * RFC 4648, RFC 6455), and against OpenSSL, which slotd used before, on inputs of every
 * length around the block boundaries. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "digest.h"
#include "macro.h"

static void hex(const uint8_t *b, size_t n, char *out) {
        for (size_t i = 0; i < n; i++)
                sprintf(out + 2 * i, "%02x", b[i]);
}

static void check_sha256(const void *data, size_t n, const char *expect) {
        uint8_t md[SHA256_DIGEST_SIZE];
        char text[2 * SHA256_DIGEST_SIZE + 1];

        sha256(data, n, md);
        hex(md, sizeof(md), text);
        assert_string_equal(text, expect);
}

static void check_sha1(const void *data, size_t n, const char *expect) {
        uint8_t md[SHA1_DIGEST_SIZE];
        char text[2 * SHA1_DIGEST_SIZE + 1];

        sha1(data, n, md);
        hex(md, sizeof(md), text);
        assert_string_equal(text, expect);
}

static const char abc56[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";

static void test_sha256_vectors(_unused_ void **state) {
        char *million = malloc(1000000);
        Sha256 c;
        uint8_t md[SHA256_DIGEST_SIZE];
        char text[2 * SHA256_DIGEST_SIZE + 1];

        check_sha256("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        check_sha256("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        check_sha256(abc56, strlen(abc56),
                     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        assert_non_null(million);
        memset(million, 'a', 1000000);
        check_sha256(million, 1000000,
                     "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
        /* The same in uneven pieces. */
        sha256_init(&c);
        for (size_t done = 0, step = 1; done < 1000000; done += step, step = step * 7 % 997 + 1)
                sha256_update(&c, million + done, MIN(step, (size_t) 1000000 - done));
        sha256_final(&c, md);
        hex(md, sizeof(md), text);
        assert_string_equal(text, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
        free(million);
}

static void test_sha1_vectors(_unused_ void **state) {
        char *million = malloc(1000000);

        check_sha1("", 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        check_sha1("abc", 3, "a9993e364706816aba3e25717850c26c9cd0d89d");
        check_sha1(abc56, strlen(abc56), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
        assert_non_null(million);
        memset(million, 'a', 1000000);
        check_sha1(million, 1000000, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
        free(million);
}

static void check_hmac(const void *key, size_t key_size, const char *data, const char *expect) {
        uint8_t md[SHA256_DIGEST_SIZE];
        char text[2 * SHA256_DIGEST_SIZE + 1];

        hmac_sha256(key, key_size, data, strlen(data), md);
        hex(md, sizeof(md), text);
        assert_string_equal(text, expect);
}

/* RFC 4231 §4.2, §4.3 and §4.7. */
static void test_hmac_vectors(_unused_ void **state) {
        uint8_t k20[20], k131[131];

        memset(k20, 0x0b, sizeof(k20));
        memset(k131, 0xaa, sizeof(k131));
        check_hmac(k20, sizeof(k20), "Hi There",
                   "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
        check_hmac("Jefe", 4, "what do ya want for nothing?",
                   "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        check_hmac(k131, sizeof(k131), "Test Using Larger Than Block-Size Key - Hash Key First",
                   "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

/* Every length from 0 to 300 (each padding case, one to five blocks), keys of 0 to 130 bytes. */
static void test_against_openssl(_unused_ void **state) {
        uint8_t data[300], key[130], a[64], b[64];
        unsigned len = 0;

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t) (i * 131 + 7);
        for (size_t i = 0; i < sizeof(key); i++)
                key[i] = (uint8_t) (i * 17 + 3);
        for (size_t n = 0; n <= sizeof(data); n++) {
                sha256(data, n, a);
                assert_true(EVP_Digest(data, n, b, &len, EVP_sha256(), NULL));
                assert_int_equal(len, SHA256_DIGEST_SIZE);
                assert_memory_equal(a, b, SHA256_DIGEST_SIZE);
                sha1(data, n, a);
                assert_true(EVP_Digest(data, n, b, &len, EVP_sha1(), NULL));
                assert_memory_equal(a, b, SHA1_DIGEST_SIZE);
        }
        for (size_t k = 0; k <= sizeof(key); k++) {
                size_t n = (k * 7) % sizeof(data);

                hmac_sha256(key, k, data, n, a);
                assert_non_null(HMAC(EVP_sha256(), k ? key : (const uint8_t *) "", (int) k, data, n,
                                     b, &len));
                assert_memory_equal(a, b, SHA256_DIGEST_SIZE);
        }
}

static void check_b64(const char *plain, const char *encoded) {
        char out[64];
        uint8_t back[64];
        ssize_t n;

        assert_int_equal(base64_encode(plain, strlen(plain), out), strlen(encoded));
        assert_string_equal(out, encoded);
        n = base64_decode(encoded, strlen(encoded), back);
        assert_int_equal(n, (ssize_t) strlen(plain));
        assert_memory_equal(back, plain, strlen(plain));
}

static void test_base64(_unused_ void **state) {
        uint8_t out[64], md[SHA1_DIGEST_SIZE];
        char accept[BASE64_ENCODED_SIZE(SHA1_DIGEST_SIZE)];
        const char *ws = "dGhlIHNhbXBsZSBub25jZQ==258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

        /* RFC 4648 §10. */
        check_b64("", "");
        check_b64("f", "Zg==");
        check_b64("fo", "Zm8=");
        check_b64("foo", "Zm9v");
        check_b64("foob", "Zm9vYg==");
        check_b64("fooba", "Zm9vYmE=");
        check_b64("foobar", "Zm9vYmFy");
        assert_int_equal(base64_decode("/+8=", 4, out), 2);
        assert_int_equal(out[0], 0xff);
        assert_int_equal(out[1], 0xef);

        /* Unpadded and with whitespace, as OpenSSL's decoder took them. */
        assert_int_equal(base64_decode("Zm9vYg", 6, out), 4);
        assert_int_equal(base64_decode("Zm9v\nYmFy\n", 10, out), 6);
        assert_memory_equal(out, "foobar", 6);

        /* Not base64. */
        assert_int_equal(base64_decode("Zm9vY", 5, out), -EINVAL);
        assert_int_equal(base64_decode("Zm9v!", 5, out), -EINVAL);
        assert_int_equal(base64_decode("Zg==Zg==", 8, out), -EINVAL);
        assert_int_equal(base64_decode("Zg=", 3, out), -EINVAL);
        assert_int_equal(base64_decode("Zm9===", 6, out), -EINVAL);
        assert_int_equal(base64_decode("Zm9v-_", 6, out), -EINVAL);

        /* RFC 6455 §1.3's handshake. */
        sha1(ws, strlen(ws), md);
        assert_int_equal(base64_encode(md, sizeof(md), accept), 28);
        assert_string_equal(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static void test_equal(_unused_ void **state) {
        assert_true(digest_equal("abc", "abc", 3));
        assert_false(digest_equal("abc", "abd", 3));
        assert_false(digest_equal("xbc", "abc", 3));
        assert_true(digest_equal("a", "b", 0));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sha256_vectors), cmocka_unit_test(test_sha1_vectors),
                cmocka_unit_test(test_hmac_vectors),   cmocka_unit_test(test_against_openssl),
                cmocka_unit_test(test_base64),         cmocka_unit_test(test_equal),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
