/* SPDX-License-Identifier: MIT */
/* Claimed records stranded without their claim (SPEC §13 step 3). A claim its host refused
 * is placed again by the replicas that see its deletion on their watch; one deleted while no
 * replica watched (none running, or each one's watch broken and read anew) would leave its
 * record claimed for ever. So whenever a replica's view of the claims is (re)read, and the
 * whole view is, it reads every record under <prefix>/allocations/, a page at a time, and
 * places each claimed one whose claim the view lacks again (allocator-orphan.h says which).
 * O(records) once per (re)read of the claims, never per event. Replicas racing on a record
 * are safe: the move is one transaction conditioned on the record as read and on its claim
 * being absent (allocator-replace.c). */
#include <inttypes.h>

#include "allocator-cache.h"
#include "allocator-replace.h"
#include "allocator-scan.h"
#include "allocator.h"
#include "log.h"

/* Records per page: a record is at most FLEET_DOC_MAX, typically well under 1 KiB. */
#define SCAN_PAGE 128
#define SCAN_BACKOFF_MIN (100 * USEC_PER_MSEC)
#define SCAN_BACKOFF_MAX (5 * USEC_PER_SEC)

OrphanView scan_orphan_view(const Allocator *a, const AllocationRecord *rec) {
        const CacheClaim *c =
                rec->machine_id ? cache_claim_by_index(a, rec->machine_id, rec->slot_id) : NULL;

        return (OrphanView){
                .claims_revision = a->cache.watches[CACHE_HOSTS].clock.revision,
                .claim_present = c != NULL,
                .claim_allocation = c ? c->doc.allocation_id : NULL,
                .now = now_usec(CLOCK_REALTIME),
        };
}

static void scan_page(Allocator *a);

static void scan_stop(RecordScan *s) {
        s->range = NULL; /* the caller cancelled it, or it is the one answering */
        s->retry = sd_event_source_disable_unref(s->retry);
        s->from = mfree(s->from);
        s->backoff = 0;
}

static int on_scan_retry(sd_event_source *source, uint64_t usec, void *userdata) {
        Allocator *a = userdata;

        a->scan.retry = sd_event_source_disable_unref(a->scan.retry);
        scan_page(a);
        return 0;
}

static void scan_retry_later(Allocator *a) {
        RecordScan *s = &a->scan;
        int r;

        s->backoff = s->backoff ? MIN(s->backoff * 2, SCAN_BACKOFF_MAX) : SCAN_BACKOFF_MIN;
        r = sd_event_add_time_relative(a->event, &s->retry, CLOCK_MONOTONIC, s->backoff, 0,
                                       on_scan_retry, a);
        if (r < 0) {
                log_warning_errno(r, "Cannot schedule reading the allocation records again: "
                                     "%m; they are read at the next read of the claims");
                scan_stop(s);
        }
}

static void scan_record(Allocator *a, const EtcdKv *kv) {
        _cleanup_(allocation_record_done) AllocationRecord rec = {};
        OrphanView v;

        if (allocation_record_parse(kv->value, kv->value_len, &rec) < 0)
                return;
        a->scan.n_records++;
        v = scan_orphan_view(a, &rec);
        if (!allocation_record_orphaned(&rec, kv->mod_revision, &v))
                return;
        a->scan.n_orphaned++;
        log_info("Allocation %s is claimed on slot %" PRIu32 " of %s, which has no claim of it: "
                 "placing it again", rec.allocation_id, rec.slot_id, rec.machine_id);
        replace_record_orphaned(a, &rec);
}

static void on_scan_page(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Allocator *a = userdata;
        RecordScan *s = &a->scan;
        size_t i = 0;

        s->range = NULL;
        if (allocator_etcd_failed(a, resp)) {
                log_warning("Cannot read the allocation records from etcd: %s; trying again",
                            resp->message);
                scan_retry_later(a);
                return;
        }
        s->backoff = 0;
        /* A page after the first starts at the last key of the one before. */
        if (s->from && resp->n_kvs > 0 && streq(resp->kvs[0].key, s->from))
                i = 1;
        for (; i < resp->n_kvs; i++)
                scan_record(a, &resp->kvs[i]);
        if (resp->more && resp->n_kvs > i) {
                if (free_and_strdup(&s->from, resp->kvs[resp->n_kvs - 1].key) < 0) {
                        log_oom();
                        scan_stop(s);
                        return;
                }
                scan_page(a);
                return;
        }
        log_debug("Read %zu allocation records: %zu claimed without their claim", s->n_records,
                  s->n_orphaned);
        scan_stop(s);
}

static void scan_page(Allocator *a) {
        RecordScan *s = &a->scan;
        _cleanup_free_ char *prefix = NULL, *end = NULL;
        int r;

        if (asprintf(&prefix, "%s/allocations/", a->config->prefix) < 0 ||
            !(end = etcd_prefix_end(prefix))) {
                log_oom();
                scan_stop(s);
                return;
        }
        r = etcd_range(a->etcd, s->from ?: prefix, end, SCAN_PAGE, on_scan_page, a, &s->range);
        if (r < 0) {
                log_warning_errno(r, "Cannot read the allocation records: %m");
                scan_retry_later(a);
        }
}

void scan_view_read(Allocator *a, CacheKind kind) {
        RecordScan *s = &a->scan;

        if (kind == CACHE_HOSTS)
                s->wanted = true;
        if (!s->wanted || !cache_ready(a))
                return; /* placing needs the slots and machines too */
        s->wanted = false;
        /* A scan under way started from an older view of the claims: from the start. */
        etcd_request_cancel(s->range);
        scan_stop(s);
        s->n_records = s->n_orphaned = 0;
        scan_page(a);
}

void scan_done(Allocator *a) {
        etcd_request_cancel(a->scan.range);
        scan_stop(&a->scan);
}
