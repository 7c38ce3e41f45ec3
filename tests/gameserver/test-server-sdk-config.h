/* SPDX-License-Identifier: MIT */
/*
 * server.json as Unity's Go SDK v0.5.4 decodes it (test-server-sdk-config.c).  Pure, and
 * apart from the rest of the SDK mode so that tests/unit/test-sdk-config.c needs only
 * jansson.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The Go SDK's query protocols (server/query.go): "" is its recommended one, SQP. */
enum sdk_query_type {
        SDK_QUERY_SQP,
        SDK_QUERY_A2S,
};

/*
 * Decodes buf as newConfigFromFile() does.  0: *ret_doc is the object, its values all
 * strings or null.  -ENODATA: nothing but white space, Go's io.EOF (a re-read ignores
 * it).  -EFAULT: the document is null, on which the SDK panics.  -EINVAL: refused;
 * error says why, starting with the key at fault where there is one.
 */
int sdk_config_decode(const char *buf, size_t len, json_t **ret_doc, char *error, size_t size);

/* The value the SDK's Config field ends with: the last non-null key matching it without
 * regard to case; NULL when none. */
const char *sdk_config_field(json_t *doc, const char *field);

/* strconv.ParseInt(text, 10, 64), which the SDK applies to serverID before subscribing. */
int sdk_config_server_id(const char *text, int64_t *ret, char *error, size_t size);

/* queryType: "" (absent) is SQP; anything but "sqp" and "a2s" stops the SDK. */
int sdk_config_query_type(const char *text, enum sdk_query_type *ret);

/* Go's own test of a json.Number's text (encoding/json isValidNumber). */
bool sdk_config_number_valid(const char *s, size_t len);
