/* SPDX-License-Identifier: MIT */
/* Claims in doubt (allocator-fence.h): a claim's transaction sent, and no answer (a timeout,
 * a broken connection the resend did not settle, etcd's "request timed out"): etcd may apply
 * it later still, when the member that holds it forwards it. Its client is answered 503 at
 * once; here, per slot, one transaction on a lease of FENCE_TTL_SEC:
 *
 *   if the slot's claim does not exist: put <prefix>/fences/<machineID>/<slotID>, and read
 *   the allocation's record; else: read the claim and the record.
 *
 * Every claim's transaction compares that the slot's fence does not exist, so once it is in,
 * no late copy of the claim applies. A record that is this claim's own (its POST's requestId,
 * or its times and slot) was applied before the fence: it is deleted as a DELETE would
 * (alloc_delete: record, index, claim, or a deallocation once its host confirmed it), and the
 * fence sent again, until it is in and no record of the claim is left. Unless the record is
 * marked answered: a later POST of the same allocationId was answered 200 with it
 * (allocator-claim.c marks it so before it answers, compared on the record as read; the
 * deletion here compares the record as read unmarked). Whichever applies first wins: such a
 * record is kept (fence_kept_total); a POST whose mark comes second finds no record and
 * claims anew. A fence etcd did not
 * answer is sent again after a back-off (100 ms doubling to 5 s), until etcd answers. Fences
 * are never read by the registry nor by the fleet view (they are outside hosts/, slots/ and
 * machines/). */
#include <inttypes.h>

#include "allocator-fence.h"
#include "allocator-ops.h"
#include "allocator.h"
#include "list.h"
#include "log.h"

#define FENCE_BACKOFF_MIN (100 * USEC_PER_MSEC)
#define FENCE_BACKOFF_MAX (5 * USEC_PER_SEC)
/* Another replica's fence, found by a claim: the slot left out this long, then tried again
 * (the fence's lease may have ended by then; if not, the claim finds it again). */
#define FENCE_SEEN_HOLD (5 * USEC_PER_SEC)

typedef struct Fence Fence;
struct Fence {
        Allocator *allocator;
        char *machine_id;
        uint32_t slot_id;
        AllocationRecord rec; /* the claim's (NULL strings for a fence only seen) */
        char *fence_key, *claim_key, *claim_value, *record_key;
        int64_t lease;
        usec_t granted_asked, lease_end; /* CLOCK_MONOTONIC: the lease asked, and its end */
        usec_t backoff;
        unsigned tries;
        bool kept; /* its record found marked answered (fence_kept) */
        bool held; /* settled: in etcd (or only seen), the slot left out until its end */
        EtcdRequest *etcd;
        RecordOp *undo;
        sd_event_source *timer;
        LIST_FIELDS(Fence, fences);
};

static void fence_free(Fence *f) {
        Allocator *a;

        if (!f)
                return;
        a = f->allocator;
        placement_slot_set_pending(f->allocator->placement, f->machine_id, f->slot_id, false);
        etcd_request_cancel(f->etcd);
        if (f->undo)
                alloc_record_cancel(f->undo);
        sd_event_source_disable_unref(f->timer);
        LIST_REMOVE(fences, f->allocator->fences, f);
        allocation_record_done(&f->rec);
        free(f->machine_id);
        free(f->fence_key);
        free(f->claim_key);
        free(f->claim_value);
        free(f->record_key);
        free(f);
        allocator_settled(a);
}

static Fence *fence_new(Allocator *a, const char *machine_id, uint32_t slot_id) {
        Fence *f = new0(Fence, 1);

        if (!f)
                return NULL;
        f->allocator = a;
        f->slot_id = slot_id;
        f->backoff = FENCE_BACKOFF_MIN;
        LIST_PREPEND(fences, a->fences, f);
        f->machine_id = strdup(machine_id);
        if (!f->machine_id) {
                fence_free(f);
                return NULL;
        }
        /* Not placed while in doubt: the claim may be applied yet. */
        placement_slot_set_pending(a->placement, machine_id, slot_id, true);
        return f;
}

static int on_fence_expired(sd_event_source *s, uint64_t usec, void *userdata) {
        fence_free(userdata);
        return 0;
}

/* The slot left out of placement until usec (CLOCK_MONOTONIC, relative), then f freed. */
static void fence_hold(Fence *f, usec_t usec) {
        f->timer = sd_event_source_disable_unref(f->timer);
        if (sd_event_add_time_relative(f->allocator->event, &f->timer, CLOCK_MONOTONIC, usec,
                                       USEC_PER_SEC, on_fence_expired, f) < 0) {
                fence_free(f);
                return;
        }
        f->held = true;
        allocator_settled(f->allocator);
}

static void fence_grant(Fence *f);

static int on_fence_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Fence *f = userdata;

        f->timer = sd_event_source_disable_unref(f->timer);
        fence_grant(f);
        return 0;
}

/* etcd did not answer (or refused): the whole again, a lease first, after a back-off. */
static void fence_retry(Fence *f, const char *why) {
        Allocator *a = f->allocator;

        a->metrics.fence_retries++;
        log_full(f->tries == 1 || f->tries % 10 == 0 ? LOG_WARNING : LOG_DEBUG,
                 "Allocation %s: the fence of slot %" PRIu32 " of %s is not in yet (%s, try %u); "
                 "trying again in %" PRIu64 " ms", f->rec.allocation_id, f->slot_id,
                 f->machine_id, why, f->tries, f->backoff / USEC_PER_MSEC);
        f->timer = sd_event_source_disable_unref(f->timer);
        if (sd_event_add_time_relative(a->event, &f->timer, CLOCK_MONOTONIC, f->backoff,
                                       10 * USEC_PER_MSEC, on_fence_retry, f) < 0) {
                log_error("Allocation %s: cannot arm the fence's retry; its slot %" PRIu32
                          " of %s is left out of placement until the allocator restarts",
                          f->rec.allocation_id, f->slot_id, f->machine_id);
                return;
        }
        f->backoff = MIN(f->backoff * 2, FENCE_BACKOFF_MAX);
}

/* Whether etcd's record (kv) is the one this claim would have written: the POST's requestId,
 * else its times and slot (a record written by a later POST of the same allocationId has
 * others). */
static bool record_is_ours(const Fence *f, const EtcdKv *kv) {
        _cleanup_(allocation_record_done) AllocationRecord theirs = {}, mine = {};
        _cleanup_free_ char *text = NULL;

        if (allocation_record_parse(kv->value, kv->value_len, &theirs) < 0)
                return false;
        if (theirs.request_id && f->rec.request_id)
                return streq(theirs.request_id, f->rec.request_id);
        if (allocation_record_format(&f->rec, &text) < 0 ||
            allocation_record_parse(text, strlen(text), &mine) < 0)
                return false;
        return theirs.requested == mine.requested && theirs.claimed == mine.claimed &&
               theirs.slot_id == mine.slot_id && streq_ptr(theirs.machine_id, mine.machine_id);
}

static bool record_answered(const EtcdKv *kv) {
        _cleanup_(allocation_record_done) AllocationRecord rec = {};

        return allocation_record_parse(kv->value, kv->value_len, &rec) >= 0 &&
               allocation_record_answered(&rec);
}

static void fence_send(Fence *f);

/* The claim's record found applied, and marked answered: a later POST of its allocationId
 * was answered 200 with it, before any deletion of it applied. It is that POST's allocation
 * now, kept. fenced: the fence is in etcd, and lasts its lease as any. Else the claim is in
 * still (its host has not confirmed it): the fence is sent again (the back-off's pace) until
 * it is in, once the claim is gone, so that no late copy of the claim applies after a DELETE
 * of the allocation either. From a timer: f may be in its own call. */
static void fence_kept(Fence *f, bool fenced) {
        usec_t now = now_usec(CLOCK_MONOTONIC);

        if (!f->kept) {
                f->kept = true;
                f->allocator->metrics.fence_kept++;
                log_warning("Allocation %s: its claim of slot %" PRIu32 " of %s was applied "
                            "after its POST was answered 503, and a POST of it again was "
                            "answered 200 with it before the fence's resolution; kept",
                            f->rec.allocation_id, f->slot_id, f->machine_id);
        }
        if (fenced) {
                fence_hold(f, f->lease_end > now ? f->lease_end - now : 0);
                return;
        }
        f->timer = sd_event_source_disable_unref(f->timer);
        if (sd_event_add_time_relative(f->allocator->event, &f->timer, CLOCK_MONOTONIC,
                                       f->backoff, 10 * USEC_PER_MSEC, on_fence_retry, f) < 0) {
                fence_hold(f, 0);
                return;
        }
        f->backoff = MIN(f->backoff * 2, FENCE_BACKOFF_MAX);
}

static void on_undone(const RecordAnswer *answer, void *userdata) {
        Fence *f = userdata;

        f->undo = NULL;
        if (answer->outcome == RECORD_KEPT) {
                fence_kept(f, false);
                return;
        }
        if (answer->outcome != RECORD_DELETED && answer->outcome != RECORD_NOT_FOUND) {
                fence_retry(f, answer->detail ?: "its deletion failed");
                return;
        }
        f->allocator->metrics.fence_undone++;
        log_warning("Allocation %s: its claim of slot %" PRIu32 " of %s was applied after its "
                    "POST was answered 503; deleted again", f->rec.allocation_id, f->slot_id,
                    f->machine_id);
        fence_send(f); /* a copy sent again may be in flight still: the fence now */
}

static void fence_undo(Fence *f) {
        const RecordRequest rq = { .project = f->rec.project_id,
                                   .environment = f->rec.environment_id,
                                   .fleet = f->rec.fleet_id,
                                   .allocation_id = f->rec.allocation_id,
                                   .keep_answered = true };

        f->undo = alloc_delete(f->allocator, &rq, on_undone, f);
}

static void on_fence_answer(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Fence *f = userdata;
        const EtcdResponse *rec;
        usec_t now;

        f->etcd = NULL;
        if (allocator_etcd_failed(f->allocator, resp)) {
                fence_retry(f, resp->message);
                return;
        }
        /* success: put, range record; failure: range claim, range record */
        if (resp->n_responses < 2) {
                fence_retry(f, "an answer without its reads");
                return;
        }
        rec = &resp->responses[1];
        if (rec->n_kvs > 0 && record_is_ours(f, &rec->kvs[0]) && record_answered(&rec->kvs[0])) {
                fence_kept(f, resp->succeeded);
                return;
        }
        if ((rec->n_kvs > 0 && record_is_ours(f, &rec->kvs[0])) ||
            (!resp->succeeded && resp->responses[0].n_kvs > 0 &&
             resp->responses[0].kvs[0].value_len == strlen(f->claim_value) &&
             memcmp(resp->responses[0].kvs[0].value, f->claim_value,
                    resp->responses[0].kvs[0].value_len) == 0)) {
                fence_undo(f);
                return;
        }
        if (!resp->succeeded) {
                /* Another allocation's claim: ours cannot apply while it lives; fenced later. */
                fence_retry(f, "the slot has another claim");
                return;
        }
        log_info("Allocation %s: slot %" PRIu32 " of %s fenced (its claim, answered 503, was "
                 "not applied and no longer can be); left out of placement for %d s",
                 f->rec.allocation_id, f->slot_id, f->machine_id, FENCE_TTL_SEC);
        now = now_usec(CLOCK_MONOTONIC);
        /* Until its lease ends (a slot held longer would be refused while etcd has it free). */
        fence_hold(f, f->lease_end > now ? f->lease_end - now : 0);
}

static void fence_send(Fence *f) {
        _cleanup_free_ char *value = NULL;
        const EtcdCompare cmp[] = {
                { .key = f->claim_key, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL },
        };
        EtcdOp success[2], failure[2];

        f->tries++;
        if (asprintf(&value, "{\"allocationId\":\"%s\",\"fleetId\":\"%s\"}",
                     f->rec.allocation_id, f->rec.fleet_id) < 0) {
                value = NULL;
                fence_retry(f, "no memory");
                return;
        }
        success[0] = (EtcdOp){ .type = ETCD_OP_PUT, .key = f->fence_key, .value = value,
                               .lease = f->lease };
        success[1] = (EtcdOp){ .type = ETCD_OP_RANGE, .key = f->record_key, .limit = 1 };
        failure[0] = (EtcdOp){ .type = ETCD_OP_RANGE, .key = f->claim_key, .limit = 1 };
        failure[1] = success[1];
        if (etcd_txn(f->allocator->etcd, cmp, ELEMENTSOF(cmp), success, ELEMENTSOF(success),
                     failure, ELEMENTSOF(failure), on_fence_answer, f, &f->etcd) < 0)
                fence_retry(f, "cannot send it");
}

static void on_granted(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Fence *f = userdata;

        f->etcd = NULL;
        if (allocator_etcd_failed(f->allocator, resp)) {
                f->tries++;
                fence_retry(f, resp->message);
                return;
        }
        f->lease = resp->lease_id;
        /* From its grant on our clock: etcd's TTL started before its answer came. */
        f->lease_end = f->granted_asked + (resp->ttl > 0 ? resp->ttl : FENCE_TTL_SEC) * USEC_PER_SEC;
        fence_send(f);
}

/* Each round its own lease: one granted before a long outage may have ended. */
static void fence_grant(Fence *f) {
        f->granted_asked = now_usec(CLOCK_MONOTONIC);
        if (etcd_lease_grant(f->allocator->etcd, FENCE_TTL_SEC, on_granted, f, &f->etcd) < 0) {
                f->tries++;
                fence_retry(f, "cannot ask for its lease");
        }
}

static int record_copy(AllocationRecord *to, const AllocationRecord *from) {
        _cleanup_free_ char *text = NULL;
        int r;

        r = allocation_record_format(from, &text);
        if (r < 0)
                return r;
        return allocation_record_parse(text, strlen(text), to);
}

int fence_start(Allocator *a, const AllocationRecord *rec, const char *claim_key,
                const char *claim_value, const char *why) {
        Fence *f = fence_new(a, rec->machine_id, rec->slot_id);

        if (!f)
                return -ENOMEM;
        /* rec's own times, not the round trip's: record_is_ours formats them alike. */
        if (record_copy(&f->rec, rec) < 0 || !(f->claim_key = strdup(claim_key)) ||
            !(f->claim_value = strdup(claim_value)) ||
            !(f->fence_key = fleet_key_fence(a->config->prefix, rec->machine_id, rec->slot_id)) ||
            !(f->record_key = allocator_record_key(a, rec->fleet_id, rec->allocation_id))) {
                fence_free(f);
                return -ENOMEM;
        }
        f->rec.requested = rec->requested;
        f->rec.claimed = rec->claimed;
        a->metrics.fences++;
        log_info("Allocation %s: %s of slot %" PRIu32 " of %s; fencing the slot",
                 rec->allocation_id, why, rec->slot_id, rec->machine_id);
        fence_grant(f);
        return 0;
}

void fence_seen(Allocator *a, const char *machine_id, uint32_t slot_id) {
        Fence *f;

        for (Fence *g = a->fences; g; g = g->fences_next)
                if (g->slot_id == slot_id && streq(g->machine_id, machine_id))
                        return; /* ours, or seen already */
        f = fence_new(a, machine_id, slot_id);
        if (f)
                fence_hold(f, FENCE_SEEN_HOLD);
}

size_t fence_count(const Allocator *a) {
        size_t n = 0;

        for (const Fence *f = a->fences; f; f = f->fences_next)
                n++;
        return n;
}

size_t fence_unresolved(const Allocator *a) {
        size_t n = 0;

        for (const Fence *f = a->fences; f; f = f->fences_next)
                n += !f->held;
        return n;
}

void fence_done(Allocator *a) {
        while (a->fences)
                fence_free(a->fences);
}
