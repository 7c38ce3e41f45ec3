/* SPDX-License-Identifier: MIT */
/* The fleet view: every slot document, machine document and claim under the prefix, read
 * once (a range) and kept by a watch from the revision after it. A transaction's answer
 * tells sooner what the watch will tell; view-rule.h says which of the three wins, whatever
 * order they come in: each key keeps the mod_revision it was seen at, and an answer the
 * watch has reached is dropped (the claim it wrote may be deleted already). A watch that
 * breaks (-ECONNRESET) or whose revision was compacted (-ESTALE) is read anew: what the new
 * range does not show is gone, but for what an answer newer than the range put. Every
 * change feeds placement (placement.h) at once: a pick never walks the view. */
#include <inttypes.h>
#include <malloc.h>

#include "allocator-cache.h"
#include "allocator.h"
#include "log.h"

#define RESYNC_BACKOFF_MIN (100 * USEC_PER_MSEC)
#define RESYNC_BACKOFF_MAX (5 * USEC_PER_SEC)

static const char *const kind_paths[_CACHE_KIND_MAX] = {
        [CACHE_SLOTS] = "slots",
        [CACHE_MACHINES] = "machines",
        [CACHE_HOSTS] = "hosts",
};

static char *index_key(const char *machine_id, uint32_t slot_id) {
        char *k;

        return asprintf(&k, "%s/%" PRIu32, machine_id, slot_id) < 0 ? NULL : k;
}

CacheSlot *cache_slot_by_index(const Allocator *a, const char *machine_id, uint32_t slot_id) {
        _cleanup_free_ char *k = index_key(machine_id, slot_id);

        return k ? hashmap_get(&a->cache.slots_by_index, k) : NULL;
}

CacheClaim *cache_claim_by_index(const Allocator *a, const char *machine_id, uint32_t slot_id) {
        _cleanup_free_ char *k = index_key(machine_id, slot_id);

        return k ? hashmap_get(&a->cache.claims_by_index, k) : NULL;
}

CacheScale *cache_scale_by_index(const Allocator *a, const char *machine_id, uint32_t slot_id) {
        _cleanup_free_ char *k = index_key(machine_id, slot_id);

        return k ? hashmap_get(&a->cache.scales_by_index, k) : NULL;
}

CacheMachine *cache_machine(const Allocator *a, const char *machine_id) {
        return machine_id ? hashmap_get(&a->cache.machines, machine_id) : NULL;
}

/* Read at least once: while a broken watch is read anew the view it had goes on serving,
 * which is safe since every claim compares the slot's mod_revision with etcd's. */
bool cache_ready(const Allocator *a) {
        for (size_t i = 0; i < _CACHE_KIND_MAX; i++)
                if (!a->cache.watches[i].ready && !a->cache.watches[i].read_once)
                        return false;
        return true;
}

/* ---- slots ---- */

/* The slot as the scaler sees it (scaler-index.h): its document, claim and command. */
static void slot_feed_scaler(Allocator *a, const CacheSlot *s) {
        const SlotDoc *d = &s->doc;
        const CacheScale *c;
        ScalerIndexSlot is;
        int r;

        if (!a->scaler_index)
                return;
        c = hashmap_get(&a->cache.scales_by_index, s->index_key);
        is = (ScalerIndexSlot){
                .fleet = s->fleet,
                .region = d->region_id,
                .kind = scaler_slot_kind_of(d->state, d->process_state, d->allocation_id,
                                            s->claimed),
                .ready = d->ready,
                .draining = d->draining,
                .command = c != NULL,
                .action = !c                        ? SCALER_NONE
                          : c->action == SCALE_START ? SCALER_START
                          : c->action == SCALE_STOP  ? SCALER_STOP
                                                     : SCALER_NONE,
        };
        r = scaler_index_slot_set(a->scaler_index, s->machine_id, s->slot_id, &is);
        if (r < 0)
                log_debug_errno(r, "Slot %s is not in the scaler's counts: %m", s->key);
}

/* The slot of index_key (a command's), fed to the scaler anew. */
static void scaler_feed_index(Allocator *a, const char *index_key) {
        const CacheSlot *s = a->scaler_index ? hashmap_get(&a->cache.slots_by_index, index_key)
                                             : NULL;

        if (s)
                slot_feed_scaler(a, s);
}

/* The slot as the capacity answer counts it (capacity-index.h). */
static void slot_feed_capacity(Allocator *a, CacheSlot *s) {
        const SlotDoc *d = &s->doc;
        CapacitySlot cs = {
                .fleet = s->fleet,
                .machine_id = s->machine_id,
                .region = d->region_id,
                .state = d->state,
                .process_state = d->process_state,
                .allocation_id = d->allocation_id,
                .claimed = s->claimed,
                .hold_until = d->hold_until,
        };
        int r = capacity_index_slot_set(a->capacity_index, &s->capacity, &cs);

        if (r < 0)
                log_debug_errno(r, "Slot %s is not in the capacity's counts: %m", s->key);
}

static void slot_feed(Allocator *a, CacheSlot *s) {
        const SlotDoc *d = &s->doc;
        PlacementSlot ps = {
                .fleet = s->fleet,
                .region = d->region_id,
                .build = d->build_configuration_id,
                .class = placement_class_of(d->state, d->process_state, d->ready,
                                            d->allocation_id, s->claimed),
                .busy = placement_busy_of(d->state, d->allocation_id, s->claimed),
        };
        int r = placement_slot_set(a->placement, s->machine_id, s->slot_id, &ps);

        if (r < 0)
                log_debug_errno(r, "Slot %s is not offered: %m", s->key);
        slot_feed_scaler(a, s);
        slot_feed_capacity(a, s);
}

static void slot_unindex_allocation(Allocator *a, CacheSlot *s) {
        if (!str_isempty(s->doc.allocation_id))
                (void) hashmap_remove(&a->cache.slots_by_allocation, s->doc.allocation_id, s);
}

static void slot_index_allocation(Allocator *a, CacheSlot *s) {
        if (!str_isempty(s->doc.allocation_id))
                (void) hashmap_put(&a->cache.slots_by_allocation, s->doc.allocation_id, s);
}

static CacheFleet *fleet_get_or_new(Allocator *a, const char *name) {
        CacheFleet *f = hashmap_get(&a->cache.fleets, name);

        if (f)
                return f;
        f = new0(CacheFleet, 1);
        if (!f || !(f->name = strdup(name)) || hashmap_put(&a->cache.fleets, f->name, f) < 0) {
                if (f)
                        free(f->name);
                free(f);
                return NULL;
        }
        return f;
}

static void slot_free(Allocator *a, CacheSlot *s) {
        CacheFleet *f = hashmap_get(&a->cache.fleets, s->fleet);

        placement_slot_remove(a->placement, s->machine_id, s->slot_id);
        capacity_index_slot_remove(a->capacity_index, &s->capacity);
        if (a->scaler_index)
                scaler_index_slot_remove(a->scaler_index, s->machine_id, s->slot_id);
        slot_unindex_allocation(a, s);
        (void) hashmap_remove(&a->cache.slots, s->key, s);
        (void) hashmap_remove(&a->cache.slots_by_index, s->index_key, s);
        LIST_REMOVE(all, a->cache.all_slots, s);
        if (f) {
                LIST_REMOVE(fleet, f->slots, s);
                f->n_slots--;
        }
        slot_doc_unintern(&a->cache.strings, &s->doc);
        free(s->seen_allocation_id);
        free(s->claim_gone_allocation_id);
        free(s->key);
        intern_unref(&a->cache.strings, s->machine_id);
        intern_unref(&a->cache.strings, s->fleet);
        free(s->index_key);
        free(s);
}

static CacheSlot *slot_new(Allocator *a, const char *key) {
        _cleanup_free_ char *fleet = NULL, *machine = NULL;
        CacheSlot *s;
        CacheFleet *f;
        uint32_t id;

        if (fleet_key_parse_slot(a->config->prefix, key, &fleet, &machine, &id) < 0)
                return NULL; /* not a slot's key: not ours to read */
        f = fleet_get_or_new(a, fleet);
        s = new0(CacheSlot, 1);
        if (!f || !s || !(s->key = strdup(key)) || !(s->index_key = index_key(machine, id)) ||
            !(s->machine_id = (char *) intern_ref(&a->cache.strings, machine)) ||
            !(s->fleet = (char *) intern_ref(&a->cache.strings, fleet)) ||
            hashmap_put(&a->cache.slots, s->key, s) < 0 ||
            hashmap_put(&a->cache.slots_by_index, s->index_key, s) < 0) {
                if (s) {
                        (void) hashmap_remove(&a->cache.slots, s->key, s);
                        free(s->key);
                        free(s->index_key);
                        intern_unref(&a->cache.strings, s->machine_id);
                        intern_unref(&a->cache.strings, s->fleet);
                }
                free(s);
                return NULL;
        }
        s->slot_id = id;
        LIST_PREPEND(all, a->cache.all_slots, s);
        LIST_PREPEND(fleet, f->slots, s);
        f->n_slots++;
        s->claimed = hashmap_get(&a->cache.claims_by_index, s->index_key) != NULL;
        return s;
}

static void slot_seen_allocation(CacheSlot *s) {
        if (str_isempty(s->doc.allocation_id))
                return;
        if (!streq_ptr(s->seen_allocation_id, s->doc.allocation_id)) {
                free(s->seen_allocation_id);
                s->seen_allocation_id = strdup(s->doc.allocation_id);
        }
        s->seen_allocation_revision = s->seen_allocation_id ? s->mod_revision : 0;
}

/* Whether a kv told one of the three ways (view-rule.h) is the entry's new value; an entry
 * seen again is stamped so here. mod_revision and generation: the entry's, NULL for none. */
static bool put_wins(const CacheWatch *w, ViewFrom from, int64_t answer_revision,
                     int64_t *mod_revision, unsigned *generation, int64_t kv_revision) {
        ViewStamp st = { .mod_revision = mod_revision ? *mod_revision : 0,
                         .generation = generation ? *generation : 0 };
        ViewAction act = view_put(&w->clock, from, answer_revision,
                                  mod_revision ? &st : NULL, kv_revision);

        if (act == VIEW_SEEN && generation) {
                view_stamp_seen(&w->clock, from, &st);
                *generation = st.generation;
        }
        return act == VIEW_SET;
}

/* The entry's stamp, its value made from the kv told. */
static void set_stamp(const CacheWatch *w, ViewFrom from, int64_t *mod_revision,
                      unsigned *generation, int64_t kv_revision) {
        ViewStamp st = { .mod_revision = *mod_revision, .generation = *generation };

        view_stamp_set(&w->clock, from, &st, kv_revision);
        *mod_revision = st.mod_revision;
        *generation = st.generation;
}

static void slot_put(Allocator *a, const EtcdKv *kv, ViewFrom from, int64_t answer_revision) {
        const CacheWatch *w = &a->cache.watches[CACHE_SLOTS];
        CacheSlot *s = hashmap_get(&a->cache.slots, kv->key);
        SlotDoc doc;

        if (!put_wins(w, from, answer_revision, s ? &s->mod_revision : NULL,
                      s ? &s->generation : NULL, kv->mod_revision))
                return;
        if (slot_doc_parse(kv->value, kv->value_len, &doc) < 0) {
                log_debug("Ignoring %s: not a slot document", kv->key);
                if (s)
                        slot_free(a, s);
                return;
        }
        if (slot_doc_intern(&a->cache.strings, &doc) < 0) {
                log_oom();
                return;
        }
        if (!s)
                s = slot_new(a, kv->key);
        if (!s) {
                slot_doc_unintern(&a->cache.strings, &doc);
                return;
        }
        slot_unindex_allocation(a, s);
        slot_doc_unintern(&a->cache.strings, &s->doc);
        s->doc = doc;
        set_stamp(w, from, &s->mod_revision, &s->generation, kv->mod_revision);
        slot_seen_allocation(s);
        a->cache.listener->slot_showed(a, s);
        slot_index_allocation(a, s);
        slot_feed(a, s);
}

/* ---- machines ---- */

static void machine_free(Allocator *a, CacheMachine *m) {
        (void) placement_machine_set(a->placement, m->machine_id, false, false);
        (void) capacity_index_machine_set(a->capacity_index, m->machine_id, false, false);
        if (a->scaler_index)
                (void) scaler_index_machine_set(a->scaler_index, m->machine_id, false, false);
        (void) hashmap_remove(&a->cache.machines, m->machine_id, m);
        LIST_REMOVE(all, a->cache.all_machines, m);
        machine_doc_done(&m->doc);
        free(m->machine_id);
        free(m);
}

static void machine_put(Allocator *a, const EtcdKv *kv, ViewFrom from,
                        int64_t answer_revision) {
        const CacheWatch *w = &a->cache.watches[CACHE_MACHINES];
        _cleanup_free_ char *id = NULL;
        CacheMachine *m;
        MachineDoc doc;

        if (fleet_key_parse_machine(a->config->prefix, kv->key, &id) < 0)
                return;
        m = hashmap_get(&a->cache.machines, id);
        if (!put_wins(w, from, answer_revision, m ? &m->mod_revision : NULL,
                      m ? &m->generation : NULL, kv->mod_revision))
                return;
        if (machine_doc_parse(kv->value, kv->value_len, &doc) < 0) {
                log_debug("Ignoring %s: not a machine document", kv->key);
                if (m)
                        machine_free(a, m);
                return;
        }
        if (!m) {
                m = new0(CacheMachine, 1);
                if (!m || hashmap_put(&a->cache.machines, id, m) < 0) {
                        free(m);
                        machine_doc_done(&doc);
                        return;
                }
                m->machine_id = TAKE_PTR(id);
                LIST_PREPEND(all, a->cache.all_machines, m);
        }
        machine_doc_done(&m->doc);
        m->doc = doc;
        set_stamp(w, from, &m->mod_revision, &m->generation, kv->mod_revision);
        if (placement_machine_set(a->placement, m->machine_id, true, doc.draining) < 0)
                log_debug("Machine %s is not offered: out of memory", m->machine_id);
        if (capacity_index_machine_set(a->capacity_index, m->machine_id, true,
                                       doc.deprovisionable) < 0)
                log_debug("Machine %s is not in the capacity's counts: out of memory",
                          m->machine_id);
        if (a->scaler_index &&
            scaler_index_machine_set(a->scaler_index, m->machine_id, true, doc.draining) < 0)
                log_debug("Machine %s is not in the scaler's counts: out of memory",
                          m->machine_id);
}

/* ---- claims ---- */

static void claim_set_slot(Allocator *a, const CacheClaim *c, bool claimed) {
        CacheSlot *s = hashmap_get(&a->cache.slots_by_index, c->index_key);

        if (s && s->claimed != claimed) {
                s->claimed = claimed;
                slot_feed(a, s);
        }
}

static void claim_unindex_allocation(Allocator *a, CacheClaim *c) {
        if (c->doc.allocation_id)
                (void) hashmap_remove(&a->cache.claims_by_allocation, c->doc.allocation_id, c);
}

static void claim_free(Allocator *a, CacheClaim *c, bool tell) {
        ClaimDoc doc = c->doc;

        claim_unindex_allocation(a, c);
        (void) hashmap_remove(&a->cache.claims, c->key, c);
        (void) hashmap_remove(&a->cache.claims_by_index, c->index_key, c);
        LIST_REMOVE(all, a->cache.all_claims, c);
        claim_set_slot(a, c, false);
        sd_event_source_disable_unref(c->deadline);
        if (tell && doc.allocation_id)
                a->cache.listener->claim_gone(a, &doc, c->machine_id, c->slot_id,
                                              c->mod_revision);
        claim_doc_done(&doc);
        free(c->key);
        free(c->machine_id);
        free(c->index_key);
        free(c);
}

static CacheClaim *claim_new(Allocator *a, const char *key, char *machine, uint32_t id) {
        CacheClaim *c = new0(CacheClaim, 1);

        if (!c || !(c->key = strdup(key)) || !(c->index_key = index_key(machine, id))) {
                if (c)
                        free(c->key);
                free(c);
                return NULL;
        }
        c->allocator = a;
        c->machine_id = machine;
        c->slot_id = id;
        if (hashmap_put(&a->cache.claims, c->key, c) < 0) {
                free(c->key);
                free(c->index_key);
                free(c);
                return NULL;
        }
        /* Two claims of one slot cannot be (the claim transaction's compares). */
        (void) hashmap_put(&a->cache.claims_by_index, c->index_key, c);
        LIST_PREPEND(all, a->cache.all_claims, c);
        return c;
}

/* ---- the scaler's commands ---- */

static void scale_free(Allocator *a, CacheScale *c) {
        (void) hashmap_remove(&a->cache.scales, c->key, c);
        (void) hashmap_remove(&a->cache.scales_by_index, c->index_key, c);
        LIST_REMOVE(all, a->cache.all_scales, c);
        scaler_feed_index(a, c->index_key);
        free(c->key);
        free(c->index_key);
        free(c);
}

static void scale_put(Allocator *a, const EtcdKv *kv, const char *machine, uint32_t id,
                      ViewFrom from, int64_t answer_revision) {
        const CacheWatch *w = &a->cache.watches[CACHE_HOSTS];
        CacheScale *c = hashmap_get(&a->cache.scales, kv->key);
        ScaleDoc doc = {};

        if (!put_wins(w, from, answer_revision, c ? &c->mod_revision : NULL,
                      c ? &c->generation : NULL, kv->mod_revision))
                return;
        if (!c) {
                c = new0(CacheScale, 1);
                if (!c || !(c->key = strdup(kv->key)) || !(c->index_key = index_key(machine, id)) ||
                    hashmap_put(&a->cache.scales, c->key, c) < 0) {
                        if (c) {
                                free(c->key);
                                free(c->index_key);
                        }
                        free(c);
                        log_oom();
                        return;
                }
                (void) hashmap_put(&a->cache.scales_by_index, c->index_key, c);
                LIST_PREPEND(all, a->cache.all_scales, c);
        }
        c->action = scale_doc_parse(kv->value, kv->value_len, &doc) < 0 ? _SCALE_ACTION_INVALID
                                                                         : doc.action;
        scale_doc_done(&doc);
        set_stamp(w, from, &c->mod_revision, &c->generation, kv->mod_revision);
        scaler_feed_index(a, c->index_key);
}

/* ---- a key of hosts/: a claim or a command ---- */

static void claim_put(Allocator *a, const EtcdKv *kv, ViewFrom from, int64_t answer_revision) {
        const CacheWatch *w = &a->cache.watches[CACHE_HOSTS];
        _cleanup_free_ char *machine = NULL;
        FleetHostKeyKind kind;
        CacheClaim *c;
        ClaimDoc doc = {};
        uint32_t id;

        if (fleet_key_parse_host(a->config->prefix, kv->key, &kind, &machine, &id, NULL) < 0)
                return;
        if (kind == FLEET_HOST_KEY_SCALE) {
                scale_put(a, kv, machine, id, from, answer_revision);
                return;
        }
        if (kind != FLEET_HOST_KEY_CLAIM)
                return; /* deallocations are the registries' */
        c = hashmap_get(&a->cache.claims, kv->key);
        if (!put_wins(w, from, answer_revision, c ? &c->mod_revision : NULL,
                      c ? &c->generation : NULL, kv->mod_revision))
                return;
        /* A claim that does not parse still takes its slot: the transactions see the key. */
        if (claim_doc_parse(kv->value, kv->value_len, &doc) < 0)
                log_debug("Claim %s is not a claim document; its slot is taken all the same",
                          kv->key);
        if (!c) {
                c = claim_new(a, kv->key, machine, id);
                if (!c) {
                        claim_doc_done(&doc);
                        return;
                }
                machine = NULL;
        }
        claim_unindex_allocation(a, c);
        claim_doc_done(&c->doc);
        c->doc = doc;
        set_stamp(w, from, &c->mod_revision, &c->generation, kv->mod_revision);
        if (c->doc.allocation_id)
                (void) hashmap_put(&a->cache.claims_by_allocation, c->doc.allocation_id, c);
        claim_set_slot(a, c, true);
        if (a->cache.listener->claim_seen(a, c) < 0)
                log_warning("Claim %s: its deadline cannot be watched: out of resources",
                            c->key);
}

/* ---- applying what etcd tells ---- */

/* answer_revision: an answer's (VIEW_FROM_ANSWER), else unused. */
static void apply_put(Allocator *a, CacheKind kind, const EtcdKv *kv, ViewFrom from,
                      int64_t answer_revision) {
        switch (kind) {
        case CACHE_SLOTS:
                slot_put(a, kv, from, answer_revision);
                break;
        case CACHE_MACHINES:
                machine_put(a, kv, from, answer_revision);
                break;
        default:
                claim_put(a, kv, from, answer_revision);
        }
}

/* Whether the entry goes: told absent at revision (view-rule.h). */
static bool delete_wins(const CacheWatch *w, ViewFrom from, int64_t revision,
                        int64_t mod_revision) {
        return view_delete(&w->clock, from, revision,
                           &(ViewStamp){ .mod_revision = mod_revision }) == VIEW_DROP;
}

/* The key deleted at revision (the watch), or absent at revision (an answer: a slot only). */
static void apply_delete(Allocator *a, CacheKind kind, const char *key, ViewFrom from,
                         int64_t revision) {
        const CacheWatch *w = &a->cache.watches[kind];
        _cleanup_free_ char *id = NULL;
        CacheSlot *s;
        CacheMachine *m;
        CacheClaim *c;
        CacheScale *sc;

        switch (kind) {
        case CACHE_SLOTS:
                s = hashmap_get(&a->cache.slots, key);
                if (s && delete_wins(w, from, revision, s->mod_revision))
                        slot_free(a, s);
                break;
        case CACHE_MACHINES:
                if (fleet_key_parse_machine(a->config->prefix, key, &id) < 0)
                        break;
                m = hashmap_get(&a->cache.machines, id);
                if (m && delete_wins(w, from, revision, m->mod_revision))
                        machine_free(a, m);
                break;
        default:
                sc = hashmap_get(&a->cache.scales, key);
                if (sc && delete_wins(w, from, revision, sc->mod_revision))
                        scale_free(a, sc);
                c = hashmap_get(&a->cache.claims, key);
                if (!c || !delete_wins(w, from, revision, c->mod_revision))
                        break;
                s = cache_slot_by_index(a, c->machine_id, c->slot_id);
                if (s && c->doc.allocation_id &&
                    free_and_strdup(&s->claim_gone_allocation_id, c->doc.allocation_id) >= 0)
                        s->claim_gone_revision = revision;
                claim_free(a, c, true);
        }
}

static CacheKind kind_of_key(const Allocator *a, const char *key) {
        for (CacheKind k = 0; k < _CACHE_KIND_MAX; k++)
                if (strncmp(key, a->cache.watches[k].prefix,
                            strlen(a->cache.watches[k].prefix)) == 0)
                        return k;
        return _CACHE_KIND_MAX;
}

void cache_apply_kv(Allocator *a, const char *key, const EtcdKv *kv, int64_t revision) {
        CacheKind kind = kind_of_key(a, key);

        if (kind == _CACHE_KIND_MAX)
                return;
        if (kv) {
                apply_put(a, kind, kv, VIEW_FROM_ANSWER, revision);
                return;
        }
        /* Absent at the answer's revision: only a slot document is dropped here (so that it
         * is not picked again in vain); the watch tells the rest (a claim's deletion, with
         * the revision it was deleted at: claim_gone_revision). */
        if (kind == CACHE_SLOTS)
                apply_delete(a, kind, key, VIEW_FROM_ANSWER, revision);
}

/* What the range of a resync did not show is gone, but for what an answer newer than the
 * range put (view_swept). */
static void sweep(Allocator *a, CacheKind kind) {
        const ViewClock *clock = &a->cache.watches[kind].clock;

#define SWEPT(e) view_swept(clock, &(ViewStamp){ .mod_revision = (e)->mod_revision, \
                                                 .generation = (e)->generation })
        switch (kind) {
        case CACHE_SLOTS:
                for (CacheSlot *s = a->cache.all_slots, *n; s; s = n) {
                        n = s->all_next;
                        if (SWEPT(s))
                                slot_free(a, s);
                }
                break;
        case CACHE_MACHINES:
                for (CacheMachine *m = a->cache.all_machines, *n; m; m = n) {
                        n = m->all_next;
                        if (SWEPT(m))
                                machine_free(a, m);
                }
                break;
        default:
                for (CacheClaim *c = a->cache.all_claims, *n; c; c = n) {
                        n = c->all_next;
                        if (SWEPT(c))
                                claim_free(a, c, true);
                }
                for (CacheScale *c = a->cache.all_scales, *n; c; c = n) {
                        n = c->all_next;
                        if (SWEPT(c))
                                scale_free(a, c);
                }
        }
#undef SWEPT
}

/* ---- range and watch ---- */

static void watch_resync(CacheWatch *w);

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        CacheWatch *w = userdata;

        w->retry = sd_event_source_disable_unref(w->retry);
        watch_resync(w);
        return 0;
}

static void watch_retry_later(CacheWatch *w) {
        Allocator *a = w->allocator;
        int r;

        w->backoff = w->backoff ? MIN(w->backoff * 2, RESYNC_BACKOFF_MAX) : RESYNC_BACKOFF_MIN;
        w->retry = sd_event_source_disable_unref(w->retry);
        r = sd_event_add_time_relative(a->event, &w->retry, CLOCK_MONOTONIC, w->backoff, 0,
                                       on_retry, w);
        if (r < 0)
                log_error_errno(r, "Cannot schedule reading %s again: %m", w->prefix);
}

static void on_watch(Etcd *e, EtcdWatch *watch, const EtcdEvent *events, size_t n,
                     int64_t revision, int error, int64_t compact_revision, void *userdata) {
        CacheWatch *w = userdata;
        Allocator *a = w->allocator;

        if (error < 0) {
                if (error == -ESTALE)
                        log_warning("The watch of %s fell behind etcd's compaction (revision "
                                    "%" PRId64 "): reading it anew", w->prefix, compact_revision);
                else
                        log_warning_errno(error, "The watch of %s ended: %m; reading it anew",
                                          w->prefix);
                w->watch = etcd_watch_free(w->watch);
                w->ready = false;
                a->metrics.watch_resyncs++;
                watch_resync(w);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                if (events[i].type == ETCD_EVENT_PUT)
                        apply_put(a, w->kind, &events[i].kv, VIEW_FROM_WATCH, 0);
                else
                        apply_delete(a, w->kind, events[i].kv.key, VIEW_FROM_WATCH,
                                     events[i].kv.mod_revision);
                /* In revision order, and a revision's events all in one message. */
                view_watch_advanced(&w->clock, events[i].kv.mod_revision);
        }
        if (n > 0 && a->cache.listener->view_changed)
                a->cache.listener->view_changed(a);
}

/* A range's answer (50,000 slot documents: tens of MB in small pieces) is freed once its
 * callback returns, into holes of the heap between what the view keeps: their pages given back
 * then. */
static int on_trim(sd_event_source *s, void *userdata) {
        Allocator *a = userdata;

        a->cache.trim = sd_event_source_disable_unref(a->cache.trim);
        (void) malloc_trim(0);
        return 0;
}

static void trim_later(Allocator *a) {
        if (!a->cache.trim && sd_event_add_defer(a->event, &a->cache.trim, on_trim, a) < 0)
                a->cache.trim = NULL;
}

static void on_range(Etcd *e, const EtcdResponse *resp, void *userdata) {
        CacheWatch *w = userdata;
        Allocator *a = w->allocator;
        int r;

        w->range = NULL;
        if (allocator_etcd_failed(a, resp)) {
                log_warning("Cannot read %s from etcd: %s; trying again in %" PRIu64 " ms",
                            w->prefix, resp->message, w->backoff / USEC_PER_MSEC);
                watch_retry_later(w);
                return;
        }
        view_range_read(&w->clock, resp->revision);
        for (size_t i = 0; i < resp->n_kvs; i++)
                apply_put(a, w->kind, &resp->kvs[i], VIEW_FROM_RANGE, 0);
        sweep(a, w->kind);
        if (resp->n_kvs > 0)
                trim_later(a);
        r = etcd_watch(a->etcd, w->prefix, w->range_end, resp->revision + 1, on_watch, w,
                       &w->watch);
        if (r < 0) {
                log_warning_errno(r, "Cannot watch %s: %m", w->prefix);
                watch_retry_later(w);
                return;
        }
        w->ready = w->read_once = true;
        w->backoff = 0;
        log_debug("Read %zu keys of %s at revision %" PRId64 ", watching", resp->n_kvs,
                  w->prefix, resp->revision);
        a->cache.listener->view_read(a, w->kind);
        if (a->cache.listener->view_changed)
                a->cache.listener->view_changed(a);
}

static void watch_resync(CacheWatch *w) {
        int r;

        view_range_asked(&w->clock);
        w->ready = false;
        r = etcd_range(w->allocator->etcd, w->prefix, w->range_end, 0, on_range, w, &w->range);
        if (r < 0) {
                log_warning_errno(r, "Cannot read %s: %m", w->prefix);
                watch_retry_later(w);
        }
}

int cache_start(Allocator *a, const CacheListener *listener) {
        a->cache.listener = listener;
        for (CacheKind k = 0; k < _CACHE_KIND_MAX; k++) {
                CacheWatch *w = &a->cache.watches[k];

                *w = (CacheWatch){ .allocator = a, .kind = k };
                if (asprintf(&w->prefix, "%s/%s/", a->config->prefix, kind_paths[k]) < 0) {
                        w->prefix = NULL;
                        return log_oom();
                }
                w->range_end = etcd_prefix_end(w->prefix);
                if (!w->range_end)
                        return log_oom();
        }
        for (CacheKind k = 0; k < _CACHE_KIND_MAX; k++)
                watch_resync(&a->cache.watches[k]);
        return 0;
}

static void fleet_free(void *v) {
        CacheFleet *f = v;

        free(f->name);
        free(f);
}

void cache_done(Allocator *a) {
        Cache *c = &a->cache;

        for (CacheKind k = 0; k < _CACHE_KIND_MAX; k++) {
                CacheWatch *w = &c->watches[k];

                etcd_request_cancel(w->range);
                w->watch = etcd_watch_free(w->watch);
                w->retry = sd_event_source_disable_unref(w->retry);
                free(w->prefix);
                free(w->range_end);
                *w = (CacheWatch){};
        }
        while (c->all_claims)
                claim_free(a, c->all_claims, false);
        while (c->all_scales)
                scale_free(a, c->all_scales);
        hashmap_done(&c->scales);
        hashmap_done(&c->scales_by_index);
        while (c->all_slots)
                slot_free(a, c->all_slots);
        while (c->all_machines)
                machine_free(a, c->all_machines);
        hashmap_done(&c->slots);
        hashmap_done(&c->slots_by_index);
        hashmap_done(&c->slots_by_allocation);
        hashmap_done_free(&c->fleets, fleet_free);
        hashmap_done(&c->machines);
        hashmap_done(&c->claims);
        hashmap_done(&c->claims_by_index);
        hashmap_done(&c->claims_by_allocation);
        intern_pool_done(&c->strings);
        c->trim = sd_event_source_disable_unref(c->trim);
}
