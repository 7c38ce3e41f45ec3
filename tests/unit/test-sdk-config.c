/* SPDX-License-Identifier: MIT */
/*
 * slotd-test-server's server.json decoder (tests/gameserver/test-server-sdk-config.c): what
 * Unity's Go SDK v0.5.4 refuses, it refuses with Go's message.  The expected messages are
 * the SDK's own, copied from unity-sgs's log (tests/gameserver/test-double.sh compares the
 * two where the binary is there).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "test-server-sdk-config.h"

#define GOOD "\"serverID\": \"12\", \"machineID\": \"34\", \"port\": \"9000\", " \
             "\"queryPort\": \"9010\", \"fleetID\": \"f\", \"queryType\": \"sqp\""

static int decode(const char *text, char *error, size_t size)
{
        json_t *doc = NULL;
        int r;

        error[0] = '\0';
        r = sdk_config_decode(text, strlen(text), &doc, error, size);
        if (r == 0)
                assert_true(json_is_object(doc));
        else
                assert_null(doc);
        json_decref(doc);
        return r;
}

static void assert_refused(const char *text, const char *message)
{
        char error[1024];

        assert_int_equal(decode(text, error, sizeof(error)), -EINVAL);
        assert_string_equal(error, message);
}

static void assert_taken(const char *text)
{
        char error[1024];

        assert_int_equal(decode(text, error, sizeof(error)), 0);
}

static void test_number_literals(void **state)
{
        static const char *const good[] = { "0", "-0", "12", "-12", "1.5", "1e3", "1E+3",
                                            "-0.0e-0", "9223372036854775808" };
        static const char *const bad[] = { "", "-", "012", "+1", "1.", ".5", "1e", "0x10",
                                           " 12", "12 ", "1_000", "NaN", "3d1219c7" };

        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                assert_true(sdk_config_number_valid(good[i], strlen(good[i])));
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_false(sdk_config_number_valid(bad[i], strlen(bad[i])));
        /* The length counts, not a NUL. */
        assert_false(sdk_config_number_valid("1\0" "2", 3));
}

static void test_as_slotd_writes_it(void **state)
{
        assert_taken("{" GOOD ", \"allocatedUUID\": \"\", \"maxPlayers\": \"16\"}");
        assert_taken("{}");
        /* null leaves a field as it was; numbers in a string are numbers. */
        assert_taken("{\"serverID\": null, \"machineID\": \"1e3\", \"map\": null}");
        /* Only the first value is read: a rewrite in place may leave the old tail behind. */
        assert_taken("{" GOOD "} \"allocatedUUID\": \"u-1\"}\n");
}

static void test_number_fields(void **state)
{
        assert_refused("{" GOOD ", \"machineID\": \"3d1219c7c4c5404aaa1f6d2a48adfda4\"}",
                       "machineID: error decoding json: json: invalid number literal, trying to "
                       "unmarshal \"\\\"3d1219c7c4c5404aaa1f6d2a48adfda4\\\"\" into Number");
        assert_refused("{\"serverID\": \"\"}",
                       "serverID: error decoding json: json: invalid number literal, trying to "
                       "unmarshal \"\\\"\\\"\" into Number");
        assert_refused("{\"queryPort\": true}",
                       "queryPort: error decoding json: json: cannot unmarshal bool into Go "
                       "struct field Config.queryPort of type json.Number");
        assert_refused("{\"port\": [1]}",
                       "port: error decoding json: json: cannot unmarshal array into Go struct "
                       "field Config.port of type json.Number");
        /* A bad literal ends the decoding at once and wins over a wrong kind seen before. */
        assert_refused("{\"serverID\": true, \"port\": \"x\"}",
                       "port: error decoding json: json: invalid number literal, trying to "
                       "unmarshal \"\\\"x\\\"\" into Number");
        /* Keys find their field without regard to case. */
        assert_refused("{\"SERVERID\": \"x\"}",
                       "SERVERID: error decoding json: json: invalid number literal, trying to "
                       "unmarshal \"\\\"x\\\"\" into Number");
}

static void test_string_fields(void **state)
{
        assert_refused("{\"fleetID\": 7}",
                       "fleetID: error decoding json: json: cannot unmarshal number into Go "
                       "struct field Config.fleetID of type string");
        assert_refused("{\"queryType\": 7}",
                       "queryType: error decoding json: json: cannot unmarshal number into Go "
                       "struct field Config.queryType of type server.QueryProtocol");
        /* The first wrong kind is the one told. */
        assert_refused("{\"ip\": {}, \"serverID\": false}",
                       "ip: error decoding json: json: cannot unmarshal object into Go struct "
                       "field Config.ip of type string");
}

/* The second pass: every value into map[string]string. */
static void test_extra_values(void **state)
{
        assert_refused("{" GOOD ", \"maxPlayers\": 16}",
                       "maxPlayers: error decoding json: json: cannot unmarshal number into Go "
                       "value of type string");
        assert_refused("{\"serverID\": 12}",
                       "serverID: error decoding json: json: cannot unmarshal number into Go "
                       "value of type string");
        assert_refused("{\"debug\": true}",
                       "debug: error decoding json: json: cannot unmarshal bool into Go value of "
                       "type string");
}

static void test_documents(void **state)
{
        char error[256];

        assert_int_equal(decode("", error, sizeof(error)), -ENODATA);
        assert_int_equal(decode(" \n\t\r", error, sizeof(error)), -ENODATA);
        assert_string_equal(error, "error decoding json: EOF");
        assert_refused("{\"serverID\": ", "error decoding json: unexpected EOF");
        assert_refused("[]", "error decoding json: json: cannot unmarshal array into Go value "
                       "of type server.Config");
        assert_refused("\"x\"", "error decoding json: json: cannot unmarshal string into Go "
                       "value of type server.Config");
        assert_int_equal(decode("null", error, sizeof(error)), -EFAULT);
        assert_int_equal(decode("\xef\xbb\xbf{}", error, sizeof(error)), -EINVAL);
        assert_int_equal(decode("{\"a\" \"b\"}", error, sizeof(error)), -EINVAL);
}

static void test_fields(void **state)
{
        json_t *doc = NULL;
        char error[256];
        const char *text = "{\"serverID\": \"1\", \"ServerID\": \"2\", \"serverid\": null, "
                           "\"localProxyUrl\": \"\"}";

        assert_int_equal(sdk_config_decode(text, strlen(text), &doc, error, sizeof(error)), 0);
        /* The last key that matches and is not null. */
        assert_string_equal(sdk_config_field(doc, "serverID"), "2");
        assert_string_equal(sdk_config_field(doc, "localProxyUrl"), "");
        assert_null(sdk_config_field(doc, "queryType"));
        json_decref(doc);
}

static void test_server_id(void **state)
{
        char error[256];
        int64_t id;

        assert_int_equal(sdk_config_server_id("12", &id, error, sizeof(error)), 0);
        assert_int_equal(id, 12);
        assert_int_equal(sdk_config_server_id("-0", &id, error, sizeof(error)), 0);
        assert_int_equal(id, 0);
        assert_int_equal(sdk_config_server_id("9223372036854775807", &id, error, sizeof(error)),
                         0);
        assert_true(id == INT64_MAX);
        assert_int_equal(sdk_config_server_id("-9223372036854775808", &id, error,
                                              sizeof(error)), 0);
        assert_true(id == INT64_MIN);
        assert_int_equal(sdk_config_server_id("9223372036854775808", &id, error, sizeof(error)),
                         -ERANGE);
        assert_string_equal(error, "error parsing server ID: strconv.ParseInt: parsing "
                            "\"9223372036854775808\": value out of range");
        assert_int_equal(sdk_config_server_id("1.5", &id, error, sizeof(error)), -EINVAL);
        assert_string_equal(error, "error parsing server ID: strconv.ParseInt: parsing \"1.5\": "
                            "invalid syntax");
        assert_int_equal(sdk_config_server_id("", &id, error, sizeof(error)), -EINVAL);
        assert_int_equal(sdk_config_server_id("1e3", &id, error, sizeof(error)), -EINVAL);
        assert_int_equal(sdk_config_server_id("-", &id, error, sizeof(error)), -EINVAL);
}

static void test_query_type(void **state)
{
        enum sdk_query_type t;

        assert_int_equal(sdk_config_query_type(NULL, &t), 0);
        assert_int_equal(t, SDK_QUERY_SQP);
        assert_int_equal(sdk_config_query_type("", &t), 0);
        assert_int_equal(t, SDK_QUERY_SQP);
        assert_int_equal(sdk_config_query_type("a2s", &t), 0);
        assert_int_equal(t, SDK_QUERY_A2S);
        assert_int_equal(sdk_config_query_type("SQP", &t), -EINVAL);
        assert_int_equal(sdk_config_query_type("tf2e", &t), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_number_literals),
                cmocka_unit_test(test_as_slotd_writes_it),
                cmocka_unit_test(test_number_fields),
                cmocka_unit_test(test_string_fields),
                cmocka_unit_test(test_extra_values),
                cmocka_unit_test(test_documents),
                cmocka_unit_test(test_fields),
                cmocka_unit_test(test_server_id),
                cmocka_unit_test(test_query_type),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
