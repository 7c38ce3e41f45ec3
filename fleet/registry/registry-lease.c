/* SPDX-License-Identifier: MIT */
/* The machine's lease and its documents in etcd. The lease is granted once slotd was read,
 * kept alive every third of its TTL, and granted anew (everything put again under the new
 * one, then the old one revoked) whenever slotd was read anew or etcd failed us: a write
 * whose outcome is unknown is then written again, and keys of slots that are no more go with
 * the old lease. Dirty documents go in one transaction per flush (REGISTRY_TXN_OPS_MAX at
 * most), one transaction in flight at a time: what changes meanwhile waits for the next. The
 * flush goes in the registry's batch, as the confirmations (registry-claim.c) do, so that
 * etcd applies the slot documents of both in the order they were made: a confirmation's
 * document queued before a flush's newer one is never applied after it. */
#include <inttypes.h>

#include "log.h"
#include "registry.h"
#include "strv.h"

/* From the first change to the transaction: the changes of one burst of slotd's signals
 * (one loop iteration each) gather in it. */
#define FLUSH_DELAY_USEC (1 * USEC_PER_MSEC)
/* A clean stop waits this long for the revocation of the lease. */
#define STOP_TIMEOUT_USEC (1 * USEC_PER_SEC)

static void lease_grant(Registry *r);
static void flush_send(Registry *r);
static int on_flush_timer(sd_event_source *s, uint64_t usec, void *userdata);

bool registry_lease_ready(const Registry *r) {
        return r->lease_state == LEASE_READY;
}

static int timer_set(Registry *r, sd_event_source **s, usec_t delay, usec_t accuracy,
                     sd_event_time_handler_t cb) {
        int k;

        if (*s) {
                k = sd_event_source_set_time_relative(*s, delay);
                if (k >= 0)
                        k = sd_event_source_set_enabled(*s, SD_EVENT_ONESHOT);
        } else
                k = sd_event_add_time_relative(r->event, s, CLOCK_MONOTONIC, delay, accuracy, cb,
                                               r);
        if (k < 0)
                log_error_errno(k, "Failed to arm a timer of the registry: %m");
        return k;
}

static void etcd_trouble(Registry *r, const char *what, const EtcdResponse *resp) {
        if (!r->etcd_trouble)
                log_warning("etcd: %s failed: %s (%s); trying again with back-off, slotd's "
                            "sessions are not touched", what, resp->message,
                            strerror(-resp->error));
        else
                log_debug("etcd: %s failed: %s", what, resp->message);
        r->etcd_trouble = true;
}

static void revoke_done(Etcd *e, const EtcdResponse *resp, void *userdata) {
        if (resp->error < 0)
                log_debug("etcd: revoking an old lease failed: %s (it expires by itself)",
                          resp->message);
}

static void lease_revoke(Registry *r, int64_t lease_id) {
        if (lease_id != 0 && etcd_lease_revoke(r->etcd, lease_id, revoke_done, r, NULL) < 0)
                log_debug("etcd: could not revoke lease %" PRIx64 "; it expires by itself",
                          (uint64_t) lease_id);
}

static int on_lease_timer(sd_event_source *s, uint64_t usec, void *userdata);

static void lease_schedule(Registry *r, usec_t delay) {
        (void) timer_set(r, &r->lease_timer, delay, USEC_PER_MSEC, on_lease_timer);
}

/* The lease is gone (expired, unknown to etcd) or a write's outcome is unknown: everything
 * is put again under a new lease. */
static void lease_lost(Registry *r, const char *why) {
        log_warning("etcd: the registration of machine %s is in doubt (%s); registering again",
                    r->machine.machine_id, why);
        if (r->lease_state == LEASE_READY) {
                lease_revoke(r, r->old_lease_id);
                r->old_lease_id = r->lease_id;
        }
        r->lease_state = LEASE_NONE;
        r->lease_id = 0;
        etcd_request_cancel(r->keepalive_req);
        r->keepalive_req = NULL;
        lease_schedule(r, backoff_next(&r->lease_backoff));
}

static void on_grant(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Registry *r = userdata;

        r->grant_req = NULL;
        if (resp->error < 0 || resp->lease_id == 0) {
                etcd_trouble(r, "granting the machine's lease", resp);
                if (r->lease_state != LEASE_READY)
                        lease_schedule(r, backoff_next(&r->lease_backoff));
                return;
        }
        if (!r->lease_wanted) {
                lease_revoke(r, resp->lease_id);
                return;
        }
        if (r->lease_state == LEASE_READY) {
                lease_revoke(r, r->old_lease_id); /* a third lease: the oldest goes now */
                r->old_lease_id = r->lease_id;
        }
        if (r->etcd_trouble)
                log_info("etcd answers again");
        r->etcd_trouble = false;
        r->lease_id = resp->lease_id;
        r->lease_state = LEASE_READY;
        r->lease_renewed = now_usec(CLOCK_MONOTONIC);
        if (r->registered_at == 0)
                r->registered_at = now_usec(CLOCK_REALTIME);
        backoff_reset(&r->lease_backoff);
        log_info("etcd: machine %s registered under lease %" PRIx64 " (TTL %" PRId64 " s); "
                 "putting its documents", r->machine.machine_id, (uint64_t) r->lease_id,
                 resp->ttl);
        registry_all_dirty(r);
        lease_schedule(r, r->lease_ttl / 3);
}

static void lease_grant(Registry *r) {
        int k;

        if (!r->lease_wanted || r->grant_req)
                return;
        k = etcd_lease_grant(r->etcd, (int64_t) (r->lease_ttl / USEC_PER_SEC), on_grant, r,
                             &r->grant_req);
        if (k < 0) {
                log_warning_errno(k, "etcd: failed to ask for a lease: %m");
                lease_schedule(r, backoff_next(&r->lease_backoff));
        }
}

static void on_keepalive(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Registry *r = userdata;

        r->keepalive_req = NULL;
        if (resp->error < 0) {
                etcd_trouble(r, "keeping the lease alive", resp);
                if (now_usec(CLOCK_MONOTONIC) - r->lease_renewed >= r->lease_ttl)
                        lease_lost(r, "no keepalive answered within the lease's TTL");
                return;
        }
        if (resp->lease_id != 0 && resp->lease_id != r->lease_id)
                return; /* for a lease replaced meanwhile */
        if (resp->ttl <= 0) {
                lease_lost(r, "the lease expired");
                return;
        }
        if (r->etcd_trouble)
                log_info("etcd answers again; the lease was kept");
        r->etcd_trouble = false;
        r->lease_renewed = now_usec(CLOCK_MONOTONIC);
}

static int on_lease_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Registry *r = userdata;

        if (r->lease_state != LEASE_READY) {
                lease_grant(r);
                return 0;
        }
        lease_schedule(r, r->lease_ttl / 3);
        if (r->keepalive_req) {
                /* the last one is still unanswered (its own timeout ends it) */
                if (now_usec(CLOCK_MONOTONIC) - r->lease_renewed >= r->lease_ttl)
                        lease_lost(r, "no keepalive answered within the lease's TTL");
                return 0;
        }
        if (etcd_lease_keepalive(r->etcd, r->lease_id, on_keepalive, r, &r->keepalive_req) < 0)
                log_warning("etcd: failed to send a keepalive");
        return 0;
}

/* ---- the flush ---- */

static void flush_restore(Registry *r) {
        for (size_t i = 0; i < r->n_flush_ids; i++) {
                RegSlot *s = registry_slot(r, r->flush_ids[i]);

                if (s)
                        registry_slot_sending(r, s, NULL); /* its document goes anew */
                if (s && s->known && !s->dirty) {
                        s->dirty = true;
                        s->dirty_next = r->dirty;
                        r->dirty = s;
                }
        }
        STRV_FOREACH(k, r->flush_stale)
                (void) strv_extend(&r->stale_keys, *k);
        r->machine_dirty |= r->flush_machine;
}

static void flush_clear(Registry *r) {
        r->n_flush_ids = 0;
        r->flush_stale = strv_free(r->flush_stale);
        r->flush_machine = false;
}

static bool flush_pending(const Registry *r) {
        return r->dirty || r->machine_dirty || strv_length(r->stale_keys) > 0;
}

static void on_flush_done(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Registry *r = userdata;
        usec_t took = now_usec(CLOCK_MONOTONIC) - r->flush_started;

        r->flush_txn = NULL;
        if (resp->error < 0) {
                flush_restore(r);
                flush_clear(r);
                etcd_trouble(r, "putting the documents", resp);
                if (r->lease_state == LEASE_READY)
                        lease_lost(r, strstr(resp->message, "lease not found")
                                              ? "etcd no longer knows the lease"
                                              : "a write's outcome is unknown");
                return;
        }
        log_debug("etcd: %zu slot documents%s put in %" PRIu64 ".%03" PRIu64 " ms (revision %" PRId64
                  ")", r->n_flush_ids, r->flush_machine ? " and the machine's" : "",
                  took / USEC_PER_MSEC, took % USEC_PER_MSEC, resp->revision);
        flush_clear(r);
        if (flush_pending(r))
                flush_send(r); /* what changed meanwhile: batched already */
        else if (r->old_lease_id != 0) {
                /* everything is under the new lease: the old one takes only stale keys away */
                lease_revoke(r, r->old_lease_id);
                r->old_lease_id = 0;
        }
}

typedef struct FlushOps {
        EtcdOp ops[REGISTRY_TXN_OPS_MAX];
        char *texts[2 * REGISTRY_TXN_OPS_MAX];
        size_t n_ops, n_texts;
} FlushOps;

static void flush_ops_done(FlushOps *f) {
        for (size_t i = 0; i < f->n_texts; i++)
                free(f->texts[i]);
}

static void flush_add_put(Registry *r, FlushOps *f, char *key, char *value) {
        f->texts[f->n_texts++] = key;
        f->texts[f->n_texts++] = value;
        f->ops[f->n_ops++] = (EtcdOp){
                .type = ETCD_OP_PUT, .key = key, .value = value, .lease = r->lease_id };
}

/* The next slot of the dirty list into the transaction. */
static void flush_add_slot(Registry *r, FlushOps *f) {
        RegSlot *s = r->dirty;
        char *key = NULL, *value = NULL;
        int k;

        r->dirty = s->dirty_next;
        s->dirty = false;
        s->dirty_next = NULL;
        k = registry_slot_document(r, s, &key, &value);
        if (k < 0) {
                log_warning_errno(k, "Slot %" PRIu32 " of fleet '%s' has no document: %m",
                                  s->id, strempty(s->fleet));
                return;
        }
        if (registry_slot_sent(r, s, key, value)) {
                /* a confirmation sent it (or, if that fails, makes the slot dirty again) */
                free(key);
                free(value);
                return;
        }
        if (s->key && !streq(s->key, key) && strv_push(&r->stale_keys, s->key) >= 0)
                s->key = NULL;
        if (free_and_strdup(&s->key, key) < 0)
                log_oom();
        r->flush_ids[r->n_flush_ids++] = s->id;
        registry_slot_sending(r, s, value);
        flush_add_put(r, f, key, value);
}

static int flush_build(Registry *r, FlushOps *f) {
        char *key, *value;
        size_t n;
        int k;

        if (r->machine_dirty) {
                k = registry_machine_document(r, &key, &value);
                if (k < 0)
                        return log_error_errno(k, "Failed to make machine %s's document: %m",
                                               strempty(r->machine.machine_id));
                r->machine_dirty = false;
                r->flush_machine = true;
                flush_add_put(r, f, key, value);
        }
        n = strv_length(r->stale_keys);
        while (n > 0 && f->n_ops < REGISTRY_TXN_OPS_MAX) {
                key = r->stale_keys[--n];
                r->stale_keys[n] = NULL;
                if (strv_push(&r->flush_stale, key) < 0) {
                        free(key);
                        return log_oom();
                }
                f->ops[f->n_ops++] = (EtcdOp){ .type = ETCD_OP_DELETE, .key = key };
        }
        while (r->dirty && f->n_ops < REGISTRY_TXN_OPS_MAX)
                flush_add_slot(r, f);
        return 0;
}

static void flush_send(Registry *r) {
        _cleanup_(flush_ops_done) FlushOps f = {};
        int k;

        if (r->lease_state != LEASE_READY || r->flush_txn || !flush_pending(r))
                return;
        k = flush_build(r, &f);
        if (k >= 0 && f.n_ops == 0)
                return;
        if (k >= 0)
                k = etcd_batch_txn(r->batch, NULL, 0, f.ops, f.n_ops, NULL, 0, on_flush_done,
                                   r, &r->flush_txn);
        if (k < 0) {
                flush_restore(r);
                flush_clear(r);
                log_warning_errno(k, "etcd: failed to send the documents: %m; trying again");
                (void) timer_set(r, &r->flush_timer, backoff_next(&r->lease_backoff), 0,
                                 on_flush_timer);
                return;
        }
        r->flush_started = now_usec(CLOCK_MONOTONIC);
}

static int on_flush_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        flush_send(userdata);
        return 0;
}

void registry_schedule_flush(Registry *r) {
        int enabled = SD_EVENT_OFF;

        if (r->lease_state != LEASE_READY || r->flush_txn || !r->machine.machine_id)
                return;
        if (r->flush_timer)
                (void) sd_event_source_get_enabled(r->flush_timer, &enabled);
        if (enabled == SD_EVENT_OFF)
                (void) timer_set(r, &r->flush_timer, FLUSH_DELAY_USEC, 1, on_flush_timer);
}

/* ---- slotd's comings and goings ---- */

void registry_resync(Registry *r) {
        r->slotd_gone_timer = sd_event_source_disable_unref(r->slotd_gone_timer);
        if (!fleet_key_component_valid(r->machine.machine_id)) {
                log_error("slotd's MachineID '%s' cannot be a fleet key (1 to 128 characters of "
                          "A-Z a-z 0-9 . _ -; see machine.id): the machine stays out of the "
                          "fleet", r->machine.machine_id);
                return;
        }
        r->lease_wanted = true;
        backoff_reset(&r->lease_backoff);
        lease_grant(r); /* when ready: a new lease, the old one revoked once all is put */
        registry_host_start(r);
}

static int on_slotd_gone_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Registry *r = userdata;

        if (r->slotd_up || r->lease_state != LEASE_READY)
                return 0;
        log_warning("slotd has been away for the lease's TTL: machine %s leaves the fleet view "
                    "until slotd is back", r->machine.machine_id);
        r->lease_wanted = false;
        lease_revoke(r, r->old_lease_id);
        lease_revoke(r, r->lease_id);
        r->old_lease_id = r->lease_id = 0;
        r->lease_state = LEASE_NONE;
        etcd_request_cancel(r->keepalive_req);
        r->keepalive_req = NULL;
        r->lease_timer = sd_event_source_disable_unref(r->lease_timer);
        return 0;
}

void registry_slotd_gone(Registry *r) {
        (void) timer_set(r, &r->slotd_gone_timer, r->lease_ttl, USEC_PER_MSEC,
                         on_slotd_gone_timer);
}

/* Batches of the claims' work in flight at a time. */
#define REGISTRY_BATCHES_IN_FLIGHT 1

int registry_etcd_setup(Registry *r, const EtcdConfig *config) {
        int k = etcd_new(&r->etcd, r->event, config);

        if (k >= 0)
                k = etcd_batch_new(&r->batch, r->etcd, r->event, REGISTRY_BATCHES_IN_FLIGHT);
        return k;
}

void registry_etcd_done(Registry *r) {
        r->lease_timer = sd_event_source_disable_unref(r->lease_timer);
        r->flush_timer = sd_event_source_disable_unref(r->flush_timer);
        r->slotd_gone_timer = sd_event_source_disable_unref(r->slotd_gone_timer);
        r->stop_timer = sd_event_source_disable_unref(r->stop_timer);
        r->batch = etcd_batch_free(r->batch);
        r->etcd = etcd_free(r->etcd); /* cancels every request, no callback */
        r->grant_req = r->keepalive_req = NULL;
        r->flush_txn = NULL;
        flush_clear(r);
}

/* ---- a clean stop ---- */

static void stop_finish(Registry *r) {
        void (*done)(Registry *r) = r->stopped;

        r->stopped = NULL;
        if (done)
                done(r);
}

static void on_stop_revoked(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Registry *r = userdata;

        if (resp->error < 0)
                log_warning("etcd: revoking the lease failed: %s; it expires by itself",
                            resp->message);
        else
                log_info("etcd: lease revoked, machine %s left the fleet view",
                         strempty(r->machine.machine_id));
        stop_finish(r);
}

static int on_stop_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        log_warning("etcd: no answer to the revocation of the lease; it expires by itself");
        stop_finish(userdata);
        return 0;
}

int registry_stop(Registry *r, void (*done)(Registry *r)) {
        r->stopped = done;
        r->lease_wanted = false;
        r->lease_timer = sd_event_source_disable_unref(r->lease_timer);
        lease_revoke(r, r->old_lease_id);
        r->old_lease_id = 0;
        if (r->lease_state != LEASE_READY ||
            etcd_lease_revoke(r->etcd, r->lease_id, on_stop_revoked, r, NULL) < 0) {
                stop_finish(r);
                return 0;
        }
        r->lease_state = LEASE_NONE;
        return timer_set(r, &r->stop_timer, STOP_TIMEOUT_USEC, USEC_PER_MSEC, on_stop_timeout);
}
