/* SPDX-License-Identifier: MIT */
/*
 * host-sim: N fleet hosts of M slots each, played at the etcd level by one process on one
 * sd-event loop, as slotd-registry plays one host (fleet/registry, SPEC §13), so that a fleet
 * of 1,000 hosts fits on one machine for tests/bench/fleet-scale (tests/bench/README.md,
 * "Fleet at scale"). It stands on the project's etcd client (etcd_dep) and documents
 * (docs_dep), the two libraries the daemons link.
 *
 * Per host: a lease (granted, kept alive every TTL/3, the keepalives spread over the TTL), the
 * machine document and its M slot documents put under it in one transaction (as a registry's
 * flush), at most --in-flight such transactions at a time so that start-up does not swamp
 * etcd. Then one watch over <prefix>/hosts/, each event dispatched by machine:
 *
 *   claim         the allocation record read, then one transaction as registry-claim.c's
 *                 confirmation: if the claim's and the record's mod_revisions are unchanged,
 *                 the record put "fulfilled" (machine, addresses, slot, port, time), the slot's
 *                 document put "allocated" under the lease, the claim deleted; else the claim
 *                 read (a changed record is read again, at most 5 times; a changed claim is
 *                 left to its own event). A claim whose record is gone is deleted; a claim of
 *                 a slot this host lacks, of another fleet, or of a slot allocated to another
 *                 allocation is refused as slotd would: deleted, the machine added to the
 *                 record's excluded.
 *   deallocation  the slot's document put back online and ready (slotd's Deallocate and the
 *                 server's restart, taken as instant), and the key deleted if unchanged.
 *   scale         the scaler's command (registry-scale.c's): start puts the slot's document
 *                 online, running and ready (the server's start taken as instant), stop (of a
 *                 free slot only, as StopIfFree) puts it available and stopped; the key deleted
 *                 if unchanged, whatever came of it. --stopped K: the last K slots of each host
 *                 start stopped, for the scaler to start (tests/bench/fleet-scaler-react).
 *
 * The confirmations and deletions go through one group commit (etcd_batch_*), as a registry's
 * do. What the simulator leaves out is slotd: no D-Bus AllocateWithOptions (~0.5 ms beside the
 * record's read, which the registry overlaps), no game server. Its figures are the fleet
 * layer's: the allocator's and etcd's.
 *
 *   host-sim --etcd URL[,URL] [--prefix P] [--fleet NAME] [--build-configuration ID]
 *            [--region ID] [--hosts N] [--slots M] [--host-base K] [--lease-ttl S]
 *            [--in-flight N] [--ready-file F] [--stopped K]
 *
 * Host k's machine ID is 5e1f + k (8 hex digits) + 20 hex digits, 32 in all like
 * /etc/machine-id. Once every host's documents are in etcd it prints one line, "ready hosts=N
 * slots=N*M seconds=S", and writes it to --ready-file. On SIGTERM or SIGINT it prints its
 * counters as one JSON object and exits 0.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gnutls/crypto.h>
#include <systemd/sd-event.h>

#include "docs.h"
#include "etcd.h"
#include "hashmap.h"
#include "macro.h"
#include "strv.h"

#define RECORD_ATTEMPTS_MAX 5
#define RETRY_USEC (100 * USEC_PER_MSEC)

typedef struct Sim Sim;
typedef struct Host Host;

typedef struct Work { /* one claim being confirmed */
        Host *host;
        uint32_t slot;
        char *claim_key;
        int64_t claim_revision, record_revision;
        ClaimDoc claim;
        unsigned attempts;
        EtcdBatchTxn *txn;
} Work;

typedef struct Slot {
        char *allocation_id; /* NULL: free */
        Work *work;
        bool stopped;        /* no server: available, stopped (the scaler's to start) */
} Slot;

struct Host {
        Sim *sim;
        unsigned index;
        char machine_id[33];
        char ipv4[16];
        uint64_t machine_number;
        int64_t lease_id;
        bool written;
        EtcdRequest *req, *keepalive;
        sd_event_source *timer;
        Slot *slots;
};

struct Sim {
        sd_event *event;
        Etcd *etcd;
        EtcdBatch *batch;
        EtcdWatch *watch;
        Hashmap by_machine;
        Host *hosts;
        unsigned n_hosts, n_slots, host_base, in_flight, next_start, writing, written;
        unsigned n_stopped; /* --stopped: slots of each host that start stopped */
        const char *prefix, *fleet, *build, *region, *ready_file;
        uint64_t lease_ttl_sec;
        usec_t started;
        uint64_t confirmed, record_gone, refused, deallocated, keepalives, errors, conflicts;
};

/* ---- documents ---- */

/* SPEC §2's machine number of a machine ID that is no decimal number: the first 8 bytes of
 * its SHA-256, big-endian, the top bit cleared, 0 made 1 (tests/integration/lib.sh). */
static uint64_t machine_number_of(const char *id) {
        uint8_t d[32];
        uint64_t n = 0;

        if (gnutls_hash_fast(GNUTLS_DIG_SHA256, id, strlen(id), d) < 0)
                return 0;
        for (size_t i = 0; i < 8; i++)
                n = n << 8 | d[i];
        n &= INT64_MAX;
        return n ?: 1;
}

static int slot_document(Host *h, uint32_t i, char **ret_key, char **ret_value) {
        Sim *s = h->sim;
        SlotDoc d = {
                .machine_id = h->machine_id, .machine_number = h->machine_number, .slot_id = i,
                .fleet_id = (char *) s->fleet, .region_id = (char *) s->region,
                .state = h->slots[i].allocation_id ? "allocated"
                         : h->slots[i].stopped     ? "available"
                                                   : "online",
                .process_state = h->slots[i].stopped ? "stopped" : "running",
                .ready = !h->slots[i].stopped,
                .build_configuration_id = (char *) s->build, .ipv4 = h->ipv4,
                .game_port = (uint16_t) (7000 + i), .query_port = (uint16_t) (17000 + i),
                .allocation_id = h->slots[i].allocation_id,
        };

        *ret_key = fleet_key_slot(s->prefix, s->fleet, h->machine_id, i);
        if (!*ret_key)
                return -ENOMEM;
        return slot_doc_format(&d, ret_value);
}

static int machine_document(Host *h, char **ret_key, char **ret_value) {
        Sim *s = h->sim;
        char *fleets[] = { (char *) s->fleet, NULL }, *regions[] = { (char *) s->region, NULL };
        MachineDoc d = {
                .machine_id = h->machine_id, .machine_number = h->machine_number,
                .ipv4 = h->ipv4, .fleets = fleets, .regions = regions, .idle_ttl_sec = 1800,
                .slots = s->n_slots, .slotd = "host-sim",
                .registered_at = now_usec(CLOCK_REALTIME),
        };

        *ret_key = fleet_key_machine(s->prefix, h->machine_id);
        if (!*ret_key)
                return -ENOMEM;
        return machine_doc_format(&d, ret_value);
}

/* ---- start-up: lease, documents ---- */

static void start_more(Sim *s);
static void keepalive_schedule(Host *h, usec_t delay);

static void host_failed(Host *h, const char *what, const char *message) {
        fprintf(stderr, "host-sim: host %u: %s failed: %s; trying again\n", h->index, what,
                message);
        h->sim->errors++;
        h->lease_id = 0;
        keepalive_schedule(h, RETRY_USEC); /* the timer grants anew without a lease */
}

static void on_written(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Host *h = userdata;
        Sim *s = h->sim;

        h->req = NULL;
        s->writing--;
        if (resp->error < 0) {
                host_failed(h, "writing the documents", resp->message);
                return;
        }
        if (!h->written) {
                h->written = true;
                if (++s->written == s->n_hosts) {
                        char line[128];
                        FILE *f;

                        snprintf(line, sizeof(line), "ready hosts=%u slots=%u seconds=%.2f",
                                 s->n_hosts, s->n_hosts * s->n_slots,
                                 (double) (now_usec(CLOCK_MONOTONIC) - s->started) / USEC_PER_SEC);
                        printf("%s\n", line);
                        fflush(stdout);
                        if (s->ready_file && (f = fopen(s->ready_file, "we"))) {
                                fprintf(f, "%s\n", line);
                                fclose(f);
                        }
                }
        }
        keepalive_schedule(h, s->lease_ttl_sec * USEC_PER_SEC / 3);
        start_more(s);
}

/* The machine document and every slot's, under the lease, in one transaction. */
static int host_write(Host *h) {
        Sim *s = h->sim;
        size_t n = s->n_slots + 1;
        _cleanup_free_ EtcdOp *ops = new0(EtcdOp, n);
        _cleanup_strv_free_ char **strings = new0(char *, 2 * n + 1);
        int r;

        if (!ops || !strings)
                return -ENOMEM;
        r = machine_document(h, &strings[0], &strings[1]);
        for (uint32_t i = 0; r >= 0 && i < s->n_slots; i++)
                r = slot_document(h, i, &strings[2 + 2 * i], &strings[3 + 2 * i]);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                ops[i] = (EtcdOp){ .type = ETCD_OP_PUT, .key = strings[2 * i],
                                   .value = strings[2 * i + 1], .lease = h->lease_id };
        s->writing++;
        r = etcd_txn(s->etcd, NULL, 0, ops, n, NULL, 0, on_written, h, &h->req);
        if (r < 0)
                s->writing--;
        return r;
}

static void on_granted(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Host *h = userdata;

        h->req = NULL;
        h->sim->writing--;
        if (resp->error < 0) {
                host_failed(h, "granting a lease", resp->message);
                return;
        }
        h->lease_id = resp->lease_id;
        if (host_write(h) < 0)
                host_failed(h, "sending the documents", "out of memory");
}

static void host_start(Host *h) {
        h->sim->writing++;
        if (etcd_lease_grant(h->sim->etcd, (int64_t) h->sim->lease_ttl_sec, on_granted, h,
                             &h->req) < 0) {
                h->sim->writing--;
                host_failed(h, "granting a lease", "could not send");
        }
}

/* At most in_flight hosts between their grant and their documents' answer. */
static void start_more(Sim *s) {
        while (s->writing < s->in_flight && s->next_start < s->n_hosts)
                host_start(&s->hosts[s->next_start++]);
}

static void on_keepalive(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Host *h = userdata;

        h->keepalive = NULL;
        if (resp->error < 0 || resp->ttl <= 0) {
                /* the documents went with the lease: a new one, and the documents again */
                fprintf(stderr, "host-sim: host %u lost its lease: %s\n", h->index,
                        resp->error < 0 ? resp->message : "expired");
                h->sim->errors++;
                h->lease_id = 0;
                keepalive_schedule(h, RETRY_USEC);
                return;
        }
        h->sim->keepalives++;
}

static int on_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        Host *h = userdata;

        if (h->lease_id == 0) {
                if (!h->req)
                        host_start(h);
                return 0;
        }
        keepalive_schedule(h, h->sim->lease_ttl_sec * USEC_PER_SEC / 3);
        if (!h->keepalive &&
            etcd_lease_keepalive(h->sim->etcd, h->lease_id, on_keepalive, h, &h->keepalive) < 0)
                h->sim->errors++;
        return 0;
}

static void keepalive_schedule(Host *h, usec_t delay) {
        usec_t when = now_usec(CLOCK_MONOTONIC) + delay;

        if (h->timer) {
                (void) sd_event_source_set_time(h->timer, when);
                (void) sd_event_source_set_enabled(h->timer, SD_EVENT_ONESHOT);
        } else if (sd_event_add_time(h->sim->event, &h->timer, CLOCK_MONOTONIC, when,
                                   10 * USEC_PER_MSEC, on_timer, h) < 0)
                h->sim->errors++;
}

/* ---- claims ---- */

static Work *work_free(Work *w) {
        if (!w)
                return NULL;
        etcd_batch_txn_cancel(w->txn);
        if (w->host->slots[w->slot].work == w)
                w->host->slots[w->slot].work = NULL;
        claim_doc_done(&w->claim);
        free(w->claim_key);
        free(w);
        return NULL;
}

static char *record_key(Work *w) {
        return fleet_key_allocation(w->host->sim->prefix, w->claim.fleet_id,
                                    w->claim.allocation_id);
}

static void record_read(Work *w);

static void on_claim_deleted(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Work *w = userdata;

        w->txn = NULL;
        if (resp->error < 0)
                w->host->sim->errors++;
        work_free(w);
}

/* The claim deleted if unchanged; with the record's put when rec_key is not NULL. */
static void claim_delete(Work *w, const char *rec_key, int64_t rec_revision, const char *rec) {
        EtcdCompare cmp[2] = {
                { .key = w->claim_key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = w->claim_revision },
                { .key = rec_key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = rec_revision },
        };
        EtcdOp ops[2] = {
                { .type = ETCD_OP_DELETE, .key = w->claim_key },
                { .type = ETCD_OP_PUT, .key = rec_key, .value = rec },
        };
        size_t n = rec_key ? 2 : 1;

        if (etcd_batch_txn(w->host->sim->batch, cmp, n, ops, n, NULL, 0, on_claim_deleted, w,
                           &w->txn) < 0) {
                w->host->sim->errors++;
                work_free(w);
        }
}

/* As slotd would refuse it: the claim deleted, the machine in the record's excluded. */
static void claim_refuse(Work *w, AllocationRecord *rec, int64_t rec_revision) {
        _cleanup_free_ char *key = record_key(w), *value = NULL;

        w->host->sim->refused++;
        if (rec && key && !strv_contains(rec->excluded, w->host->machine_id) &&
            strv_extend(&rec->excluded, w->host->machine_id) >= 0 &&
            allocation_record_format(rec, &value) >= 0)
                claim_delete(w, key, rec_revision, value);
        else
                claim_delete(w, NULL, 0, NULL);
}

static void slot_release(Work *w) {
        Slot *sl = &w->host->slots[w->slot];

        if (streq_ptr(sl->allocation_id, w->claim.allocation_id))
                sl->allocation_id = mfree(sl->allocation_id);
}

static void on_confirmed(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Work *w = userdata;
        Sim *s = w->host->sim;
        bool claim_same;

        w->txn = NULL;
        if (resp->error < 0) {
                s->errors++;
                record_read(w); /* the transaction again, on the record read anew */
                return;
        }
        if (resp->succeeded) {
                s->confirmed++;
                work_free(w);
                return;
        }
        s->conflicts++;
        claim_same = resp->n_responses > 0 && resp->responses[0].n_kvs == 1 &&
                     resp->responses[0].kvs[0].mod_revision == w->claim_revision;
        if (claim_same && ++w->attempts < RECORD_ATTEMPTS_MAX)
                record_read(w);
        else {
                slot_release(w); /* a changed claim comes with its own event */
                work_free(w);
        }
}

static int confirm_send(Work *w, AllocationRecord *rec, const char *rec_key) {
        Host *h = w->host;
        _cleanup_free_ char *value = NULL, *slot_key = NULL, *slot_value = NULL;
        EtcdCompare cmp[2] = {
                { .key = w->claim_key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = w->claim_revision },
                { .key = rec_key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                  .number = w->record_revision },
        };
        EtcdOp fail = { .type = ETCD_OP_RANGE, .key = w->claim_key };
        int r;

        r = free_and_strdup(&rec->machine_id, h->machine_id);
        if (r >= 0)
                r = free_and_strdup(&rec->ipv4, h->ipv4);
        if (r >= 0)
                r = free_and_strdup(&rec->ipv6, "");
        if (r < 0)
                return r;
        rec->status = ALLOCATION_FULFILLED;
        rec->machine_number = h->machine_number;
        rec->slot_id = w->slot;
        rec->game_port = (uint16_t) (7000 + w->slot);
        rec->fulfilled = now_usec(CLOCK_REALTIME);
        r = allocation_record_format(rec, &value);
        if (r >= 0)
                r = slot_document(h, w->slot, &slot_key, &slot_value);
        if (r < 0)
                return r;
        EtcdOp ops[3] = {
                { .type = ETCD_OP_PUT, .key = rec_key, .value = value },
                { .type = ETCD_OP_PUT, .key = slot_key, .value = slot_value,
                  .lease = h->lease_id },
                { .type = ETCD_OP_DELETE, .key = w->claim_key },
        };
        return etcd_batch_txn(h->sim->batch, cmp, 2, ops, 3, &fail, 1, on_confirmed, w,
                              &w->txn);
}

static void on_record(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Work *w = userdata;
        _cleanup_(allocation_record_done) AllocationRecord rec = {};
        _cleanup_free_ char *key = NULL;

        w->txn = NULL;
        if (resp->error < 0) {
                w->host->sim->errors++;
                slot_release(w);
                work_free(w);
                return;
        }
        if (resp->n_kvs == 0 ||
            allocation_record_parse(resp->kvs[0].value, resp->kvs[0].value_len, &rec) < 0) {
                w->host->sim->record_gone++;
                slot_release(w);
                claim_delete(w, NULL, 0, NULL); /* its ground is gone */
                return;
        }
        key = record_key(w);
        w->record_revision = resp->kvs[0].mod_revision;
        if (rec.status == ALLOCATION_FULFILLED && streq_ptr(rec.machine_id, w->host->machine_id) &&
            rec.slot_id == w->slot)
                claim_delete(w, NULL, 0, NULL);
        else if (!key || confirm_send(w, &rec, key) < 0) {
                w->host->sim->errors++;
                slot_release(w);
                work_free(w);
        }
}

static void record_read(Work *w) {
        _cleanup_free_ char *key = record_key(w);

        if (!key || etcd_batch_range(w->host->sim->batch, key, NULL, 0, on_record, w,
                                     &w->txn) < 0) {
                w->host->sim->errors++;
                slot_release(w);
                work_free(w);
        }
}

/* A claim's put: slotd's AllocateWithOptions, as it would answer, then the confirmation. */
static void claim_put(Host *h, uint32_t slot, const EtcdKv *kv) {
        Work *w = new0(Work, 1);
        Slot *sl;

        if (!w || !(w->claim_key = strdup(kv->key))) {
                free(w);
                h->sim->errors++;
                return;
        }
        w->host = h;
        w->slot = slot;
        w->claim_revision = kv->mod_revision;
        if (slot >= h->sim->n_slots) {
                w->slot = 0;
                claim_refuse(w, NULL, 0);
                return;
        }
        sl = &h->slots[slot];
        if (sl->work) { /* a newer version of its claim: the older one's allocation undone */
                slot_release(sl->work);
                work_free(sl->work);
        }
        sl->work = w;
        if (claim_doc_parse(kv->value, kv->value_len, &w->claim) < 0 ||
            !fleet_key_component_valid(strempty(w->claim.fleet_id)) ||
            !fleet_key_component_valid(strempty(w->claim.allocation_id))) {
                claim_refuse(w, NULL, 0);
                return;
        }
        if (!streq(w->claim.fleet_id, h->sim->fleet) ||
            (sl->allocation_id && !streq(sl->allocation_id, w->claim.allocation_id))) {
                claim_refuse(w, NULL, 0); /* slotd: no such slot, or busy */
                return;
        }
        if (!sl->allocation_id && !(sl->allocation_id = strdup(w->claim.allocation_id))) {
                h->sim->errors++;
                work_free(w);
                return;
        }
        sl->stopped = false; /* slotd starts a stopped slot's server on allocation */
        record_read(w);
}

/* ---- deallocations ---- */

typedef struct Dealloc {
        Sim *sim;
} Dealloc;

static void on_dealloc_done(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Dealloc *d = userdata;

        if (resp->error < 0)
                d->sim->errors++;
        else
                d->sim->deallocated++;
        free(d);
}

static void dealloc_put(Host *h, const EtcdKv *kv) {
        _cleanup_(deallocation_doc_done) DeallocationDoc doc = {};
        _cleanup_free_ char *slot_key = NULL, *slot_value = NULL;
        Dealloc *d;
        Slot *sl;

        if (deallocation_doc_parse(kv->value, kv->value_len, &doc) < 0 ||
            doc.slot_id >= h->sim->n_slots) {
                h->sim->errors++;
                return;
        }
        sl = &h->slots[doc.slot_id];
        if (streq_ptr(sl->allocation_id, doc.allocation_id)) {
                work_free(sl->work);
                sl->allocation_id = mfree(sl->allocation_id);
        }
        d = new0(Dealloc, 1);
        if (!d || slot_document(h, doc.slot_id, &slot_key, &slot_value) < 0) {
                free(d);
                h->sim->errors++;
                return;
        }
        d->sim = h->sim;
        EtcdCompare cmp = { .key = kv->key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                            .number = kv->mod_revision };
        EtcdOp ops[2] = {
                { .type = ETCD_OP_PUT, .key = slot_key, .value = slot_value,
                  .lease = h->lease_id },
                { .type = ETCD_OP_DELETE, .key = kv->key },
        };
        if (etcd_batch_txn(h->sim->batch, &cmp, 1, ops, 2, NULL, 0, on_dealloc_done, d,
                           NULL) < 0) {
                free(d);
                h->sim->errors++;
        }
}

/* ---- the scaler's commands ---- */

typedef struct Scaled {
        Sim *sim;
} Scaled;

static void on_scaled(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Scaled *d = userdata;

        if (resp->error < 0)
                d->sim->errors++;
        free(d);
}

/* As registry-scale.c with slotd's Start() and StopIfFree(): a stop of a busy slot refused,
 * the key deleted if unchanged whatever came of it. */
static void scale_put(Host *h, uint32_t slot, const EtcdKv *kv) {
        _cleanup_(scale_doc_done) ScaleDoc doc = {};
        _cleanup_free_ char *slot_key = NULL, *slot_value = NULL;
        Scaled *d;
        Slot *sl;
        size_t n_ops = 1;

        if (scale_doc_parse(kv->value, kv->value_len, &doc) < 0 || slot >= h->sim->n_slots ||
            !streq_ptr(doc.fleet_id, h->sim->fleet)) {
                h->sim->errors++;
                return;
        }
        sl = &h->slots[slot];
        if (doc.action == SCALE_START && sl->stopped) {
                sl->stopped = false;
                n_ops = 2;
        } else if (doc.action == SCALE_STOP && !sl->stopped && !sl->allocation_id && !sl->work) {
                sl->stopped = true;
                n_ops = 2;
        }
        d = new0(Scaled, 1);
        if (!d || (n_ops == 2 && slot_document(h, slot, &slot_key, &slot_value) < 0)) {
                free(d);
                h->sim->errors++;
                return;
        }
        d->sim = h->sim;
        EtcdCompare cmp = { .key = kv->key, .target = ETCD_TARGET_MOD, .result = ETCD_EQUAL,
                            .number = kv->mod_revision };
        EtcdOp ops[2] = {
                { .type = ETCD_OP_DELETE, .key = kv->key },
                { .type = ETCD_OP_PUT, .key = slot_key, .value = slot_value,
                  .lease = h->lease_id },
        };
        if (etcd_batch_txn(h->sim->batch, &cmp, 1, ops, n_ops, NULL, 0, on_scaled, d, NULL) < 0) {
                free(d);
                h->sim->errors++;
        }
}

/* ---- the watch ---- */

static void on_event(Sim *s, const EtcdEvent *ev) {
        _cleanup_free_ char *machine = NULL, *alloc = NULL;
        FleetHostKeyKind kind;
        uint32_t slot = 0;
        Host *h;

        if (ev->type != ETCD_EVENT_PUT ||
            fleet_key_parse_host(s->prefix, ev->kv.key, &kind, &machine, &slot, &alloc) < 0)
                return;
        h = hashmap_get(&s->by_machine, machine);
        if (!h)
                return; /* another registry's */
        if (kind == FLEET_HOST_KEY_CLAIM)
                claim_put(h, slot, &ev->kv);
        else if (kind == FLEET_HOST_KEY_DEALLOCATION)
                dealloc_put(h, &ev->kv);
        else if (kind == FLEET_HOST_KEY_SCALE)
                scale_put(h, slot, &ev->kv);
}

static void on_watch(Etcd *e, EtcdWatch *w, const EtcdEvent *events, size_t n, int64_t revision,
                     int error, int64_t compact_revision, void *userdata) {
        Sim *s = userdata;

        if (error < 0) {
                /* a benchmark's simulator: a broken watch ends the run, loudly */
                fprintf(stderr, "host-sim: the watch of the hosts' keys broke (%d)\n", error);
                s->errors++;
                sd_event_exit(s->event, 1);
                return;
        }
        for (size_t i = 0; i < n; i++)
                on_event(s, &events[i]);
}

/* ---- main ---- */

static int on_signal(sd_event_source *es, const struct signalfd_siginfo *si, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(es), 0);
}

static void print_counters(const Sim *s) {
        uint64_t batches = 0, txns = 0;

        if (s->batch)
                etcd_batch_counts(s->batch, &batches, &txns);
        printf("{\"hosts\":%u,\"slots\":%u,\"written\":%u,\"confirmed\":%" PRIu64
               ",\"record_gone\":%" PRIu64 ",\"refused\":%" PRIu64 ",\"deallocated\":%" PRIu64
               ",\"conflicts\":%" PRIu64 ",\"keepalives\":%" PRIu64 ",\"errors\":%" PRIu64
               ",\"batches\":%" PRIu64 ",\"batched_txns\":%" PRIu64 "}\n",
               s->n_hosts, s->n_hosts * s->n_slots, s->written, s->confirmed, s->record_gone,
               s->refused, s->deallocated, s->conflicts, s->keepalives, s->errors, batches, txns);
}

static int parse_args(Sim *s, int argc, char **argv, char ***ret_endpoints) {
        static const struct option opts[] = {
                { "etcd", required_argument, NULL, 'e' },
                { "prefix", required_argument, NULL, 'p' },
                { "fleet", required_argument, NULL, 'f' },
                { "build-configuration", required_argument, NULL, 'b' },
                { "region", required_argument, NULL, 'r' },
                { "hosts", required_argument, NULL, 'n' },
                { "slots", required_argument, NULL, 'm' },
                { "host-base", required_argument, NULL, 'k' },
                { "lease-ttl", required_argument, NULL, 't' },
                { "in-flight", required_argument, NULL, 'i' },
                { "ready-file", required_argument, NULL, 'R' },
                { "stopped", required_argument, NULL, 'S' },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) >= 0) {
                switch (c) {
                case 'e':
                        for (char *save = NULL, *t = strtok_r(optarg, ",", &save); t;
                             t = strtok_r(NULL, ",", &save))
                                if (strv_extend(ret_endpoints, t) < 0)
                                        return -ENOMEM;
                        break;
                case 'p': s->prefix = optarg; break;
                case 'f': s->fleet = optarg; break;
                case 'b': s->build = optarg; break;
                case 'r': s->region = optarg; break;
                case 'n': s->n_hosts = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'm': s->n_slots = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'k': s->host_base = (unsigned) strtoul(optarg, NULL, 10); break;
                case 't': s->lease_ttl_sec = strtoull(optarg, NULL, 10); break;
                case 'i': s->in_flight = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'R': s->ready_file = optarg; break;
                case 'S': s->n_stopped = (unsigned) strtoul(optarg, NULL, 10); break;
                default: return -EINVAL;
                }
        }
        if (!*ret_endpoints || s->n_hosts == 0 || s->n_slots == 0 || s->n_slots > 127 ||
            s->lease_ttl_sec < 2 || s->in_flight == 0 || s->n_stopped > s->n_slots ||
            optind != argc)
                return -EINVAL;
        return 0;
}

static int hosts_make(Sim *s) {
        s->hosts = new0(Host, s->n_hosts);
        if (!s->hosts)
                return -ENOMEM;
        for (unsigned k = 0; k < s->n_hosts; k++) {
                Host *h = &s->hosts[k];
                unsigned n = s->host_base + k;

                *h = (Host){ .sim = s, .index = n, .slots = new0(Slot, s->n_slots) };
                if (!h->slots)
                        return -ENOMEM;
                for (unsigned i = s->n_slots - s->n_stopped; i < s->n_slots; i++)
                        h->slots[i].stopped = true;
                snprintf(h->machine_id, sizeof(h->machine_id), "5e1f%08x%020x", n, 0xa11 + n);
                snprintf(h->ipv4, sizeof(h->ipv4), "10.%u.%u.%u", n >> 16 & 255, n >> 8 & 255,
                         n & 255);
                h->machine_number = machine_number_of(h->machine_id);
                if (hashmap_put(&s->by_machine, h->machine_id, h) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int main(int argc, char **argv) {
        Sim s = { .prefix = FLEET_PREFIX_DEFAULT, .fleet = "game", .build = "1001",
                  .region = "", .n_hosts = 8, .n_slots = 100, .host_base = 1,
                  .lease_ttl_sec = 5, .in_flight = 8 };
        _cleanup_strv_free_ char **endpoints = NULL;
        _cleanup_free_ char *watch_key = NULL, *watch_end = NULL;
        int r;

        if (parse_args(&s, argc, argv, &endpoints) < 0) {
                fprintf(stderr, "usage: host-sim --etcd URL[,URL] [--prefix P] [--fleet NAME] "
                        "[--build-configuration ID] [--region ID] [--hosts N] [--slots M<=127] "
                        "[--host-base K] [--lease-ttl S>=2] [--in-flight N] [--ready-file F] "
                        "[--stopped K<=M]\n");
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        r = sd_event_default(&s.event);
        if (r >= 0)
                r = sd_event_add_signal(s.event, NULL, SIGTERM, on_signal, NULL);
        if (r >= 0)
                r = sd_event_add_signal(s.event, NULL, SIGINT, on_signal, NULL);
        if (r >= 0)
                r = etcd_new(&s.etcd, s.event, &(EtcdConfig){ .endpoints = endpoints,
                                                             .timeout_usec = 10 * USEC_PER_SEC });
        if (r >= 0)
                r = etcd_batch_new(&s.batch, s.etcd, s.event, 2);
        if (r >= 0)
                r = hosts_make(&s);
        if (r >= 0 && (asprintf(&watch_key, "%s/hosts/", s.prefix) < 0 ||
                       !(watch_end = etcd_prefix_end(watch_key))))
                r = -ENOMEM;
        if (r >= 0)
                r = etcd_watch(s.etcd, watch_key, watch_end, 0, on_watch, &s, &s.watch);
        if (r < 0) {
                fprintf(stderr, "host-sim: failed to start: %s\n", strerror(-r));
                return 1;
        }
        s.started = now_usec(CLOCK_MONOTONIC);
        start_more(&s);
        r = sd_event_loop(s.event);
        print_counters(&s);
        return r < 0 ? 1 : r;
}
