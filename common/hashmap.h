/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* A string-keyed hash table with separate chaining. Keys are not copied: the caller keeps
 * them alive while they are in the table (slotd keys slots by strings the slots own). */

typedef struct HashEntry HashEntry;
typedef struct Hashmap {
        HashEntry **buckets;
        size_t n_buckets;
        size_t size;
} Hashmap;

void hashmap_done(Hashmap *h);
/* The same, calling free_value on each value first (the values may own their keys). */
void hashmap_done_free(Hashmap *h, void (*free_value)(void *value));
/* -EEXIST if the key is there already. */
int hashmap_put(Hashmap *h, const char *key, void *value);
void *hashmap_get(const Hashmap *h, const char *key);
/* Removes key if it maps to value (or to anything when value is NULL); returns the value. */
void *hashmap_remove(Hashmap *h, const char *key, void *value);
