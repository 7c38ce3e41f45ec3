/* SPDX-License-Identifier: MIT */
/* Claims placed again (SPEC §13 steps 2 and 3), by any replica: each watched claim has a
 * timer at its deadline; a claim deleted without its record being fulfilled was refused by
 * its host. Either way the record is read, a new slot picked (its machine and the record's
 * excluded ones left out), and one transaction conditioned on the record as read, the new
 * slot unchanged and without a claim (and, for a deadline, the old claim unchanged; else the
 * old claim not the record's: absent, or another's) moves the claim. Replicas race on it; the
 * compares let one win. A claim whose record is gone or has moved on is garbage, deleted if
 * unchanged. A claimed record found without its claim (allocator-scan.c, a GET) is placed
 * again as a refused one. */
#include <inttypes.h>
#include <sys/random.h>

#include "allocator-cache.h"
#include "allocator-replace.h"
#include "allocator.h"
#include "log.h"
#include "strv.h"

/* After a claim's deletion, how long the slot's document has to show the allocation
 * (fulfilled: the same transaction, seen on another watch) before the record is read. */
#define GONE_CHECK_DELAY (250 * USEC_PER_MSEC)
/* Spread of the replicas' deadline timers, so that they do not all race for each claim. */
#define DEADLINE_JITTER_MAX (200 * USEC_PER_MSEC)
#define REPLACE_ATTEMPTS_MAX 5
#define RETRY_DELAY (1 * USEC_PER_SEC)

struct ReplaceOp {
        Allocator *allocator;
        ReplaceReason reason;
        char *allocation_id;
        char *fleet;
        char *record_key;
        char *old_machine;
        uint32_t old_slot;
        char *old_claim_key;      /* deadline: the claim to move; else the one gone */
        int64_t old_claim_revision;
        int64_t gone_claim_revision; /* a claim gone: the revision it was made at */
        int64_t record_revision;
        char *new_machine;        /* the slot in flight */
        uint32_t new_slot;
        bool pending;
        char *new_claim_key, *new_claim_value, *new_slot_key;
        char *failed_record, *failed_index; /* a refused claim with nowhere to go */
        unsigned attempts;
        EtcdRequest *etcd;
        sd_event_source *timer;
        LIST_FIELDS(ReplaceOp, ops);
};

static void op_unpend(ReplaceOp *op) {
        if (op->pending)
                placement_slot_set_pending(op->allocator->placement, op->new_machine,
                                           op->new_slot, false);
        op->pending = false;
}

static void op_free(ReplaceOp *op) {
        op_unpend(op);
        etcd_request_cancel(op->etcd);
        sd_event_source_disable_unref(op->timer);
        LIST_REMOVE(ops, op->allocator->replace_ops, op);
        free(op->allocation_id);
        free(op->fleet);
        free(op->record_key);
        free(op->old_machine);
        free(op->old_claim_key);
        free(op->new_machine);
        free(op->new_claim_key);
        free(op->new_claim_value);
        free(op->new_slot_key);
        free(op->failed_record);
        free(op->failed_index);
        free(op);
}

static ReplaceOp *op_find(Allocator *a, const char *allocation_id) {
        for (ReplaceOp *op = a->replace_ops; op; op = op->ops_next)
                if (streq(op->allocation_id, allocation_id))
                        return op;
        return NULL;
}

static ReplaceOp *op_new(Allocator *a, ReplaceReason reason, const ClaimDoc *doc,
                         const char *machine, uint32_t slot) {
        ReplaceOp *op = new0(ReplaceOp, 1);

        if (!op)
                return NULL;
        *op = (ReplaceOp){ .allocator = a, .reason = reason, .old_slot = slot };
        LIST_PREPEND(ops, a->replace_ops, op);
        op->allocation_id = strdup(doc->allocation_id);
        op->fleet = strdup(doc->fleet_id);
        op->old_machine = strdup(machine);
        if (!op->allocation_id || !op->fleet || !op->old_machine ||
            !fleet_key_component_valid(op->fleet) ||
            !fleet_key_component_valid(op->allocation_id) ||
            !(op->record_key = allocator_record_key(a, op->fleet, op->allocation_id)) ||
            !(op->old_claim_key = fleet_key_claim(a->config->prefix, machine, slot))) {
                op_free(op);
                return NULL;
        }
        return op;
}

static void op_read(ReplaceOp *op);

static int on_op_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        ReplaceOp *op = userdata;

        op->timer = sd_event_source_disable_unref(op->timer);
        op_read(op);
        return 0;
}

static void op_later(ReplaceOp *op, usec_t delay) {
        op->timer = sd_event_source_disable_unref(op->timer);
        if (sd_event_add_time_relative(op->allocator->event, &op->timer, CLOCK_MONOTONIC, delay,
                                       10 * USEC_PER_MSEC, on_op_timer, op) < 0) {
                log_warning("Allocation %s: cannot schedule placing its claim again",
                            op->allocation_id);
                op_free(op);
        }
}

/* Tried enough for now: a deadline's claim comes back at its next deadline (its timer is
 * re-armed by the view), a refused one is given up (a GET of its record past its deadline,
 * or the next read of the claims, finds it again: allocator-orphan.h). */
static void op_give_up(ReplaceOp *op, const char *why) {
        Allocator *a = op->allocator;
        CacheClaim *c = op->reason == REPLACE_DEADLINE ? hashmap_get(&a->cache.claims,
                                                                     op->old_claim_key)
                                                       : NULL;

        log_warning("Allocation %s: its claim on slot %" PRIu32 " of %s cannot be placed again "
                    "now: %s", op->allocation_id, op->old_slot, op->old_machine, why);
        if (c && c->mod_revision == op->old_claim_revision)
                (void) replace_claim_seen(a, c);
        op_free(op);
}

static void op_etcd_failed(ReplaceOp *op, const EtcdResponse *resp) {
        if (++op->attempts < REPLACE_ATTEMPTS_MAX)
                op_later(op, RETRY_DELAY);
        else
                op_give_up(op, resp ? resp->message : "etcd did not answer");
}

/* ---- garbage ---- */

static void on_garbage_deleted(Etcd *e, const EtcdResponse *resp, void *userdata) {
        ReplaceOp *op = userdata;

        op->etcd = NULL;
        if (allocator_etcd_failed(op->allocator, resp)) {
                op_etcd_failed(op, resp);
                return;
        }
        if (resp->succeeded)
                log_info("Deleted the claim %s: its allocation %s has no record that points at "
                         "it", op->old_claim_key, op->allocation_id);
        op_free(op);
}

static void delete_garbage(ReplaceOp *op) {
        const EtcdCompare cmp = { .key = op->old_claim_key, .target = ETCD_TARGET_MOD,
                                  .result = ETCD_EQUAL, .number = op->old_claim_revision };
        const EtcdOp del = { .type = ETCD_OP_DELETE, .key = op->old_claim_key };

        if (etcd_txn(op->allocator->etcd, &cmp, 1, &del, 1, NULL, 0, on_garbage_deleted, op,
                     &op->etcd) < 0)
                op_etcd_failed(op, NULL);
}

static const char *reason_words(ReplaceReason reason) {
        return reason == REPLACE_DEADLINE ? "not confirmed in time"
               : reason == REPLACE_REFUSED ? "refused"
                                           : "found without its claim";
}

/* A claim gone (refused, orphaned) is moved, or its record dropped, only if the old claim
 * key does not hold the record's claim: a claim is put with its record, in one transaction,
 * so the record's claim is the one of the record's mod_revision. Absent, or another
 * allocation's put later, it is not. The failure branch reads it. */
static EtcdCompare old_claim_not_the_records(const ReplaceOp *op) {
        return (EtcdCompare){ .key = op->old_claim_key, .target = ETCD_TARGET_MOD,
                              .result = ETCD_NOT_EQUAL, .number = op->record_revision };
}

/* Whether a failed transaction found the record's claim still there: nothing to place. */
static bool old_claim_there(const ReplaceOp *op, const EtcdResponse *resp) {
        if (op->reason == REPLACE_DEADLINE || resp->n_responses < 1 ||
            resp->responses[0].n_kvs != 1 ||
            resp->responses[0].kvs[0].mod_revision != op->record_revision)
                return false;
        log_debug("Allocation %s: its claim %s is there after all", op->allocation_id,
                  op->old_claim_key);
        return true;
}

/* ---- a refused claim with nowhere to go: its record failed ---- */

static void on_failed(Etcd *e, const EtcdResponse *resp, void *userdata) {
        ReplaceOp *op = userdata;

        op->etcd = NULL;
        if (allocator_etcd_failed(op->allocator, resp)) {
                op_etcd_failed(op, resp);
                return;
        }
        if (resp->succeeded) {
                op->allocator->metrics.claims_dropped++;
                log_warning("Allocation %s: %s on slot %" PRIu32 " of %s, and no other slot of "
                            "fleet %s is free: it failed (its record is kept %" PRIu64 "s)",
                            op->allocation_id, reason_words(op->reason), op->old_slot,
                            op->old_machine, op->fleet,
                            (op->allocator->config->failed_ttl + USEC_PER_SEC - 1) / USEC_PER_SEC);
                op_free(op);
                return;
        }
        if (old_claim_there(op, resp))
                op_free(op);
        else
                op_read(op); /* the record changed meanwhile */
}

/* The record failed and its index, both on a lease of allocator.failed_ttl: etcd deletes them
 * then, whichever replica is up (or none). */
static void on_failed_lease(Etcd *e, const EtcdResponse *resp, void *userdata) {
        ReplaceOp *op = userdata;
        const EtcdCompare cmp[2] = {
                { .key = op->record_key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = op->record_revision },
                old_claim_not_the_records(op),
        };
        _cleanup_free_ char *ikey = fleet_key_allocation_id(op->allocator->config->prefix,
                                                           op->allocation_id);
        EtcdOp put[2] = {
                { .type = ETCD_OP_PUT, .key = op->record_key, .value = op->failed_record },
                { .type = ETCD_OP_PUT, .key = ikey, .value = op->failed_index },
        };
        const EtcdOp fail = { .type = ETCD_OP_RANGE, .key = op->old_claim_key };

        op->etcd = NULL;
        if (allocator_etcd_failed(op->allocator, resp)) {
                op_etcd_failed(op, resp);
                return;
        }
        put[0].lease = put[1].lease = resp->lease_id;
        if (!ikey || etcd_txn(op->allocator->etcd, cmp, 2, put, 2, &fail, 1, on_failed, op,
                              &op->etcd) < 0)
                op_give_up(op, "its record cannot be marked failed");
}

/* rec failed: why (the last host's refusal, or what the allocator saw) kept beside it. */
static int fail_prepare(ReplaceOp *op, AllocationRecord *rec) {
        AllocationIdDoc index = { .allocation_id = rec->allocation_id,
                                  .fleet_id = rec->fleet_id };
        _cleanup_free_ char *why = NULL;
        int r;

        if (str_isempty(rec->error) &&
            asprintf(&why, "%s on slot %" PRIu32 " of %s, and no other slot of fleet %s is "
                     "free", reason_words(op->reason), op->old_slot, op->old_machine,
                     op->fleet) < 0)
                return -ENOMEM;
        if (why) {
                free(rec->error);
                rec->error = TAKE_PTR(why);
        }
        rec->status = ALLOCATION_FAILED;
        rec->failed = now_usec(CLOCK_REALTIME);
        /* no slot holds it: Unity's serverId 0, "not allocated" */
        rec->machine_id = mfree(rec->machine_id);
        rec->ipv4 = mfree(rec->ipv4);
        rec->ipv6 = mfree(rec->ipv6);
        rec->machine_number = 0;
        rec->slot_id = 0;
        rec->game_port = 0;
        op->failed_record = mfree(op->failed_record);
        op->failed_index = mfree(op->failed_index);
        r = allocation_record_format(rec, &op->failed_record);
        return r < 0 ? r : allocation_id_doc_format(&index, &op->failed_index);
}

static void fail_record(ReplaceOp *op, AllocationRecord *rec) {
        Allocator *a = op->allocator;
        int64_t ttl = (int64_t) ((a->config->failed_ttl + USEC_PER_SEC - 1) / USEC_PER_SEC);

        if (++op->attempts > REPLACE_ATTEMPTS_MAX || fail_prepare(op, rec) < 0 ||
            etcd_lease_grant(a->etcd, ttl, on_failed_lease, op, &op->etcd) < 0)
                op_give_up(op, "its record cannot be marked failed");
}

/* ---- the move ---- */

static void on_moved(Etcd *e, const EtcdResponse *resp, void *userdata) {
        ReplaceOp *op = userdata;
        Allocator *a = op->allocator;
        EtcdKv claim;

        op->etcd = NULL;
        op_unpend(op);
        if (allocator_etcd_failed(a, resp)) {
                op_etcd_failed(op, resp);
                return;
        }
        if (!resp->succeeded) {
                /* Another replica moved it, its host confirmed it, or the new slot was taken:
                 * the record read anew tells which. */
                a->metrics.txn_conflicts++;
                if (old_claim_there(op, resp))
                        op_free(op);
                else if (++op->attempts < REPLACE_ATTEMPTS_MAX)
                        op_read(op);
                else
                        op_give_up(op, "every attempt lost a race");
                return;
        }
        claim = (EtcdKv){ .key = op->new_claim_key, .value = op->new_claim_value,
                          .value_len = strlen(op->new_claim_value),
                          .create_revision = resp->revision, .mod_revision = resp->revision,
                          .version = 1 };
        cache_apply_kv(a, op->new_claim_key, &claim, resp->revision);
        a->metrics.claims_replaced[op->reason]++;
        log_info("Allocation %s: %s on slot %" PRIu32 " of %s, placed again on slot %" PRIu32
                 " of %s", op->allocation_id, reason_words(op->reason), op->old_slot,
                 op->old_machine, op->new_slot, op->new_machine);
        op_free(op);
}

static int move_send(ReplaceOp *op, const char *record, const CacheSlot *s) {
        EtcdCompare cmp[4] = {
                { .key = op->record_key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = op->record_revision },
                { .key = op->new_slot_key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = s->mod_revision },
                { .key = op->new_claim_key, .target = ETCD_TARGET_CREATE,
                  .result = ETCD_EQUAL },
        };
        EtcdOp ops[3] = {
                { .type = ETCD_OP_PUT, .key = op->record_key, .value = record },
                { .type = ETCD_OP_PUT, .key = op->new_claim_key, .value = op->new_claim_value },
        };
        const EtcdOp fail = { .type = ETCD_OP_RANGE, .key = op->old_claim_key };
        size_t n_cmp = 3, n_ops = 2;

        if (op->reason == REPLACE_DEADLINE) {
                cmp[n_cmp++] = (EtcdCompare){ .key = op->old_claim_key,
                                              .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                                              .number = op->old_claim_revision };
                ops[n_ops++] = (EtcdOp){ .type = ETCD_OP_DELETE, .key = op->old_claim_key };
        } else
                cmp[n_cmp++] = old_claim_not_the_records(op);
        return etcd_txn(op->allocator->etcd, cmp, n_cmp, ops, n_ops, &fail,
                        op->reason == REPLACE_DEADLINE ? 0 : 1, on_moved, op, &op->etcd);
}

/* rec moved to slot s: the new claim, the record to put. */
static int move_prepare(ReplaceOp *op, AllocationRecord *rec, const CacheSlot *s,
                        char **ret_record) {
        Allocator *a = op->allocator;
        const CacheMachine *m = cache_machine(a, s->machine_id);
        usec_t now = now_usec(CLOCK_REALTIME);
        ClaimDoc claim;
        int r = 0;

        if (!strv_contains(rec->excluded, op->old_machine))
                r = strv_extend(&rec->excluded, op->old_machine);
        if (r >= 0)
                r = free_and_strdup(&rec->machine_id, s->machine_id);
        if (r >= 0)
                r = free_and_strdup(&rec->ipv4, s->doc.ipv4);
        if (r >= 0)
                r = free_and_strdup(&rec->ipv6, s->doc.ipv6);
        if (r >= 0)
                r = free_and_strdup(&op->new_machine, s->machine_id);
        if (r >= 0)
                r = free_and_strdup(&op->new_slot_key, s->key);
        if (r < 0)
                return r;
        op->new_slot = rec->slot_id = s->slot_id;
        rec->machine_number = s->doc.machine_number;
        rec->game_port = s->doc.game_port;
        rec->status = ALLOCATION_CLAIMED;
        rec->claimed = now;
        rec->deadline = now + a->config->claim_timeout;
        rec->attempts++;
        free(op->new_claim_key);
        free(op->new_claim_value);
        op->new_claim_value = NULL;
        op->new_claim_key = fleet_key_claim(a->config->prefix, s->machine_id, s->slot_id);
        if (!op->new_claim_key)
                return -ENOMEM;
        claim = (ClaimDoc){ .allocation_id = rec->allocation_id, .fleet_id = rec->fleet_id,
                            .build_configuration_id = rec->build_configuration_id,
                            .payload = rec->payload, .deadline = rec->deadline,
                            .draining = m && m->doc.draining, /* the last resort */
                            .restart = rec->restart };
        r = claim_doc_format(&claim, &op->new_claim_value);
        return r < 0 ? r : allocation_record_format(rec, ret_record);
}

static void move(ReplaceOp *op, AllocationRecord *rec) {
        Allocator *a = op->allocator;
        _cleanup_strv_free_ char **excluded = strv_copy(rec->excluded);
        _cleanup_free_ char *record = NULL;
        PlacementRequest pr = { .fleet = rec->fleet_id, .region = rec->region_id,
                                .build = rec->build_configuration_id };
        const char *machine;
        CacheSlot *s = NULL;
        uint32_t id;

        if ((rec->excluded && !excluded) || strv_extend(&excluded, op->old_machine) < 0) {
                op_give_up(op, "out of memory");
                return;
        }
        pr.excluded = excluded;
        if (placement_pick(a->placement, &pr, &machine, &id) >= 0)
                s = cache_slot_by_index(a, machine, id);
        if (!s) {
                if (op->reason != REPLACE_DEADLINE)
                        fail_record(op, rec);
                else
                        op_give_up(op, "no other slot is free");
                return;
        }
        if (move_prepare(op, rec, s, &record) < 0 || move_send(op, record, s) < 0) {
                op_give_up(op, "out of memory");
                return;
        }
        placement_slot_set_pending(a->placement, s->machine_id, s->slot_id, true);
        op->pending = true;
}

/* Whether rec still points at the claim this op is about. */
static bool record_on_old_claim(const ReplaceOp *op, const AllocationRecord *rec) {
        return rec->status == ALLOCATION_CLAIMED && streq_ptr(rec->machine_id, op->old_machine) &&
               rec->slot_id == op->old_slot;
}

static void on_record(Etcd *e, const EtcdResponse *resp, void *userdata) {
        _cleanup_(allocation_record_done) AllocationRecord rec = {};
        ReplaceOp *op = userdata;
        bool on_claim;

        op->etcd = NULL;
        if (allocator_etcd_failed(op->allocator, resp)) {
                op_etcd_failed(op, resp);
                return;
        }
        on_claim = resp->n_kvs > 0 &&
                   allocation_record_parse(resp->kvs[0].value, resp->kvs[0].value_len,
                                           &rec) >= 0 &&
                   record_on_old_claim(op, &rec);
        if (!on_claim) {
                /* Fulfilled, moved, deleted: a refusal needs nothing; a claim still there
                 * under the deadline is garbage. */
                if (op->reason == REPLACE_DEADLINE)
                        delete_garbage(op);
                else
                        op_free(op);
                return;
        }
        op->record_revision = resp->kvs[0].mod_revision;
        move(op, &rec);
}

/* Whether s's document shows the allocation, or showed it after its claim was made
 * (claim_revision; 0: not known, only what it shows now counts). */
static bool slot_showed(const CacheSlot *s, const char *allocation_id, int64_t claim_revision) {
        if (!s)
                return false;
        return streq_ptr(s->doc.allocation_id, allocation_id) ||
               (claim_revision > 0 && streq_ptr(s->seen_allocation_id, allocation_id) &&
                s->seen_allocation_revision > claim_revision);
}

static void op_read(ReplaceOp *op) {
        Allocator *a = op->allocator;
        CacheClaim *c = op->old_claim_key ? hashmap_get(&a->cache.claims, op->old_claim_key)
                                          : NULL;

        CacheSlot *s = cache_slot_by_index(a, op->old_machine, op->old_slot);

        /* The claim this is about changed or went (confirmed, moved): done. */
        if (op->reason == REPLACE_DEADLINE && (!c || c->mod_revision != op->old_claim_revision)) {
                op_free(op);
                return;
        }
        /* A claim gone: placed again elsewhere already, or fulfilled (the slot's document
         * shows the allocation, or showed it after the claim was made): done. */
        if (op->reason != REPLACE_DEADLINE &&
            (hashmap_get(&a->cache.claims_by_allocation, op->allocation_id) ||
             slot_showed(s, op->allocation_id, op->gone_claim_revision))) {
                op_free(op);
                return;
        }
        if (etcd_range(a->etcd, op->record_key, NULL, 1, on_record, op, &op->etcd) < 0)
                op_etcd_failed(op, NULL);
}

/* ---- what the view tells ---- */

static usec_t jitter(void) {
        uint32_t v = 0;

        (void) getrandom(&v, sizeof(v), GRND_NONBLOCK);
        return v % DEADLINE_JITTER_MAX;
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        CacheClaim *c = userdata;
        Allocator *a = c->allocator;
        ReplaceOp *op;

        if (op_find(a, c->doc.allocation_id))
                return 0; /* one move at a time per allocation */
        op = op_new(a, REPLACE_DEADLINE, &c->doc, c->machine_id, c->slot_id);
        if (!op)
                return 0;
        op->old_claim_revision = c->mod_revision;
        log_debug("Claim %s of allocation %s passed its deadline unconfirmed", c->key,
                  c->doc.allocation_id);
        op_read(op);
        return 0;
}

int replace_claim_seen(Allocator *a, CacheClaim *c) {
        usec_t at;
        int r;

        c->deadline = sd_event_source_disable_unref(c->deadline);
        if (!c->doc.allocation_id || !c->doc.fleet_id)
                return 0; /* not a claim this allocator can place: it waits for a person */
        /* A deadline in the past (a replica that starts late, a claim re-armed after a failed
         * move) fires at once, or one claim timeout from now when re-armed. */
        at = MAX(c->doc.deadline, c->deadline_rearmed ? now_usec(CLOCK_REALTIME) +
                                                                a->config->claim_timeout
                                                      : 0);
        r = sd_event_add_time(a->event, &c->deadline, CLOCK_REALTIME, at + jitter(),
                              10 * USEC_PER_MSEC, on_deadline, c);
        c->deadline_rearmed = true;
        return r;
}

void replace_claim_gone(Allocator *a, const ClaimDoc *doc, const char *machine_id,
                        uint32_t slot_id, int64_t claim_revision) {
        ReplaceOp *op;

        if (!doc->allocation_id || !doc->fleet_id || op_find(a, doc->allocation_id))
                return;
        /* Its host confirmed it, and the view saw that already: nothing to read (the common
         * case: one fewer read of etcd per allocation). */
        if (claim_revision > 0 &&
            slot_showed(cache_slot_by_index(a, machine_id, slot_id), doc->allocation_id,
                        claim_revision))
                return;
        op = op_new(a, REPLACE_REFUSED, doc, machine_id, slot_id);
        if (!op)
                return;
        op->gone_claim_revision = claim_revision;
        op_later(op, GONE_CHECK_DELAY);
}

void replace_slot_showed(Allocator *a, const CacheSlot *s) {
        ReplaceOp *op;

        if (!a->replace_ops || str_isempty(s->doc.allocation_id))
                return;
        op = op_find(a, s->doc.allocation_id);
        /* waiting for its check (nothing of it in etcd's hands): the check is answered */
        if (op && op->reason == REPLACE_REFUSED && !op->etcd && !op->pending &&
            op->old_slot == s->slot_id && streq(op->old_machine, s->machine_id) &&
            slot_showed(s, op->allocation_id, op->gone_claim_revision))
                op_free(op);
}

void replace_record_orphaned(Allocator *a, const AllocationRecord *rec) {
        const ClaimDoc doc = { .allocation_id = rec->allocation_id, .fleet_id = rec->fleet_id };
        ReplaceOp *op;

        if (!rec->allocation_id || !rec->fleet_id || !rec->machine_id ||
            op_find(a, rec->allocation_id))
                return;
        op = op_new(a, REPLACE_ORPHANED, &doc, rec->machine_id, rec->slot_id);
        if (op)
                op_later(op, jitter()); /* the replicas that read it too, spread */
}

void replace_done(Allocator *a) {
        while (a->replace_ops)
                op_free(a->replace_ops);
}
