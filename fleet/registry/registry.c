/* SPDX-License-Identifier: MIT */
/* The registry's model of slotd: the slots by id, the dirty list the flush takes its
 * documents from, and the documents' keys. Every change is O(1) in the slots; only a full
 * read of slotd and a new lease walk them all. */
#include "log.h"
#include "registry-state.h"
#include "registry.h"
#include "strv.h"

int registry_new(Registry **ret, sd_event *event) {
        Registry *r = new0(Registry, 1);

        if (!r)
                return -ENOMEM;
        r->event = sd_event_ref(event);
        r->bus_backoff = (Backoff){ .first = 100 * USEC_PER_MSEC, .max = 5 * USEC_PER_SEC };
        /* etcd back must be seen well within a claim's deadline (5 s by default) */
        r->lease_backoff = (Backoff){ .first = 100 * USEC_PER_MSEC, .max = 1 * USEC_PER_SEC };
        r->host_backoff = (Backoff){ .first = 100 * USEC_PER_MSEC, .max = 1 * USEC_PER_SEC };
        *ret = r;
        return 0;
}

Registry *registry_free(Registry *r) {
        if (!r)
                return NULL;
        registry_host_done(r);
        registry_etcd_done(r);
        registry_bus_done(r);
        for (size_t i = 0; i < r->n_slots; i++)
                reg_slot_free(r->slots[i]);
        free(r->slots);
        strv_free(r->stale_keys);
        reg_machine_done(&r->machine);
        free(r->bus_address);
        free(r->prefix);
        sd_event_unref(r->event);
        free(r);
        return NULL;
}

RegSlot *registry_slot(Registry *r, uint32_t id) {
        return id < r->n_slots ? r->slots[id] : NULL;
}

/* A slot's key may be among the stale ones (it went and came back between two flushes): a
 * transaction may not both delete and put a key. */
static void stale_keys_drop(Registry *r, const char *key) {
        size_t n = strv_length(r->stale_keys), j = 0;

        for (size_t i = 0; i < n; i++) {
                if (streq(r->stale_keys[i], key))
                        free(r->stale_keys[i]);
                else
                        r->stale_keys[j++] = r->stale_keys[i];
        }
        if (r->stale_keys)
                r->stale_keys[j] = NULL;
}

int registry_slot_add(Registry *r, uint32_t id, RegSlot **ret) {
        RegSlot *s;

        if (id >= r->n_slots) {
                size_t n = MAX((size_t) id + 1, r->n_slots * 2);
                RegSlot **t = realloc(r->slots, n * sizeof(RegSlot *));

                if (!t)
                        return -ENOMEM;
                memset(t + r->n_slots, 0, (n - r->n_slots) * sizeof(RegSlot *));
                r->slots = t;
                r->n_slots = n;
        }
        s = r->slots[id];
        if (!s) {
                s = new0(RegSlot, 1);
                if (!s)
                        return -ENOMEM;
                s->id = id;
                r->slots[id] = s;
        }
        *ret = s;
        return 0;
}

/* Its document goes at the next flush; a slot on the dirty list stays there. */
static void dirty_unlink(Registry *r, RegSlot *s) {
        for (RegSlot **p = &r->dirty; *p; p = &(*p)->dirty_next)
                if (*p == s) {
                        *p = s->dirty_next;
                        break;
                }
        s->dirty = false;
        s->dirty_next = NULL;
}

/* Rare (slotd removed the slot: Reload, or a restart with fewer slots): the walk of the dirty
 * list is bounded by the slots changed since the last flush. */
void registry_slot_remove(Registry *r, uint32_t id) {
        RegSlot *s = registry_slot(r, id);

        if (!s)
                return;
        if (s->dirty)
                dirty_unlink(r, s);
        if (s->key && strv_push(&r->stale_keys, s->key) >= 0)
                s->key = NULL;
        r->slots[id] = reg_slot_free(s);
        registry_schedule_flush(r);
}

bool registry_slot_sent(const Registry *r, const RegSlot *s, const char *key, const char *value) {
        return s->sent_doc && s->sent_lease == r->lease_id && streq_ptr(s->key, key) &&
               streq(s->sent_doc, value);
}

void registry_slot_sending(Registry *r, RegSlot *s, const char *value) {
        free(s->sent_doc);
        s->sent_doc = value ? strdup(value) : NULL; /* NULL: nothing skipped, no harm */
        s->sent_lease = r->lease_id;
}

void registry_slot_dirty(Registry *r, RegSlot *s) {
        if (!s->dirty && s->known) {
                s->dirty = true;
                s->dirty_next = r->dirty;
                r->dirty = s;
        }
        registry_schedule_flush(r);
}

void registry_machine_dirty(Registry *r) {
        r->machine_dirty = true;
        registry_schedule_flush(r);
}

void registry_all_dirty(Registry *r) {
        for (size_t i = 0; i < r->n_slots; i++)
                if (r->slots[i] && r->slots[i]->known && !r->slots[i]->dirty) {
                        r->slots[i]->dirty = true;
                        r->slots[i]->dirty_next = r->dirty;
                        r->dirty = r->slots[i];
                }
        registry_machine_dirty(r);
}

int registry_slot_document(Registry *r, const RegSlot *s, char **ret_key, char **ret_value) {
        _cleanup_free_ char *key = NULL, *value = NULL;
        SlotDoc doc;
        int k;

        if (!fleet_key_component_valid(strempty(s->fleet)) ||
            !fleet_key_component_valid(strempty(r->machine.machine_id)))
                return -EINVAL;
        key = fleet_key_slot(r->prefix, s->fleet, r->machine.machine_id, s->id);
        if (!key)
                return -ENOMEM;
        reg_slot_doc(&r->machine, s, &doc);
        k = slot_doc_format(&doc, &value);
        if (k < 0)
                return k;
        stale_keys_drop(r, key);
        *ret_key = TAKE_PTR(key);
        *ret_value = TAKE_PTR(value);
        return 0;
}

/* The fleets' region IDs, each once, read from one slot of each fleet (slotd has no region
 * on the Manager). slotd numbers a fleet's slots in one run, so the scan stops after the
 * first slot of the last fleet: O(fleets) in practice, O(slots) at worst. */
static int machine_regions(Registry *r, char ***ret) {
        _cleanup_strv_free_ char **regions = NULL, **pending = strv_copy(r->machine.fleets);

        if (!pending)
                return -ENOMEM;
        for (size_t i = 0; i < r->n_slots && pending[0]; i++) {
                RegSlot *s = r->slots[i];
                size_t n, j = 0;

                if (!s || !s->known || !s->fleet || !strv_contains(pending, s->fleet))
                        continue;
                if (s->region_id && s->region_id[0] && !strv_contains(regions, s->region_id) &&
                    strv_extend(&regions, s->region_id) < 0)
                        return -ENOMEM;
                n = strv_length(pending);
                for (size_t k = 0; k < n; k++) {
                        if (streq(pending[k], s->fleet))
                                free(pending[k]);
                        else
                                pending[j++] = pending[k];
                }
                pending[j] = NULL;
        }
        *ret = TAKE_PTR(regions);
        return 0;
}

int registry_machine_document(Registry *r, char **ret_key, char **ret_value) {
        _cleanup_free_ char *key = NULL, *value = NULL;
        _cleanup_strv_free_ char **regions = NULL;
        MachineDoc doc;
        int k;

        if (!fleet_key_component_valid(strempty(r->machine.machine_id)))
                return -EINVAL;
        key = fleet_key_machine(r->prefix, r->machine.machine_id);
        if (!key)
                return -ENOMEM;
        k = machine_regions(r, &regions);
        if (k < 0)
                return k;
        reg_machine_doc(&r->machine, regions, r->idle_ttl_sec, r->registered_at, &doc);
        k = machine_doc_format(&doc, &value);
        if (k < 0)
                return k;
        *ret_key = TAKE_PTR(key);
        *ret_value = TAKE_PTR(value);
        return 0;
}
