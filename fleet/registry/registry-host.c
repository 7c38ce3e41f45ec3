/* SPDX-License-Identifier: MIT */
/* This machine's claims, deallocations and the scaler's commands (SPEC §13, <prefix>/hosts/<machineID>/): read whole
 * (a range) whenever the registry (re)connects to etcd or slotd was read anew, then watched
 * from the range's revision on. Each key is a RegHostKey (registry-claim.c) that works on its
 * newest version; a key the range no longer has was deleted while nobody watched. */
#include <inttypes.h>

#include "log.h"
#include "registry.h"

static void host_schedule_retry(Registry *r);

static void host_list_unlink(Registry *r, RegHostKey *k) {
        if (k->prev)
                k->prev->next = k->next;
        else if (r->host_list == k)
                r->host_list = k->next;
        if (k->next)
                k->next->prev = k->prev;
        k->prev = k->next = NULL;
}

void registry_host_forget(RegHostKey *k) {
        Registry *r = k->registry;

        hashmap_remove(&r->host_keys, k->key, k);
        host_list_unlink(r, k);
        reg_host_key_free(k);
}

static void host_forget_all(Registry *r) {
        while (r->host_list)
                registry_host_forget(r->host_list);
        hashmap_done(&r->host_keys);
}

static RegHostKey *host_key_new(Registry *r, const char *key) {
        _cleanup_free_ char *machine_id = NULL, *allocation_id = NULL;
        FleetHostKeyKind kind;
        uint32_t slot_id = 0;
        RegHostKey *k;

        if (fleet_key_parse_host(r->prefix, key, &kind, &machine_id, &slot_id, &allocation_id) < 0 ||
            !streq_ptr(machine_id, r->machine.machine_id)) {
                log_debug("Ignoring key %s: not a claim, deallocation or command of this machine",
                          key);
                return NULL;
        }
        k = new0(RegHostKey, 1);
        if (!k || !(k->key = strdup(key))) {
                free(k);
                log_oom();
                return NULL;
        }
        k->registry = r;
        k->kind = kind == FLEET_HOST_KEY_CLAIM ? REG_CLAIM
                  : kind == FLEET_HOST_KEY_SCALE ? REG_SCALE
                                                 : REG_DEALLOCATION;
        k->slot_id = slot_id;
        k->allocation_id = TAKE_PTR(allocation_id);
        k->backoff = (Backoff){ .first = 200 * USEC_PER_MSEC, .max = 5 * USEC_PER_SEC };
        if (hashmap_put(&r->host_keys, k->key, k) < 0) {
                reg_host_key_free(k);
                log_oom();
                return NULL;
        }
        k->next = r->host_list;
        if (k->next)
                k->next->prev = k;
        r->host_list = k;
        return k;
}

/* A version of a key (mod_revision 0: deleted), from the range or the watch. */
static void host_key_seen(Registry *r, const char *key, int64_t mod_revision, const char *value,
                          size_t len, bool in_range) {
        RegHostKey *k = hashmap_get(&r->host_keys, key);

        if (!k) {
                if (mod_revision == 0)
                        return;
                k = host_key_new(r, key);
                if (!k)
                        return;
        }
        if (in_range)
                k->epoch = r->host_epoch;
        reg_host_key_update(k, mod_revision, value, len);
}

static void on_host_watch(Etcd *e, EtcdWatch *w, const EtcdEvent *events, size_t n,
                          int64_t revision, int error, int64_t compact_revision, void *userdata) {
        Registry *r = userdata;

        if (error < 0) {
                log_warning_errno(error, "etcd: the watch of %s ended: %m; reading it again",
                                  r->host_prefix);
                r->host_watch = etcd_watch_free(w);
                host_schedule_retry(r);
                return;
        }
        backoff_reset(&r->host_backoff);
        for (size_t i = 0; i < n; i++)
                host_key_seen(r, events[i].kv.key,
                              events[i].type == ETCD_EVENT_PUT ? events[i].kv.mod_revision : 0,
                              events[i].kv.value, events[i].kv.value_len, false);
}

static void on_host_range(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Registry *r = userdata;
        _cleanup_free_ char *end = NULL;
        RegHostKey *next;
        int k;

        r->host_range = NULL;
        if (resp->error < 0) {
                log_warning("etcd: reading %s failed: %s; trying again", r->host_prefix,
                            resp->message);
                host_schedule_retry(r);
                return;
        }
        /* The watch first, from the range's revision on: nothing between them is missed. */
        end = etcd_prefix_end(r->host_prefix);
        k = end ? etcd_watch(r->etcd, r->host_prefix, end, resp->revision + 1, on_host_watch, r,
                             &r->host_watch)
                : -ENOMEM;
        if (k < 0) {
                log_warning_errno(k, "etcd: failed to watch %s: %m; trying again", r->host_prefix);
                host_schedule_retry(r);
                return;
        }
        r->host_epoch++;
        for (size_t i = 0; i < resp->n_kvs; i++)
                host_key_seen(r, resp->kvs[i].key, resp->kvs[i].mod_revision, resp->kvs[i].value,
                              resp->kvs[i].value_len, true);
        for (RegHostKey *h = r->host_list; h; h = next) {
                next = h->next;
                if (h->epoch != r->host_epoch)
                        reg_host_key_update(h, 0, NULL, 0);
        }
        log_debug("etcd: %zu claims and deallocations for machine %s at revision %" PRId64,
                  resp->n_kvs, r->machine.machine_id, resp->revision);
}

static void host_stop(Registry *r) {
        etcd_request_cancel(r->host_range);
        r->host_range = NULL;
        r->host_watch = etcd_watch_free(r->host_watch);
        r->host_retry = sd_event_source_disable_unref(r->host_retry);
}

static int host_read(Registry *r) {
        _cleanup_free_ char *end = NULL;

        host_stop(r);
        end = etcd_prefix_end(r->host_prefix);
        if (!end)
                return -ENOMEM;
        return etcd_range(r->etcd, r->host_prefix, end, 0, on_host_range, r, &r->host_range);
}

static int on_host_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Registry *r = userdata;
        int k;

        k = host_read(r);
        if (k < 0) {
                log_warning_errno(k, "etcd: failed to read %s: %m", r->host_prefix);
                host_schedule_retry(r);
        }
        return 0;
}

static void host_schedule_retry(Registry *r) {
        usec_t delay = backoff_next(&r->host_backoff);
        int k;

        r->host_watch = etcd_watch_free(r->host_watch);
        if (r->host_retry) {
                k = sd_event_source_set_time_relative(r->host_retry, delay);
                if (k >= 0)
                        k = sd_event_source_set_enabled(r->host_retry, SD_EVENT_ONESHOT);
        } else
                k = sd_event_add_time_relative(r->event, &r->host_retry, CLOCK_MONOTONIC, delay,
                                               USEC_PER_MSEC, on_host_retry, r);
        if (k < 0)
                log_error_errno(k, "Failed to schedule reading %s again: %m", r->host_prefix);
}

/* slotd was read anew (or for the first time): the claims are read again, and whatever slotd
 * has not done yet is done now (SPEC §13 step 5). */
void registry_host_start(Registry *r) {
        _cleanup_free_ char *prefix = NULL;
        int k;

        if (asprintf(&prefix, "%s/hosts/%s/", r->prefix, r->machine.machine_id) < 0) {
                log_oom();
                return;
        }
        if (!streq_ptr(prefix, r->host_prefix)) {
                host_stop(r);
                host_forget_all(r); /* another machine ID: its keys are not ours */
                free(r->host_prefix);
                r->host_prefix = TAKE_PTR(prefix);
        }
        backoff_reset(&r->host_backoff);
        k = host_read(r);
        if (k < 0) {
                log_warning_errno(k, "etcd: failed to read %s: %m", r->host_prefix);
                host_schedule_retry(r);
        }
}

void registry_host_done(Registry *r) {
        host_stop(r);
        host_forget_all(r);
        r->host_prefix = mfree(r->host_prefix);
}
