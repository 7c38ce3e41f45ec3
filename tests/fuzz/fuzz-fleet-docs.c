/* SPDX-License-Identifier: MIT */
/* The fleet's documents and keys (fleet/docs/docs.c), as they come out of etcd: the input goes to
 * every document parser, and, as a NUL-terminated string, to the time and key parsers.
 * Properties: a failed parse leaves its struct empty; what a parser accepts formats, and the
 * formatted text parses again to the same text (a fixed point); accepted times and keys are
 * within the bounds docs.h promises. */
#include <errno.h>
#include <string.h>

#include "docs.h"
#include "fuzz.h"

#define P FLEET_PREFIX_DEFAULT

static bool all_zero(const void *p, size_t size) {
        const unsigned char *b = p;

        for (size_t i = 0; i < size; i++)
                if (b[i])
                        return false;
        return true;
}

/* Parse, format, parse the formatted text, format again: both texts must be equal. */
#define FUZZ_DOC(type, name, data, size)                                                     \
        do {                                                                                 \
                type d, e;                                                                   \
                char *t1 = NULL, *t2 = NULL;                                                 \
                int r = name##_parse((const char *) data, size, &d);                         \
                                                                                             \
                FUZZ_ASSERT(r == 0 || r == -EBADMSG || r == -ENOMEM);                        \
                if (r < 0) {                                                                 \
                        FUZZ_ASSERT(all_zero(&d, sizeof(d)));                                \
                        break;                                                               \
                }                                                                            \
                FUZZ_ASSERT(name##_format(&d, &t1) == 0);                                    \
                FUZZ_ASSERT(strlen(t1) <= FLEET_DOC_MAX * 6);                                \
                FUZZ_ASSERT(name##_parse(t1, strlen(t1), &e) == 0);                          \
                FUZZ_ASSERT(name##_format(&e, &t2) == 0);                                    \
                FUZZ_ASSERT(strcmp(t1, t2) == 0);                                            \
                name##_done(&d);                                                             \
                name##_done(&e);                                                             \
                FUZZ_ASSERT(all_zero(&d, sizeof(d)));                                        \
                free(t1);                                                                    \
                free(t2);                                                                    \
        } while (0)

static void fuzz_time(const char *s) {
        char buf[RFC3339_MAX];
        usec_t t = 17, u;

        if (rfc3339_parse(s, &t) < 0) {
                FUZZ_ASSERT(t == 17);
                return;
        }
        if (t == 0) {
                FUZZ_ASSERT(s[0] == '\0'); /* only "" is none */
                return;
        }
        rfc3339_format(t, buf);
        FUZZ_ASSERT(strlen(buf) < RFC3339_MAX);
        FUZZ_ASSERT(rfc3339_parse(buf, &u) == 0);
        /* The format keeps milliseconds: the same moment, cut to them. */
        FUZZ_ASSERT(t > 0 && (u == t - t % USEC_PER_MSEC || (t < USEC_PER_MSEC && u == 1)));
}

static void fuzz_keys(const char *s) {
        char *a = NULL, *b = NULL, *k = NULL;
        FleetHostKeyKind kind;
        uint32_t id;

        if (fleet_key_parse_slot(P, s, &a, &b, &id) == 0) {
                FUZZ_ASSERT(fleet_key_component_valid(a) && fleet_key_component_valid(b));
                k = fleet_key_slot(P, a, b, id);
                FUZZ_ASSERT(k && strcmp(k, s) == 0);
        }
        free(a);
        free(b);
        free(k);
        a = b = k = NULL;
        if (fleet_key_parse_host(P, s, &kind, &a, &id, &b) == 0) {
                FUZZ_ASSERT(fleet_key_component_valid(a));
                k = kind == FLEET_HOST_KEY_CLAIM ? fleet_key_claim(P, a, id)
                    : kind == FLEET_HOST_KEY_SCALE ? fleet_key_scale(P, a, id)
                                                   : fleet_key_deallocation(P, a, b);
                FUZZ_ASSERT(k && strcmp(k, s) == 0);
        }
        free(a);
        free(b);
        free(k);
        a = b = NULL;
        if (fleet_key_parse_allocation(P, s, &a, &b) == 0)
                FUZZ_ASSERT(fleet_key_component_valid(a) && fleet_key_component_valid(b));
        free(a);
        free(b);
        a = NULL;
        if (fleet_key_parse_machine(P, s, &a) == 0)
                FUZZ_ASSERT(fleet_key_component_valid(a));
        free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s;

        FUZZ_DOC(SlotDoc, slot_doc, data, size);
        FUZZ_DOC(MachineDoc, machine_doc, data, size);
        FUZZ_DOC(AllocationRecord, allocation_record, data, size);
        FUZZ_DOC(ClaimDoc, claim_doc, data, size);
        FUZZ_DOC(DeallocationDoc, deallocation_doc, data, size);
        FUZZ_DOC(AllocationIdDoc, allocation_id_doc, data, size);
        FUZZ_DOC(ScaleDoc, scale_doc, data, size);

        if (size > 4096)
                return 0;
        s = malloc(size + 1);
        FUZZ_ASSERT(s);
        memcpy(s, data, size);
        s[size] = '\0';
        fuzz_time(s);
        fuzz_keys(s);
        free(s);
        return 0;
}
