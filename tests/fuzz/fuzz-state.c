/* SPDX-License-Identifier: MIT */
/* The state file parser. The input is the whole file. Whatever it accepts must survive a
 * round through state_format(): a restart reads back exactly what the daemon wrote. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "state-file.h"

static bool streq_or_null(const char *a, const char *b) {
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool slot_equal(const SlotRecord *a, const SlotRecord *b) {
        return a->id == b->id && streq_or_null(a->fleet, b->fleet) &&
               streq_or_null(a->allocation_uuid, b->allocation_uuid) &&
               streq_or_null(a->build_configuration, b->build_configuration) &&
               streq_or_null(a->reservation_uuid, b->reservation_uuid) &&
               a->reserved_until == b->reserved_until && a->hold_until == b->hold_until &&
               streq_or_null(a->failure, b->failure) && a->failed == b->failed &&
               a->restarts == b->restarts && a->last_exit_code == b->last_exit_code &&
               a->last_exit_signal == b->last_exit_signal && a->keeper == b->keeper &&
               a->ready == b->ready && a->started_at == b->started_at &&
               a->payload_at == b->payload_at;
}

static void assert_word(const char *s) {
        if (!s)
                return;
        FUZZ_ASSERT(s[0] != '\0');
        for (const char *p = s; *p; p++)
                FUZZ_ASSERT((unsigned char) *p > ' ' && *p != 0x7f && *p != '=');
}

static bool state_equal(const StateRecord *a, const StateRecord *b) {
        if (a->draining != b->draining || a->idle_since != b->idle_since ||
            a->n_slots != b->n_slots || strcmp(a->boot_id, b->boot_id) != 0 ||
            (a->boot_id[0] && a->wall_offset != b->wall_offset))
                return false;
        for (size_t i = 0; i < a->n_slots; i++)
                if (!slot_equal(&a->slots[i], &b->slots[i]))
                        return false;
        return true;
}

/* Formats rec and parses the text again into *ret; returns the text. */
static char *round_trip(const StateRecord *rec, StateRecord *ret) {
        unsigned skipped = 0;
        char *text = NULL;
        int n;

        n = state_format(rec, &text);
        if (n == -ENOMEM)
                return NULL;
        FUZZ_ASSERT(n > 0 && text && strlen(text) == (size_t) n);
        FUZZ_ASSERT(state_parse(text, (size_t) n, ret, &skipped) == 0);
        /* Every line the daemon writes is one it reads back. */
        FUZZ_ASSERT(skipped == 0);
        return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        StateRecord rec = {}, once = {}, twice = {};
        char *text1 = NULL, *text2 = NULL;
        unsigned skipped = 0;
        int r;

        r = state_parse((const char *) data, size, &rec, &skipped);
        FUZZ_ASSERT(r == 0 || r == -EBADMSG || r == -ENOMEM);
        if (r < 0)
                return 0;

        FUZZ_ASSERT(rec.n_slots == 0 || rec.slots);
        for (size_t i = 0; i < rec.n_slots; i++) {
                const SlotRecord *s = &rec.slots[i];

                FUZZ_ASSERT(s->fleet);
                assert_word(s->fleet);
                assert_word(s->allocation_uuid);
                assert_word(s->build_configuration);
                assert_word(s->reservation_uuid);
                assert_word(s->failure);
        }

        /* What was read survives a write and a read; what was written once is then a fixed
         * point, byte for byte. */
        text1 = round_trip(&rec, &once);
        if (text1) {
                FUZZ_ASSERT(state_equal(&rec, &once));
                text2 = round_trip(&once, &twice);
                if (text2) {
                        FUZZ_ASSERT(state_equal(&once, &twice));
                        FUZZ_ASSERT(strcmp(text1, text2) == 0);
                }
        }

        free(text2);
        free(text1);
        state_record_done(&twice);
        state_record_done(&once);
        state_record_done(&rec);
        return 0;
}
