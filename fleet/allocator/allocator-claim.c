/* SPDX-License-Identifier: MIT */
/* POST …/allocations (SPEC §13 step 1): a slot picked from the fleet view, then one
 * transaction whose compares are that the record does not exist, that the slot's document
 * is unchanged since the view read it, and that the slot has no claim; its puts are the
 * record and the claim. A transaction that fails reads, in its failure branch, the record
 * (there: the same allocationId asked again, answered with it), the slot and its claim (to
 * bring the view up to date at once); then the next slot, a bounded number of times.
 * The claims of concurrent POSTs go to etcd together, each a nested transaction of one
 * request (etcd.h's group commit: one request, one raft entry, one fsync for them all); a
 * failed request fails each of its claims as a failed transaction of its own would. */
#include <inttypes.h>

#include "allocator-api.h"
#include "allocator-cache.h"
#include "allocator-http.h"
#include "allocator.h"
#include "log.h"

#define CLAIM_ATTEMPTS_MAX 16
/* A claim whose request broke after it was sent (its etcd member died: the outcome is
 * unknown) is sent again, the same guarded transaction, at most this many times. */
#define CLAIM_IN_DOUBT_MAX 2

typedef struct ClaimOp {
        Allocator *allocator;
        ApiRequest *req;
        ApiAllocateBody body;
        char *record_key;
        char *index_key, *index_value; /* the allocationId's index (SPEC §13) */
        AllocationRecord rec;
        unsigned attempts;
        unsigned in_doubt; /* times the same claim was sent again, its outcome unknown */
        int64_t slot_revision; /* the slot document's, as the claim compares it */
        bool pending; /* rec's slot is marked in flight in placement */
        char *slot_key, *claim_key, *claim_value;
        EtcdRequest *etcd;       /* the record's read, with no slot left */
        EtcdBatchTxn *claim_txn; /* the claim, in a batch (etcd.h's group commit) */
} ClaimOp;

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
        api_allocate_body_done(&op->body);
        /* rec's strings other than its own copies point into body (see claim_op_new). */
        free(op->rec.machine_id);
        free(op->rec.ipv4);
        free(op->rec.ipv6);
        free(op->record_key);
        free(op->index_key);
        free(op->index_value);
        free(op->slot_key);
        free(op->claim_key);
        free(op->claim_value);
        free(op);
}

static void claim_op_cancel(void *userdata) {
        claim_op_free(userdata);
}

/* The answer, counted; the op is done. */
static void claim_op_finish(ClaimOp *op, AllocResult result, unsigned status, json_t *body) {
        Allocator *a = op->allocator;

        a->metrics.allocations[result]++;
        allocator_metrics_observe_latency(&a->metrics, now_usec(CLOCK_MONOTONIC) -
                                                               api_request_started(op->req));
        api_request_clear_op(op->req);
        api_request_answer(op->req, status, body);
        claim_op_free(op);
}

static void claim_op_created(ClaimOp *op, AllocResult result) {
        const ApiRoute *rt = api_request_route(op->req);
        _cleanup_free_ char *href = api_allocation_href(rt->project, rt->environment, rt->fleet,
                                                        op->body.allocation_id);

        if (result == ALLOC_RESULT_CLAIMED)
                log_debug("Allocation %s claimed slot %" PRIu32 " of %s", op->body.allocation_id,
                          op->rec.slot_id, op->rec.machine_id);
        claim_op_finish(op, result, 200,
                        json_pack("{s:s, s:s}", "allocationId", op->body.allocation_id, "href",
                                  href ?: ""));
}

void api_etcd_unavailable(Allocator *a, ApiRequest *req, const EtcdResponse *resp) {
        api_request_error(req, 503, "etcd unavailable: %s",
                          resp && !str_isempty(resp->message) ? resp->message : "no answer");
}

static void claim_op_etcd_failed(ClaimOp *op, const EtcdResponse *resp) {
        api_request_clear_op(op->req);
        api_etcd_unavailable(op->allocator, op->req, resp);
        op->allocator->metrics.allocations[ALLOC_RESULT_UNAVAILABLE]++;
        allocator_metrics_observe_latency(&op->allocator->metrics,
                                          now_usec(CLOCK_MONOTONIC) -
                                                  api_request_started(op->req));
        claim_op_free(op);
}

static void claim_try(ClaimOp *op);

/* No slot: unless the allocationId has its record already (asked again while the fleet is
 * full), 503. */
static void on_existing_read(Etcd *e, const EtcdResponse *resp, void *userdata) {
        ClaimOp *op = userdata;
        const char *region = op->body.region_id;

        op->etcd = NULL;
        if (allocator_etcd_failed(op->allocator, resp)) {
                claim_op_etcd_failed(op, resp);
                return;
        }
        if (resp->n_kvs > 0) {
                claim_op_created(op, ALLOC_RESULT_EXISTING);
                return;
        }
        if (str_isempty(region))
                claim_op_finish(op, ALLOC_RESULT_NO_CAPACITY, 503,
                                api_error_json("no capacity in fleet %s", op->rec.fleet_id));
        else
                claim_op_finish(op, ALLOC_RESULT_NO_CAPACITY, 503,
                                api_error_json("no capacity in fleet %s (region %s)",
                                               op->rec.fleet_id, region));
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
                claim_op_finish(op, ALLOC_RESULT_CONFLICT, 409,
                                api_error_json("allocation %s: %s in etcd has no record "
                                               "beside it; the allocationId cannot be used "
                                               "until that key is deleted",
                                               op->rec.allocation_id, op->index_key));
                return;
        }
        claim_op_finish(op, ALLOC_RESULT_CONFLICT, 409,
                        api_error_json("allocation %s is of fleet %s, not %s",
                                       op->rec.allocation_id, doc.fleet_id,
                                       op->rec.fleet_id));
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
                claim_op_etcd_failed(op, resp);
                return;
        }
        if (resp->succeeded) {
                /* The view learns of the claim now rather than from the watch, so that the
                 * next request does not pick the slot in vain. */
                claim = (EtcdKv){ .key = op->claim_key, .value = op->claim_value,
                                  .value_len = strlen(op->claim_value),
                                  .create_revision = resp->revision,
                                  .mod_revision = resp->revision, .version = 1 };
                cache_apply_kv(a, op->claim_key, &claim);
                claim_op_created(op, ALLOC_RESULT_CLAIMED);
                return;
        }
        if (resp->n_responses >= 1 && resp->responses[0].n_kvs > 0) {
                claim_op_created(op, claim_was_ours(op, resp) ? ALLOC_RESULT_CLAIMED
                                                              : ALLOC_RESULT_EXISTING);
                return;
        }
        if (resp->n_responses >= 4 && resp->responses[3].n_kvs > 0) {
                claim_op_index_taken(op, &resp->responses[3].kvs[0]);
                return;
        }
        a->metrics.txn_conflicts++;
        if (resp->n_responses >= 3) {
                cache_apply_kv(a, op->slot_key,
                               resp->responses[1].n_kvs > 0 ? &resp->responses[1].kvs[0] : NULL);
                if (resp->responses[2].n_kvs > 0)
                        cache_apply_kv(a, op->claim_key, &resp->responses[2].kvs[0]);
        }
        if (op->attempts >= CLAIM_ATTEMPTS_MAX) {
                claim_op_finish(op, ALLOC_RESULT_CONTENDED, 503,
                                api_error_json("allocation %s: each of %u slots tried was "
                                               "taken by another claim first; try again",
                                               op->rec.allocation_id, op->attempts));
                return;
        }
        claim_try(op);
}

/* The claim: the record, its index and the claim put if none of the three exists yet and the
 * slot's document is as read; else the four read (on_claim_answer tells which compare
 * failed). */
static int claim_send(ClaimOp *op) {
        const EtcdCompare cmp[] = {
                { .key = op->record_key, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL },
                { .key = op->slot_key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = op->slot_revision },
                { .key = op->claim_key, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL },
                { .key = op->index_key, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL },
        };
        _cleanup_free_ char *record = NULL;
        EtcdOp success[3], failure[4];
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
        r = free_and_strdup(&op->rec.machine_id, s->machine_id);
        if (r >= 0)
                r = free_and_strdup(&op->rec.ipv4, s->doc.ipv4);
        if (r >= 0)
                r = free_and_strdup(&op->rec.ipv6, s->doc.ipv6);
        op->slot_key = strdup(s->key);
        op->claim_key = fleet_key_claim(a->config->prefix, s->machine_id, s->slot_id);
        if (r < 0 || !op->slot_key || !op->claim_key)
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
                            .draining = m && m->doc.draining };
        return claim_doc_format(&claim, &op->claim_value);
}

static void claim_try(ClaimOp *op) {
        Allocator *a = op->allocator;
        PlacementRequest pr = { .fleet = op->rec.fleet_id, .region = op->body.region_id,
                                .build = op->body.build_configuration_id };
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

static ClaimOp *claim_op_new(Allocator *a, ApiRequest *req, ApiAllocateBody *body) {
        const ApiRoute *rt = api_request_route(req);
        ClaimOp *op = new0(ClaimOp, 1);

        if (!op)
                return NULL;
        op->allocator = a;
        op->req = req;
        op->body = *body;
        *body = (ApiAllocateBody){};
        /* The record's strings borrow the body's and the route's (claim_op_free). */
        op->rec = (AllocationRecord){
                .allocation_id = op->body.allocation_id,
                .project_id = (char *) rt->project,
                .environment_id = (char *) rt->environment,
                .fleet_id = (char *) rt->fleet,
                .build_configuration_id = op->body.build_configuration_id,
                .region_id = op->body.region_id,
                .payload = op->body.payload,
                .status = ALLOCATION_CLAIMED,
                .requested = now_usec(CLOCK_REALTIME),
                .attempts = 1,
        };
        op->record_key = allocator_record_key(a, rt->fleet, op->body.allocation_id);
        op->index_key = fleet_key_allocation_id(a->config->prefix, op->body.allocation_id);
        if (!op->record_key || !op->index_key ||
            allocation_id_doc_format(&(AllocationIdDoc){ .allocation_id = op->body.allocation_id,
                                                          .fleet_id = (char *) rt->fleet },
                                     &op->index_value) < 0) {
                claim_op_free(op);
                return NULL;
        }
        return op;
}

static void allocate_refuse(Allocator *a, ApiRequest *req, AllocResult result, unsigned status,
                            json_t *body) {
        a->metrics.allocations[result]++;
        allocator_metrics_observe_latency(&a->metrics,
                                          now_usec(CLOCK_MONOTONIC) - api_request_started(req));
        api_request_answer(req, status, body);
}

void api_allocate(Allocator *a, ApiRequest *req) {
        _cleanup_(api_allocate_body_done) ApiAllocateBody body = {};
        const ApiRoute *rt = api_request_route(req);
        const char *error = NULL, *text, *other;
        size_t size;
        ClaimOp *op;

        text = api_request_body(req, &size);
        if (api_parse_allocate(text, size, &body, &error) < 0) {
                allocate_refuse(a, req, ALLOC_RESULT_INVALID, 400,
                                api_error_json("allocation in fleet %s: %s", rt->fleet,
                                               error ?: "out of memory"));
                return;
        }
        if (!cache_ready(a)) {
                allocate_refuse(a, req, ALLOC_RESULT_UNAVAILABLE, 503,
                                api_error_json("etcd unavailable: the fleet view is not read "
                                               "from etcd yet (allocation %s)",
                                               body.allocation_id));
                return;
        }
        other = allocation_fleet_elsewhere(a, body.allocation_id, rt->fleet);
        if (other) {
                allocate_refuse(a, req, ALLOC_RESULT_CONFLICT, 409,
                                api_error_json("allocation %s is of fleet %s, not %s",
                                               body.allocation_id, other, rt->fleet));
                return;
        }
        op = claim_op_new(a, req, &body);
        if (!op) {
                allocate_refuse(a, req, ALLOC_RESULT_UNAVAILABLE, 503,
                                api_error_json("out of memory"));
                return;
        }
        api_request_set_op(req, op, claim_op_cancel);
        claim_try(op);
}
