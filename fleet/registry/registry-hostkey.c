/* SPDX-License-Identifier: MIT */
/* One key of hosts/<machineID>/: the work on its newest version, one at a time, retried with
 * back-off while it fails for passing reasons; and the deallocations (SPEC §13 step 4):
 * Deallocate through slotd, then delete the key if it is unchanged. Doing a version twice is
 * harmless: slotd's Deallocate of an allocation it does not have is NoSuchAllocation, its
 * Allocate of the UUID a slot already has returns that slot. */
#include <inttypes.h>

#include "log.h"
#include "registry-hostkey.h"

static void work_start(RegHostKey *k);
static void dealloc_start(RegHostKey *k);

RegHostKey *reg_host_key_free(RegHostKey *k) {
        if (!k)
                return NULL;
        k->call = sd_bus_slot_unref(k->call);
        etcd_request_cancel(k->req);
        claim_txn_cancel(k);
        claim_prefetch_drop(k);
        k->retry = sd_event_source_disable_unref(k->retry);
        claim_doc_done(&k->claim);
        free(k->key);
        free(k->allocation_id);
        free(k->value);
        free(k->refusal);
        free(k);
        return NULL;
}

static bool work_due(const RegHostKey *k) {
        return !k->busy && k->mod_revision != 0 && k->done_revision != k->mod_revision;
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        RegHostKey *k = userdata;

        if (k->busy && k->undo)
                claim_undo(k);
        else if (work_due(k))
                work_start(k);
        return 0;
}

void host_key_retry_later(RegHostKey *k) {
        usec_t delay = backoff_next(&k->backoff);
        int r;

        if (k->retry) {
                r = sd_event_source_set_time_relative(k->retry, delay);
                if (r >= 0)
                        r = sd_event_source_set_enabled(k->retry, SD_EVENT_ONESHOT);
        } else
                r = sd_event_add_time_relative(k->registry->event, &k->retry, CLOCK_MONOTONIC,
                                               delay, USEC_PER_MSEC, on_retry, k);
        if (r < 0)
                log_error_errno(r, "Failed to schedule another try of %s: %m", k->key);
}

static bool retry_armed(const RegHostKey *k) {
        int enabled = SD_EVENT_OFF;

        if (k->retry)
                (void) sd_event_source_get_enabled(k->retry, &enabled);
        return enabled != SD_EVENT_OFF;
}

static void work_start(RegHostKey *k) {
        if (k->retry)
                (void) sd_event_source_set_enabled(k->retry, SD_EVENT_OFF);
        k->busy = true;
        k->undo = false;
        k->working_revision = k->mod_revision;
        k->attempts = 0;
        if (k->kind == REG_CLAIM)
                claim_start(k);
        else if (k->kind == REG_SCALE)
                scale_start(k);
        else
                dealloc_start(k);
}

void host_key_work_done(RegHostKey *k, WorkOutcome outcome) {
        k->busy = false;
        k->undo = false;
        k->call = sd_bus_slot_unref(k->call);
        claim_prefetch_drop(k);
        if (outcome == WORK_DONE) {
                k->done_revision = k->working_revision;
                backoff_reset(&k->backoff);
        }
        if (k->mod_revision == 0) {
                registry_host_forget(k); /* deleted meanwhile: nothing more to do */
                return;
        }
        if (k->mod_revision != k->working_revision)
                work_start(k); /* a newer version came meanwhile */
        else if (outcome == WORK_RETRY)
                host_key_retry_later(k);
}

WorkOutcome host_key_unreached(const RegHostKey *k) {
        return k->registry->slotd_up ? WORK_RETRY : WORK_WAIT;
}

void reg_host_key_update(RegHostKey *k, int64_t mod_revision, const char *value, size_t len) {
        if (mod_revision != 0 && mod_revision == k->mod_revision) {
                /* read again (slotd or etcd came back): done unless it is not */
                if (work_due(k) && !retry_armed(k))
                        work_start(k);
                return;
        }
        free(k->value);
        k->value = mod_revision != 0 ? strndup(value, len) : NULL;
        k->mod_revision = k->value || mod_revision == 0 ? mod_revision : 0;
        if (k->busy)
                return; /* looked at once the current work is over */
        if (k->mod_revision == 0) {
                registry_host_forget(k);
                return;
        }
        work_start(k);
}

bool slotd_error_is_refusal(const sd_bus_error *e) {
        return strncmp(e->name, SLOTD_ERROR_PREFIX, strlen(SLOTD_ERROR_PREFIX)) == 0 ||
               sd_bus_error_has_names(e, SD_BUS_ERROR_ACCESS_DENIED, SD_BUS_ERROR_INVALID_ARGS,
                                      SD_BUS_ERROR_UNKNOWN_OBJECT, SD_BUS_ERROR_UNKNOWN_METHOD);
}

/* ---- the key deleted if unchanged ---- */

static void on_deleted(Etcd *e, const EtcdResponse *resp, void *userdata) {
        RegHostKey *k = userdata;

        k->txn = NULL;
        if (resp->error < 0) {
                log_debug("etcd: deleting %s failed: %s", k->key, resp->message);
                host_key_work_done(k, WORK_RETRY);
                return;
        }
        host_key_work_done(k, WORK_DONE);
}

void host_key_delete(RegHostKey *k) {
        EtcdCompare cmp = {
                .key = k->key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                .number = k->working_revision,
        };
        EtcdOp op = { .type = ETCD_OP_DELETE, .key = k->key };

        if (etcd_batch_txn(k->registry->batch, &cmp, 1, &op, 1, NULL, 0, on_deleted, k,
                           &k->txn) < 0)
                host_key_work_done(k, WORK_RETRY);
}

/* ---- the slot's document with the key's last transaction ---- */

/* A transaction that carried the slot's document and did not apply did not put it either: the
 * flush does. */
void host_key_doc_lost(RegHostKey *k) {
        RegSlot *s = registry_slot(k->registry, k->slot_id);

        if (!s)
                return;
        registry_slot_sending(k->registry, s, NULL);
        registry_slot_dirty(k->registry, s);
}

/* The slot's document in the key's transaction: put, or, where a flush sent this very one
 * already (slotd's signals came before its answer), compared: that flush may still be in
 * flight and may fail, and what the transaction tells etcd must not be seen before the slot's
 * document shows it (SPEC §13). A failed compare is a transaction that did not apply. */
void host_key_add_doc(RegHostKey *k, RegSlot *s, const char *key, const char *value,
                      EtcdCompare *cmp, size_t *n_cmp, EtcdOp *ops, size_t *n_ops) {
        Registry *r = k->registry;

        if (registry_slot_sent(r, s, key, value))
                cmp[(*n_cmp)++] = (EtcdCompare){ .key = key, .target = ETCD_TARGET_VALUE,
                                                 .result = ETCD_EQUAL, .value = value };
        else {
                ops[(*n_ops)++] = (EtcdOp){ .type = ETCD_OP_PUT, .key = key, .value = value,
                                            .lease = r->lease_id };
                k->carries_doc = true;
        }
}

static void on_deleted_with_doc(Etcd *e, const EtcdResponse *resp, void *userdata) {
        RegHostKey *k = userdata;

        k->txn = NULL;
        if (k->carries_doc && (resp->error < 0 || !resp->succeeded))
                host_key_doc_lost(k);
        k->carries_doc = false;
        if (resp->error < 0) {
                log_debug("etcd: deleting %s failed: %s", k->key, resp->message);
                host_key_work_done(k, WORK_RETRY);
                return;
        }
        /* Not applied: the key changed (its new version is worked on next), or a flush of the
         * document failed meanwhile (it is dirty again): deleted again, with it. */
        if (!resp->succeeded && resp->n_responses > 0 && resp->responses[0].n_kvs == 1 &&
            resp->responses[0].kvs[0].mod_revision == k->working_revision) {
                if (++k->attempts < RECORD_ATTEMPTS_MAX)
                        host_key_delete_with_doc(k);
                else
                        host_key_work_done(k, WORK_RETRY);
                return;
        }
        host_key_work_done(k, WORK_DONE);
}

void host_key_delete_with_doc(RegHostKey *k) {
        _cleanup_free_ char *slot_key = NULL, *slot_value = NULL;
        Registry *r = k->registry;
        RegSlot *s = registry_slot(r, k->slot_id);
        EtcdCompare cmp[2] = { {
                .key = k->key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                .number = k->working_revision,
        } };
        EtcdOp ops[2], fail = { .type = ETCD_OP_RANGE, .key = k->key };
        size_t n_cmp = 1, n = 0;

        k->carries_doc = false;
        if (s && registry_lease_ready(r) &&
            registry_slot_document(r, s, &slot_key, &slot_value) >= 0)
                host_key_add_doc(k, s, slot_key, slot_value, cmp, &n_cmp, ops, &n);
        ops[n++] = (EtcdOp){ .type = ETCD_OP_DELETE, .key = k->key };
        if (etcd_batch_txn(r->batch, cmp, n_cmp, ops, n, &fail, 1, on_deleted_with_doc, k,
                           &k->txn) < 0) {
                k->carries_doc = false; /* nothing sent, nothing recorded */
                host_key_work_done(k, WORK_RETRY);
                return;
        }
        if (k->carries_doc)
                registry_slot_sending(r, s, streq_ptr(s->key, slot_key) ? slot_value : NULL);
}

/* ---- deallocations ---- */

static int on_deallocated(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        RegHostKey *k = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        k->call = sd_bus_slot_unref(k->call);
        if (e && !sd_bus_error_has_name(e, SLOTD_ERROR_PREFIX "NoSuchAllocation")) {
                log_warning("slotd did not deallocate %s (%s): %s; trying again",
                            k->allocation_id, k->key, e->message ?: e->name);
                host_key_work_done(k, slotd_error_is_refusal(e) ? WORK_RETRY
                                                                : host_key_unreached(k));
                return 0;
        }
        log_info("Allocation %s deallocated%s", k->allocation_id,
                 e ? " (slotd had none)" : "");
        host_key_delete(k);
        return 0;
}

static void dealloc_start(RegHostKey *k) {
        Registry *r = k->registry;

        if (!r->synced) {
                host_key_work_done(k, WORK_WAIT);
                return;
        }
        if (registry_bus_deallocate(r, k->allocation_id, on_deallocated, k, &k->call) < 0)
                host_key_work_done(k, host_key_unreached(k));
}
