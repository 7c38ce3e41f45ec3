/* SPDX-License-Identifier: MIT */
#include "hashmap.h"
#include "macro.h"

struct HashEntry {
        HashEntry *next;
        const char *key;
        void *value;
        uint64_t hash;
};

/* FNV-1a with a per-process seed, so that keys chosen by a caller cannot be aimed at one
 * bucket in advance. */
static uint64_t hash_string(const char *s) {
        static uint64_t seed;
        uint64_t h;

        if (seed == 0)
                seed = ((uint64_t) getpid() << 32) ^ (uint64_t) (uintptr_t) &seed ^ 0xcbf29ce484222325ULL;
        h = seed;
        for (; *s; s++) {
                h ^= (unsigned char) *s;
                h *= 0x100000001b3ULL;
        }
        return h ^ (h >> 29);
}

void hashmap_done_free(Hashmap *h, void (*free_value)(void *value)) {
        for (size_t i = 0; i < h->n_buckets; i++)
                for (HashEntry *e = h->buckets[i], *n; e; e = n) {
                        n = e->next;
                        if (free_value)
                                free_value(e->value);
                        free(e);
                }
        free(h->buckets);
        *h = (Hashmap){};
}

void hashmap_done(Hashmap *h) {
        hashmap_done_free(h, NULL);
}

static int hashmap_grow(Hashmap *h) {
        size_t n = h->n_buckets ? h->n_buckets * 2 : 64;
        HashEntry **b = calloc(n, sizeof(HashEntry *));

        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < h->n_buckets; i++)
                for (HashEntry *e = h->buckets[i], *next; e; e = next) {
                        next = e->next;
                        e->next = b[e->hash & (n - 1)];
                        b[e->hash & (n - 1)] = e;
                }
        free(h->buckets);
        h->buckets = b;
        h->n_buckets = n;
        return 0;
}

void *hashmap_get(const Hashmap *h, const char *key) {
        uint64_t hash;

        if (h->n_buckets == 0)
                return NULL;
        hash = hash_string(key);
        for (HashEntry *e = h->buckets[hash & (h->n_buckets - 1)]; e; e = e->next)
                if (e->hash == hash && streq(e->key, key))
                        return e->value;
        return NULL;
}

int hashmap_put(Hashmap *h, const char *key, void *value) {
        HashEntry *e;
        int r;

        if (hashmap_get(h, key))
                return -EEXIST;
        if (h->size + 1 > h->n_buckets * 3 / 4) {
                r = hashmap_grow(h);
                if (r < 0)
                        return r;
        }
        e = malloc(sizeof(HashEntry));
        if (!e)
                return -ENOMEM;
        e->key = key;
        e->value = value;
        e->hash = hash_string(key);
        e->next = h->buckets[e->hash & (h->n_buckets - 1)];
        h->buckets[e->hash & (h->n_buckets - 1)] = e;
        h->size++;
        return 0;
}

void *hashmap_remove(Hashmap *h, const char *key, void *value) {
        uint64_t hash;

        if (h->n_buckets == 0)
                return NULL;
        hash = hash_string(key);
        for (HashEntry **p = &h->buckets[hash & (h->n_buckets - 1)]; *p; p = &(*p)->next) {
                HashEntry *e = *p;
                if (e->hash == hash && streq(e->key, key) && (!value || e->value == value)) {
                        void *v = e->value;
                        *p = e->next;
                        free(e);
                        h->size--;
                        return v;
                }
        }
        return NULL;
}
