/* SPDX-License-Identifier: MIT */
#pragma once

/* The API (allocator-api.c): a request routed, answered; its allocations by the operations
 * (allocator-ops.h), their outcomes in the API's words (allocator-answer.h). */

typedef struct Allocator Allocator;
typedef struct ApiRequest ApiRequest;

void api_dispatch(Allocator *a, ApiRequest *req);
