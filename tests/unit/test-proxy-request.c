/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "macro.h"
#include "request.h"

static int route(const char *method, const char *path, ProxyRoute *r) {
        *r = (ProxyRoute){ .server = 4242 };
        return request_route(method, path, r);
}

static void test_routes(_unused_ void **state) {
        ProxyRoute r;

        assert_int_equal(route("PATCH", "/v1/servers/7/allocations/a-b_c.d:e", &r), 0);
        assert_int_equal(r.op, PROXY_OP_READY);
        assert_int_equal(r.server, 7);
        assert_string_equal(r.allocation, "a-b_c.d:e");

        assert_int_equal(route("POST", "/v1/servers/0/hold", &r), 0);
        assert_int_equal(r.op, PROXY_OP_HOLD);
        assert_int_equal(r.server, 0);
        assert_int_equal(route("GET", "/v1/servers/12/hold", &r), 0);
        assert_int_equal(r.op, PROXY_OP_HOLD_STATUS);
        assert_int_equal(route("DELETE", "/v1/servers/12/hold", &r), 0);
        assert_int_equal(r.op, PROXY_OP_RELEASE_HOLD);

        assert_int_equal(route("POST", "/v1/servers/3/reservations", &r), 0);
        assert_int_equal(r.op, PROXY_OP_RESERVE);
        assert_int_equal(route("DELETE", "/v1/servers/3/reservations", &r), 0);
        assert_int_equal(r.op, PROXY_OP_UNRESERVE);
        assert_int_equal(route("DELETE", "/v1/servers/3/reservations/r-1", &r), 0);
        assert_int_equal(r.op, PROXY_OP_UNRESERVE);
        assert_int_equal(r.server, 3);

        assert_int_equal(route("GET", "/payload/6f1c9a3e-0000-4000-8000-000000000001", &r), 0);
        assert_int_equal(r.op, PROXY_OP_PAYLOAD);
        assert_string_equal(r.allocation, "6f1c9a3e-0000-4000-8000-000000000001");
        assert_int_equal(route("GET", "/token", &r), 0);
        assert_int_equal(r.op, PROXY_OP_TOKEN);
        assert_int_equal(route("GET", "/v1/connection/websocket", &r), 0);
        assert_int_equal(r.op, PROXY_OP_WEBSOCKET);

        assert_string_equal(proxy_op_to_string(PROXY_OP_HOLD_STATUS), "hold_status");
        assert_string_equal(proxy_op_to_string(PROXY_OP_UNRESERVE), "unreserve");
        assert_null(proxy_op_to_string(PROXY_OP_WEBSOCKET));
        assert_null(proxy_op_to_string(_PROXY_OP_MAX));
}

static void test_route_errors(_unused_ void **state) {
        char long_id[PROXY_ID_MAX + 40];
        ProxyRoute r;

        /* 404: no such path, and near misses of real ones. */
        assert_int_equal(route("GET", "/", &r), -ENOENT);
        assert_int_equal(route("GET", "", &r), -ENOENT);
        assert_int_equal(route("GET", "token", &r), -ENOENT);
        assert_int_equal(route("GET", "/token/", &r), -ENOENT);
        assert_int_equal(route("GET", "//token", &r), -ENOENT);
        assert_int_equal(route("GET", "/v1/servers/1/hold/x", &r), -ENOENT);
        assert_int_equal(route("GET", "/v1/servers/1", &r), -ENOENT);
        assert_int_equal(route("GET", "/v1/servers/1/", &r), -ENOENT);
        assert_int_equal(route("GET", "/v2/servers/1/hold", &r), -ENOENT);
        assert_int_equal(route("GET", "/a/b/c/d/e/f/g/h", &r), -ENOENT);
        assert_int_equal(route("GET", "/payload", &r), -ENOENT);
        assert_int_equal(route("PATCH", "/v1/servers/1/allocations", &r), -ENOENT);
        /* Failure leaves the output alone. */
        assert_int_equal(r.server, 4242);

        /* 405, with what the path takes. */
        assert_int_equal(route("PUT", "/v1/servers/1/hold", &r), -EOPNOTSUPP);
        assert_string_equal(r.allow, "GET, POST, DELETE");
        assert_int_equal(route("GET", "/v1/servers/1/allocations/x", &r), -EOPNOTSUPP);
        assert_string_equal(r.allow, "PATCH");
        assert_int_equal(route("POST", "/token", &r), -EOPNOTSUPP);
        assert_int_equal(route("get", "/token", &r), -EOPNOTSUPP);
        assert_int_equal(route("GET", "/v1/servers/1/reservations/x", &r), -EOPNOTSUPP);
        assert_string_equal(r.allow, "DELETE");

        /* 400: malformed IDs in the path. */
        assert_int_equal(route("GET", "/v1/servers/x/hold", &r), -EINVAL);
        assert_int_equal(route("GET", "/v1/servers/-1/hold", &r), -EINVAL);
        assert_int_equal(route("GET", "/v1/servers/01/hold", &r), -EINVAL);
        assert_int_equal(route("GET", "/v1/servers/4294967295/hold", &r), -EINVAL);
        assert_int_equal(route("GET", "/v1/servers/99999999999/hold", &r), -EINVAL);
        assert_int_equal(route("GET", "/v1/servers/1%32/hold", &r), -EINVAL);
        assert_int_equal(route("GET", "/v1/servers/4294967294/hold", &r), 0);
        assert_int_equal(route("PATCH", "/v1/servers/1/allocations/a%20b", &r), -EINVAL);
        assert_int_equal(route("GET", "/payload/a b", &r), -EINVAL);
        memset(long_id, 'a', sizeof(long_id));
        memcpy(long_id, "/payload/", 9);
        long_id[9 + PROXY_ID_MAX] = '\0';
        assert_int_equal(route("GET", long_id, &r), 0);
        long_id[9 + PROXY_ID_MAX] = 'a';
        long_id[9 + PROXY_ID_MAX + 1] = '\0';
        assert_int_equal(route("GET", long_id, &r), -EINVAL);
}

static void test_bodies(_unused_ void **state) {
        bool ready = false;
        usec_t t = 0;

        assert_int_equal(request_parse_ready("{\"ready\":true}", 14, &ready), 0);
        assert_true(ready);
        assert_int_equal(request_parse_ready("{\"ready\":false,\"x\":[1]}", 23, &ready), 0);
        assert_false(ready);
        assert_int_equal(request_parse_ready("{\"ready\":1}", 11, &ready), -EBADMSG);
        assert_int_equal(request_parse_ready("{}", 2, &ready), -EBADMSG);
        assert_int_equal(request_parse_ready("", 0, &ready), -EBADMSG);
        assert_int_equal(request_parse_ready("[true]", 6, &ready), -EBADMSG);
        assert_int_equal(request_parse_ready("{\"ready\":true,\"ready\":false}", 28, &ready),
                         -EBADMSG);
        /* A NUL inside the body ends nothing early: the size counts. */
        assert_int_equal(request_parse_ready("{\"ready\":true}\0junk", 19, &ready), -EBADMSG);

        assert_int_equal(request_parse_hold("{\"timeout\":\"2m\"}", 16, &t), 0);
        assert_int_equal(t, 2 * USEC_PER_MINUTE);
        assert_int_equal(request_parse_hold("{\"timeout\":120}", 15, &t), -EBADMSG);
        assert_int_equal(request_parse_hold("{\"timeout\":\"2 m\"}", 17, &t), -EBADMSG);
        assert_int_equal(request_parse_hold("{\"timeout\":\"9000h\"}", 19, &t), -ERANGE);
        assert_int_equal(request_parse_hold("{}", 2, &t), -EBADMSG);

        assert_int_equal(request_parse_reserve("", 0), 0);
        assert_int_equal(request_parse_reserve("{}", 2), 0);
        assert_int_equal(request_parse_reserve("{\"a\":1}", 7), 0);
        assert_int_equal(request_parse_reserve("[]", 2), -EBADMSG);
        assert_int_equal(request_parse_reserve("{", 1), -EBADMSG);
}

static void test_durations(_unused_ void **state) {
        usec_t t = 1;

        assert_int_equal(request_parse_duration("0", &t), 0);
        assert_int_equal(t, 0);
        assert_int_equal(request_parse_duration("90s", &t), 0);
        assert_int_equal(t, 90 * USEC_PER_SEC);
        assert_int_equal(request_parse_duration("1h30m", &t), 0);
        assert_int_equal(t, 90 * USEC_PER_MINUTE);
        assert_int_equal(request_parse_duration("1h1m1s", &t), 0);
        assert_int_equal(t, 3661 * USEC_PER_SEC);
        assert_int_equal(request_parse_duration("8760h", &t), 0);
        assert_int_equal(t, PROXY_DURATION_MAX_USEC);

        assert_int_equal(request_parse_duration("8760h1s", &t), -ERANGE);
        assert_int_equal(request_parse_duration("99999999999999999999s", &t), -ERANGE);
        assert_int_equal(request_parse_duration("", &t), -EINVAL);
        assert_int_equal(request_parse_duration("5", &t), -EINVAL);
        assert_int_equal(request_parse_duration("s", &t), -EINVAL);
        assert_int_equal(request_parse_duration("5d", &t), -EINVAL);
        assert_int_equal(request_parse_duration("1.5h", &t), -EINVAL);
        assert_int_equal(request_parse_duration("-5s", &t), -EINVAL);
        assert_int_equal(request_parse_duration("5s ", &t), -EINVAL);
        assert_int_equal(request_parse_duration("5ms", &t), -EINVAL);
        assert_int_equal(t, PROXY_DURATION_MAX_USEC);
}

static void test_channels(_unused_ void **state) {
        unsigned s = 9;

        assert_int_equal(request_parse_channel("server#12", &s), 0);
        assert_int_equal(s, 12);
        assert_int_equal(request_parse_channel("server#", &s), -EINVAL);
        assert_int_equal(request_parse_channel("server#012", &s), -EINVAL);
        assert_int_equal(request_parse_channel("server#1a", &s), -EINVAL);
        assert_int_equal(request_parse_channel("server12", &s), -EINVAL);
        assert_int_equal(request_parse_channel("Server#1", &s), -EINVAL);
        assert_int_equal(request_parse_channel("server#4294967295", &s), -EINVAL);
        assert_int_equal(request_parse_channel("", &s), -EINVAL);
        assert_int_equal(s, 12);
}

static void test_error_status(_unused_ void **state) {
        assert_int_equal(request_error_status("access-denied"), 403);
        assert_int_equal(request_error_status("no-such-slot"), 404);
        assert_int_equal(request_error_status("no-such-allocation"), 404);
        assert_int_equal(request_error_status("invalid-state"), 409);
        assert_int_equal(request_error_status("invalid-argument"), 400);
        assert_int_equal(request_error_status("no-capacity"), 409);
        assert_int_equal(request_error_status("draining"), 409);
        assert_int_equal(request_error_status("unavailable"), 503);
        assert_int_equal(request_error_status("failed"), 500);
        assert_int_equal(request_error_status("state-unwritable"), 503);
        assert_int_equal(request_error_status("made-up"), 500);
        assert_int_equal(request_error_status(NULL), 500);
}

static void assert_json(json_t *j, const char *expected) {
        char *text;

        assert_non_null(j);
        text = json_dumps(j, JSON_COMPACT);
        assert_string_equal(text, expected);
        free(text);
        json_decref(j);
}

static void test_bodies_out(_unused_ void **state) {
        json_t *in;

        in = json_pack("{s:b,s:I}", "held", 1, "expires_at", (json_int_t) 1700000000);
        assert_json(request_hold_body(in), "{\"expiresAt\":1700000000,\"held\":true}");
        json_decref(in);
        in = json_pack("{s:b}", "held", 0);
        assert_null(request_hold_body(in));
        json_decref(in);

        in = json_pack("{s:s,s:s,s:i,s:s,s:s,s:s,s:s,s:s}", "reservation_id", "r1",
                       "build_configuration_id", "1234", "game_port", 9000, "ipv4", "10.0.0.1",
                       "ipv6", "::1", "requested", "2024-01-01T00:00:00Z", "created",
                       "2024-01-01T00:00:01Z", "fulfilled", "2024-01-01T00:00:02Z");
        assert_json(request_reservation_body(in),
                    "{\"reservationId\":\"r1\",\"buildConfigurationId\":1234,\"gamePort\":9000,"
                    "\"ipv4\":\"10.0.0.1\",\"ipv6\":\"::1\","
                    "\"requested\":\"2024-01-01T00:00:00Z\","
                    "\"created\":\"2024-01-01T00:00:01Z\","
                    "\"fulfilled\":\"2024-01-01T00:00:02Z\"}");
        /* Not all digits, a leading zero, too long for a double: 0, never a string (Unity's
         * SDKs decode an int64 and would fail the whole reply on a string). */
        static const char *const not_numbers[] = { "shooter-eu", "0123", "12345678901234567890",
                                                   "" };
        for (size_t i = 0; i < ELEMENTSOF(not_numbers); i++) {
                json_object_set_new(in, "build_configuration_id", json_string(not_numbers[i]));
                json_t *out = request_reservation_body(in);
                json_t *b = json_object_get(out, "buildConfigurationId");
                assert_true(json_is_integer(b));
                assert_int_equal(json_integer_value(b), 0);
                json_decref(out);
        }
        json_object_del(in, "game_port");
        assert_null(request_reservation_body(in));
        json_decref(in);

        in = json_pack("{s:s}", "token", "a.b.c");
        assert_json(request_token_body(in), "{\"token\":\"a.b.c\",\"error\":\"\"}");
        json_decref(in);
        in = json_object();
        assert_null(request_token_body(in));
        json_decref(in);
}

static void test_token_bucket(_unused_ void **state) {
        TokenBucket b = {};
        usec_t t = 1000 * USEC_PER_SEC;
        unsigned n = 0;

        /* Full at first: the burst, then nothing. */
        while (token_bucket_take(&b, 50, 100, t))
                n++;
        assert_int_equal(n, 100);
        /* 50 a second: one every 20 ms, however finely the time is cut. */
        for (unsigned i = 0; i < 19; i++)
                assert_false(token_bucket_take(&b, 50, 100, t + (i + 1) * USEC_PER_MSEC));
        assert_true(token_bucket_take(&b, 50, 100, t + 20 * USEC_PER_MSEC));
        assert_false(token_bucket_take(&b, 50, 100, t + 20 * USEC_PER_MSEC));
        /* A long pause fills it to the burst, not beyond. */
        t += 3600 * USEC_PER_SEC;
        for (n = 0; token_bucket_take(&b, 50, 100, t);)
                n++;
        assert_int_equal(n, 100);
        /* Time going backwards refills nothing. */
        assert_false(token_bucket_take(&b, 50, 100, t - USEC_PER_SEC));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_routes),
                cmocka_unit_test(test_route_errors),
                cmocka_unit_test(test_bodies),
                cmocka_unit_test(test_durations),
                cmocka_unit_test(test_channels),
                cmocka_unit_test(test_error_status),
                cmocka_unit_test(test_bodies_out),
                cmocka_unit_test(test_token_bucket),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
