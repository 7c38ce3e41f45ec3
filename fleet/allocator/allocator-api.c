/* SPDX-License-Identifier: MIT */
/* The API (SPEC §13), the door's side: POST of an allocation, handed to the operations
 * (allocator-ops.h) and their outcome answered (allocator-answer.h); GET of one allocation
 * and of the list, read from etcd (linearizable: a record another replica wrote a moment ago
 * is there); DELETE, one
 * transaction conditioned on the record as read (the read and the transaction each go in a
 * batch with other requests', etcd.h's group commit); the fleet's capacity and the metrics,
 * from the fleet view. */
#include <inttypes.h>

#include "allocator-answer.h"
#include "allocator-api.h"
#include "allocator-cache.h"
#include "allocator-http.h"
#include "allocator-ops.h"
#include "allocator-replace.h"
#include "allocator-scan.h"
#include "allocator.h"
#include "log.h"

#define DELETE_ATTEMPTS_MAX 4
/* A deletion whose answer was lost with its etcd member is read and sent again at most this
 * many times (allocator-claim.c's in-doubt claims alike). */
#define DELETE_IN_DOUBT_MAX 2

/* An allocation op: one request's reads and writes in etcd. */
typedef struct ReadOp {
        Allocator *allocator;
        ApiRequest *req;
        EtcdRequest *etcd;
        EtcdBatchTxn *txn; /* DELETE's read and transaction, in a batch */
        char *key;
        int64_t record_revision;
        unsigned attempts;
        unsigned in_doubt; /* DELETE: its transaction's outcome was unknown this many times */
} ReadOp;

static void read_op_free(ReadOp *op) {
        etcd_request_cancel(op->etcd);
        etcd_batch_txn_cancel(op->txn);
        free(op->key);
        free(op);
}

static void read_op_cancel(void *userdata) {
        read_op_free(userdata);
}

static void read_op_answer(ReadOp *op, unsigned status, json_t *body) {
        api_request_clear_op(op->req);
        api_request_answer(op->req, status, body);
        read_op_free(op);
}

static void read_op_unavailable(ReadOp *op, const EtcdResponse *resp) {
        api_request_clear_op(op->req);
        api_request_answer(op->req, 503, api_etcd_unavailable_json(resp ? resp->message : NULL));
        read_op_free(op);
}

static ReadOp *read_op_new(Allocator *a, ApiRequest *req, char *key) {
        ReadOp *op;

        if (!key)
                return NULL;
        op = new0(ReadOp, 1);
        if (!op) {
                free(key);
                return NULL;
        }
        *op = (ReadOp){ .allocator = a, .req = req, .key = key };
        api_request_set_op(req, op, read_op_cancel);
        return op;
}

/* ---- what GET shows ---- */

/* claimed, fulfilled, or lost when its machine has left the fleet view. */
static const char *record_status_word(const Allocator *a, const AllocationRecord *rec) {
        if (cache_ready(a) && !str_isempty(rec->machine_id) && !cache_machine(a, rec->machine_id))
                return "lost";
        return allocation_status_to_string(rec->status);
}

static bool record_ready(const Allocator *a, const AllocationRecord *rec) {
        const CacheSlot *s = rec->machine_id ? cache_slot_by_index(a, rec->machine_id,
                                                                    rec->slot_id)
                                             : NULL;

        return s && s->doc.ready && streq_ptr(s->doc.allocation_id, rec->allocation_id);
}

/* The record of kv, if it parses and is of the route's project and environment. */
static int record_of(const ApiRoute *rt, const EtcdKv *kv, AllocationRecord *ret) {
        int r = allocation_record_parse(kv->value, kv->value_len, ret);

        if (r < 0)
                return r;
        if (!streq_ptr(ret->project_id, rt->project) ||
            !streq_ptr(ret->environment_id, rt->environment)) {
                allocation_record_done(ret);
                return -ENOENT;
        }
        return 0;
}

static json_t *record_json(const Allocator *a, const AllocationRecord *rec) {
        AllocationRecord shown = *rec;
        const CacheMachine *m;

        /* A record written before machineNumber was: its machine's, as the view shows it. */
        if (shown.machine_number == 0 && (m = cache_machine(a, rec->machine_id)))
                shown.machine_number = m->doc.machine_number;
        return api_allocation_json(&shown, record_status_word(a, rec), record_ready(a, rec));
}

static void not_found(ReadOp *op) {
        const ApiRoute *rt = api_request_route(op->req);

        read_op_answer(op, 404, api_error_json("allocation %s not found in fleet %s",
                                               rt->allocation, rt->fleet));
}

/* The record a read of one allocation found; false when the request was answered instead
 * (etcd unavailable, or no such allocation). */
static bool read_op_record(ReadOp *op, const EtcdResponse *resp, AllocationRecord *rec) {
        op->etcd = NULL;
        if (allocator_etcd_failed(op->allocator, resp)) {
                read_op_unavailable(op, resp);
                return false;
        }
        if (resp->n_kvs == 0 || record_of(api_request_route(op->req), &resp->kvs[0], rec) < 0) {
                not_found(op);
                return false;
        }
        return true;
}

/* A record read claimed whose claim the view lacks (allocator-orphan.h) is placed again: the
 * read of the records at a (re)read of the claims finds such records, this finds one whose
 * re-placement was given up since (O(1)). */
static void kick_orphan(Allocator *a, const AllocationRecord *rec, int64_t revision) {
        OrphanView v;

        if (rec->status != ALLOCATION_CLAIMED || !cache_ready(a))
                return;
        v = scan_orphan_view(a, rec);
        if (allocation_record_orphaned(rec, revision, &v))
                replace_record_orphaned(a, rec);
}

static void on_get(Etcd *e, const EtcdResponse *resp, void *userdata) {
        _cleanup_(allocation_record_done) AllocationRecord rec = {};
        ReadOp *op = userdata;

        if (!read_op_record(op, resp, &rec))
                return;
        kick_orphan(op->allocator, &rec, resp->kvs[0].mod_revision);
        read_op_answer(op, 200, record_json(op->allocator, &rec));
}

static bool list_wants(const ApiRoute *rt, const char *word) {
        if (rt->status_lost)
                return streq(word, "lost");
        return rt->status < 0 || streq(word, allocation_status_to_string(rt->status));
}

static void on_list(Etcd *e, const EtcdResponse *resp, void *userdata) {
        ReadOp *op = userdata;
        const ApiRoute *rt = api_request_route(op->req);
        json_t *list;

        op->etcd = NULL;
        if (allocator_etcd_failed(op->allocator, resp)) {
                read_op_unavailable(op, resp);
                return;
        }
        list = json_array();
        for (size_t i = 0; list && i < resp->n_kvs; i++) {
                _cleanup_(allocation_record_done) AllocationRecord rec = {};

                if (record_of(rt, &resp->kvs[i], &rec) < 0 ||
                    !list_wants(rt, record_status_word(op->allocator, &rec)))
                        continue;
                if (json_array_append_new(list, record_json(op->allocator, &rec)) < 0) {
                        json_decref(list);
                        list = NULL;
                }
        }
        read_op_answer(op, list ? 200 : 500, list ? json_pack("{s:o}", "allocations", list)
                                                : api_error_json("out of memory"));
}

static void api_get(Allocator *a, ApiRequest *req, bool list) {
        const ApiRoute *rt = api_request_route(req);
        _cleanup_free_ char *prefix = NULL, *end = NULL;
        ReadOp *op;
        int r;

        if (list) {
                if (asprintf(&prefix, "%s/allocations/%s/", a->config->prefix, rt->fleet) < 0)
                        prefix = NULL;
                end = prefix ? etcd_prefix_end(prefix) : NULL;
        }
        op = read_op_new(a, req, list ? TAKE_PTR(prefix)
                                      : allocator_record_key(a, rt->fleet, rt->allocation));
        if (!op || (list && !end)) {
                if (op)
                        read_op_free(op);
                api_request_clear_op(req);
                api_request_error(req, 500, "out of memory");
                return;
        }
        r = etcd_range(a->etcd, op->key, end, list ? 0 : 1, list ? on_list : on_get, op,
                       &op->etcd);
        if (r < 0)
                read_op_unavailable(op, NULL);
}

/* ---- DELETE (SPEC §13 step 4) ---- */

static void delete_read(ReadOp *op);

static void on_deleted(Etcd *e, const EtcdResponse *resp, void *userdata) {
        ReadOp *op = userdata;

        op->txn = NULL;
        if (resp->error == -ECONNRESET && op->in_doubt < DELETE_IN_DOUBT_MAX) {
                /* The answer was lost with its member: the deletion may have been applied or
                 * not. The record read anew tells (gone: it was), and a deletion sent again
                 * is guarded by the record's revision as the first was. */
                op->in_doubt++;
                op->allocator->metrics.etcd_in_doubt++;
                log_info("Allocation %s: etcd's answer to its deletion was lost (%s); reading "
                         "it again", api_request_route(op->req)->allocation, resp->message);
                delete_read(op);
                return;
        }
        if (allocator_etcd_failed(op->allocator, resp)) {
                read_op_unavailable(op, resp);
                return;
        }
        if (resp->succeeded) {
                op->allocator->metrics.deallocations++;
                log_debug("Allocation %s deleted", api_request_route(op->req)->allocation);
                read_op_answer(op, 204, NULL);
                return;
        }
        if (++op->attempts >= DELETE_ATTEMPTS_MAX) {
                read_op_answer(op, 503, api_error_json("allocation %s changed under each of %u "
                                                       "attempts to delete it; try again",
                                                       api_request_route(op->req)->allocation,
                                                       op->attempts));
                return;
        }
        delete_read(op); /* the record or its claim changed: read it anew */
}

/* The transaction: the record as read deleted, and its allocationId's index; a claim of it
 * deleted too (if the view knows it as this allocation's: a claim of another on the slot is
 * not touched); for a fulfilled record, its machine's deallocation key put for the registry. */
static int delete_send(ReadOp *op, const AllocationRecord *rec) {
        Allocator *a = op->allocator;
        CacheClaim *c = rec->machine_id ? cache_claim_by_index(a, rec->machine_id, rec->slot_id)
                                        : NULL;
        DeallocationDoc d = { .allocation_id = rec->allocation_id, .fleet_id = rec->fleet_id,
                              .slot_id = rec->slot_id };
        _cleanup_free_ char *dkey = NULL, *dvalue = NULL,
                *ikey = fleet_key_allocation_id(a->config->prefix, rec->allocation_id);
        EtcdCompare cmp[2] = {
                { .key = op->key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = op->record_revision },
        };
        EtcdOp ops[3] = { { .type = ETCD_OP_DELETE, .key = op->key },
                          { .type = ETCD_OP_DELETE, .key = ikey } };
        size_t n = 2;
        int r;

        if (!ikey)
                return -ENOMEM;

        if (rec->status == ALLOCATION_FULFILLED && !str_isempty(rec->machine_id)) {
                dkey = fleet_key_deallocation(a->config->prefix, rec->machine_id,
                                              rec->allocation_id);
                r = dkey ? deallocation_doc_format(&d, &dvalue) : -ENOMEM;
                if (r < 0)
                        return r;
                ops[n++] = (EtcdOp){ .type = ETCD_OP_PUT, .key = dkey, .value = dvalue };
        } else if (c && streq_ptr(c->doc.allocation_id, rec->allocation_id)) {
                cmp[1] = (EtcdCompare){ .key = c->key, .target = ETCD_TARGET_MOD,
                                        .result = ETCD_EQUAL, .number = c->mod_revision };
                ops[n++] = (EtcdOp){ .type = ETCD_OP_DELETE, .key = c->key };
        }
        return etcd_batch_txn(a->batch, cmp, cmp[1].key ? 2 : 1, ops, n, NULL, 0, on_deleted,
                              op, &op->txn);
}

static void on_delete_read(Etcd *e, const EtcdResponse *resp, void *userdata) {
        _cleanup_(allocation_record_done) AllocationRecord rec = {};
        ReadOp *op = userdata;

        op->txn = NULL;
        if (op->in_doubt > 0 && resp->error >= 0 && resp->n_kvs == 0) {
                /* gone after a deletion whose answer was lost: that deletion (or another) */
                op->allocator->metrics.deallocations++;
                read_op_answer(op, 204, NULL);
                return;
        }
        if (!read_op_record(op, resp, &rec))
                return;
        op->record_revision = resp->kvs[0].mod_revision;
        if (delete_send(op, &rec) < 0)
                read_op_unavailable(op, NULL);
}

/* The record, read in a batch with other requests' transactions. */
static void delete_read(ReadOp *op) {
        if (etcd_batch_range(op->allocator->batch, op->key, NULL, 1, on_delete_read, op,
                             &op->txn) < 0)
                read_op_unavailable(op, NULL);
}

/* The transaction at once, without reading the record first, when the view knows what the
 * record holds: the slot that shows the allocation saw its claim deleted at revision R, and
 * no claim of it is left; the only transaction that deletes a claim and writes its record at
 * R, the slot then showing the allocation, is its host's confirmation: the record is
 * fulfilled there. Compared (the record's mod_revision R): if it is not so, the transaction
 * fails and the record is read as usual. */
static bool delete_direct(ReadOp *op) {
        Allocator *a = op->allocator;
        const ApiRoute *rt = api_request_route(op->req);
        CacheSlot *s = cache_ready(a) ? hashmap_get(&a->cache.slots_by_allocation, rt->allocation)
                                      : NULL;
        AllocationRecord rec;

        if (!s || !streq_ptr(s->claim_gone_allocation_id, rt->allocation) ||
            s->claim_gone_revision <= 0 || !streq_ptr(s->fleet, rt->fleet) ||
            hashmap_get(&a->cache.claims_by_allocation, rt->allocation))
                return false;
        rec = (AllocationRecord) { .allocation_id = (char *) rt->allocation,
                                   .fleet_id = (char *) rt->fleet, .machine_id = s->machine_id,
                                   .slot_id = s->slot_id, .status = ALLOCATION_FULFILLED };
        op->record_revision = s->claim_gone_revision;
        return delete_send(op, &rec) >= 0;
}

static void api_delete(Allocator *a, ApiRequest *req) {
        const ApiRoute *rt = api_request_route(req);
        ReadOp *op = read_op_new(a, req, allocator_record_key(a, rt->fleet, rt->allocation));

        if (!op) {
                api_request_error(req, 500, "out of memory");
                return;
        }
        if (!delete_direct(op))
                delete_read(op);
}

/* ---- GET /v1/fleets/{fleetId}/capacity (SPEC §13) ---- */

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

static void api_capacity(Allocator *a, ApiRequest *req) {
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

static void api_metrics(Allocator *a, ApiRequest *req) {
        AllocatorGauges g = {
                .slots = a->cache.slots.size,
                .machines = a->cache.machines.size,
                .claims = a->cache.claims.size,
                .requests_in_flight = a->requests_in_flight,
                .fleet_view_ready = cache_ready(a),
        };
        char *text;

        etcd_batch_counts(a->batch, &g.etcd_batches, &g.etcd_batched_txns);

        if (allocator_metrics_format(&a->metrics, &g, &text) < 0) {
                api_request_error(req, 500, "out of memory (metrics)");
                return;
        }
        api_request_answer_text(req, 200, text, "text/plain; version=0.0.4; charset=utf-8");
}

/* ---- POST …/allocations (SPEC §13 step 1) ---- */

/* An allocation's outcome, counted and answered. */
static void allocate_answered(const AllocAnswer *answer, void *userdata) {
        ApiRequest *req = userdata;
        Allocator *a = api_request_allocator(req);
        json_t *body = NULL;
        unsigned status;

        a->metrics.allocations[alloc_outcome_result(answer->outcome)]++;
        allocator_metrics_observe_latency(&a->metrics,
                                          now_usec(CLOCK_MONOTONIC) - api_request_started(req));
        status = alloc_answer_http(answer, &body);
        api_request_answer(req, status, body);
}

static void allocate_cancel(void *op) {
        alloc_claim_cancel(op);
}

static void api_allocate(Allocator *a, ApiRequest *req) {
        _cleanup_(api_allocate_body_done) ApiAllocateBody body = {};
        const ApiRoute *rt = api_request_route(req);
        AllocRequest r = { .project = rt->project, .environment = rt->environment,
                           .fleet = rt->fleet };
        const char *error = NULL, *text;
        size_t size;
        ClaimOp *op;

        text = api_request_body(req, &size);
        if (api_parse_allocate(text, size, &body, &error) < 0) {
                allocate_answered(&(AllocAnswer){ .outcome = ALLOC_INVALID, .request = &r,
                                                  .detail = error },
                                  req);
                return;
        }
        r.allocation_id = body.allocation_id;
        r.build_configuration_id = body.build_configuration_id;
        r.region_id = body.region_id;
        r.payload = body.payload;
        /* Answered, perhaps at once (then NULL), through allocate_answered. */
        op = alloc_claim(a, &r, allocate_answered, req);
        if (op)
                api_request_set_op(req, op, allocate_cancel);
}

void api_dispatch(Allocator *a, ApiRequest *req) {
        switch (api_request_route(req)->op) {
        case API_ALLOCATE:
                api_allocate(a, req);
                break;
        case API_GET:
                api_get(a, req, false);
                break;
        case API_LIST:
                api_get(a, req, true);
                break;
        case API_DELETE:
                api_delete(a, req);
                break;
        case API_CAPACITY:
                api_capacity(a, req);
                break;
        default:
                api_metrics(a, req);
        }
}
