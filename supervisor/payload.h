/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "hashmap.h"
#include "time-util.h"

/* The payloads given with allocations (the local proxy's GET /payload/<uuid>): one file each
 * in <state_dir>/payload/, written durably before the allocation is acknowledged, so that a
 * payload is as durable as its allocation. Available until the allocation ends or
 * localproxy.payload_ttl after it was given, whichever comes first. */

typedef struct PayloadStore {
        int dir_fd;
        Hashmap map;                 /* allocation UUID → Payload */
        usec_t ttl;
} PayloadStore;

/* Opens (creates) <state_dir>/payload and loads what an earlier slotd left there for the
 * allocations keep() says still exist; removes the rest. */
int payload_store_open(PayloadStore *p, int state_dir_fd, usec_t ttl,
                       bool (*keep)(const char *uuid, void *userdata), void *userdata);
void payload_store_done(PayloadStore *p);
/* Replaces any payload of uuid. Durable when it returns 0. */
int payload_store_put(PayloadStore *p, const char *uuid, const void *data, size_t size,
                      usec_t now_realtime);
/* -ENOENT: none, or its TTL has passed (the file is then removed). */
int payload_store_get(PayloadStore *p, const char *uuid, usec_t now_realtime, const void **ret,
                      size_t *ret_size);
void payload_store_drop(PayloadStore *p, const char *uuid);
