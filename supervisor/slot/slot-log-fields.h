/* SPDX-License-Identifier: MIT */
#pragma once

/* The journal fields of the entries slotd logs about a slot (SPEC §2 "Logs", log.h): which
 * slot, which fleet, and while there is one its allocation and its reservation. Pure: no
 * I/O, tested by tests/unit/test-slot-log-fields.c.
 *
 *   SLOT_ID=3  FLEET=shooter  ALLOCATION_ID=<uuid>  RESERVATION_ID=<uuid>
 *
 * The list is NULL-terminated, as log_internal() takes it; the first two are the slot's for
 * its whole life, the others come and go with the session (slot_log_fields_set()). A hold
 * has no ID of its own: it is in MESSAGE only. */

#define SLOT_LOG_FIELDS_MAX 4

typedef struct SlotLogFields {
        char *list[SLOT_LOG_FIELDS_MAX + 1];
} SlotLogFields;

/* SLOT_ID= and FLEET=, and nothing else yet. -ENOMEM (nothing kept) or 0. */
int slot_log_fields_init(SlotLogFields *f, unsigned id, const char *fleet);

/* The session's fields anew: ALLOCATION_ID= when 'allocation' is not NULL (nor empty),
 * RESERVATION_ID= likewise. On -ENOMEM only SLOT_ID= and FLEET= are left: an entry never
 * names a session that is over. */
int slot_log_fields_set(SlotLogFields *f, const char *allocation, const char *reservation);

void slot_log_fields_done(SlotLogFields *f);
