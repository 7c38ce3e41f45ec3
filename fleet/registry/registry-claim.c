/* SPDX-License-Identifier: MIT */
/* A claim (SPEC §13 step 2): the slot allocated through slotd's AllocateWithOptions (payload
 * included), then one transaction, if the claim is unchanged, marks the record fulfilled,
 * puts the slot's document and deletes the claim. A claim that changed meanwhile has what it
 * made deallocated; a claim slotd refuses is deleted and the machine added to the record's
 * excluded, so that the allocators place it elsewhere at once. The reads of the record and
 * the confirmations go in the registry's batch (etcd.h's group commit), with the deletions
 * of done keys (registry-hostkey.c): each is a transaction of its own, nested in a request
 * that carries whatever else was ready. A batch's request that fails fails them all alike: a
 * put under a lease etcd no longer has fails the batch, and each of its keys is tried again. */
#include <inttypes.h>

#include "log.h"
#include "registry-hostkey.h"
#include "registry-state.h"

/* A transaction whose compares failed on the record alone (an allocator rewrote it) is made
 * again on the record read anew, RECORD_ATTEMPTS_MAX times (registry-hostkey.h). */

static void claim_refuse(RegHostKey *k, const char *why);
static void confirm_read(RegHostKey *k);

static int claim_record_key(RegHostKey *k, char **ret) {
        if (!fleet_key_component_valid(k->claim.fleet_id) ||
            !fleet_key_component_valid(k->claim.allocation_id))
                return -EINVAL;
        *ret = fleet_key_allocation(k->registry->prefix, k->claim.fleet_id,
                                    k->claim.allocation_id);
        return *ret ? 0 : -ENOMEM;
}

static int read_record(RegHostKey *k, etcd_callback_t cb) {
        _cleanup_free_ char *key = NULL;
        int r;

        r = claim_record_key(k, &key);
        if (r >= 0)
                r = etcd_batch_range(k->registry->batch, key, NULL, 0, cb, k, &k->txn);
        return r;
}

/* The transaction's failure branch reads the claim: changed, or only the record? */
static bool claim_unchanged(const RegHostKey *k, const EtcdResponse *resp) {
        return resp->n_responses > 0 && resp->responses[0].n_kvs == 1 &&
               resp->responses[0].kvs[0].mod_revision == k->working_revision;
}

/* ---- undo ---- */

static int on_undone(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        RegHostKey *k = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        k->call = sd_bus_slot_unref(k->call);
        if (e && !sd_bus_error_has_name(e, SLOTD_ERROR_PREFIX "NoSuchAllocation")) {
                log_warning("slotd did not deallocate %s, whose claim changed: %s; trying again",
                            k->claim.allocation_id, e->message ?: e->name);
                host_key_retry_later(k); /* the undo again, not the claim */
                return 0;
        }
        host_key_delete(k); /* if it is unchanged: a claim without its record blocks the slot */
        return 0;
}

void claim_undo(RegHostKey *k) {
        if (!k->undo)
                log_info("The claim of allocation %s on slot %" PRIu32 " changed or lost its "
                         "record while slotd allocated it: deallocating it",
                         k->claim.allocation_id, k->slot_id);
        k->undo = true;
        if (registry_bus_deallocate(k->registry, k->claim.allocation_id, on_undone, k,
                                    &k->call) < 0)
                host_key_retry_later(k);
}

/* ---- confirm ---- */

void claim_txn_cancel(RegHostKey *k) {
        etcd_batch_txn_cancel(k->txn);
        k->txn = NULL;
        if (k->carries_doc)
                host_key_doc_lost(k); /* sent or not, it may not have applied */
        k->carries_doc = false;
}

static void on_confirmed(Etcd *e, const EtcdResponse *resp, void *userdata) {
        RegHostKey *k = userdata;

        k->txn = NULL;
        if (resp->error < 0 || !resp->succeeded)
                host_key_doc_lost(k);
        k->carries_doc = false;
        if (resp->error < 0) {
                log_warning("etcd: confirming allocation %s failed: %s; trying again",
                            k->claim.allocation_id, resp->message);
                host_key_work_done(k, WORK_RETRY);
        } else if (resp->succeeded) {
                log_info("Allocation %s fulfilled on slot %" PRIu32 " (claim revision %" PRId64
                         ")", k->claim.allocation_id, k->slot_id, k->working_revision);
                host_key_work_done(k, WORK_DONE);
        } else if (claim_unchanged(k, resp) && ++k->attempts < RECORD_ATTEMPTS_MAX)
                confirm_read(k); /* the record changed, not the claim */
        else if (claim_unchanged(k, resp))
                host_key_work_done(k, WORK_RETRY);
        else
                claim_undo(k);
}

/* The ops of the confirmation: the record fulfilled, the slot's document, the claim deleted. */
static int confirm_send(RegHostKey *k, const char *record_key, AllocationRecord *rec) {
        Registry *r = k->registry;
        _cleanup_free_ char *value = NULL, *slot_key = NULL, *slot_value = NULL;
        RegSlot *s = registry_slot(r, k->slot_id);
        EtcdCompare cmp[3] = {
                { .key = k->key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = k->working_revision },
                { .key = record_key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = k->record_revision },
        };
        EtcdOp ops[3], fail = { .type = ETCD_OP_RANGE, .key = k->key };
        size_t n_cmp = 2, n = 0;
        int q;

        if (!s)
                return -ENOENT;
        q = reg_record_fulfil(rec, &r->machine, s, now_usec(CLOCK_REALTIME));
        if (q >= 0)
                q = allocation_record_format(rec, &value);
        if (q < 0)
                return q;
        ops[n++] = (EtcdOp){ .type = ETCD_OP_PUT, .key = record_key, .value = value };
        k->carries_doc = false;
        if (registry_lease_ready(r) && registry_slot_document(r, s, &slot_key, &slot_value) >= 0)
                host_key_add_doc(k, s, slot_key, slot_value, cmp, &n_cmp, ops, &n);
        ops[n++] = (EtcdOp){ .type = ETCD_OP_DELETE, .key = k->key };
        q = etcd_batch_txn(r->batch, cmp, n_cmp, ops, n, &fail, 1, on_confirmed, k, &k->txn);
        if (q < 0) {
                k->carries_doc = false; /* nothing sent, nothing recorded */
                return q;
        }
        if (k->carries_doc)
                registry_slot_sending(r, s, streq_ptr(s->key, slot_key) ? slot_value : NULL);
        return 0;
}

/* The record read (kv NULL: none), once slotd allocated the claim: the confirmation. */
static void record_found(RegHostKey *k, int error, const EtcdKv *kv) {
        _cleanup_(allocation_record_done) AllocationRecord rec = {};
        _cleanup_free_ char *record_key = NULL;

        if (error < 0) {
                host_key_work_done(k, WORK_RETRY);
                return;
        }
        if (!kv || allocation_record_parse(kv->value, kv->value_len, &rec) < 0) {
                claim_undo(k); /* the record is gone (deallocated): so is the claim's ground */
                return;
        }
        if (reg_record_fulfilled_here(&rec, k->registry->machine.machine_id, k->slot_id)) {
                host_key_delete(k);
                return;
        }
        k->record_revision = kv->mod_revision;
        if (claim_record_key(k, &record_key) < 0 || confirm_send(k, record_key, &rec) < 0)
                host_key_work_done(k, WORK_RETRY);
}

static void on_record_read(Etcd *e, const EtcdResponse *resp, void *userdata) {
        RegHostKey *k = userdata;

        k->txn = NULL;
        record_found(k, resp->error, resp->error >= 0 && resp->n_kvs > 0 ? &resp->kvs[0] : NULL);
}

static void confirm_read(RegHostKey *k) {
        if (read_record(k, on_record_read) < 0)
                host_key_work_done(k, WORK_RETRY);
}

/* ---- the record read while slotd allocates ---- */

void claim_prefetch_drop(RegHostKey *k) {
        etcd_batch_txn_cancel(k->prefetch);
        k->prefetch = NULL;
        k->prefetch_asked = k->prefetch_here = k->allocated = false;
        k->prefetch_error = 0;
        k->prefetched.value = mfree(k->prefetched.value);
}

/* slotd allocated, and the read is here: the confirmation on what it found (a read that
 * failed is made again now). */
static void prefetch_use(RegHostKey *k) {
        EtcdKv kv = k->prefetched;
        int error = k->prefetch_error;

        k->prefetched = (EtcdKv) {};
        claim_prefetch_drop(k);
        if (error < 0)
                confirm_read(k);
        else
                record_found(k, 0, kv.value ? &kv : NULL);
        free(kv.value);
}

static void on_prefetched(Etcd *e, const EtcdResponse *resp, void *userdata) {
        RegHostKey *k = userdata;

        k->prefetch = NULL;
        k->prefetch_here = true;
        k->prefetch_error = resp->error;
        if (resp->error >= 0 && resp->n_kvs > 0) {
                const EtcdKv *kv = &resp->kvs[0];

                k->prefetched.value = malloc(kv->value_len + 1);
                if (k->prefetched.value) {
                        memcpy(k->prefetched.value, kv->value, kv->value_len + 1);
                        k->prefetched.value_len = kv->value_len;
                        k->prefetched.mod_revision = kv->mod_revision;
                } else
                        k->prefetch_error = -ENOMEM;
        }
        if (k->allocated)
                prefetch_use(k);
}

static void prefetch_start(RegHostKey *k) {
        _cleanup_free_ char *key = NULL;

        claim_prefetch_drop(k);
        if (claim_record_key(k, &key) >= 0 &&
            etcd_batch_range(k->registry->batch, key, NULL, 0, on_prefetched, k,
                             &k->prefetch) >= 0)
                k->prefetch_asked = true;
}

/* slotd allocated the claim: the confirmation, on the record read meanwhile if it is here. */
static void claim_allocated(RegHostKey *k) {
        if (k->prefetch_here)
                prefetch_use(k);
        else if (k->prefetch_asked)
                k->allocated = true; /* on_prefetched goes on */
        else
                confirm_read(k);
}

/* ---- allocate ---- */

static int on_allocated(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        RegHostKey *k = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        k->call = sd_bus_slot_unref(k->call);
        if (e && slotd_error_is_refusal(e)) {
                claim_refuse(k, e->message ?: e->name);
                return 0;
        }
        if (e) {
                log_warning("Allocating %s on slot %" PRIu32 " got no answer from slotd: %s",
                            k->claim.allocation_id, k->slot_id, e->message ?: e->name);
                host_key_work_done(k, host_key_unreached(k));
                return 0;
        }
        claim_allocated(k);
        return 0;
}

void claim_start(RegHostKey *k) {
        Registry *r = k->registry;
        RegSlot *s = registry_slot(r, k->slot_id);
        char why[256];

        claim_doc_done(&k->claim);
        if (claim_doc_parse(k->value, strlen(k->value), &k->claim) < 0) {
                claim_refuse(k, "not a claim document");
                return;
        }
        if (!r->synced) {
                host_key_work_done(k, WORK_WAIT);
                return;
        }
        if (!s || !s->known || !streq_ptr(s->fleet, k->claim.fleet_id)) {
                snprintf(why, sizeof(why), s && s->known ? "slot %" PRIu32 " is of fleet %s"
                                                         : "no slot %" PRIu32 "%s",
                         k->slot_id, s && s->fleet ? s->fleet : " on this machine");
                claim_refuse(k, why);
                return;
        }
        if (registry_bus_allocate(r, k->slot_id, &k->claim, on_allocated, k, &k->call) < 0) {
                host_key_work_done(k, host_key_unreached(k));
                return;
        }
        prefetch_start(k); /* beside slotd's work: the confirmation waits for neither twice */
}

/* ---- refuse ---- */

static void on_refused(Etcd *e, const EtcdResponse *resp, void *userdata) {
        RegHostKey *k = userdata;

        k->req = NULL;
        if (resp->error < 0)
                host_key_work_done(k, WORK_RETRY);
        else if (!resp->succeeded && claim_unchanged(k, resp) &&
                 ++k->attempts < RECORD_ATTEMPTS_MAX)
                claim_refuse(k, NULL);
        else
                host_key_work_done(k, resp->succeeded || !claim_unchanged(k, resp) ? WORK_DONE
                                                                                  : WORK_RETRY);
}

static int refuse_send(RegHostKey *k, const EtcdResponse *resp) {
        _cleanup_(allocation_record_done) AllocationRecord rec = {};
        _cleanup_free_ char *record_key = NULL, *value = NULL;
        EtcdCompare cmp[2] = {
                { .key = k->key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = k->working_revision },
        };
        EtcdOp ops[2] = { { .type = ETCD_OP_DELETE, .key = k->key } };
        EtcdOp fail = { .type = ETCD_OP_RANGE, .key = k->key };
        size_t n = 1; /* as many compares as ops */
        int q;

        if (resp && resp->n_kvs == 1 &&
            allocation_record_parse(resp->kvs[0].value, resp->kvs[0].value_len, &rec) >= 0) {
                q = claim_record_key(k, &record_key);
                if (q >= 0)
                        q = reg_record_exclude(&rec, k->registry->machine.machine_id);
                if (q >= 0 && k->refusal)
                        q = free_and_strdup(&rec.error, k->refusal);
                if (q >= 0)
                        q = allocation_record_format(&rec, &value);
                if (q < 0)
                        return q;
                cmp[1] = (EtcdCompare){ .key = record_key, .target = ETCD_TARGET_MOD,
                                        .result = ETCD_EQUAL, .number = resp->kvs[0].mod_revision };
                ops[n++] = (EtcdOp){ .type = ETCD_OP_PUT, .key = record_key, .value = value };
        }
        return etcd_txn(k->registry->etcd, cmp, n, ops, n, &fail, 1, on_refused, k, &k->req);
}

static void on_refuse_read(Etcd *e, const EtcdResponse *resp, void *userdata) {
        RegHostKey *k = userdata;

        k->txn = NULL;
        if (resp->error < 0 || refuse_send(k, resp) < 0)
                host_key_work_done(k, WORK_RETRY);
}

/* why NULL: another attempt after the record changed under the last one. */
static void claim_refuse(RegHostKey *k, const char *why) {
        if (why) {
                log_warning("Refusing the claim %s (allocation %s): %s", k->key,
                            strempty(k->claim.allocation_id), why);
                /* kept in the record: GET shows it once no host would take the allocation */
                if (free_and_strdup(&k->refusal, why) < 0)
                        k->refusal = mfree(k->refusal);
        }
        if (!k->claim.allocation_id || read_record(k, on_refuse_read) < 0) {
                /* not a claim at all: deleted, with no record to tell */
                if (refuse_send(k, NULL) < 0)
                        host_key_work_done(k, WORK_RETRY);
        }
}
