/* SPDX-License-Identifier: MIT */
/*
 * fleet-load: the load client of tests/bench/fleet-bench (tests/bench/README.md, "Fleet
 * benchmark"), in C so that the machine's CPU, which bounds the fleet, goes to the product
 * measured (its Python predecessor took ~0.48 ms of CPU per allocation, a quarter of a core).
 *
 * N closed-loop clients against slotd-allocator replicas, on one thread and one sd-event loop:
 * each an easy handle of one libcurl multi (keep-alive HTTP/1.1), client w on replica
 * w % replicas. Each loops: POST a new allocationId, wait until its record reads "fulfilled"
 * (seen on a watch of <prefix>/allocations/<fleet>/ through the project's own etcd client,
 * fleet/etcd/etcd.h, so that no polling loads the allocator), then DELETE it, and again: churn, so
 * that the fleet's capacity lasts. After --warmup seconds, for --seconds seconds, it records:
 *
 *   post_ms      POST sent -> its 200 read (the allocator's claim transaction)
 *   fulfil_ms    POST sent -> the watch event of the record's "fulfilled" put
 *   confirm_ms   the record's "claimed" -> "fulfilled" times (allocator and registry clocks,
 *                ms resolution): the host's watch, slotd's Allocate and the confirm transaction
 *   delete_ms    DELETE sent -> its 204
 *   etcd         revision, and etcd_mvcc_{put,delete,txn,range}_total, WAL fsyncs, backend
 *                commits, unary gRPC calls by method, read from etcd before and after the window
 *   cpu          CPU seconds over the window of the PIDs named by --pid NAME=PID (repeatable,
 *                summed per NAME) and of this client (getrusage)
 *
 * An allocation counts when its DELETE finished inside the window and it was seen fulfilled.
 * After the window every client finishes its cycle (at most --fulfil-timeout + 10 s). Prints
 * one JSON object (and writes it to --out): clients, replicas, seconds, allocations, per_sec,
 * {post,fulfil,confirm,delete}_p{50,99} (ms, nearest rank), etcd_*_per_alloc,
 * etcd_requests_by_method_per_alloc, etcd_fsyncs_per_sec, etcd_fsync_ms_mean, cpu_pct (% of
 * one core, per NAME and "client"), errors (count by kind); null where there is no sample.
 *
 *   fleet-load --url URL[,URL] --token-file F --path PATH --etcd URL [--prefix P] [--fleet NAME]
 *              [--build-configuration ID] [--clients N] [--seconds S] [--warmup S]
 *              [--fulfil-timeout S] [--pid NAME=PID]... [--out FILE]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <systemd/sd-event.h>
#include <systemd/sd-id128.h>

#include "curl-event.h"
#include "etcd.h"
#include "fleet-load.h"
#include "hashmap.h"

#define USEC_PER_SEC 1000000ULL
#define PAUSE_USEC 10000ULL            /* after a failed POST or a transport error */
#define READY_TIMEOUT_USEC (30 * USEC_PER_SEC)
#define BODY_KEEP 80                   /* bytes of an answer's body kept (for errors) */

typedef enum ClientState { C_IDLE, C_POST, C_WAIT, C_DELETE, C_PAUSE } ClientState;
typedef enum Phase { P_READY, P_WARMUP, P_WINDOW, P_GRACE } Phase;

typedef struct Bench Bench;

typedef struct Client {
        Bench *b;
        CURL *easy;
        ClientState state;
        bool in_multi, mapped, seen, have_confirm;
        char id[37];
        char *body, *url_post, *url_delete;
        size_t body_size, url_delete_size;
        char resp[BODY_KEEP + 1];
        size_t resp_len;
        uint64_t t0, t1, t3, seen_at;
        int64_t confirm_ms;
        sd_event_source *timer; /* the fulfilment's timeout, or the pause after an error */
} Client;

typedef struct Options {
        char **urls;
        size_t n_urls;
        const char *token_file, *path, *etcd, *prefix, *fleet, *build_configuration, *out;
        unsigned clients;
        double seconds, warmup, fulfil_timeout;
        const char **pids; /* NAME=PID */
        size_t n_pids;
} Options;

struct Bench {
        Options o;
        char *token, *bc_json;
        sd_event *event;
        CURLM *multi;
        CurlEvent *curl;
        sd_event_source *phase_timer, *rewatch_timer;
        struct curl_slist *post_headers, *delete_headers;
        Etcd *etcd;
        EtcdWatch *watch;
        int64_t watch_revision;
        Phase phase;
        bool ready, measuring, stop;
        int exit_code;
        Hashmap waiting; /* allocationId -> Client, from the POST until the DELETE */
        Client *clients;
        unsigned n_busy;
        Samples post, fulfil, confirm, del;
        unsigned long done;
        json_t *errors;
        json_t *e0, *e1, *c0, *c1; /* etcd's counters, CPU seconds by NAME and "client" */
        uint64_t t0, t1;
};

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

static void bench_fail(Bench *b, const char *what) {
        fprintf(stderr, "fleet-load: %s\n", what);
        b->exit_code = 1;
        (void) sd_event_exit(b->event, 1);
}


/* An error's count, by its words; an answer's bytes that are not UTF-8 (jansson's keys must
 * be) become U+FFFD, as Python's errors="replace" made them. */
static void bench_error(Bench *b, const char *what) {
        char key[BODY_KEEP * 3 + 64];
        size_t k = 0;
        json_t *v = json_object_get(b->errors, what);

        if (!v && json_object_set_new(b->errors, what, json_integer(0)) < 0) {
                for (const char *p = what; *p && k + 4 < sizeof(key); p++)
                        if ((unsigned char) *p < 0x80)
                                key[k++] = *p;
                        else {
                                memcpy(key + k, "\xef\xbf\xbd", 3);
                                k += 3;
                        }
                key[k] = '\0';
                what = key;
                if (!json_object_get(b->errors, key) &&
                    json_object_set_new(b->errors, key, json_integer(0)) < 0) {
                        bench_fail(b, "out of memory");
                        return;
                }
        }
        v = json_object_get(b->errors, what);
        json_integer_set(v, json_integer_value(v) + 1);
}

/* ---- the clients ---- */

static void client_start(Client *c);
static void client_delete(Client *c);

static void uuid_v4(char out[37]) {
        sd_id128_t id;
        uint8_t *u = id.bytes;

        (void) sd_id128_randomize(&id); /* getrandom(): it does not fail */
        u[6] = (u[6] & 0x0f) | 0x40;
        u[8] = (u[8] & 0x3f) | 0x80;
        snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
                 u[13], u[14], u[15]);
}

static void client_unmap(Client *c) {
        if (c->mapped)
                (void) hashmap_remove(&c->b->waiting, c->id, c);
        c->mapped = false;
}

static int on_client_timer(sd_event_source *s, uint64_t usec, void *userdata);

static void client_arm(Client *c, uint64_t usec) {
        int r;

        if (!c->timer)
                r = sd_event_add_time_relative(c->b->event, &c->timer, CLOCK_MONOTONIC, usec, 1,
                                               on_client_timer, c);
        else {
                r = sd_event_source_set_time_relative(c->timer, usec);
                if (r >= 0)
                        r = sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
        }
        if (r < 0)
                bench_fail(c->b, "cannot arm a timer");
}

static void client_send(Client *c) {
        c->resp_len = 0;
        if (curl_multi_add_handle(c->b->multi, c->easy) != CURLM_OK) {
                bench_fail(c->b, "curl_multi_add_handle failed");
                return;
        }
        c->in_multi = true;
}

static void client_pause(Client *c) {
        c->state = C_PAUSE;
        client_arm(c, PAUSE_USEC);
}

static void client_idle(Client *c) {
        Bench *b = c->b;

        c->state = C_IDLE;
        if (--b->n_busy == 0 && b->stop)
                (void) sd_event_exit(b->event, 0);
}

static void client_start(Client *c) {
        Bench *b = c->b;

        client_unmap(c);
        if (b->stop) {
                client_idle(c);
                return;
        }
        uuid_v4(c->id);
        snprintf(c->body, c->body_size, "{\"allocationId\":\"%s\",\"buildConfigurationId\":%s}",
                 c->id, b->bc_json);
        c->seen = c->have_confirm = false;
        if (hashmap_put(&b->waiting, c->id, c) < 0) {
                bench_fail(b, "out of memory");
                return;
        }
        c->mapped = true;
        curl_easy_setopt(c->easy, CURLOPT_URL, c->url_post);
        curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, b->post_headers);
        curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, NULL);
        curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->body);
        curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE, (long) strlen(c->body));
        c->state = C_POST;
        c->t0 = now_usec();
        client_send(c);
}

static void client_delete(Client *c) {
        client_unmap(c);
        snprintf(c->url_delete + strlen(c->url_post), c->url_delete_size - strlen(c->url_post),
                 "/%s", c->id);
        curl_easy_setopt(c->easy, CURLOPT_URL, c->url_delete);
        curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, c->b->delete_headers);
        curl_easy_setopt(c->easy, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, "DELETE");
        c->state = C_DELETE;
        c->t3 = now_usec();
        client_send(c);
}

static void client_posted(Client *c, long status, uint64_t t) {
        char what[BODY_KEEP + 32];
        int n;

        c->t1 = t;
        if (status != 200) {
                client_unmap(c);
                n = snprintf(what, sizeof(what), "POST %ld ", status);
                memcpy(what + n, c->resp, c->resp_len);
                what[(size_t) n + c->resp_len] = '\0';
                bench_error(c->b, what);
                client_pause(c);
        } else if (c->seen)
                client_delete(c);
        else {
                c->state = C_WAIT;
                client_arm(c, (uint64_t) (c->b->o.fulfil_timeout * USEC_PER_SEC));
        }
}

static void client_deleted(Client *c, long status, uint64_t t) {
        Bench *b = c->b;
        char what[32];

        if (status != 204) {
                snprintf(what, sizeof(what), "DELETE %ld", status);
                bench_error(b, what);
        }
        if (b->measuring && c->seen) {
                b->done++;
                if (samples_add(&b->post, (double) (c->t1 - c->t0) / 1000.0) < 0 ||
                    samples_add(&b->fulfil, ((double) c->seen_at - (double) c->t0) / 1000.0) < 0 ||
                    samples_add(&b->del, (double) (t - c->t3) / 1000.0) < 0 ||
                    (c->have_confirm && samples_add(&b->confirm, (double) c->confirm_ms) < 0)) {
                        bench_fail(b, "out of memory");
                        return;
                }
        }
        client_start(c);
}

static void client_done(Client *c, CURLcode result) {
        uint64_t t = now_usec();
        long status = 0;

        if (result != CURLE_OK) {
                client_unmap(c);
                bench_error(c->b, curl_easy_strerror(result));
                client_pause(c);
                return;
        }
        (void) curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        if (c->state == C_POST)
                client_posted(c, status, t);
        else
                client_deleted(c, status, t);
}

static int on_client_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Client *c = userdata;
        char what[64];

        (void) s, (void) usec;
        if (c->state == C_WAIT) {
                client_unmap(c);
                snprintf(what, sizeof(what), "not fulfilled within %gs", c->b->o.fulfil_timeout);
                bench_error(c->b, what);
                client_delete(c);
        } else if (c->state == C_PAUSE)
                client_start(c);
        return 0;
}

static size_t on_client_data(char *ptr, size_t size, size_t nmemb, void *userdata) {
        Client *c = userdata;
        size_t n = size * nmemb, k = n < BODY_KEEP - c->resp_len ? n : BODY_KEEP - c->resp_len;

        memcpy(c->resp + c->resp_len, ptr, k);
        c->resp_len += k;
        return n;
}

/* scheme://host:port of url (the Python client, too, sent only the path to the replica). */
static int client_setup(Bench *b, Client *c, const char *url) {
        const char *p = strstr(url, "://"), *slash = p ? strchr(p + 3, '/') : NULL;
        int base = slash ? (int) (slash - url) : (int) strlen(url);

        c->b = b;
        c->easy = curl_easy_init();
        c->body_size = strlen(b->bc_json) + 128;
        c->body = malloc(c->body_size);
        if (!c->easy || !c->body || asprintf(&c->url_post, "%.*s%s", base, url, b->o.path) < 0)
                return -ENOMEM;
        c->url_delete_size = strlen(c->url_post) + 40;
        c->url_delete = malloc(c->url_delete_size);
        if (!c->url_delete)
                return -ENOMEM;
        memcpy(c->url_delete, c->url_post, strlen(c->url_post) + 1);
        curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
        curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c->easy, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(c->easy, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_1_1);
        curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_client_data);
        curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c);
        return 0;
}

static void client_free(Bench *b, Client *c) {
        client_unmap(c);
        if (c->in_multi)
                (void) curl_multi_remove_handle(b->multi, c->easy);
        if (c->easy)
                curl_easy_cleanup(c->easy);
        sd_event_source_disable_unref(c->timer);
        free(c->body);
        free(c->url_post);
        free(c->url_delete);
}

/* ---- libcurl's multi interface on sd-event (common/curl-event.h) ---- */

static void bench_collect(Bench *b) {
        CURLMsg *msg;
        Client *c;
        int left;

        while ((msg = curl_multi_info_read(b->multi, &left))) {
                if (msg->msg != CURLMSG_DONE)
                        continue;
                c = NULL;
                (void) curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &c);
                if (!c)
                        continue;
                CURLcode result = msg->data.result;
                (void) curl_multi_remove_handle(b->multi, c->easy);
                c->in_multi = false;
                client_done(c, result);
        }
}

static void on_curl_process(void *userdata) {
        bench_collect(userdata);
}

/* ---- the watch: fulfilment ---- */

static int bench_watch(Bench *b, int64_t start_revision);

static void on_put(Bench *b, const EtcdKv *kv, uint64_t t) {
        json_t *doc = json_loadb(kv->value, kv->value_len, 0, NULL);
        const char *id = json_string_value(json_object_get(doc, "allocationId"));
        const char *status = json_string_value(json_object_get(doc, "status"));
        int64_t claimed, fulfilled;
        Client *c;

        if (!id || !status || strcmp(status, "fulfilled") != 0 ||
            !(c = hashmap_get(&b->waiting, id)) || c->seen) {
                json_decref(doc);
                return;
        }
        c->seen = true;
        c->seen_at = t;
        c->have_confirm =
                rfc3339_ms(json_string_value(json_object_get(doc, "claimed")), &claimed) &&
                rfc3339_ms(json_string_value(json_object_get(doc, "fulfilled")), &fulfilled);
        if (c->have_confirm)
                c->confirm_ms = fulfilled - claimed;
        json_decref(doc);
        if (c->state == C_WAIT) {
                (void) sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);
                client_delete(c);
        }
}

static void bench_start(Bench *b);

static void on_watch(Etcd *e, EtcdWatch *w, const EtcdEvent *events, size_t n, int64_t revision,
                     int error, int64_t compact_revision, void *userdata) {
        Bench *b = userdata;
        uint64_t t = now_usec();

        (void) e, (void) compact_revision;
        if (error < 0) {
                /* Counted, and watched anew 100 ms later from where it ended (the allocations
                 * whose events are lost then time out). */
                bench_error(b, "watch ended");
                fprintf(stderr, "fleet-load: the watch ended: %s\n", strerror(-error));
                b->watch = etcd_watch_free(w);
                if (error == -ESTALE)
                        b->watch_revision = 0;
                if (sd_event_source_set_time_relative(b->rewatch_timer, 100000) < 0 ||
                    sd_event_source_set_enabled(b->rewatch_timer, SD_EVENT_ONESHOT) < 0)
                        bench_fail(b, "cannot arm a timer");
                return;
        }
        if (revision > b->watch_revision)
                b->watch_revision = revision;
        if (!b->ready) {
                b->ready = true;
                bench_start(b);
        }
        for (size_t i = 0; i < n; i++)
                if (events[i].type == ETCD_EVENT_PUT)
                        on_put(b, &events[i].kv, t);
}

static int on_rewatch(sd_event_source *s, uint64_t usec, void *userdata) {
        Bench *b = userdata;

        (void) s, (void) usec;
        if (bench_watch(b, b->watch_revision > 0 ? b->watch_revision + 1 : 0) < 0)
                bench_fail(b, "cannot watch etcd");
        return 0;
}

static int bench_watch(Bench *b, int64_t start_revision) {
        char *key = NULL, *end = NULL;
        int r = -ENOMEM;

        if (asprintf(&key, "%s/allocations/%s/", b->o.prefix, b->o.fleet) >= 0 &&
            (end = etcd_prefix_end(key)))
                r = etcd_watch(b->etcd, key, end, start_revision, on_watch, b, &b->watch);
        free(key);
        free(end);
        return r;
}

/* ---- the phases: the watch's creation, warm-up, the window, the clients' last cycle ---- */

static int on_phase(sd_event_source *s, uint64_t usec, void *userdata);

static void bench_phase(Bench *b, Phase p, uint64_t usec) {
        b->phase = p;
        if (sd_event_source_set_time_relative(b->phase_timer, usec) < 0 ||
            sd_event_source_set_enabled(b->phase_timer, SD_EVENT_ONESHOT) < 0)
                bench_fail(b, "cannot arm a timer");
}

static void bench_start(Bench *b) {
        b->n_busy = b->o.clients;
        for (unsigned w = 0; w < b->o.clients; w++)
                client_start(&b->clients[w]);
        bench_phase(b, P_WARMUP, (uint64_t) (b->o.warmup * USEC_PER_SEC));
}

static int on_phase(sd_event_source *s, uint64_t usec, void *userdata) {
        Bench *b = userdata;

        (void) s, (void) usec;
        switch (b->phase) {
        case P_READY:
                bench_fail(b, "etcd did not create the watch within 30 s");
                break;
        case P_WARMUP:
                if (!(b->e0 = etcd_counters(b->o.etcd)) ||
                    !(b->c0 = cpu_sample(b->o.pids, b->o.n_pids))) {
                        bench_fail(b, "cannot read etcd's counters");
                        break;
                }
                b->t0 = now_usec();
                b->measuring = true;
                bench_phase(b, P_WINDOW, (uint64_t) (b->o.seconds * USEC_PER_SEC));
                break;
        case P_WINDOW:
                b->measuring = false;
                if (!(b->e1 = etcd_counters(b->o.etcd)) ||
                    !(b->c1 = cpu_sample(b->o.pids, b->o.n_pids))) {
                        bench_fail(b, "cannot read etcd's counters");
                        break;
                }
                b->t1 = now_usec();
                b->stop = true;
                if (b->n_busy == 0)
                        (void) sd_event_exit(b->event, 0);
                else
                        bench_phase(b, P_GRACE,
                                    (uint64_t) ((b->o.fulfil_timeout + 10) * USEC_PER_SEC));
                break;
        case P_GRACE:
                (void) sd_event_exit(b->event, 0);
                break;
        }
        return 0;
}

/* ---- the result ---- */

static double delta(const Bench *b, const char *name) {
        return json_number_value(json_object_get(b->e1, name)) -
               json_number_value(json_object_get(b->e0, name));
}

/* A counter's growth per allocation, to 2 decimals. */
static double per_alloc(Bench *b, const char *name, double n) {
        return py_round(delta(b, name) / n, 2);
}

static int cmp_string(const void *x, const void *y) {
        return strcmp(*(const char *const *) x, *(const char *const *) y);
}

/* requests_METHOD, sorted by METHOD, of those that grew. */
static json_t *result_by_method(Bench *b, double n) {
        const char *names[json_object_size(b->e1) + 1], *key;
        json_t *o = json_object(), *v;
        size_t k = 0;

        json_object_foreach(b->e1, key, v)
                if (strncmp(key, "requests_", 9) == 0)
                        names[k++] = key;
        qsort(names, k, sizeof(char *), cmp_string);
        for (size_t i = 0; o && i < k; i++)
                if (delta(b, names[i]) > 0)
                        json_object_set_new(o, names[i] + 9, json_real(per_alloc(b, names[i], n)));
        return o;
}

static json_t *result_cpu(Bench *b, double secs) {
        json_t *o = json_object(), *v;
        const char *key;

        json_object_foreach(b->c1, key, v) {
                double used = json_real_value(v) - json_real_value(json_object_get(b->c0, key));

                json_object_set_new(o, key, json_real(py_round(100 * used / secs, 1)));
        }
        return o;
}

static json_t *result_latency(Bench *b, double secs) {
        Samples *all[] = { &b->post, &b->fulfil, &b->confirm, &b->del };

        for (size_t i = 0; i < 4; i++)
                samples_sort(all[i]);
        return json_pack("{s:I,s:I,s:f,s:I,s:f,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}",
                         "clients", (json_int_t) b->o.clients,
                         "replicas", (json_int_t) b->o.n_urls,
                         "seconds", py_round(secs, 3),
                         "allocations", (json_int_t) b->done,
                         "per_sec", py_round((double) b->done / secs, 1),
                         "post_p50", pct(&b->post, 50, false),
                         "post_p99", pct(&b->post, 99, false),
                         "fulfil_p50", pct(&b->fulfil, 50, false),
                         "fulfil_p99", pct(&b->fulfil, 99, false),
                         "confirm_p50", pct(&b->confirm, 50, true),
                         "confirm_p99", pct(&b->confirm, 99, true),
                         "delete_p50", pct(&b->del, 50, false),
                         "delete_p99", pct(&b->del, 99, false));
}

static json_t *result_etcd(Bench *b, double secs) {
        double n = b->done > 0 ? (double) b->done : 1, fsyncs, fsync_s;

        fsyncs = delta(b, "etcd_disk_wal_fsync_duration_seconds_count");
        fsync_s = delta(b, "etcd_disk_wal_fsync_duration_seconds_sum");
        return json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:o,s:f,s:f}",
                         "etcd_revisions_per_alloc", per_alloc(b, "revision", n),
                         "etcd_puts_per_alloc", per_alloc(b, "etcd_mvcc_put_total", n),
                         "etcd_deletes_per_alloc", per_alloc(b, "etcd_mvcc_delete_total", n),
                         "etcd_txns_per_alloc", per_alloc(b, "etcd_mvcc_txn_total", n),
                         "etcd_ranges_per_alloc", per_alloc(b, "etcd_mvcc_range_total", n),
                         "etcd_requests_per_alloc", per_alloc(b, "requests", n),
                         "etcd_requests_by_method_per_alloc", result_by_method(b, n),
                         "etcd_fsyncs_per_sec", py_round(fsyncs / secs, 1),
                         "etcd_fsync_ms_mean",
                         py_round(1000 * fsync_s / (fsyncs > 1 ? fsyncs : 1), 3));
}

static int bench_report(Bench *b) {
        double secs = (double) (b->t1 - b->t0) / USEC_PER_SEC;
        json_t *res = result_latency(b, secs), *etcd = result_etcd(b, secs);
        char *text = NULL;
        FILE *f;
        int r = -ENOMEM;

        if (res && etcd && json_object_update(res, etcd) == 0 &&
            json_object_set_new(res, "cpu_pct", result_cpu(b, secs)) == 0 &&
            json_object_set(res, "errors", b->errors) == 0)
                text = json_dumps(res, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII |
                                               JSON_REAL_PRECISION(15));
        if (text) {
                printf("%s\n", text);
                r = 0;
                if (b->o.out && (!(f = fopen(b->o.out, "we")) || fprintf(f, "%s\n", text) < 0 ||
                                 fclose(f) != 0)) {
                        fprintf(stderr, "fleet-load: cannot write %s\n", b->o.out);
                        r = -EIO;
                }
        }
        free(text);
        json_decref(res);
        json_decref(etcd);
        return r;
}

/* ---- set-up, options ---- */

static struct curl_slist *headers(const char *token, bool json) {
        struct curl_slist *h = NULL, *n;
        char *auth = NULL;

        if (asprintf(&auth, "Authorization: Bearer %s", token) < 0)
                return NULL;
        h = curl_slist_append(NULL, auth);
        free(auth);
        if (h && (!(n = curl_slist_append(h, "Expect:")) ||
                  (json && !(n = curl_slist_append(h, "Content-Type: application/json"))))) {
                curl_slist_free_all(h);
                return NULL;
        }
        return h;
}

static int bench_setup_curl(Bench *b) {
        if (!(b->multi = curl_multi_init()) ||
            curl_multi_setopt(b->multi, CURLMOPT_MAXCONNECTS, (long) b->o.clients + 4) != CURLM_OK ||
            curl_event_new(&b->curl, b->event, b->multi, "fleet-load-curl", on_curl_process, b) < 0)
                return -ENOMEM;
        b->post_headers = headers(b->token, true);
        b->delete_headers = headers(b->token, false);
        if (!b->post_headers || !b->delete_headers)
                return -ENOMEM;
        b->clients = calloc(b->o.clients ? b->o.clients : 1, sizeof(Client));
        if (!b->clients)
                return -ENOMEM;
        for (unsigned w = 0; w < b->o.clients; w++)
                if (client_setup(b, &b->clients[w], b->o.urls[w % b->o.n_urls]) < 0)
                        return -ENOMEM;
        return 0;
}

static int bench_setup(Bench *b) {
        char *endpoints[] = { (char *) b->o.etcd, NULL };
        EtcdConfig config = { .endpoints = endpoints };
        json_t *bc = json_string(b->o.build_configuration);
        int r;

        b->bc_json = bc ? json_dumps(bc, JSON_ENCODE_ANY) : NULL;
        json_decref(bc);
        b->errors = json_object();
        if (!b->bc_json || !b->errors)
                return -ENOMEM;
        r = sd_event_new(&b->event);
        if (r >= 0)
                r = bench_setup_curl(b);
        if (r >= 0)
                r = etcd_new(&b->etcd, b->event, &config);
        if (r >= 0)
                r = bench_watch(b, 0);
        if (r >= 0)
                r = sd_event_add_time_relative(b->event, &b->rewatch_timer, CLOCK_MONOTONIC, 0, 1,
                                               on_rewatch, b);
        if (r >= 0)
                r = sd_event_source_set_enabled(b->rewatch_timer, SD_EVENT_OFF);
        if (r >= 0)
                r = sd_event_add_time_relative(b->event, &b->phase_timer, CLOCK_MONOTONIC,
                                               READY_TIMEOUT_USEC, 1, on_phase, b);
        b->phase = P_READY;
        return r;
}

static void bench_done(Bench *b) {
        for (unsigned w = 0; b->clients && w < b->o.clients; w++)
                client_free(b, &b->clients[w]);
        free(b->clients);
        hashmap_done(&b->waiting);
        b->etcd = etcd_free(b->etcd); /* and its watch */
        if (b->multi)
                (void) curl_multi_cleanup(b->multi);
        curl_event_free(b->curl); /* after the multi handle, whose sockets it removed */
        sd_event_source_disable_unref(b->phase_timer);
        sd_event_source_disable_unref(b->rewatch_timer);
        sd_event_unref(b->event);
        curl_slist_free_all(b->post_headers);
        curl_slist_free_all(b->delete_headers);
        Samples *all[] = { &b->post, &b->fulfil, &b->confirm, &b->del };
        for (size_t i = 0; i < 4; i++)
                free(all[i]->v);
        json_decref(b->errors);
        json_decref(b->e0);
        json_decref(b->e1);
        json_decref(b->c0);
        json_decref(b->c1);
        free(b->token);
        free(b->bc_json);
        free(b->o.urls);
        free(b->o.pids);
}

/* The first line of --token-file, without the white space around it. */
static int read_token(Bench *b) {
        FILE *f = fopen(b->o.token_file, "re");
        size_t cap = 0, n;
        char *t;

        if (!f)
                return -errno;
        if (getline(&b->token, &cap, f) < 0) {
                free(b->token);
                b->token = strdup("");
        }
        fclose(f);
        if (!b->token)
                return -ENOMEM;
        for (n = strlen(b->token); n > 0 && strchr(" \t\r\n\v\f", b->token[n - 1]); n--)
                b->token[n - 1] = '\0';
        t = b->token + strspn(b->token, " \t\r\n\v\f");
        memmove(b->token, t, strlen(t) + 1);
        return 0;
}

/* --url's list, split in place (argv's string). */
static int split_urls(Options *o, char *list) {
        for (char *u; (u = strsep(&list, ","));) {
                char **n = realloc(o->urls, (o->n_urls + 1) * sizeof(char *));

                if (!n)
                        return -ENOMEM;
                o->urls = n;
                o->urls[o->n_urls++] = u;
        }
        return 0;
}

static int add_pid(Options *o, const char *spec) {
        const char *eq = strchr(spec, '=');
        const char **n = realloc(o->pids, (o->n_pids + 1) * sizeof(char *));
        char *end;

        if (!n)
                return -ENOMEM;
        o->pids = n;
        if (!eq || eq == spec || strtol(eq + 1, &end, 10) <= 0 || *end != '\0')
                return -EINVAL;
        o->pids[o->n_pids++] = spec;
        return 0;
}

static bool number(const char *s, double *ret) {
        char *end;

        *ret = strtod(s, &end);
        return end != s && *end == '\0' && *ret >= 0;
}

static int usage(FILE *f) {
        fprintf(f, "usage: fleet-load --url URL[,URL] --token-file F --path PATH --etcd URL "
                        "[--prefix P] [--fleet NAME] [--build-configuration ID] [--clients N] "
                        "[--seconds S] [--warmup S] [--fulfil-timeout S] [--pid NAME=PID]... "
                        "[--out FILE]\n");
        return -EINVAL;
}

static int parse_option(Options *o, int opt, char *arg) {
        double d;
        int r;

        switch (opt) {
        case 'u': return o->urls ? usage(stderr) : split_urls(o, arg);
        case 't': o->token_file = arg; return 0;
        case 'p': o->path = arg; return 0;
        case 'e': o->etcd = arg; return 0;
        case 'P': o->prefix = arg; return 0;
        case 'f': o->fleet = arg; return 0;
        case 'b': o->build_configuration = arg; return 0;
        case 'o': o->out = arg; return 0;
        case 'i': return (r = add_pid(o, arg)) == -EINVAL ? usage(stderr) : r;
        case 'h': usage(stdout); return 1;
        case 'c': if (!number(arg, &d) || d != (unsigned) d) return usage(stderr);
                  o->clients = (unsigned) d; return 0;
        case 's': return number(arg, &o->seconds) && o->seconds > 0 ? 0 : usage(stderr);
        case 'w': return number(arg, &o->warmup) ? 0 : usage(stderr);
        case 'T': return number(arg, &o->fulfil_timeout) ? 0 : usage(stderr);
        default: return usage(stderr);
        }
}

static int parse_args(Options *o, int argc, char **argv) {
        static const struct option opts[] = {
                { "url", required_argument, NULL, 'u' },
                { "token-file", required_argument, NULL, 't' },
                { "path", required_argument, NULL, 'p' }, { "etcd", required_argument, NULL, 'e' },
                { "prefix", required_argument, NULL, 'P' },
                { "fleet", required_argument, NULL, 'f' },
                { "build-configuration", required_argument, NULL, 'b' },
                { "clients", required_argument, NULL, 'c' },
                { "seconds", required_argument, NULL, 's' },
                { "warmup", required_argument, NULL, 'w' },
                { "fulfil-timeout", required_argument, NULL, 'T' },
                { "pid", required_argument, NULL, 'i' }, { "out", required_argument, NULL, 'o' },
                { "help", no_argument, NULL, 'h' }, {} };
        int opt, r;

        *o = (Options) { .prefix = "/slotd/v1", .fleet = "game", .build_configuration = "1001",
                         .clients = 1, .seconds = 10, .warmup = 1, .fulfil_timeout = 10 };
        while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1)
                if ((r = parse_option(o, opt, optarg)) != 0)
                        return r;
        if (optind != argc || !o->urls || !o->token_file || !o->path || !o->etcd)
                return usage(stderr);
        return 0;
}

int main(int argc, char **argv) {
        Bench b = {};
        int r;

        r = parse_args(&b.o, argc, argv);
        if (r == 0 && (r = read_token(&b)) < 0)
                fprintf(stderr, "fleet-load: %s: %s\n", b.o.token_file, strerror(-r));
        if (r != 0) {
                bench_done(&b);
                return r > 0 ? 0 : 2;
        }
        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        r = bench_setup(&b);
        if (r < 0)
                fprintf(stderr, "fleet-load: cannot start: %s\n", strerror(-r));
        else if (sd_event_loop(b.event) < 0 || b.exit_code != 0)
                r = -1;
        else
                r = bench_report(&b);
        bench_done(&b);
        curl_global_cleanup();
        return r < 0 ? 1 : 0;
}
