/* SPDX-License-Identifier: MIT */
#pragma once

/* The fleet status page (SPEC §13, GET /): one self-contained HTML5 document (inline CSS, no
 * script, nothing fetched from anywhere) made from the answering replica's fleet view and its
 * own counters. Pure: the door (allocator-api.c) hands it what the view holds. Every string
 * that came from etcd is escaped. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "time-util.h"

/* A machine as its document tells (NULL fields: none). */
typedef struct StatusMachine {
        const char *machine_id;
        uint64_t machine_number; /* 0: not told */
        char *const *faults;     /* NULL-terminated, or NULL */
        bool draining;
        bool deprovisionable;
} StatusMachine;

/* A slot as its document tells. */
typedef struct StatusSlot {
        const char *fleet;
        const char *region;     /* "" when none */
        const char *machine_id;
        uint32_t slot_id;
        const char *state;      /* NULL when the document has none */
        bool claimed;           /* a claim of it is not yet confirmed */
        const StatusMachine *machine; /* its machine's document, NULL when the view has none */
} StatusSlot;

typedef struct StatusPage {
        usec_t made; /* CLOCK_REALTIME */
        bool view_ready;
        int64_t revision_slots, revision_machines, revision_hosts;
        /* sorted by fleet, region, machine, slot (status_slot_compare) */
        const StatusSlot *slots;
        size_t n_slots;
        /* every machine of the view, sorted by machine_id */
        const StatusMachine *machines;
        size_t n_machines;
        size_t n_claims;
        uint64_t allocations_last_minute; /* new claims made in the last 60 s */
        uint64_t posts_total, allocations_total, no_capacity_total;
} StatusPage;

/* qsort's order of StatusSlot (by value). */
int status_slot_compare(const void *a, const void *b);
/* s written to f with &, <, >, " and ' escaped (HTML text and attribute values alike);
 * NULL writes nothing. */
void html_escape_to(FILE *f, const char *s);
/* The page, a string the caller frees. -ENOMEM. O(slots + machines). */
int status_page_format(const StatusPage *p, char **ret);
