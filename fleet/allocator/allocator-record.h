/* SPDX-License-Identifier: MIT */
#pragma once

/* GET of one allocation or of the list, and DELETE (allocator-record.c). */

#include <stdbool.h>

typedef struct Allocator Allocator;
typedef struct ApiRequest ApiRequest;

void api_get(Allocator *a, ApiRequest *req, bool list);
void api_delete(Allocator *a, ApiRequest *req);
