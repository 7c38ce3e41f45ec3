/* SPDX-License-Identifier: MIT */
#pragma once

/* The API (allocator-api.c, allocator-claim.c): a request routed, answered. */

#include "etcd.h"

typedef struct Allocator Allocator;
typedef struct ApiRequest ApiRequest;

void api_dispatch(Allocator *a, ApiRequest *req);
void api_allocate(Allocator *a, ApiRequest *req);
/* 503 for an etcd failure, in the words of SPEC §13. */
void api_etcd_unavailable(Allocator *a, ApiRequest *req, const EtcdResponse *resp);
