/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>

#include "macro.h"
#include "slot-log-fields.h"

int slot_log_fields_init(SlotLogFields *f, unsigned id, const char *fleet) {
        *f = (SlotLogFields) {};
        if (asprintf(&f->list[0], "SLOT_ID=%u", id) < 0) {
                f->list[0] = NULL;
                return -ENOMEM;
        }
        if (asprintf(&f->list[1], "FLEET=%s", fleet) < 0) {
                f->list[1] = NULL;
                slot_log_fields_done(f);
                return -ENOMEM;
        }
        return 0;
}

/* The session's fields, from list[2] on. */
static void slot_log_fields_clear_session(SlotLogFields *f) {
        for (size_t i = 2; i < ELEMENTSOF(f->list); i++)
                f->list[i] = mfree_str(f->list[i]);
}

static int slot_log_fields_add(SlotLogFields *f, size_t *n, const char *key, const char *value) {
        if (!value || !*value)
                return 0;
        if (asprintf(&f->list[*n], "%s=%s", key, value) < 0) {
                f->list[*n] = NULL;
                slot_log_fields_clear_session(f);
                return -ENOMEM;
        }
        (*n)++;
        return 0;
}

int slot_log_fields_set(SlotLogFields *f, const char *allocation, const char *reservation) {
        size_t n = 2;
        int r;

        if (!f->list[0] || !f->list[1])
                return -EINVAL;
        slot_log_fields_clear_session(f);
        r = slot_log_fields_add(f, &n, "ALLOCATION_ID", allocation);
        if (r < 0)
                return r;
        return slot_log_fields_add(f, &n, "RESERVATION_ID", reservation);
}

void slot_log_fields_done(SlotLogFields *f) {
        for (size_t i = 0; i < ELEMENTSOF(f->list); i++)
                f->list[i] = mfree_str(f->list[i]);
}
