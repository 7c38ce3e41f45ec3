/* SPDX-License-Identifier: MIT */
/* An allocation's record read (GET), the records of a fleet listed, an allocation deleted
 * (SPEC §13 step 4): reads from etcd are linearizable (a record another replica wrote a moment
 * ago is there); a deletion is one transaction conditioned on the record as read (the read and
 * the transaction each go in a batch with other requests', etcd.h's group commit). Each ends
 * in an outcome (allocator-ops.h) that the door turns into its answer. */
#include <inttypes.h>

#include "allocator-cache.h"
#include "allocator-ops.h"
#include "allocator-replace.h"
#include "allocator-scan.h"
#include "allocator.h"
#include "log.h"
#include "strv.h"

#define DELETE_ATTEMPTS_MAX 4
/* A deletion whose answer was lost with its etcd member is read and sent again at most this
 * many times (allocator-claim.c's in-doubt claims alike). */
#define DELETE_IN_DOUBT_MAX 2

/* One request's reads and writes in etcd. */
struct RecordOp {
        Allocator *allocator;
        RecordDone done;
        void *userdata;
        bool starting; /* in alloc_get() & co.: done then, the op is freed there */
        bool finished;
        RecordRequest request; /* its strings, owned */
        ListRequest list;      /* the list's: its strings request's, or owned (ids) */
        EtcdRequest *etcd;
        EtcdBatchTxn *txn; /* DELETE's read and transaction, in a batch */
        AllocationRecord deleting; /* DELETE: the record read, while its claim is read */
        char *key;
        int64_t record_revision;
        unsigned attempts;
        unsigned in_doubt; /* DELETE: its transaction's outcome was unknown this many times */
};

static void record_op_free(RecordOp *op) {
        etcd_request_cancel(op->etcd);
        etcd_batch_txn_cancel(op->txn);
        free((char *) op->request.project);
        free((char *) op->request.environment);
        free((char *) op->request.fleet);
        free((char *) op->request.allocation_id);
        free((char *) op->list.ids);
        allocation_record_done(&op->deleting);
        free(op->key);
        free(op);
}

void alloc_record_cancel(RecordOp *op) {
        record_op_free(op);
}

/* The outcome told; the op is done. */
static void record_op_finish_with(RecordOp *op, RecordOutcome outcome, const char *detail,
                                  const RecordShown *shown, size_t n_shown) {
        op->done(&(RecordAnswer){ .outcome = outcome, .request = &op->request, .detail = detail,
                                  .attempts = op->attempts, .shown = shown,
                                  .n_shown = n_shown, .limit = op->list.limit,
                                  .offset = op->list.offset },
                 op->userdata);
        if (op->starting)
                op->finished = true;
        else
                record_op_free(op);
}

static void record_op_finish(RecordOp *op, RecordOutcome outcome) {
        record_op_finish_with(op, outcome, NULL, NULL, 0);
}

static void record_op_etcd_failed(RecordOp *op, const EtcdResponse *resp) {
        record_op_finish_with(op, RECORD_ETCD_FAILED, resp ? resp->message : NULL, NULL, 0);
}

/* An outcome decided before any op. */
static RecordOp *record_refuse(const RecordRequest *r, RecordOutcome outcome, RecordDone done,
                               void *userdata) {
        done(&(RecordAnswer){ .outcome = outcome, .request = r }, userdata);
        return NULL;
}

/* The request's strings copied; key (taken, NULL: no memory) the record's or the list's. */
static RecordOp *record_op_new(Allocator *a, const RecordRequest *r, char *key,
                               RecordDone done, void *userdata) {
        _cleanup_free_ char *k = key;
        RecordOp *op = new0(RecordOp, 1);

        if (!op)
                return NULL;
        *op = (RecordOp){ .allocator = a, .done = done, .userdata = userdata,
                          .key = TAKE_PTR(k) };
        op->request = (RecordRequest){
                .project = strdup(r->project),
                .environment = strdup(r->environment),
                .fleet = strdup(r->fleet),
                .allocation_id = r->allocation_id ? strdup(r->allocation_id) : NULL,
                .keep_answered = r->keep_answered,
        };
        if (!op->key || !op->request.project || !op->request.environment ||
            !op->request.fleet || (r->allocation_id && !op->request.allocation_id)) {
                record_op_free(op);
                return NULL;
        }
        return op;
}

/* The op started by start(op), which may finish it: NULL then. */
static RecordOp *record_op_start(RecordOp *op, void (*start)(RecordOp *op)) {
        op->starting = true;
        start(op);
        op->starting = false;
        if (op->finished) {
                record_op_free(op);
                return NULL;
        }
        return op;
}

/* An op on the record of request's allocation, started by start(op). */
static RecordOp *record_op_launch(Allocator *a, const RecordRequest *request,
                                  void (*start)(RecordOp *op), RecordDone done, void *userdata) {
        RecordOp *op = record_op_new(a, request,
                                     allocator_record_key(a, request->fleet,
                                                          request->allocation_id),
                                     done, userdata);

        if (!op)
                return record_refuse(request, RECORD_NO_MEMORY, done, userdata);
        return record_op_start(op, start);
}

/* ---- what GET shows ---- */

/* Whether rec's slot is ready for players for it (the slot's readyForPlayers, not the
 * process's ready), and since when. */
static bool record_readiness(const Allocator *a, const AllocationRecord *rec,
                             usec_t *ret_since) {
        const CacheSlot *s = rec->machine_id ? cache_slot_by_index(a, rec->machine_id,
                                                                    rec->slot_id)
                                             : NULL;

        if (!s || !s->doc.ready_for_players ||
            !streq_ptr(s->doc.allocation_id, rec->allocation_id))
                return false;
        *ret_since = s->doc.ready_for_players_at;
        return true;
}

/* The record of kv, if it parses and is of the request's project and environment. */
static int record_of(const RecordRequest *rq, const EtcdKv *kv, AllocationRecord *ret) {
        int r = allocation_record_parse(kv->value, kv->value_len, ret);

        if (r < 0)
                return r;
        if (!streq_ptr(ret->project_id, rq->project) ||
            !streq_ptr(ret->environment_id, rq->environment)) {
                allocation_record_done(ret);
                return -ENOENT;
        }
        return 0;
}

/* rec (taken) as GET shows it: lost when its machine has left the fleet view. */
static RecordShown record_shown(const Allocator *a, AllocationRecord *rec) {
        RecordShown shown = { .record = *rec };
        const CacheMachine *m;

        *rec = (AllocationRecord){};
        shown.lost = cache_ready(a) && !str_isempty(shown.record.machine_id) &&
                     !cache_machine(a, shown.record.machine_id);
        shown.readiness = record_readiness(a, &shown.record, &shown.ready_at);
        /* A record written before machineNumber was: its machine's, as the view shows it. */
        if (shown.record.machine_number == 0 && (m = cache_machine(a, shown.record.machine_id)))
                shown.record.machine_number = m->doc.machine_number;
        return shown;
}

/* The record a read of one allocation found; false when the op finished instead (etcd
 * unavailable, or no such allocation). */
static bool record_op_record(RecordOp *op, const EtcdResponse *resp, AllocationRecord *rec) {
        op->etcd = NULL;
        if (allocator_etcd_failed(op->allocator, resp)) {
                record_op_etcd_failed(op, resp);
                return false;
        }
        if (resp->n_kvs == 0 || record_of(&op->request, &resp->kvs[0], rec) < 0) {
                record_op_finish(op, RECORD_NOT_FOUND);
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
        RecordOp *op = userdata;
        RecordShown shown;

        if (!record_op_record(op, resp, &rec))
                return;
        kick_orphan(op->allocator, &rec, resp->kvs[0].mod_revision);
        shown = record_shown(op->allocator, &rec);
        record_op_finish_with(op, RECORD_FOUND, NULL, &shown, 1);
        allocation_record_done(&shown.record);
}

static void get_start(RecordOp *op) {
        if (etcd_range(op->allocator->etcd, op->key, NULL, 1, on_get, op, &op->etcd) < 0)
                record_op_etcd_failed(op, NULL);
}

RecordOp *alloc_get(Allocator *a, const RecordRequest *request, RecordDone done,
                    void *userdata) {
        return record_op_launch(a, request, get_start, done, userdata);
}

/* ---- the list ---- */

static bool list_wants(const ListRequest *l, const RecordShown *s, usec_t now) {
        if (l->ids && l->ids[0] != '\0' && !list_ids_contain(l->ids, s->record.allocation_id))
                return false;
        if (l->age > 0 && (s->record.requested > now || now - s->record.requested < l->age))
                return false;
        if (l->status_lost)
                return s->lost;
        return l->status < 0 ||
               streq(record_shown_status(s), allocation_status_to_string(l->status));
}

static void shown_free_many(RecordShown *shown, size_t n) {
        for (size_t i = 0; i < n; i++)
                allocation_record_done(&shown[i].record);
        free(shown);
}

static void on_list(Etcd *e, const EtcdResponse *resp, void *userdata) {
        RecordOp *op = userdata;
        RecordShown *shown = NULL, *grown;
        usec_t now = now_usec(CLOCK_REALTIME);
        size_t n = 0, skipped = 0;

        op->etcd = NULL;
        if (allocator_etcd_failed(op->allocator, resp)) {
                record_op_etcd_failed(op, resp);
                return;
        }
        /* etcd's range is in the order of the keys: of the allocationIds */
        for (size_t i = 0; i < resp->n_kvs && n < op->list.limit; i++) {
                _cleanup_(allocation_record_done) AllocationRecord rec = {};
                RecordShown s;

                if (record_of(&op->request, &resp->kvs[i], &rec) < 0)
                        continue;
                s = record_shown(op->allocator, &rec);
                if (!list_wants(&op->list, &s, now) || skipped++ < op->list.offset) {
                        allocation_record_done(&s.record);
                        continue;
                }
                grown = reallocarray(shown, n + 1, sizeof(RecordShown));
                if (!grown) {
                        allocation_record_done(&s.record);
                        shown_free_many(shown, n);
                        record_op_finish(op, RECORD_NO_MEMORY);
                        return;
                }
                shown = grown;
                shown[n++] = s;
        }
        record_op_finish_with(op, RECORD_FOUND, NULL, shown, n);
        shown_free_many(shown, n);
}

static void list_start(RecordOp *op) {
        _cleanup_free_ char *end = etcd_prefix_end(op->key);

        if (!end) {
                record_op_finish(op, RECORD_NO_MEMORY);
                return;
        }
        if (etcd_range(op->allocator->etcd, op->key, end, 0, on_list, op, &op->etcd) < 0)
                record_op_etcd_failed(op, NULL);
}

RecordOp *alloc_list(Allocator *a, const ListRequest *request, RecordDone done,
                     void *userdata) {
        const RecordRequest r = { .project = request->project,
                                  .environment = request->environment,
                                  .fleet = request->fleet };
        char *prefix;
        RecordOp *op;

        if (asprintf(&prefix, "%s/allocations/%s/", a->config->prefix, request->fleet) < 0)
                prefix = NULL;
        op = record_op_new(a, &r, prefix, done, userdata);
        if (!op)
                return record_refuse(&r, RECORD_NO_MEMORY, done, userdata);
        op->list = (ListRequest){ .project = op->request.project,
                                  .environment = op->request.environment,
                                  .fleet = op->request.fleet, .status = request->status,
                                  .status_lost = request->status_lost, .age = request->age,
                                  .ids = request->ids ? strdup(request->ids) : NULL,
                                  .limit = request->limit, .offset = request->offset };
        if (request->ids && !op->list.ids) {
                record_op_free(op);
                return record_refuse(&r, RECORD_NO_MEMORY, done, userdata);
        }
        return record_op_start(op, list_start);
}

/* ---- DELETE (SPEC §13 step 4) ---- */

static void delete_read(RecordOp *op);

static void on_deleted(Etcd *e, const EtcdResponse *resp, void *userdata) {
        RecordOp *op = userdata;

        op->txn = NULL;
        if (resp->error == -ECONNRESET && op->in_doubt < DELETE_IN_DOUBT_MAX) {
                /* The answer was lost with its member: the deletion may have been applied or
                 * not. The record read anew tells (gone: it was), and a deletion sent again
                 * is guarded by the record's revision as the first was. */
                op->in_doubt++;
                op->allocator->metrics.etcd_in_doubt++;
                log_info("Allocation %s: etcd's answer to its deletion was lost (%s); reading "
                         "it again", op->request.allocation_id, resp->message);
                delete_read(op);
                return;
        }
        if (allocator_etcd_failed(op->allocator, resp)) {
                record_op_etcd_failed(op, resp);
                return;
        }
        if (resp->succeeded) {
                op->allocator->metrics.deallocations++;
                log_debug("Allocation %s deleted", op->request.allocation_id);
                record_op_finish(op, RECORD_DELETED);
                return;
        }
        if (++op->attempts >= DELETE_ATTEMPTS_MAX) {
                record_op_finish(op, RECORD_CHANGED);
                return;
        }
        delete_read(op); /* the record or its claim changed: read it anew */
}

/* The claim of a claimed record as the DELETE knows it: its key, its mod_revision (0: no key)
 * and whether it is the record's (its allocationId). */
typedef struct DeleteClaim {
        const char *key;
        int64_t mod_revision;
        bool ours;
} DeleteClaim;

/* The transaction: the record as read deleted, and its allocationId's index; the slot's claim,
 * if it is this allocation's, deleted too (a claim of another on the slot is not touched),
 * each compared as known; for a fulfilled record, its machine's deallocation key put for the
 * registry. claim: NULL for a record that has none to delete (fulfilled, failed). */
static int delete_send(RecordOp *op, const AllocationRecord *rec, const DeleteClaim *claim) {
        Allocator *a = op->allocator;
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
        } else if (claim && claim->ours) {
                cmp[1] = (EtcdCompare){ .key = claim->key, .target = ETCD_TARGET_MOD,
                                        .result = ETCD_EQUAL, .number = claim->mod_revision };
                ops[n++] = (EtcdOp){ .type = ETCD_OP_DELETE, .key = claim->key };
        }
        return etcd_batch_txn(a->batch, cmp, cmp[1].key ? 2 : 1, ops, n, NULL, 0, on_deleted,
                              op, &op->txn);
}

/* The slot's claim as read from etcd: the record's if its document names the allocationId. */
static void on_delete_claim_read(Etcd *e, const EtcdResponse *resp, void *userdata) {
        _cleanup_(claim_doc_done) ClaimDoc doc = {};
        RecordOp *op = userdata;
        _cleanup_(allocation_record_done) AllocationRecord rec = op->deleting;
        _cleanup_free_ char *key = NULL;
        DeleteClaim claim = {};

        op->deleting = (AllocationRecord){};
        op->txn = NULL;
        if (allocator_etcd_failed(op->allocator, resp)) {
                record_op_etcd_failed(op, resp);
                return;
        }
        key = fleet_key_claim(op->allocator->config->prefix, rec.machine_id, rec.slot_id);
        if (!key) {
                record_op_etcd_failed(op, NULL);
                return;
        }
        claim.key = key;
        if (resp->n_kvs > 0) {
                claim.mod_revision = resp->kvs[0].mod_revision;
                claim.ours = claim_doc_parse(resp->kvs[0].value, resp->kvs[0].value_len,
                                             &doc) >= 0 &&
                             streq_ptr(doc.allocation_id, rec.allocation_id);
        }
        if (delete_send(op, &rec, &claim) < 0)
                record_op_etcd_failed(op, NULL);
}

/* A claimed record: its claim from the view when the view holds the allocation's claim on the
 * record's slot, on a first attempt; else (the view has not seen the claim yet, its watch
 * behind that of the replica that wrote it; or a transaction failed) read from etcd, in a
 * batch, so that the claim is deleted whichever replica answers the DELETE. */
static int delete_claimed(RecordOp *op, AllocationRecord *rec) {
        Allocator *a = op->allocator;
        CacheClaim *c = cache_claim_by_index(a, rec->machine_id, rec->slot_id);
        _cleanup_free_ char *key = NULL;

        if (c && op->attempts == 0 && op->in_doubt == 0 &&
            streq_ptr(c->doc.allocation_id, rec->allocation_id))
                return delete_send(op, rec, &(DeleteClaim){ .key = c->key,
                                                            .mod_revision = c->mod_revision,
                                                            .ours = true });
        key = fleet_key_claim(a->config->prefix, rec->machine_id, rec->slot_id);
        if (!key)
                return -ENOMEM;
        log_debug("Allocation %s: not in the fleet view: its claim read from etcd",
                  rec->allocation_id);
        allocation_record_done(&op->deleting);
        op->deleting = *rec; /* moved: rec left empty */
        *rec = (AllocationRecord){};
        return etcd_batch_range(a->batch, key, NULL, 1, on_delete_claim_read, op, &op->txn);
}

static void on_delete_read(Etcd *e, const EtcdResponse *resp, void *userdata) {
        _cleanup_(allocation_record_done) AllocationRecord rec = {};
        RecordOp *op = userdata;
        int r;

        op->txn = NULL;
        if (op->in_doubt > 0 && resp->error >= 0 && resp->n_kvs == 0) {
                /* gone after a deletion whose answer was lost: that deletion (or another) */
                op->allocator->metrics.deallocations++;
                record_op_finish(op, RECORD_DELETED);
                return;
        }
        if (!record_op_record(op, resp, &rec))
                return;
        /* A fence's: the transaction compares the record as read here, unmarked; a POST's
         * mark applied first changes it, and this reads it again. */
        if (op->request.keep_answered && allocation_record_answered(&rec)) {
                record_op_finish(op, RECORD_KEPT);
                return;
        }
        op->record_revision = resp->kvs[0].mod_revision;
        if (rec.status == ALLOCATION_CLAIMED && !str_isempty(rec.machine_id))
                r = delete_claimed(op, &rec);
        else
                r = delete_send(op, &rec, NULL);
        if (r < 0)
                record_op_etcd_failed(op, NULL);
}

/* The record, read in a batch with other requests' transactions. */
static void delete_read(RecordOp *op) {
        if (etcd_batch_range(op->allocator->batch, op->key, NULL, 1, on_delete_read, op,
                             &op->txn) < 0)
                record_op_etcd_failed(op, NULL);
}

/* The transaction at once, without reading the record first, when the view knows what the
 * record holds: the slot that shows the allocation saw its claim deleted at revision R, and
 * no claim of it is left; the only transaction that deletes a claim and writes its record at
 * R, the slot then showing the allocation, is its host's confirmation: the record is
 * fulfilled there. Compared (the record's mod_revision R): if it is not so, the transaction
 * fails and the record is read as usual. Only when the allocator serves one project
 * environment (allocator.environments), which the door checked: else the record's own tells
 * whether it is the request's, and it is read. */
static bool delete_direct(RecordOp *op) {
        Allocator *a = op->allocator;
        const char *id = op->request.allocation_id, *fleet = op->request.fleet;
        CacheSlot *s = cache_ready(a) ? hashmap_get(&a->cache.slots_by_allocation, id) : NULL;
        AllocationRecord rec;

        if (strv_length(a->config->environments) != 1)
                return false;
        if (!s || !streq_ptr(s->claim_gone_allocation_id, id) || s->claim_gone_revision <= 0 ||
            !streq_ptr(s->fleet, fleet) || hashmap_get(&a->cache.claims_by_allocation, id))
                return false;
        rec = (AllocationRecord) { .allocation_id = (char *) id,
                                   .fleet_id = (char *) fleet, .machine_id = s->machine_id,
                                   .slot_id = s->slot_id, .status = ALLOCATION_FULFILLED };
        op->record_revision = s->claim_gone_revision;
        return delete_send(op, &rec, NULL) >= 0;
}

static void delete_start(RecordOp *op) {
        /* A fence's reads the record: whether it is marked answered is its own to tell. */
        if (op->request.keep_answered || !delete_direct(op))
                delete_read(op);
}

RecordOp *alloc_delete(Allocator *a, const RecordRequest *request, RecordDone done,
                       void *userdata) {
        return record_op_launch(a, request, delete_start, done, userdata);
}
