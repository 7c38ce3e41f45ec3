/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "allocation.h"

/* One allocation event of a slot (manager-events.c). */
typedef struct AllocEvent {
        unsigned slot_id;
        uint64_t offset;             /* the slot's events so far, this one included */
        bool allocate;               /* AllocateEventType, else DeallocateEventType */
        char uuid[ALLOC_ID_MAX + 1]; /* the allocation */
} AllocEvent;

void alloc_event_id(uint64_t epoch, unsigned slot_id, uint64_t offset, char ret[static 37]);
