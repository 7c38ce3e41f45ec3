/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "time-util.h"

/* What the local proxy makes of an HTTP request before it asks slotd anything, and what it
 * makes of slotd's answer: routes, bodies, durations, Centrifuge channel names, the token
 * bucket. Pure: no I/O, no logging; every byte is hostile (bounded, fuzzed). */

typedef enum ProxyOp {
        PROXY_OP_READY,
        PROXY_OP_HOLD,
        PROXY_OP_HOLD_STATUS,
        PROXY_OP_RELEASE_HOLD,
        PROXY_OP_RESERVE,
        PROXY_OP_UNRESERVE,
        PROXY_OP_PAYLOAD,
        PROXY_OP_TOKEN,
        PROXY_OP_WEBSOCKET,      /* not an IPC op: the Centrifuge endpoint */
        _PROXY_OP_MAX,
} ProxyOp;

/* Allocation and reservation IDs (SPEC: 1–128 of A-Z a-z 0-9 . _ : -). */
#define PROXY_ID_MAX 128
/* The longest hold a request may name; slotd applies its own, lower, limit. */
#define PROXY_DURATION_MAX_USEC (365 * 24 * USEC_PER_HOUR)

typedef struct ProxyRoute {
        ProxyOp op;
        const char *allow;                  /* the path's methods, for 405's Allow header */
        unsigned server;
        char allocation[PROXY_ID_MAX + 1];  /* ready, payload */
} ProxyRoute;

/* The name slotd knows an op by (ipc.h), NULL for PROXY_OP_WEBSOCKET. */
const char *proxy_op_to_string(ProxyOp op);

/* Matches a method and an undecoded path (no query) against the API. Returns 0, -ENOENT for
 * no such path (404), -EOPNOTSUPP for a path that exists without this method (405; ->allow
 * is set), -EINVAL for a malformed server or allocation ID (400). *ret is written on 0 and
 * -EOPNOTSUPP only. */
int request_route(const char *method, const char *path, ProxyRoute *ret);

/* Bodies. Each returns 0, or -EBADMSG when the body is not the object the route takes (not
 * JSON, wrong types, a missing field); unknown fields are ignored. */
int request_parse_ready(const char *body, size_t size, bool *ret);
/* {"timeout":"2m"}; -ERANGE for a duration beyond PROXY_DURATION_MAX_USEC. */
int request_parse_hold(const char *body, size_t size, usec_t *ret);
/* Reserve: an empty body or any JSON object. */
int request_parse_reserve(const char *body, size_t size);

/* "90s", "2m", "1h30m": whole numbers with units s, m, h (Go's time.Duration text, as far
 * as the SDKs use it). -EINVAL for anything else, -ERANGE beyond PROXY_DURATION_MAX_USEC. */
int request_parse_duration(const char *s, usec_t *ret);

/* "server#<N>", N as a server ID in a path: -EINVAL otherwise. */
int request_parse_channel(const char *channel, unsigned *ret_server);

/* The HTTP status for an ipc.h error code; 500 for codes it does not know. */
unsigned request_error_status(const char *code);

/* slotd's results (ipc.h) turned into the bodies Unity's SDKs read. NULL when the result
 * lacks a field or OOM; the caller answers 500 then. */
json_t *request_hold_body(const json_t *result);
json_t *request_reservation_body(const json_t *result);
json_t *request_token_body(const json_t *result);

/* A token bucket: 'rate' tokens a second up to 'burst'. Starts full. */
typedef struct TokenBucket {
        uint64_t microtokens;
        usec_t last;
        bool started;
} TokenBucket;

/* Takes one token at 'now' (CLOCK_MONOTONIC): true when there was one. */
bool token_bucket_take(TokenBucket *b, unsigned rate, unsigned burst, usec_t now);
