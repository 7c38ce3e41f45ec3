/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "hashmap.h"
#include "time-util.h"

/* The payloads given with allocations (the local proxy's GET /payload/<uuid>): one file each
 * in <state_dir>/payload/, written durably before the allocation is acknowledged, so that a
 * payload is as durable as its allocation. Available until the allocation ends or
 * localproxy.payload_ttl after it was given, whichever comes first. When it was given is
 * CLOCK_BOOTTIME (wallclock.h), kept in the state file with its allocation: the file's mtime,
 * in real time, is only the fallback for a payload the state file does not date. */

typedef struct PayloadStore {
        int dir_fd;
        Hashmap map;                 /* allocation UUID → Payload */
        usec_t ttl;
} PayloadStore;

/* Opens (creates) <state_dir>/payload and loads what an earlier slotd left there for the
 * allocations keep() says still exist, given when keep() says (CLOCK_BOOTTIME; it leaves
 * *given_at alone where it does not know); removes the rest. */
int payload_store_open(PayloadStore *p, int state_dir_fd, usec_t ttl,
                       bool (*keep)(const char *uuid, usec_t *given_at, void *userdata),
                       void *userdata);
void payload_store_done(PayloadStore *p);
/* Replaces any payload of uuid. Durable when it returns 0. */
int payload_store_put(PayloadStore *p, const char *uuid, const void *data, size_t size,
                      usec_t now_boottime);
/* -ENOENT: none, or its TTL has passed (the file is then removed). */
int payload_store_get(PayloadStore *p, const char *uuid, usec_t now_boottime, const void **ret,
                      size_t *ret_size);
void payload_store_drop(PayloadStore *p, const char *uuid);
/* When the payload of uuid was given (CLOCK_BOOTTIME), 0 when it has none. */
usec_t payload_store_given_at(PayloadStore *p, const char *uuid);
