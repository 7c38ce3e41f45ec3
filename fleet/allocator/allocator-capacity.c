/* SPDX-License-Identifier: MIT */
/* GET /v1/fleets/{fleetId}/capacity (SPEC §13), from the fleet view. Moved from
 * allocator-api.c as it was. */
#include "allocator-answer.h"
#include "allocator-cache.h"
#include "allocator-capacity.h"
#include "allocator-http.h"
#include "allocator.h"

static const char *const states[] = { "available", "online", "held", "reserved", "allocated" };
static const char *const process_states[] = { "stopped", "starting", "running", "stopping",
                                              "failed" };

static json_t *counts_new(const char *const *names, size_t n) {
        json_t *o = json_object();

        for (size_t i = 0; o && i < n; i++)
                if (json_object_set_new(o, names[i], json_integer(0)) < 0) {
                        json_decref(o);
                        return NULL;
                }
        return o;
}

static json_t *tally_new(void) {
        return json_pack("{s:i, s:i, s:o, s:o, s:i}", "slots", 0, "machines", 0, "states",
                         counts_new(states, ELEMENTSOF(states)), "processStates",
                         counts_new(process_states, ELEMENTSOF(process_states)), "claimed", 0);
}

static int count_up(json_t *o, const char *name) {
        json_t *v = json_object_get(o, name);

        if (!v)
                return json_object_set_new(o, name, json_integer(1));
        return json_integer_set(v, json_integer_value(v) + 1);
}

static int tally_slot(json_t *t, const CacheSlot *s, bool new_machine) {
        int r = count_up(t, "slots");

        if (r >= 0 && new_machine)
                r = count_up(t, "machines");
        if (r >= 0 && s->doc.state)
                r = count_up(json_object_get(t, "states"), s->doc.state);
        if (r >= 0 && s->doc.process_state)
                r = count_up(json_object_get(t, "processStates"), s->doc.process_state);
        if (r >= 0 && s->claimed)
                r = count_up(t, "claimed");
        return r;
}

/* Whether (key) is new to seen: its keys are strings the caller frees with the map. */
static int first_time(Hashmap *seen, char *key) {
        int r = hashmap_put(seen, key, key);

        if (r < 0)
                free(key);
        return r == -EEXIST ? 0 : r < 0 ? r : 1;
}

static int strcmp_ptr(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static json_t *strings_sorted_json(const char **ids, size_t n) {
        json_t *list = json_array();

        qsort(ids, n, sizeof(char *), strcmp_ptr);
        for (size_t i = 0; list && i < n; i++)
                if (json_array_append_new(list, json_string(ids[i])) < 0) {
                        json_decref(list);
                        list = NULL;
                }
        return list;
}

typedef struct Capacity {
        json_t *total, *regions;
        Hashmap machines;        /* machineID → (seen), keys the view's */
        Hashmap region_machines; /* "<region>/<machineID>" → itself, owned */
        const char **deprovisionable;
        size_t n_deprovisionable;
        usec_t hold_until;
} Capacity;

static void capacity_done(Capacity *c) {
        json_decref(c->total);
        json_decref(c->regions);
        hashmap_done(&c->machines);
        hashmap_done_free(&c->region_machines, free);
        free(c->deprovisionable);
}

static int capacity_add(const Allocator *a, Capacity *c, const CacheSlot *s) {
        const char *region = strempty(s->doc.region_id);
        const CacheMachine *m;
        json_t *t = json_object_get(c->regions, region);
        char *rm;
        int r, new_machine, new_in_region;

        if (!t && json_object_set_new(c->regions, region, t = tally_new()) < 0)
                return -ENOMEM;
        if (!t || asprintf(&rm, "%s/%s", region, s->machine_id) < 0)
                return -ENOMEM;
        new_in_region = first_time(&c->region_machines, rm);
        r = hashmap_put(&c->machines, s->machine_id, (void *) s);
        new_machine = r >= 0;
        if (new_in_region < 0 || (r < 0 && r != -EEXIST))
                return -ENOMEM;
        m = new_machine ? cache_machine(a, s->machine_id) : NULL;
        if (m && m->doc.deprovisionable)
                c->deprovisionable[c->n_deprovisionable++] = m->machine_id;
        c->hold_until = MAX(c->hold_until, s->doc.hold_until);
        r = tally_slot(c->total, s, new_machine);
        return r < 0 ? r : tally_slot(t, s, new_in_region > 0);
}

static json_t *capacity_json(const Allocator *a, const char *fleet) {
        const CacheFleet *f = hashmap_get(&a->cache.fleets, fleet);
        _cleanup_(capacity_done) Capacity c = {
                .total = tally_new(),
                .regions = json_object(),
                .deprovisionable = new0(const char *, f ? f->n_slots + 1 : 1),
        };
        char hold[RFC3339_MAX];
        json_t *deprovisionable;

        if (!c.total || !c.regions || !c.deprovisionable)
                return NULL;
        for (const CacheSlot *s = f ? f->slots : NULL; s; s = s->fleet_next)
                if (capacity_add(a, &c, s) < 0)
                        return NULL;
        deprovisionable = strings_sorted_json(c.deprovisionable, c.n_deprovisionable);
        return json_pack("{s:s, s:O, s:O, s:o, s:s}", "fleetId", fleet, "total", c.total,
                         "regions", c.regions, "deprovisionable", deprovisionable, "holdUntil",
                         rfc3339_format(c.hold_until, hold));
}

void api_capacity(Allocator *a, ApiRequest *req) {
        const ApiRoute *rt = api_request_route(req);
        json_t *j;

        if (!cache_ready(a)) {
                api_request_error(req, 503, "etcd unavailable: the fleet view is not read from "
                                            "etcd yet (capacity of fleet %s)", rt->fleet);
                return;
        }
        j = capacity_json(a, rt->fleet);
        if (!j) {
                api_request_error(req, 500, "out of memory (capacity of fleet %s)", rt->fleet);
                return;
        }
        api_request_answer(req, 200, j);
}
