/* SPDX-License-Identifier: MIT */
/* GET of one allocation and of the list, read from etcd (linearizable: a record another
 * replica wrote a moment ago is there); DELETE, one transaction conditioned on the record as
 * read (the read and the transaction each go in a batch with other requests', etcd.h's group
 * commit). Moved from allocator-api.c as they were. */
#include <inttypes.h>

#include "allocator-answer.h"
#include "allocator-cache.h"
#include "allocator-http.h"
#include "allocator-record.h"
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

void api_get(Allocator *a, ApiRequest *req, bool list) {
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

void api_delete(Allocator *a, ApiRequest *req) {
        const ApiRoute *rt = api_request_route(req);
        ReadOp *op = read_op_new(a, req, allocator_record_key(a, rt->fleet, rt->allocation));

        if (!op) {
                api_request_error(req, 500, "out of memory");
                return;
        }
        if (!delete_direct(op))
                delete_read(op);
}
