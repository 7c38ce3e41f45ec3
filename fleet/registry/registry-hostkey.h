/* SPDX-License-Identifier: MIT */
#pragma once

/* What registry-hostkey.c (a key's work, deallocations) and registry-claim.c (claims)
 * share. */

#include "registry.h"

/* A transaction whose compares failed on something other than the key itself (a record, a
 * slot's document) is made again at most this often, then after the key's back-off. */
#define RECORD_ATTEMPTS_MAX 5

typedef enum WorkOutcome {
        WORK_DONE,  /* this version is done with */
        WORK_RETRY, /* a passing failure: again after the key's back-off */
        WORK_WAIT,  /* slotd is away: again when it was read anew (the host range does it) */
} WorkOutcome;

/* Ends the work on working_revision; k may be freed (the key was deleted meanwhile). */
void host_key_work_done(RegHostKey *k, WorkOutcome outcome);
/* Tries the current step again after the key's back-off, the key staying busy (an undo). */
void host_key_retry_later(RegHostKey *k);
/* A slotd call that did not reach slotd: WORK_RETRY while slotd is up, WORK_WAIT otherwise. */
WorkOutcome host_key_unreached(const RegHostKey *k);

/* slotd's answer refuses the request (the request's fault or the slot's state), as opposed
 * to a call that got no answer from slotd. */
bool slotd_error_is_refusal(const sd_bus_error *e);

/* Deletes the key if it is still at working_revision, then ends the work. */
void host_key_delete(RegHostKey *k);
/* The same, with the slot's document put (or compared, if a flush sent it already) in the
 * same transaction: whoever sees the key gone sees what its work made of the slot. */
void host_key_delete_with_doc(RegHostKey *k);
/* The slot's document as one op (put) or compare (sent already) of the key's transaction;
 * k->carries_doc says a put was added. */
void host_key_add_doc(RegHostKey *k, RegSlot *s, const char *key, const char *value,
                      EtcdCompare *cmp, size_t *n_cmp, EtcdOp *ops, size_t *n_ops);
/* A transaction that carried the slot's document did not apply: the next flush puts it. */
void host_key_doc_lost(RegHostKey *k);

void claim_start(RegHostKey *k);
/* registry-scale.c: the scaler's command, carried out through slotd's Start() or Stop(), then
 * deleted whatever came of it. */
void scale_start(RegHostKey *k);
/* The record read while slotd allocates, cancelled or forgotten (the work is over). */
void claim_prefetch_drop(RegHostKey *k);
/* The claim's transaction in the batch, cancelled; a slot document it carried goes with the
 * next flush instead. */
void claim_txn_cancel(RegHostKey *k);
/* Deallocates what a claim that changed had made; again after the back-off until slotd
 * answers. */
void claim_undo(RegHostKey *k);
