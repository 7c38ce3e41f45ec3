/* SPDX-License-Identifier: MIT */
/* The scaler's election (allocator-scaler.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "allocator-scaler.h"
#include "allocator.h"
#include "log.h"
#include "macro.h"

/* A campaign waits in etcd this long at most, then is made again (etcd deletes the key of
 * one given up, which the next makes anew). */
#define CAMPAIGN_TIMEOUT (60 * USEC_PER_SEC)
#define RETRY_MIN (100 * USEC_PER_MSEC)
#define RETRY_MAX (5 * USEC_PER_SEC)

struct Scaler {
        Allocator *a;
        char *name;  /* <prefix>/scaler */
        char *value; /* who campaigns: "<host>:<pid>" */
        int64_t lease;
        usec_t lease_ok; /* the last keepalive answered (or the grant), CLOCK_MONOTONIC */
        EtcdRequest *grant, *keepalive_req, *campaign;
        sd_event_source *keepalive, *retry;
        usec_t backoff;
        EtcdLeaderKey leader; /* while leading */
        bool leading;
};

static void scaler_grant(Scaler *s);

static void leader_clear(Scaler *s) {
        s->leader.name = mfree(s->leader.name);
        s->leader.key = mfree(s->leader.key);
        s->leader = (EtcdLeaderKey) {};
}

/* The lease given up (lost, or its keepalives unanswered for the TTL): not leading, and a
 * new lease campaigns after a back-off. */
static void scaler_lost(Scaler *s, const char *why) {
        if (s->leading)
                log_warning("Scaler: no longer leading (%s)", why);
        s->leading = false;
        leader_clear(s);
        etcd_request_cancel(s->campaign);
        etcd_request_cancel(s->keepalive_req);
        s->campaign = s->keepalive_req = NULL;
        s->keepalive = sd_event_source_disable_unref(s->keepalive);
        s->lease = 0;
        s->backoff = s->backoff ? MIN(s->backoff * 2, RETRY_MAX) : RETRY_MIN;
}

static int on_retry(sd_event_source *es, uint64_t usec, void *userdata) {
        Scaler *s = userdata;

        s->retry = sd_event_source_disable_unref(s->retry);
        scaler_grant(s);
        return 0;
}

static void scaler_retry(Scaler *s, const char *why) {
        scaler_lost(s, why);
        s->retry = sd_event_source_disable_unref(s->retry);
        if (sd_event_add_time_relative(s->a->event, &s->retry, CLOCK_MONOTONIC, s->backoff, 0,
                                       on_retry, s) < 0)
                log_error("Scaler: cannot arm a timer: the election is given up");
}

static void on_campaign(Etcd *e, const EtcdResponse *r, void *userdata);

static void scaler_campaign(Scaler *s) {
        int r = etcd_election_campaign(s->a->etcd, s->name, s->lease, s->value,
                                       CAMPAIGN_TIMEOUT, on_campaign, s, &s->campaign);
        if (r < 0)
                scaler_retry(s, "campaign refused");
}

static void on_campaign(Etcd *e, const EtcdResponse *r, void *userdata) {
        Scaler *s = userdata;

        s->campaign = NULL;
        if (r->error == -ETIMEDOUT) {
                scaler_campaign(s); /* still waiting behind the leader */
                return;
        }
        if (r->error < 0) {
                log_warning("Scaler: campaign failed: %s", r->message);
                scaler_retry(s, "campaign failed");
                return;
        }
        leader_clear(s);
        s->leader = (EtcdLeaderKey) { .name = strdup(r->leader.name),
                                      .key = strdup(r->leader.key), .rev = r->leader.rev,
                                      .lease = r->leader.lease };
        if (!s->leader.name || !s->leader.key) {
                scaler_retry(s, "no memory");
                return;
        }
        s->leading = true;
        s->backoff = 0;
        log_info("Scaler: leading (election %s, key %s, revision %" PRIi64 ")", s->name,
                 s->leader.key, s->leader.rev);
}

static void on_keepalive_answer(Etcd *e, const EtcdResponse *r, void *userdata) {
        Scaler *s = userdata;

        s->keepalive_req = NULL;
        if (r->error == 0 && r->ttl <= 0) {
                scaler_retry(s, "lease expired");
                return;
        }
        if (r->error == 0)
                s->lease_ok = now_usec(CLOCK_MONOTONIC);
        else if (now_usec(CLOCK_MONOTONIC) - s->lease_ok >= SCALER_LEASE_TTL * USEC_PER_SEC)
                scaler_retry(s, "keepalives unanswered for the lease's TTL");
}

static int on_keepalive(sd_event_source *es, uint64_t usec, void *userdata) {
        Scaler *s = userdata;

        /* leading only while the lease is known alive: etcd may end it any time after */
        if (s->leading &&
            now_usec(CLOCK_MONOTONIC) - s->lease_ok >= SCALER_LEASE_TTL * USEC_PER_SEC) {
                scaler_retry(s, "keepalives unanswered for the lease's TTL");
                return 0;
        }
        if (!s->keepalive_req &&
            etcd_lease_keepalive(s->a->etcd, s->lease, on_keepalive_answer, s,
                                 &s->keepalive_req) < 0)
                log_warning("Scaler: keepalive refused");
        return sd_event_source_set_time_relative(es, SCALER_LEASE_TTL * USEC_PER_SEC / 3);
}

static void on_grant(Etcd *e, const EtcdResponse *r, void *userdata) {
        Scaler *s = userdata;

        s->grant = NULL;
        if (r->error < 0 || r->lease_id <= 0) {
                scaler_retry(s, r->error < 0 ? r->message : "no lease");
                return;
        }
        s->lease = r->lease_id;
        s->lease_ok = now_usec(CLOCK_MONOTONIC);
        if (sd_event_add_time_relative(s->a->event, &s->keepalive, CLOCK_MONOTONIC,
                                       SCALER_LEASE_TTL * USEC_PER_SEC / 3, 0, on_keepalive, s) < 0 ||
            sd_event_source_set_enabled(s->keepalive, SD_EVENT_ON) < 0) {
                scaler_retry(s, "no timer");
                return;
        }
        scaler_campaign(s);
}

static void scaler_grant(Scaler *s) {
        if (etcd_lease_grant(s->a->etcd, SCALER_LEASE_TTL, on_grant, s, &s->grant) < 0)
                scaler_retry(s, "grant refused");
}

int scaler_start(Allocator *a) {
        char host[256] = "";
        Scaler *s = new0(Scaler, 1);

        if (!s)
                return log_oom();
        s->a = a;
        (void) gethostname(host, sizeof(host) - 1);
        if (asprintf(&s->name, "%s/scaler", a->config->prefix) < 0 ||
            asprintf(&s->value, "%s:%d", host, (int) getpid()) < 0) {
                free(s->name);
                free(s);
                return log_oom();
        }
        a->scaler = s;
        scaler_grant(s);
        return 0;
}

static void on_revoked(Etcd *e, const EtcdResponse *r, void *userdata) {
        Scaler *s = userdata;
        (void) sd_event_exit(s->a->event, 0);
}

static int on_revoke_timeout(sd_event_source *es, uint64_t usec, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(es), 0);
}

int scaler_resign(Allocator *a) {
        Scaler *s = a->scaler;

        if (!s || s->lease <= 0)
                return 0;
        s->keepalive = sd_event_source_disable_unref(s->keepalive);
        s->retry = sd_event_source_disable_unref(s->retry);
        etcd_request_cancel(s->campaign);
        s->campaign = NULL;
        s->leading = false;
        if (etcd_lease_revoke(a->etcd, s->lease, on_revoked, s, NULL) < 0 ||
            sd_event_add_time_relative(a->event, &s->retry, CLOCK_MONOTONIC, USEC_PER_SEC, 0,
                                       on_revoke_timeout, NULL) < 0)
                return 0;
        s->lease = 0;
        return 1;
}

void scaler_done(Allocator *a) {
        Scaler *s = a->scaler;

        if (!s)
                return;
        s->keepalive = sd_event_source_disable_unref(s->keepalive);
        s->retry = sd_event_source_disable_unref(s->retry);
        etcd_request_cancel(s->grant);
        etcd_request_cancel(s->campaign);
        etcd_request_cancel(s->keepalive_req);
        leader_clear(s);
        free(s->name);
        free(s->value);
        a->scaler = mfree(s);
}

bool scaler_leading(const Allocator *a) {
        return a->scaler && a->scaler->leading;
}
