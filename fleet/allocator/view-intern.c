/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "strv.h"
#include "view-intern.h"

typedef struct Interned {
        size_t n_ref;
        char s[];
} Interned;

static Interned *interned_of(const char *s) {
        return (Interned *) (s - offsetof(Interned, s));
}

const char *intern_ref(Hashmap *pool, const char *s) {
        Interned *i = hashmap_get(pool, s);
        size_t len;

        if (i) {
                i->n_ref++;
                return i->s;
        }
        len = strlen(s);
        i = malloc(sizeof(Interned) + len + 1);
        if (!i)
                return NULL;
        i->n_ref = 1;
        memcpy(i->s, s, len + 1);
        if (hashmap_put(pool, i->s, i) < 0) {
                free(i);
                return NULL;
        }
        return i->s;
}

void intern_unref(Hashmap *pool, const char *s) {
        Interned *i;

        if (!s)
                return;
        i = interned_of(s);
        if (--i->n_ref > 0)
                return;
        (void) hashmap_remove(pool, i->s, i);
        free(i);
}

void intern_pool_done(Hashmap *pool) {
        hashmap_done_free(pool, free);
}

/* The document's shared fields (SlotDoc's char * members but allocation_id). */
#define SLOT_DOC_SHARED(d)                                                                   \
        {                                                                                    \
                &(d)->machine_id, &(d)->fleet_id, &(d)->region_id, &(d)->state,              \
                        &(d)->process_state, &(d)->build_configuration_id, &(d)->ipv4,       \
                        &(d)->ipv6                                                           \
        }

/* *p (malloc'd, or NULL) replaced by the pool's copy. */
static int intern_field(Hashmap *pool, char **p) {
        const char *shared;

        if (!*p)
                return 0;
        shared = intern_ref(pool, *p);
        if (!shared)
                return -ENOMEM;
        free(*p);
        *p = (char *) shared;
        return 0;
}

int slot_doc_intern(Hashmap *pool, SlotDoc *d) {
        char **fields[] = SLOT_DOC_SHARED(d);
        size_t done = 0, done_ids = 0;

        for (; done < ELEMENTSOF(fields); done++)
                if (intern_field(pool, fields[done]) < 0)
                        goto undo;
        STRV_FOREACH(id, d->build_configurations) {
                if (intern_field(pool, (char **) id) < 0)
                        goto undo;
                done_ids++;
        }
        return 0;
undo:
        /* what is the pool's given back, the rest freed: d consumed */
        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                if (i < done)
                        intern_unref(pool, *fields[i]);
                else
                        free(*fields[i]);
        for (size_t i = 0; d->build_configurations && d->build_configurations[i]; i++)
                if (i < done_ids)
                        intern_unref(pool, d->build_configurations[i]);
                else
                        free(d->build_configurations[i]);
        free(d->build_configurations);
        free(d->allocation_id);
        *d = (SlotDoc){};
        return -ENOMEM;
}

void slot_doc_unintern(Hashmap *pool, SlotDoc *d) {
        char **fields[] = SLOT_DOC_SHARED(d);

        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                intern_unref(pool, *fields[i]);
        STRV_FOREACH(id, d->build_configurations)
                intern_unref(pool, *id);
        free(d->build_configurations);
        free(d->allocation_id);
        *d = (SlotDoc){};
}
