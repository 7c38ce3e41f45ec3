/* SPDX-License-Identifier: MIT */
#pragma once

/* The allocator's HTTP side (allocator-http.c): microhttpd, TLS, authentication, and the life
 * of one request, answered by the API (allocator-api.h). */

#include <jansson.h>

#include "allocator-request.h"
#include "macro.h"
#include "time-util.h"

typedef struct Allocator Allocator;
typedef struct ApiRequest ApiRequest;

Allocator *api_request_allocator(const ApiRequest *req);
const ApiRoute *api_request_route(const ApiRequest *req);
const char *api_request_body(const ApiRequest *req, size_t *ret_size);
usec_t api_request_started(const ApiRequest *req);
/* Every answer takes body (may be NULL). Once answered, the request's op is forgotten. */
void api_request_answer(ApiRequest *req, unsigned status, json_t *body);
_printf_(3, 4) void api_request_error(ApiRequest *req, unsigned status, const char *fmt, ...);
void api_request_answer_text(ApiRequest *req, unsigned status, char *text,
                             const char *content_type);
/* The op working for the request: cancel(op) when the client goes away or the request's
 * deadline passes before an answer. */
void api_request_set_op(ApiRequest *req, void *op, void (*cancel)(void *op));
void api_request_clear_op(ApiRequest *req);

/* Each request routed is handed to dispatch (allocator-api.c's, wired by allocator-main.c),
 * which answers it, at once or later. */
typedef void (*ApiDispatch)(Allocator *a, ApiRequest *req);
int http_start(Allocator *a, int listen_fd, ApiDispatch dispatch);
/* Every request still waiting answered 503 with why, its op cancelled (a stop). */
void http_answer_waiting(Allocator *a, const char *why);
void http_stop(Allocator *a);
