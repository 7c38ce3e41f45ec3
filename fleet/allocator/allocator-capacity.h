/* SPDX-License-Identifier: MIT */
#pragma once

/* GET /v1/fleets/{fleetId}/capacity (allocator-capacity.c). */

typedef struct Allocator Allocator;
typedef struct ApiRequest ApiRequest;

void api_capacity(Allocator *a, ApiRequest *req);
