/* SPDX-License-Identifier: MIT */
/* POST …/allocations (SPEC §13 step 1): a slot picked from the fleet view, then one
 * transaction whose compares are that the record does not exist, that the slot's document
 * is unchanged since the view read it, and that the slot has no claim; its puts are the
 * record and the claim. A transaction that fails reads, in its failure branch, the record
 * (there: the same allocationId asked again, answered with it once etcd holds it marked
 * answered, claim_existing), the slot and its claim (to
 * bring the view up to date at once); then the next slot, a bounded number of times.
 * The claims of concurrent POSTs go to etcd together, each a nested transaction of one
 * request (etcd.h's group commit: one request, one raft entry, one fsync for them all); a
 * failed request fails each of its claims as a failed transaction of its own would.
 * Each ends in an outcome (allocator-ops.h) that the door turns into its answer. */
#include <inttypes.h>

#include "allocator-cache.h"
#include "allocator-fence.h"
#include "allocator-ops.h"
#include "allocator.h"
#include "log.h"

#define CLAIM_ATTEMPTS_MAX 16
/* A claim whose request broke after it was sent (its etcd member died: the outcome is
 * unknown) is sent again, the same guarded transaction, at most this many times. */
#define CLAIM_IN_DOUBT_MAX 2

struct ClaimOp {
        Allocator *allocator;
        AllocDone done;
        void *userdata;
        bool starting; /* in alloc_claim(): done then, the op is freed there */
        bool finished;
        char *record_key;
        char *index_key, *index_value; /* the allocationId's index (SPEC §13) */
        AllocationRecord rec; /* the request's strings, copied */
        unsigned attempts;
        unsigned in_doubt; /* times the same claim was sent again, its outcome unknown */
        int64_t slot_revision; /* the slot document's, as the claim compares it */
        bool pending; /* rec's slot is marked in flight in placement */
        char *slot_key, *claim_key, *claim_value;
        char *fence_key; /* the slot's fence (allocator-fence.h): the claim compares it absent */
        EtcdRequest *etcd;       /* the record's read, with no slot left */
        EtcdBatchTxn *claim_txn; /* the claim, in a batch (etcd.h's group commit) */
};

static void claim_op_unpend(ClaimOp *op) {
        if (op->pending)
                placement_slot_set_pending(op->allocator->placement, op->rec.machine_id,
                                           op->rec.slot_id, false);
        op->pending = false;
}

static void claim_op_free(ClaimOp *op) {
        claim_op_unpend(op);
        etcd_request_cancel(op->etcd);
        etcd_batch_txn_cancel(op->claim_txn);
        allocation_record_done(&op->rec);
        free(op->record_key);
        free(op->index_key);
        free(op->index_value);
        free(op->slot_key);
        free(op->claim_key);
        free(op->claim_value);
        free(op->fence_key);
        free(op);
}

/* The slot of op's claim, whose outcome is unknown, fenced (allocator-fence.c); why ends in
 * "its claim", for the log. */
static void claim_op_fence(ClaimOp *op, const char *why) {
        int r = fence_start(op->allocator, &op->rec, op->claim_key, op->claim_value, why);

        if (r < 0)
                log_error_errno(r, "Allocation %s: cannot fence slot %" PRIu32 " of %s, whose "
                                "claim is in doubt: %m", op->rec.allocation_id, op->rec.slot_id,
                                op->rec.machine_id);
}

/* The POST ended before its claim was answered (the door's deadline passed, or its client
 * left): a claim that left for etcd, or one sent again after a copy whose answer was lost,
 * may apply yet, with no one told. Fenced as for a 503 (allocator-fence.c), so that no
 * allocation comes of it. A claim still queued never leaves. */
void alloc_claim_cancel(ClaimOp *op) {
        if (op->pending && op->claim_txn &&
            (etcd_batch_txn_sent(op->claim_txn) || op->in_doubt > 0)) {
                claim_op_unpend(op); /* the fence's own pending mark, not the claim's */
                claim_op_fence(op, "its request ended before etcd answered its claim");
        }
        claim_op_free(op);
}

/* The outcome told; the op is done. */
static void claim_op_finish(ClaimOp *op, AllocOutcome outcome, const char *detail) {
        const AllocRequest request = {
                .project = op->rec.project_id,
                .environment = op->rec.environment_id,
                .fleet = op->rec.fleet_id,
                .allocation_id = op->rec.allocation_id,
                .build_configuration_id = op->rec.build_configuration_id,
                .region_id = op->rec.region_id,
                .payload = op->rec.payload,
        };

        op->done(&(AllocAnswer){ .outcome = outcome, .request = &request, .detail = detail,
                                 .attempts = op->attempts },
                 op->userdata);
        if (op->starting)
                op->finished = true;
        else
                claim_op_free(op);
}

static void claim_op_created(ClaimOp *op, AllocOutcome outcome) {
        if (outcome == ALLOC_CLAIMED)
                log_debug("Allocation %s claimed slot %" PRIu32 " of %s", op->rec.allocation_id,
                          op->rec.slot_id, op->rec.machine_id);
        claim_op_finish(op, outcome, NULL);
}

static void claim_op_etcd_failed(ClaimOp *op, const EtcdResponse *resp) {
        claim_op_finish(op, ALLOC_ETCD_FAILED, resp ? resp->message : NULL);
}

/* The claim was sent and etcd's answer says nothing of its outcome (anything but a refused
 * connection: the request never left then; but a copy sent before it, whose answer was lost
 * with its member (claim_in_doubt), may apply yet): 503 now, and the doubt resolved behind
 * it (allocator-fence.c), so that a 503 is never an allocation (SPEC §13). */
static void claim_op_in_doubt(ClaimOp *op, const EtcdResponse *resp) {
        if (resp->error != -ECONNREFUSED || op->in_doubt > 0)
                claim_op_fence(op, "answered 503: etcd did not answer its claim");
        claim_op_etcd_failed(op, resp);
}

static void claim_try(ClaimOp *op);
static void claim_existing(ClaimOp *op, const EtcdKv *kv);

/* No slot: unless the allocationId has its record already (asked again while the fleet is
 * full), 503. */
static void on_existing_read(Etcd *e, const EtcdResponse *resp, void *userdata) {
        ClaimOp *op = userdata;

        op->etcd = NULL;
        if (allocator_etcd_failed(op->allocator, resp)) {
                claim_op_etcd_failed(op, resp);
                return;
        }
        if (resp->n_kvs > 0) {
                claim_existing(op, &resp->kvs[0]);
                return;
        }
        claim_op_finish(op, ALLOC_NO_CAPACITY, NULL);
}

static void on_existing_reread(Etcd *e, const EtcdResponse *resp, void *userdata);

/* The record as the mark's transaction left it: marked (by this POST or another), 200; as
 * read, marked again; gone (a fence's resolution deleted it first, or a DELETE did), a new
 * allocation. */
static void existing_again(ClaimOp *op, const EtcdKv *kv) {
        if (kv) {
                claim_existing(op, kv);
                return;
        }
        log_info("Allocation %s: its record, found by a POST of it again, was deleted before "
                 "that POST could be answered with it (a fence's resolution, or a DELETE); "
                 "claiming a slot anew", op->rec.allocation_id);
        claim_try(op);
}

static void on_existing_marked(Etcd *e, const EtcdResponse *resp, void *userdata) {
        ClaimOp *op = userdata;

        op->claim_txn = NULL;
        if (resp->error == -ECONNRESET && op->in_doubt < CLAIM_IN_DOUBT_MAX) {
                /* The mark's answer lost with its member: the record read anew tells. */
                op->in_doubt++;
                op->allocator->metrics.etcd_in_doubt++;
                if (etcd_batch_range(op->allocator->batch, op->record_key, NULL, 1,
                                     on_existing_reread, op, &op->claim_txn) < 0)
                        claim_op_etcd_failed(op, NULL);
                return;
        }
        if (allocator_etcd_failed(op->allocator, resp)) {
                /* Its outcome unknown: no 200 for a record a resolution may yet delete. */
                claim_op_etcd_failed(op, resp);
                return;
        }
        if (resp->succeeded) {
                log_debug("Allocation %s: asked again, answered with its record (marked %s)",
                          op->rec.allocation_id, strempty(op->rec.request_id));
                claim_op_created(op, ALLOC_EXISTING);
                return;
        }
        existing_again(op, resp->n_responses >= 1 && resp->responses[0].n_kvs > 0
                                   ? &resp->responses[0].kvs[0]
                                   : NULL);
}

static void on_existing_reread(Etcd *e, const EtcdResponse *resp, void *userdata) {
        ClaimOp *op = userdata;

        op->claim_txn = NULL;
        if (allocator_etcd_failed(op->allocator, resp)) {
                claim_op_etcd_failed(op, resp);
                return;
        }
        existing_again(op, resp->n_kvs > 0 ? &resp->kvs[0] : NULL);
}

/* The allocationId's record found, written by another POST: perhaps one answered 503 whose
 * claim etcd applied late, which its fence's resolution deletes (allocator-fence.c). So it is
 * answered 200 only once etcd holds it marked answered (answeredRequestId, answered), which
 * the resolution never deletes: a record marked already at once; else one transaction puts
 * it back marked if it is as read (its mod_revision), and reads it if not. The resolution's
 * deletion compares the record as it read it unmarked: of the two, the first applied wins,
 * and the other sees it (SPEC §13, "a 503 is never an allocation"). */
static void claim_existing(ClaimOp *op, const EtcdKv *kv) {
        _cleanup_(allocation_record_done) AllocationRecord rec = {};
        _cleanup_free_ char *value = NULL;
        const EtcdCompare cmp[] = {
                { .key = op->record_key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = kv->mod_revision },
        };
        EtcdOp success[1], failure[1];

        /* One that does not parse is no claim's in doubt (allocator-fence.c reads it alike). */
        if (allocation_record_parse(kv->value, kv->value_len, &rec) < 0 ||
            allocation_record_answered(&rec)) {
                claim_op_created(op, ALLOC_EXISTING);
                return;
        }
        if (op->attempts >= CLAIM_ATTEMPTS_MAX) {
                claim_op_finish(op, ALLOC_CONTENDED, NULL);
                return;
        }
        op->attempts++;
        rec.answered = now_usec(CLOCK_REALTIME);
        if (free_and_strdup(&rec.answered_request_id, strempty(op->rec.request_id)) < 0 ||
            allocation_record_format(&rec, &value) < 0) {
                claim_op_finish(op, ALLOC_NO_MEMORY, NULL);
                return;
        }
        success[0] = (EtcdOp){ .type = ETCD_OP_PUT, .key = op->record_key, .value = value };
        failure[0] = (EtcdOp){ .type = ETCD_OP_RANGE, .key = op->record_key, .limit = 1 };
        if (etcd_batch_txn(op->allocator->batch, cmp, ELEMENTSOF(cmp), success,
                           ELEMENTSOF(success), failure, ELEMENTSOF(failure),
                           on_existing_marked, op, &op->claim_txn) < 0)
                claim_op_etcd_failed(op, NULL);
}

static void claim_no_capacity(ClaimOp *op) {
        int r = etcd_range(op->allocator->etcd, op->record_key, NULL, 1, on_existing_read, op,
                           &op->etcd);

        if (r < 0)
                claim_op_etcd_failed(op, NULL);
}

static int claim_send(ClaimOp *op);

/* A claim sent whose request broke before etcd answered (ECONNRESET: the member died with
 * it; it may have been applied, by the leader it was forwarded to, or not): the same
 * transaction again, to the next member. Its compares make it apply at most once: if the
 * first was applied, the second finds the record and answers with it (claim_was_ours). */
static bool claim_in_doubt(ClaimOp *op, const EtcdResponse *resp) {
        if (resp->error != -ECONNRESET || op->in_doubt >= CLAIM_IN_DOUBT_MAX)
                return false;
        op->in_doubt++;
        op->allocator->metrics.etcd_in_doubt++;
        log_info("Allocation %s: etcd's answer to its claim of slot %" PRIu32 " of %s was "
                 "lost (%s); sending the same transaction again, which applies at most once",
                 op->rec.allocation_id, op->rec.slot_id, op->rec.machine_id, resp->message);
        if (claim_send(op) < 0)
                return false;
        return true;
}

/* The record found by a claim sent again is this claim's own (the first was applied): the
 * claim still there as sent, or (the registry may have confirmed it and deleted the claim
 * meanwhile) the record with this op's machine, slot and times, as etcd holds them. */
static bool claim_was_ours(const ClaimOp *op, const EtcdResponse *resp) {
        _cleanup_(allocation_record_done) AllocationRecord theirs = {}, mine = {};
        _cleanup_free_ char *text = NULL;
        const EtcdKv *c, *rec;

        if (op->in_doubt == 0 || resp->n_responses < 3 || resp->responses[0].n_kvs == 0)
                return false;
        if (resp->responses[2].n_kvs > 0) {
                c = &resp->responses[2].kvs[0];
                if (c->value_len == strlen(op->claim_value) &&
                    memcmp(c->value, op->claim_value, c->value_len) == 0)
                        return true;
        }
        rec = &resp->responses[0].kvs[0];
        if (allocation_record_format(&op->rec, &text) < 0 ||
            allocation_record_parse(text, strlen(text), &mine) < 0 ||
            allocation_record_parse(rec->value, rec->value_len, &theirs) < 0)
                return false;
        return theirs.requested == mine.requested && theirs.claimed == mine.claimed &&
               theirs.slot_id == mine.slot_id && streq_ptr(theirs.machine_id, mine.machine_id);
}

/* No record in this fleet, but the allocationId's index exists: another fleet's claim of it
 * won (perhaps through another replica, whose claim this one's view had not seen yet). */
static void claim_op_index_taken(ClaimOp *op, const EtcdKv *index) {
        _cleanup_(allocation_id_doc_done) AllocationIdDoc doc = {};

        /* Written with its record and deleted with it: one alone was written by hand. */
        if (allocation_id_doc_parse(index->value, index->value_len, &doc) < 0 ||
            streq(doc.fleet_id, op->rec.fleet_id)) {
                log_warning("Allocation %s: %s in etcd has no record of fleet %s beside it",
                            op->rec.allocation_id, op->index_key, op->rec.fleet_id);
                claim_op_finish(op, ALLOC_INDEX_ORPHANED, op->index_key);
                return;
        }
        claim_op_finish(op, ALLOC_FLEET_ELSEWHERE, doc.fleet_id);
}

static void on_claim_answer(Etcd *e, const EtcdResponse *resp, void *userdata) {
        ClaimOp *op = userdata;
        Allocator *a = op->allocator;
        EtcdKv claim;

        op->claim_txn = NULL;
        if (claim_in_doubt(op, resp))
                return;
        claim_op_unpend(op);
        if (allocator_etcd_failed(a, resp)) {
                claim_op_in_doubt(op, resp);
                return;
        }
        if (resp->succeeded) {
                /* The view learns of the claim now rather than from the watch, so that the
                 * next request does not pick the slot in vain. */
                claim = (EtcdKv){ .key = op->claim_key, .value = op->claim_value,
                                  .value_len = strlen(op->claim_value),
                                  .create_revision = resp->revision,
                                  .mod_revision = resp->revision, .version = 1 };
                cache_apply_kv(a, op->claim_key, &claim, resp->revision);
                claim_op_created(op, ALLOC_CLAIMED);
                return;
        }
        if (resp->n_responses >= 1 && resp->responses[0].n_kvs > 0) {
                if (claim_was_ours(op, resp))
                        claim_op_created(op, ALLOC_CLAIMED);
                else
                        claim_existing(op, &resp->responses[0].kvs[0]);
                return;
        }
        if (resp->n_responses >= 4 && resp->responses[3].n_kvs > 0) {
                claim_op_index_taken(op, &resp->responses[3].kvs[0]);
                return;
        }
        a->metrics.txn_conflicts++;
        if (resp->n_responses >= 5 && resp->responses[4].n_kvs > 0)
                fence_seen(a, op->rec.machine_id, op->rec.slot_id); /* left out for now */
        if (resp->n_responses >= 3) {
                cache_apply_kv(a, op->slot_key,
                               resp->responses[1].n_kvs > 0 ? &resp->responses[1].kvs[0] : NULL,
                               resp->revision);
                if (resp->responses[2].n_kvs > 0)
                        cache_apply_kv(a, op->claim_key, &resp->responses[2].kvs[0],
                                       resp->revision);
        }
        if (op->attempts >= CLAIM_ATTEMPTS_MAX) {
                claim_op_finish(op, ALLOC_CONTENDED, NULL);
                return;
        }
        claim_try(op);
}

/* The claim: the record, its index and the claim put if none of the three exists yet, the
 * slot's document is as read and the slot has no fence (a claim in doubt's, allocator-fence.c:
 * this transaction, if it is the one in doubt sent late, then never applies); else the five
 * read (on_claim_answer tells which compare failed). */
static int claim_send(ClaimOp *op) {
        const EtcdCompare cmp[] = {
                { .key = op->record_key, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL },
                { .key = op->slot_key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = op->slot_revision },
                { .key = op->claim_key, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL },
                { .key = op->index_key, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL },
                { .key = op->fence_key, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL },
        };
        _cleanup_free_ char *record = NULL;
        EtcdOp success[3], failure[5];
        int r;

        r = allocation_record_format(&op->rec, &record);
        if (r < 0)
                return r;
        success[0] = (EtcdOp){ .type = ETCD_OP_PUT, .key = op->record_key, .value = record };
        success[1] = (EtcdOp){ .type = ETCD_OP_PUT, .key = op->claim_key,
                               .value = op->claim_value };
        success[2] = (EtcdOp){ .type = ETCD_OP_PUT, .key = op->index_key,
                               .value = op->index_value };
        failure[0] = (EtcdOp){ .type = ETCD_OP_RANGE, .key = op->record_key, .limit = 1 };
        failure[1] = (EtcdOp){ .type = ETCD_OP_RANGE, .key = op->slot_key, .limit = 1 };
        failure[2] = (EtcdOp){ .type = ETCD_OP_RANGE, .key = op->claim_key, .limit = 1 };
        failure[3] = (EtcdOp){ .type = ETCD_OP_RANGE, .key = op->index_key, .limit = 1 };
        failure[4] = (EtcdOp){ .type = ETCD_OP_RANGE, .key = op->fence_key, .limit = 1 };
        return etcd_batch_txn(op->allocator->batch, cmp, ELEMENTSOF(cmp), success,
                              ELEMENTSOF(success), failure, ELEMENTSOF(failure), on_claim_answer,
                              op, &op->claim_txn);
}

/* The record and the claim for slot s. */
static int claim_prepare(ClaimOp *op, const CacheSlot *s) {
        Allocator *a = op->allocator;
        const CacheMachine *m = cache_machine(a, s->machine_id);
        usec_t now = now_usec(CLOCK_REALTIME);
        ClaimDoc claim;
        int r;

        op->slot_key = mfree(op->slot_key);
        op->claim_key = mfree(op->claim_key);
        op->claim_value = mfree(op->claim_value);
        op->fence_key = mfree(op->fence_key);
        r = free_and_strdup(&op->rec.machine_id, s->machine_id);
        if (r >= 0)
                r = free_and_strdup(&op->rec.ipv4, s->doc.ipv4);
        if (r >= 0)
                r = free_and_strdup(&op->rec.ipv6, s->doc.ipv6);
        op->slot_key = strdup(s->key);
        op->claim_key = fleet_key_claim(a->config->prefix, s->machine_id, s->slot_id);
        op->fence_key = fleet_key_fence(a->config->prefix, s->machine_id, s->slot_id);
        if (r < 0 || !op->slot_key || !op->claim_key || !op->fence_key)
                return -ENOMEM;
        op->rec.machine_number = s->doc.machine_number;
        op->rec.slot_id = s->slot_id;
        op->slot_revision = s->mod_revision;
        op->rec.game_port = s->doc.game_port;
        op->rec.claimed = now;
        op->rec.deadline = now + a->config->claim_timeout;
        claim = (ClaimDoc){ .allocation_id = op->rec.allocation_id,
                            .fleet_id = op->rec.fleet_id,
                            .build_configuration_id = op->rec.build_configuration_id,
                            .payload = op->rec.payload, .deadline = op->rec.deadline,
                            /* placement's last resort: its host lets it through (SPEC §13) */
                            .draining = m && m->doc.draining,
                            .restart = op->rec.restart };
        return claim_doc_format(&claim, &op->claim_value);
}

static void claim_try(ClaimOp *op) {
        Allocator *a = op->allocator;
        PlacementRequest pr = { .fleet = op->rec.fleet_id, .region = op->rec.region_id,
                                .build = op->rec.build_configuration_id };
        const char *machine;
        CacheSlot *s;
        uint32_t id;
        int r;

        r = placement_pick(a->placement, &pr, &machine, &id);
        s = r >= 0 ? cache_slot_by_index(a, machine, id) : NULL;
        if (!s) {
                claim_no_capacity(op);
                return;
        }
        op->attempts++;
        r = claim_prepare(op, s);
        if (r >= 0)
                r = claim_send(op);
        if (r < 0) {
                log_error_errno(r, "Allocation %s: cannot send its claim: %m",
                                op->rec.allocation_id);
                claim_op_etcd_failed(op, NULL);
                return;
        }
        placement_slot_set_pending(a->placement, s->machine_id, s->slot_id, true);
        op->pending = true;
}

/* The allocationId in the view under another fleet: 409 (SPEC §13). */
static const char *allocation_fleet_elsewhere(Allocator *a, const char *id, const char *fleet) {
        CacheClaim *c = hashmap_get(&a->cache.claims_by_allocation, id);
        CacheSlot *s = hashmap_get(&a->cache.slots_by_allocation, id);

        if (c && c->doc.fleet_id && !streq(c->doc.fleet_id, fleet))
                return c->doc.fleet_id;
        if (s && !streq(s->fleet, fleet))
                return s->fleet;
        return NULL;
}

bool alloc_fleet_runs_build(Allocator *a, const char *fleet, const char *id) {
        const CacheFleet *f = hashmap_get(&a->cache.fleets, fleet);

        if (str_isempty(id))
                return true;
        /* Mostly the first slot answers; only a refusal reads every slot of the fleet. */
        for (const CacheSlot *s = f ? f->slots : NULL; s; s = s->fleet_next)
                if (slot_doc_runs_build(&s->doc, id))
                        return true;
        return false;
}

/* The record's strings are the request's, copied. */
static ClaimOp *claim_op_new(Allocator *a, const AllocRequest *r, AllocDone done,
                             void *userdata) {
        ClaimOp *op = new0(ClaimOp, 1);

        if (!op)
                return NULL;
        op->allocator = a;
        op->done = done;
        op->userdata = userdata;
        op->rec = (AllocationRecord){
                .allocation_id = strdup(r->allocation_id),
                .project_id = strdup(r->project),
                .environment_id = strdup(r->environment),
                .fleet_id = strdup(r->fleet),
                .build_configuration_id = strdup(r->build_configuration_id),
                .region_id = strdup(r->region_id),
                .payload = strdup(r->payload),
                .request_id = r->request_id ? strdup(r->request_id) : NULL,
                .status = ALLOCATION_CLAIMED,
                .restart = r->restart,
                .requested = now_usec(CLOCK_REALTIME),
                .attempts = 1,
        };
        if (!op->rec.allocation_id || !op->rec.project_id || !op->rec.environment_id ||
            !op->rec.fleet_id || !op->rec.build_configuration_id || !op->rec.region_id ||
            !op->rec.payload || (r->request_id && !op->rec.request_id)) {
                claim_op_free(op);
                return NULL;
        }
        op->record_key = allocator_record_key(a, r->fleet, r->allocation_id);
        op->index_key = fleet_key_allocation_id(a->config->prefix, r->allocation_id);
        if (!op->record_key || !op->index_key ||
            allocation_id_doc_format(&(AllocationIdDoc){ .allocation_id = op->rec.allocation_id,
                                                          .fleet_id = op->rec.fleet_id },
                                     &op->index_value) < 0) {
                claim_op_free(op);
                return NULL;
        }
        return op;
}

/* An outcome decided before any op. */
static ClaimOp *alloc_refuse(const AllocRequest *r, AllocOutcome outcome, const char *detail,
                             AllocDone done, void *userdata) {
        done(&(AllocAnswer){ .outcome = outcome, .request = r, .detail = detail }, userdata);
        return NULL;
}

ClaimOp *alloc_claim(Allocator *a, const AllocRequest *r, AllocDone done, void *userdata) {
        const char *other;
        ClaimOp *op;

        if (!cache_ready(a))
                return alloc_refuse(r, ALLOC_VIEW_NOT_READY, NULL, done, userdata);
        /* 400 at the door rather than a 200 that every host refuses (SPEC §13). */
        if (!alloc_fleet_runs_build(a, r->fleet, r->build_configuration_id))
                return alloc_refuse(r, ALLOC_UNKNOWN_BUILD, NULL, done, userdata);
        other = allocation_fleet_elsewhere(a, r->allocation_id, r->fleet);
        if (other)
                return alloc_refuse(r, ALLOC_FLEET_ELSEWHERE, other, done, userdata);
        op = claim_op_new(a, r, done, userdata);
        if (!op)
                return alloc_refuse(r, ALLOC_NO_MEMORY, NULL, done, userdata);
        op->starting = true;
        claim_try(op);
        op->starting = false;
        if (op->finished) {
                claim_op_free(op);
                return NULL;
        }
        return op;
}
