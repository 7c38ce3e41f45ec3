/* SPDX-License-Identifier: MIT */
/* etcd-drive: runs a script of etcd requests through fleet/etcd/etcd.h, one Etcd on one sd-event
 * loop, for test-etcd-client.sh. The script comes on stdin, one command a line; each prints
 * one result line (and its kvs / events) on stdout, ending with "ms=<elapsed>":
 *
 *   put KEY VALUE [LEASE]          ok rev=R
 *   get KEY | prefix KEY [LIMIT]   kv KEY VALUE c=C m=M v=V l=L ...; ok rev=R count=N more=B
 *   del KEY | delprefix KEY        ok rev=R deleted=N
 *   txn CMP... then OP... else OP...
 *        CMP: create|mod|version|lease:KEY:=|!=|<|>:NUMBER, value:KEY:=|!=:TEXT
 *        OP:  put:KEY:VALUE, get:KEY, prefix:KEY, del:KEY
 *                                  per op "resp I ..." (and its kvs); txn succeeded=B rev=R n=N
 *   nest TXN ; TXN ...             one txn without compares whose ops are the TXNs (each as
 *                                  txn's words), nested (ETCD_OP_TXN): per nested txn "nested I
 *                                  succeeded=B rev=R n=N" and its ops' "resp"; txn ... n=N
 *   batch TXN ; TXN ...            the TXNs queued at once through etcd_batch_txn (group
 *                                  commit): per txn, as it is answered, "batched I succeeded=B
 *                                  rev=R n=N" (or "batched I error ENAME") and its ops' "resp";
 *                                  then batch txns=N requests=K (requests sent for them)
 *   batch-cancel TXN ; TXN ; TXN   the same, but TXN 1 is cancelled while queued and TXN 2 (in
 *                                  the same request as TXN 0) by TXN 0's callback: only TXN 0
 *                                  answers
 *   grant TTL                      lease id=ID ttl=T (remembered as @lease)
 *   keepalive [ID] | revoke [ID]   keepalive ttl=T | ok rev=R
 *   keepalive-for SECONDS PERIOD_MS  keeps @lease alive: kept n=N ttl=T
 *   leases N TTL [PREFIX]          N leases at once, a key PREFIX<I> (/it/many/) under each
 *   keepalive-many SECONDS PERIOD_MS  rounds of keepalives of the N leases at once, errors not
 *                                  fatal: kept-many rounds=R ok=K errors=E expired=X last=L
 *                                  (ttl > 0 in the last round) first_error=ENAME
 *   keepalive-many SECONDS PERIOD_MS rounds   the same, and a line as each round ends:
 *                                  round n=R ok=K errors=E took_ms=T
 *   keepalive-cancel               one of @lease cancelled at once, then another: keepalive
 *                                  ttl=T cancelled_called=C (the first's callbacks: 0)
 *   watch NAME KEY|prefix:KEY [REV]  watch NAME created rev=R (events print as they come:
 *                                  event NAME PUT|DELETE KEY VALUE m=M; watch-error NAME E c=C)
 *   wait NAME N [SECONDS]          watch NAME events=N (or watch-error / timeout)
 *   unwatch NAME
 *   shell COMMAND...               runs COMMAND (blocking; for kill/restart in the script)
 *   bench-txn N [PARALLEL]         N txns (PARALLEL in flight, 1 by default), each two
 *                                  create_revision compares and two puts, as a claim is:
 *                                  bench txns=N ok=K seconds=S rate=R p50_us=.. p99_us=..
 *   bench-batch N [PARALLEL [BYTES]]  the same txns through etcd_batch_txn, each value of
 *                                  BYTES bytes if given; adds requests=K
 *
 * "@lease" and "@rev" (the last revision seen) are replaced in arguments. Errors print
 * "error ENAME message". Exit status 0 unless the script itself was malformed (2).
 * Environment: ETCD_ENDPOINTS (comma-separated), ETCD_TIMEOUT_MS, and for TLS ETCD_CA_FILE,
 * ETCD_CERT_FILE, ETCD_KEY_FILE (EtcdConfig's ca_file, cert_file, key_file). */
#include "etcd-drive.h"

void end_line(Drive *d) {
        printf(" ms=%" PRIu64 "\n", (now_usec(CLOCK_MONOTONIC) - d->started) / USEC_PER_MSEC);
        fflush(stdout);
}

bool print_error(Drive *d, const EtcdResponse *r) {
        if (r->error == 0)
                return false;
        printf("error %s %s", strerrorname_np(-r->error) ?: "?", r->message);
        end_line(d);
        return true;
}

static void print_kvs(const EtcdKv *kvs, size_t n, const char *indent) {
        for (size_t i = 0; i < n; i++)
                printf("%skv %s %s c=%" PRId64 " m=%" PRId64 " v=%" PRId64 " l=%" PRId64 "\n",
                       indent, kvs[i].key, kvs[i].value_len ? kvs[i].value : "-",
                       kvs[i].create_revision, kvs[i].mod_revision, kvs[i].version,
                       kvs[i].lease);
}

static void on_done(Etcd *e, const EtcdResponse *r, void *userdata) {
        Drive *d = userdata;

        if (!print_error(d, r)) {
                if (r->revision > 0)
                        d->rev = r->revision;
                print_kvs(r->kvs, r->n_kvs, "");
                printf("ok rev=%" PRId64, r->revision);
                if (r->n_kvs > 0 || r->count > 0)
                        printf(" count=%" PRId64 " more=%d", r->count, r->more);
                if (r->deleted > 0)
                        printf(" deleted=%" PRId64, r->deleted);
                end_line(d);
        }
        step(d);
}

static void on_txn(Etcd *e, const EtcdResponse *r, void *userdata) {
        Drive *d = userdata;

        if (!print_error(d, r)) {
                d->rev = r->revision;
                for (size_t i = 0; i < r->n_responses; i++) {
                        const EtcdResponse *s = &r->responses[i];
                        printf("resp %zu rev=%" PRId64 " count=%" PRId64 " deleted=%" PRId64
                               "\n", i, s->revision, s->count, s->deleted);
                        print_kvs(s->kvs, s->n_kvs, "  ");
                }
                printf("txn succeeded=%d rev=%" PRId64 " n=%zu", r->succeeded, r->revision,
                       r->n_responses);
                end_line(d);
        }
        step(d);
}

static void on_lease(Etcd *e, const EtcdResponse *r, void *userdata) {
        Drive *d = userdata;

        if (!print_error(d, r)) {
                d->lease = r->lease_id;
                printf("lease id=%" PRId64 " ttl=%" PRId64, r->lease_id, r->ttl);
                end_line(d);
        }
        step(d);
}

static void on_keepalive(Etcd *e, const EtcdResponse *r, void *userdata) {
        Drive *d = userdata;

        if (!print_error(d, r)) {
                printf("keepalive ttl=%" PRId64, r->ttl);
                end_line(d);
        }
        step(d);
}

/* ---- the script's words ---- */

int64_t number(Drive *d, const char *s) {
        if (streq(s, "@lease"))
                return d->lease;
        if (streq(s, "@rev"))
                return d->rev;
        return strtoll(s, NULL, 10);
}

static size_t split(char *line, char **words) {
        size_t n = 0;
        char *save = NULL;

        for (char *w = strtok_r(line, " \t", &save); w && n < MAX_WORDS;
             w = strtok_r(NULL, " \t", &save))
                words[n++] = w;
        return n;
}

static DriveWatch *watch_by_name(Drive *d, const char *name, bool create) {
        for (size_t i = 0; i < MAX_WATCHES; i++)
                if (d->watches[i].name[0] && streq(d->watches[i].name, name))
                        return &d->watches[i];
        if (!create)
                return NULL;
        for (size_t i = 0; i < MAX_WATCHES; i++)
                if (!d->watches[i].name[0]) {
                        (void) snprintf(d->watches[i].name, sizeof(d->watches[i].name), "%s",
                                        name);
                        return &d->watches[i];
                }
        return NULL;
}

/* ---- txn ---- */

static int parse_compare(Drive *d, char *w, EtcdCompare *c) {
        static const char *const targets[] = { "version", "create", "mod", "value", "lease" };
        char *target = strsep(&w, ":"), *key = strsep(&w, ":"), *op = strsep(&w, ":");
        size_t t;

        if (!target || !key || !op || !w)
                return -EINVAL;
        for (t = 0; t < ELEMENTSOF(targets) && !streq(targets[t], target); t++)
                ;
        if (t == ELEMENTSOF(targets))
                return -EINVAL;
        *c = (EtcdCompare) { .key = key, .target = (EtcdCompareTarget) t };
        c->result = streq(op, "=") ? ETCD_EQUAL : streq(op, "!=") ? ETCD_NOT_EQUAL
                  : streq(op, "<") ? ETCD_LESS : ETCD_GREATER;
        if (c->target == ETCD_TARGET_VALUE)
                c->value = w;
        else
                c->number = number(d, w);
        return 0;
}

static int parse_op(Drive *d, char *w, EtcdOp *op, char **prefix_end) {
        char *kind = strsep(&w, ":"), *key = strsep(&w, ":");

        if (!kind || !key)
                return -EINVAL;
        *op = (EtcdOp) { .key = key };
        if (streq(kind, "put")) {
                op->type = ETCD_OP_PUT;
                op->value = w ?: "";
        } else if (streq(kind, "get"))
                op->type = ETCD_OP_RANGE;
        else if (streq(kind, "prefix")) {
                op->type = ETCD_OP_RANGE;
                *prefix_end = etcd_prefix_end(key);
                op->range_end = *prefix_end;
        } else if (streq(kind, "del"))
                op->type = ETCD_OP_DELETE;
        else
                return -EINVAL;
        return 0;
}

/* A txn's words parsed; its strings point into the words. */
typedef struct DriveTxn {
        EtcdCompare cmp[MAX_WORDS];
        EtcdOp ops[2][MAX_WORDS];
        size_t n_cmp, n_ops[2], n_ends;
        char *ends[MAX_WORDS];
} DriveTxn;

static void drive_txn_done(DriveTxn *t) {
        for (size_t i = 0; i < t->n_ends; i++)
                free(t->ends[i]);
        t->n_ends = 0;
}

/* words: CMP... then OP... else OP... */
static int parse_txn(Drive *d, char **words, size_t n, DriveTxn *t) {
        size_t branch = 2;
        int r = 0;

        for (size_t i = 0; i < n && r >= 0; i++) {
                if (streq(words[i], "then"))
                        branch = 0;
                else if (streq(words[i], "else"))
                        branch = 1;
                else if (branch == 2)
                        r = parse_compare(d, words[i], &t->cmp[t->n_cmp++]);
                else
                        r = parse_op(d, words[i], &t->ops[branch][t->n_ops[branch]++],
                                     &t->ends[t->n_ends++]);
        }
        return r;
}

static int run_txn(Drive *d, char **words, size_t n) {
        _cleanup_free_ DriveTxn *t = new0(DriveTxn, 1);
        int r;

        if (!t)
                return -ENOMEM;
        r = parse_txn(d, words + 1, n - 1, t);
        if (r >= 0)
                r = etcd_txn(d->etcd, t->cmp, t->n_cmp, t->ops[0], t->n_ops[0], t->ops[1],
                             t->n_ops[1], on_txn, d, NULL);
        drive_txn_done(t);
        return r;
}

/* ---- nested txns: nest, batch ---- */

static void print_responses(const EtcdResponse *r, const char *indent) {
        for (size_t i = 0; i < r->n_responses; i++) {
                const EtcdResponse *s = &r->responses[i];
                printf("%sresp %zu rev=%" PRId64 " count=%" PRId64 " deleted=%" PRId64 "\n",
                       indent, i, s->revision, s->count, s->deleted);
                print_kvs(s->kvs, s->n_kvs, "    ");
        }
}

static void on_nest(Etcd *e, const EtcdResponse *r, void *userdata) {
        Drive *d = userdata;

        if (!print_error(d, r)) {
                d->rev = r->revision;
                for (size_t i = 0; i < r->n_responses; i++) {
                        const EtcdResponse *s = &r->responses[i];
                        printf("nested %zu succeeded=%d rev=%" PRId64 " n=%zu\n", i,
                               s->succeeded, s->revision, s->n_responses);
                        print_responses(s, "  ");
                }
                printf("txn succeeded=%d rev=%" PRId64 " n=%zu", r->succeeded, r->revision,
                       r->n_responses);
                end_line(d);
        }
        step(d);
}

typedef struct BatchedTxn {
        Drive *drive;
        size_t index;
} BatchedTxn;

static void on_batched(Etcd *e, const EtcdResponse *r, void *userdata) {
        BatchedTxn *b = userdata;
        Drive *d = b->drive;
        uint64_t requests;

        if (r->error < 0)
                printf("batched %zu error %s %s\n", b->index, strerrorname_np(-r->error) ?: "?",
                       r->message);
        else {
                d->rev = MAX(d->rev, r->revision);
                printf("batched %zu succeeded=%d rev=%" PRId64 " n=%zu\n", b->index,
                       r->succeeded, r->revision, r->n_responses);
                print_responses(r, "  ");
        }
        free(b);
        if (d->cancel_later) {
                etcd_batch_txn_cancel(d->cancel_later);
                d->cancel_later = NULL;
                d->cancel_later_data = mfree(d->cancel_later_data);
        }
        if (++d->count < d->target)
                return;
        etcd_batch_counts(d->batch, &requests, NULL);
        printf("batch txns=%zu requests=%" PRIu64, d->count, requests - d->batches_before);
        end_line(d);
        step(d);
}

/* words: TXN ; TXN ... */
static int run_nested(Drive *d, char **words, size_t n, bool batch, bool cancel) {
        _cleanup_free_ DriveTxn *t = new0(DriveTxn, MAX_NESTED);
        EtcdOp nested[MAX_NESTED];
        size_t k = 0, from = 1;
        int r = 0;

        if (!t)
                return -ENOMEM;
        for (size_t i = 1; i <= n && r >= 0; i++) {
                if (i < n && !streq(words[i], ";"))
                        continue;
                if (k == MAX_NESTED) {
                        r = -EINVAL;
                        break;
                }
                r = parse_txn(d, words + from, i - from, &t[k]);
                nested[k] = (EtcdOp){ .type = ETCD_OP_TXN, .compare = t[k].cmp,
                                      .n_compare = t[k].n_cmp, .success = t[k].ops[0],
                                      .n_success = t[k].n_ops[0], .failure = t[k].ops[1],
                                      .n_failure = t[k].n_ops[1] };
                k++;
                from = i + 1;
        }
        if (r >= 0 && !batch)
                r = etcd_txn(d->etcd, NULL, 0, nested, k, NULL, 0, on_nest, d, NULL);
        if (r >= 0 && batch) {
                etcd_batch_counts(d->batch, &d->batches_before, NULL);
                d->count = 0;
                d->target = k;
        }
        if (r >= 0 && cancel && k != 3)
                r = -EINVAL;
        if (r >= 0 && cancel)
                d->target = 1;
        for (size_t i = 0; r >= 0 && batch && i < k; i++) {
                BatchedTxn *b = new0(BatchedTxn, 1);
                EtcdBatchTxn *handle = NULL;
                if (b)
                        *b = (BatchedTxn){ .drive = d, .index = i };
                r = b ? etcd_batch_txn(d->batch, nested[i].compare, nested[i].n_compare,
                                       nested[i].success, nested[i].n_success,
                                       nested[i].failure, nested[i].n_failure, on_batched, b,
                                       &handle)
                      : -ENOMEM;
                if (r >= 0 && cancel && i == 1) {
                        etcd_batch_txn_cancel(handle);
                        free(b);
                } else if (r >= 0 && cancel && i == 2) {
                        d->cancel_later = handle;
                        d->cancel_later_data = b;
                }
                if (r < 0) {
                        free(b);
                        /* those queued answer; the count waits for them only */
                        d->target = i;
                        r = i > 0 ? 0 : r;
                        break;
                }
        }
        for (size_t i = 0; i < MIN(k, (size_t) MAX_NESTED); i++)
                drive_txn_done(&t[i]);
        return r;
}

/* ---- watches ---- */

static void wait_check(Drive *d);

static void on_watch(Etcd *e, EtcdWatch *w, const EtcdEvent *events, size_t n, int64_t revision,
                     int error, int64_t compact_revision, void *userdata) {
        DriveWatch *dw = userdata;
        Drive *d = dw->drive;

        if (error < 0) {
                dw->error = error;
                printf("watch-error %s %s c=%" PRId64 "\n", dw->name,
                       strerrorname_np(-error) ?: "?", compact_revision);
                /* freed from its own callback, as etcd.h allows */
                dw->watch = etcd_watch_free(w);
        }
        for (size_t i = 0; i < n; i++)
                printf("event %s %s %s %s m=%" PRId64 "\n", dw->name,
                       events[i].type == ETCD_EVENT_PUT ? "PUT" : "DELETE", events[i].kv.key,
                       events[i].kv.value_len ? events[i].kv.value : "-",
                       events[i].kv.mod_revision);
        dw->events += n;
        fflush(stdout);
        if (!dw->created && error == 0) {
                dw->created = true;
                if (d->waiting == dw && d->wait_for == 0) {
                        d->waiting = NULL;
                        printf("watch %s created rev=%" PRId64, dw->name, revision);
                        end_line(d);
                        step(d);
                        return;
                }
        }
        wait_check(d);
}

static void wait_done(Drive *d, const char *how) {
        DriveWatch *dw = d->waiting;

        d->waiting = NULL;
        (void) sd_event_source_set_enabled(d->timer, SD_EVENT_OFF);
        printf("watch %s %s events=%zu", dw->name, how, dw->events);
        end_line(d);
        step(d);
}

static void wait_check(Drive *d) {
        DriveWatch *dw = d->waiting;

        if (!dw)
                return;
        if (dw->error < 0 && d->wait_for == 0) {
                /* a watch that ended before it was created (the waiter of "watch") */
                d->waiting = NULL;
                printf("watch %s failed", dw->name);
                end_line(d);
                step(d);
        } else if (d->wait_for > 0 && (dw->events >= d->wait_for || dw->error < 0))
                wait_done(d, dw->error < 0 ? "ended" : "done");
}

static int on_wait_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Drive *d = userdata;

        if (d->waiting)
                wait_done(d, "timeout");
        return 0;
}

static int run_watch(Drive *d, char **words, size_t n) {
        _cleanup_free_ char *end = NULL;
        DriveWatch *dw;
        const char *key;
        int r;

        if (n < 3 || !(dw = watch_by_name(d, words[1], true)))
                return -EINVAL;
        dw->watch = etcd_watch_free(dw->watch);
        dw->events = 0;
        dw->error = 0;
        dw->created = false;
        dw->drive = d;
        key = words[2];
        if (strncmp(key, "prefix:", 7) == 0) {
                key += 7;
                end = etcd_prefix_end(key);
        }
        r = etcd_watch(d->etcd, key, end, n > 3 ? number(d, words[3]) : 0, on_watch, dw,
                       &dw->watch);
        if (r < 0)
                return r;
        d->waiting = dw;
        d->wait_for = 0;
        return 0;
}

static int run_wait(Drive *d, char **words, size_t n) {
        DriveWatch *dw;
        double secs = n > 3 ? strtod(words[3], NULL) : 10;

        if (n < 3 || !(dw = watch_by_name(d, words[1], false)))
                return -EINVAL;
        d->waiting = dw;
        d->wait_for = (size_t) strtoull(words[2], NULL, 10);
        (void) sd_event_source_set_time_relative(d->timer, (usec_t) (secs * USEC_PER_SEC));
        (void) sd_event_source_set_enabled(d->timer, SD_EVENT_ONESHOT);
        if (d->wait_for == 0 || dw->events >= d->wait_for || dw->error < 0) {
                d->wait_for = MAX(d->wait_for, (size_t) 1);
                wait_done(d, dw->error < 0 ? "ended" : "done");
        }
        return 0;
}

/* ---- keepalive-for, bench ---- */

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata);

static void on_kept(Etcd *e, const EtcdResponse *r, void *userdata) {
        Drive *d = userdata;

        if (print_error(d, r)) {
                d->until = 0;
                step(d);
                return;
        }
        d->count++;
        d->last_ttl = r->ttl;
        if (now_usec(CLOCK_MONOTONIC) >= d->until || r->ttl <= 0) {
                printf("kept n=%zu ttl=%" PRId64, d->count, r->ttl);
                end_line(d);
                step(d);
                return;
        }
        (void) sd_event_source_set_time_relative(d->timer, d->period);
        (void) sd_event_source_set_enabled(d->timer, SD_EVENT_ONESHOT);
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Drive *d = userdata;
        int r;

        if (d->waiting)
                return on_wait_timeout(s, usec, userdata);
        if (d->many_mode) {
                many_round(d);
                return 0;
        }
        r = etcd_lease_keepalive(d->etcd, d->lease, on_kept, d, NULL);
        if (r < 0) {
                printf("error %s keepalive", strerrorname_np(-r) ?: "?");
                end_line(d);
                step(d);
        }
        return 0;
}

static int cmp_usec(const void *a, const void *b) {
        usec_t x = *(const usec_t *) a, y = *(const usec_t *) b;
        return x < y ? -1 : x > y;
}

static int bench_next(Drive *d);

typedef struct BenchTxn {
        Drive *drive;
        usec_t sent;
} BenchTxn;

static void on_bench(Etcd *e, const EtcdResponse *r, void *userdata) {
        BenchTxn *b = userdata;
        Drive *d = b->drive;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        double secs;

        d->lat[d->count++] = now - b->sent;
        free(b);
        if (r->error == 0 && r->succeeded)
                d->ok++;
        if (d->issued < d->target && bench_next(d) >= 0)
                return;
        if (d->count < d->issued)
                return; /* others in flight */
        qsort(d->lat, d->count, sizeof(usec_t), cmp_usec);
        secs = (double) (now - d->started) / USEC_PER_SEC;
        printf("bench txns=%zu ok=%zu seconds=%.3f rate=%.0f p50_us=%" PRIu64 " p99_us=%" PRIu64,
               d->count, d->ok, secs, d->count / secs, d->lat[d->count / 2],
               d->lat[d->count * 99 / 100]);
        if (d->bench_batched) {
                uint64_t requests;
                etcd_batch_counts(d->batch, &requests, NULL);
                printf(" requests=%" PRIu64, requests - d->batches_before);
        }
        end_line(d);
        d->lat = mfree(d->lat);
        step(d);
}

/* One txn of the kind the allocator makes: two compares (keys not yet there), two puts; keys
 * of this run only (the start time in them), so every txn succeeds. */
static int bench_next(Drive *d) {
        char key[64], claim[64];
        EtcdCompare c[2];
        EtcdOp ops[2];
        BenchTxn *b = new0(BenchTxn, 1);
        int r;

        if (!b)
                return -ENOMEM;
        (void) snprintf(key, sizeof(key), "/bench/%" PRIu64 "/alloc/%zu", d->started, d->issued);
        (void) snprintf(claim, sizeof(claim), "/bench/%" PRIu64 "/claim/%zu", d->started,
                        d->issued);
        c[0] = (EtcdCompare) { .key = key, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL };
        c[1] = (EtcdCompare) { .key = claim, .target = ETCD_TARGET_CREATE, .result = ETCD_EQUAL };
        ops[0] = (EtcdOp) { .type = ETCD_OP_PUT, .key = key,
                            .value = d->bench_value ?: "{\"status\":\"claimed\"}" };
        ops[1] = (EtcdOp) { .type = ETCD_OP_PUT, .key = claim,
                            .value = d->bench_value ?: "{\"claim\":true}" };
        *b = (BenchTxn) { .drive = d, .sent = now_usec(CLOCK_MONOTONIC) };
        if (d->bench_batched)
                r = etcd_batch_txn(d->batch, c, 2, ops, 2, NULL, 0, on_bench, b, NULL);
        else
                r = etcd_txn(d->etcd, c, 2, ops, 2, NULL, 0, on_bench, b, NULL);
        if (r < 0) {
                free(b);
                return r;
        }
        d->issued++;
        return 0;
}

/* ---- the script ---- */

static int run(Drive *d, char **w, size_t n) {
        _cleanup_free_ char *end = NULL;

        if (streq(w[0], "put") && n >= 3)
                return etcd_put(d->etcd, w[1], w[2], n > 3 ? number(d, w[3]) : 0, on_done, d,
                                NULL);
        if ((streq(w[0], "get") || streq(w[0], "prefix")) && n >= 2) {
                if (streq(w[0], "prefix"))
                        end = etcd_prefix_end(w[1]);
                return etcd_range(d->etcd, w[1], end, n > 2 ? number(d, w[2]) : 0, on_done, d,
                                  NULL);
        }
        if ((streq(w[0], "del") || streq(w[0], "delprefix")) && n >= 2) {
                if (streq(w[0], "delprefix"))
                        end = etcd_prefix_end(w[1]);
                return etcd_delete(d->etcd, w[1], end, on_done, d, NULL);
        }
        if (streq(w[0], "txn"))
                return run_txn(d, w, n);
        if (streq(w[0], "nest") || streq(w[0], "batch") || streq(w[0], "batch-cancel"))
                return run_nested(d, w, n, !streq(w[0], "nest"), streq(w[0], "batch-cancel"));
        if (streq(w[0], "grant") && n >= 2)
                return etcd_lease_grant(d->etcd, number(d, w[1]), on_lease, d, NULL);
        if (streq(w[0], "keepalive"))
                return etcd_lease_keepalive(d->etcd, n > 1 ? number(d, w[1]) : d->lease,
                                            on_keepalive, d, NULL);
        if (streq(w[0], "revoke"))
                return etcd_lease_revoke(d->etcd, n > 1 ? number(d, w[1]) : d->lease, on_done,
                                         d, NULL);
        if (streq(w[0], "keepalive-for") && n >= 3) {
                d->count = 0;
                d->until = now_usec(CLOCK_MONOTONIC) + (usec_t) (strtod(w[1], NULL) * USEC_PER_SEC);
                d->period = strtoull(w[2], NULL, 10) * USEC_PER_MSEC;
                return etcd_lease_keepalive(d->etcd, d->lease, on_kept, d, NULL);
        }
        if (streq(w[0], "leases"))
                return run_leases(d, w, n);
        if (streq(w[0], "keepalive-many") && n >= 3 && d->n_many > 0) {
                d->until = now_usec(CLOCK_MONOTONIC) + (usec_t) (strtod(w[1], NULL) * USEC_PER_SEC);
                d->period = strtoull(w[2], NULL, 10) * USEC_PER_MSEC;
                d->rounds = d->ok = d->errors = d->expired = 0;
                d->first_error = 0;
                d->many_mode = true;
                d->many_report = n > 3 && streq(w[3], "rounds");
                many_round(d);
                return 0;
        }
        if (streq(w[0], "keepalive-cancel"))
                return run_keepalive_cancel(d);
        if (streq(w[0], "watch"))
                return run_watch(d, w, n);
        if (streq(w[0], "wait"))
                return run_wait(d, w, n);
        if ((streq(w[0], "bench-txn") || streq(w[0], "bench-batch")) && n >= 2) {
                size_t parallel = n > 2 ? MAX(strtoull(w[2], NULL, 10), 1ULL) : 1;
                int r = 0;

                d->bench_batched = streq(w[0], "bench-batch");
                etcd_batch_counts(d->batch, &d->batches_before, NULL);
                d->bench_value = mfree(d->bench_value);
                if (n > 3) {
                        size_t size = strtoull(w[3], NULL, 10);
                        d->bench_value = malloc(size + 1);
                        if (!d->bench_value)
                                return -ENOMEM;
                        memset(d->bench_value, 'x', size);
                        d->bench_value[size] = '\0';
                }

                d->target = MAX(strtoull(w[1], NULL, 10), 1ULL);
                d->count = d->ok = d->issued = 0;
                d->lat = new0(usec_t, d->target);
                if (!d->lat)
                        return -ENOMEM;
                while (r >= 0 && d->issued < MIN(parallel, d->target))
                        r = bench_next(d);
                return d->issued > 0 ? 0 : r;
        }
        return -EINVAL;
}

/* A command that completes at once (unwatch, shell) returns 1. */
static int run_sync(Drive *d, char **w, size_t n, const char *line) {
        if (streq(w[0], "unwatch") && n >= 2) {
                DriveWatch *dw = watch_by_name(d, w[1], false);
                if (!dw)
                        return -EINVAL;
                dw->watch = etcd_watch_free(dw->watch);
                printf("unwatched %s", w[1]);
                return 1;
        }
        if (streq(w[0], "shell")) {
                int st = system(line + strlen("shell"));
                printf("shell status=%d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
                return 1;
        }
        return 0;
}

void step(Drive *d) {
        for (;;) {
                char *words[MAX_WORDS], *copy;
                const char *line;
                size_t n;
                int r;

                if (d->next >= d->n_lines) {
                        d->busy = false;
                        if (d->eof)
                                (void) sd_event_exit(d->event, d->status);
                        return;
                }
                d->busy = true;
                line = d->lines[d->next++];
                copy = strdupa(line);
                n = split(copy, words);
                if (n == 0 || words[0][0] == '#')
                        continue;
                d->started = now_usec(CLOCK_MONOTONIC);
                r = run_sync(d, words, n, line);
                if (r > 0) {
                        end_line(d);
                        continue;
                }
                if (r == 0)
                        r = run(d, words, n);
                if (r >= 0)
                        return; /* its callback steps on */
                printf("error %s bad command: %s", strerrorname_np(-r) ?: "?", line);
                end_line(d);
                if (r == -EINVAL)
                        d->status = 2;
        }
}

/* The script is read as it comes, so that a test can act between commands (a coprocess). */
static int on_stdin(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Drive *d = userdata;
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof(buf));

        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                d->eof = true;
                (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
        }
        for (ssize_t i = 0; i < n; i++) {
                char *nl;
                if (d->partial_len + 1 >= sizeof(d->partial))
                        d->partial_len = 0; /* an absurd line is dropped */
                d->partial[d->partial_len++] = buf[i];
                if (buf[i] != '\n')
                        continue;
                d->partial[d->partial_len - 1] = '\0';
                nl = strdup(d->partial);
                d->partial_len = 0;
                char **l = realloc(d->lines, (d->n_lines + 1) * sizeof(char *));
                if (!nl || !l) {
                        free(nl);
                        return sd_event_exit(d->event, 1);
                }
                d->lines = l;
                d->lines[d->n_lines++] = nl;
        }
        if (!d->busy)
                step(d);
        return 0;
}

int main(int argc, char **argv) {
        Drive d = {};
        EtcdConfig config = {};
        _cleanup_free_ char *eps = NULL;
        char *endpoints[16] = {}, *save = NULL;
        size_t n = 0;
        int r;

        eps = strdup(getenv("ETCD_ENDPOINTS") ?: "");
        if (!eps || eps[0] == '\0') {
                fprintf(stderr, "ETCD_ENDPOINTS is not set\n");
                return 2;
        }
        for (char *p = strtok_r(eps, ",", &save); p && n < 15; p = strtok_r(NULL, ",", &save))
                endpoints[n++] = p;
        config.endpoints = endpoints;
        config.timeout_usec = strtoull(getenv("ETCD_TIMEOUT_MS") ?: "2000", NULL, 10) *
                              USEC_PER_MSEC;
        config.ca_file = getenv("ETCD_CA_FILE");
        config.cert_file = getenv("ETCD_CERT_FILE");
        config.key_file = getenv("ETCD_KEY_FILE");
        (void) fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);
        if (sd_event_default(&d.event) < 0 ||
            sd_event_add_io(d.event, &d.input, STDIN_FILENO, EPOLLIN, on_stdin, &d) < 0 ||
            sd_event_add_time_relative(d.event, &d.timer, CLOCK_MONOTONIC, 0, 1, on_tick, &d) < 0 ||
            sd_event_source_set_enabled(d.timer, SD_EVENT_OFF) < 0) {
                fprintf(stderr, "set-up failed\n");
                return 1;
        }
        r = etcd_new(&d.etcd, d.event, &config);
        if (r >= 0)
                r = etcd_batch_new(&d.batch, d.etcd, d.event, 1);
        if (r < 0) {
                fprintf(stderr, "etcd_new: %s\n", strerror(-r));
                return 1;
        }
        r = sd_event_loop(d.event);
        for (size_t i = 0; i < MAX_WATCHES; i++)
                etcd_watch_free(d.watches[i].watch);
        etcd_batch_free(d.batch);
        etcd_free(d.etcd);
        free(d.bench_value);
        free(d.many);
        sd_event_source_unref(d.timer);
        sd_event_source_unref(d.input);
        sd_event_unref(d.event);
        for (size_t i = 0; i < d.n_lines; i++)
                free(d.lines[i]);
        free(d.lines);
        return r;
}
