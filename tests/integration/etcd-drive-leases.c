/* SPDX-License-Identifier: MIT */
/* etcd-drive's commands for many leases at once (etcd-drive.c has the list): leases N TTL
 * [PREFIX] grants N leases and puts a key under each, keepalive-many keeps them alive in
 * rounds, keepalive-cancel cancels a keepalive at once and checks the next one's answer. */
#include "etcd-drive.h"

/* ---- leases, keepalive-many, keepalive-cancel ---- */

static void on_many_put(Etcd *e, const EtcdResponse *r, void *userdata) {
        Drive *d = userdata;

        if (r->error < 0 && d->first_error == 0)
                d->first_error = r->error;
        if (++d->answered < d->n_many)
                return;
        if (d->first_error < 0)
                printf("error %s leases", strerrorname_np(-d->first_error) ?: "?");
        else
                printf("leases n=%zu ttl=%" PRId64, d->n_many, d->last_ttl);
        end_line(d);
        step(d);
}

static void on_many_grant(Etcd *e, const EtcdResponse *r, void *userdata) {
        Drive *d = userdata;
        char key[64];
        size_t i = d->count++;

        if (r->error == 0) {
                d->many[i] = r->lease_id;
                d->last_ttl = r->ttl;
                (void) snprintf(key, sizeof(key), "%s%zu", d->many_prefix, i);
                if (etcd_put(e, key, "kept", r->lease_id, on_many_put, d, NULL) >= 0)
                        return;
        }
        on_many_put(e, &(EtcdResponse) { .error = r->error ?: -ENOMEM }, d);
}

static void on_many_kept(Etcd *e, const EtcdResponse *r, void *userdata) {
        Drive *d = userdata;

        if (r->error < 0) {
                d->errors++;
                d->round_errors++;
                if (d->first_error == 0)
                        d->first_error = r->error;
        } else if (r->ttl <= 0)
                d->expired++;
        else {
                d->ok++;
                d->last_ok++;
        }
        if (++d->answered < d->n_many)
                return;
        d->rounds++;
        if (d->many_report) {
                /* no " ms=": the command's own answer is still to come */
                printf("round n=%zu ok=%zu errors=%zu took_ms=%" PRIu64 "\n", d->rounds,
                       d->last_ok, d->round_errors,
                       (now_usec(CLOCK_MONOTONIC) - d->round_start) / USEC_PER_MSEC);
                fflush(stdout);
        }
        if (now_usec(CLOCK_MONOTONIC) < d->until) {
                /* the next round PERIOD after this one started (at once if that passed) */
                (void) sd_event_source_set_time(d->timer, d->round_start + d->period);
                (void) sd_event_source_set_enabled(d->timer, SD_EVENT_ONESHOT);
                return;
        }
        d->many_mode = false;
        printf("kept-many rounds=%zu ok=%zu errors=%zu expired=%zu last=%zu first_error=%s",
               d->rounds, d->ok, d->errors, d->expired, d->last_ok,
               d->first_error < 0 ? strerrorname_np(-d->first_error) ?: "?" : "none");
        end_line(d);
        step(d);
}

/* A round: every lease's keepalive at once. */
void many_round(Drive *d) {
        d->round_start = now_usec(CLOCK_MONOTONIC);
        d->answered = d->last_ok = d->round_errors = 0;
        for (size_t i = 0; i < d->n_many; i++) {
                int r = etcd_lease_keepalive(d->etcd, d->many[i], on_many_kept, d, NULL);
                if (r < 0)
                        on_many_kept(d->etcd, &(EtcdResponse) { .error = r }, d);
        }
}

int run_leases(Drive *d, char **w, size_t n) {
        size_t want = n > 1 ? strtoull(w[1], NULL, 10) : 0;
        int r = 0;

        if (n < 3 || want == 0)
                return -EINVAL;
        free(d->many);
        d->many = new0(int64_t, want);
        if (!d->many)
                return -ENOMEM;
        d->n_many = want;
        (void) snprintf(d->many_prefix, sizeof(d->many_prefix), "%s", n > 3 ? w[3] : "/it/many/");
        d->count = d->answered = 0;
        d->first_error = 0;
        for (size_t i = 0; i < want && r >= 0; i++)
                r = etcd_lease_grant(d->etcd, number(d, w[2]), on_many_grant, d, NULL);
        return r;
}

static void on_cancelled(Etcd *e, const EtcdResponse *r, void *userdata) {
        ((Drive *) userdata)->cancelled_called++;
}

static void on_after_cancel(Etcd *e, const EtcdResponse *r, void *userdata) {
        Drive *d = userdata;

        if (!print_error(d, r)) {
                printf("keepalive ttl=%" PRId64 " cancelled_called=%u", r->ttl,
                       d->cancelled_called);
                end_line(d);
        }
        step(d);
}

int run_keepalive_cancel(Drive *d) {
        EtcdRequest *req;
        int r = etcd_lease_keepalive(d->etcd, d->lease, on_cancelled, d, &req);

        if (r < 0)
                return r;
        etcd_request_cancel(req);
        d->cancelled_called = 0;
        return etcd_lease_keepalive(d->etcd, d->lease, on_after_cancel, d, NULL);
}
