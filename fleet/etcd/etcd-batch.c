/* SPDX-License-Identifier: MIT */
/* Group commit (etcd.h): txns queued as nested txns, sent together as the success ops of one
 * txn without compares. etcd applies such a request as one raft entry (one fsync), each nested
 * txn on its own compares, and answers each in its own response_txn: the i-th op's answer
 * goes to the i-th queued txn's callback. A failed request fails every txn in it the same way
 * (the client never sends a write twice). Callbacks run from the loop only, never inside
 * etcd_batch_txn(): a batch leaves from a deferred event. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-grpc.h"
#include "etcd-answer.h"
#include "etcd.h"
#include "hashmap.h"
#include "list.h"
#include "macro.h"
#include "strv.h"

/* etcd's --max-request-bytes defaults to 1.5 MiB (of protobuf, the request's own encoding);
 * its --max-txn-ops to 128, counted along each nesting path. */
#define BATCH_BYTES_MAX (1024U * 1024U)
#define BATCH_OPS_MAX 128U
/* How far past a txn that must wait (it writes a key of the batch) the queue is searched. */
#define BATCH_SCAN_MAX (4U * BATCH_OPS_MAX)
/* A read in a request that broke after it was sent goes again, this many times at most. */
#define BATCH_RESEND_MAX 2U

typedef struct Flight Flight;

struct EtcdBatchTxn {
        EtcdBatch *batch;
        LIST_FIELDS(EtcdBatchTxn, queue); /* in batch->queue until sent */
        Flight *flight;                   /* the request it went in */
        size_t index;                     /* in flight->txns */
        bool dispatching;
        EtcdBytes op; /* its op (a RequestOp with its request_txn), until sent */
        size_t size;
        char **keys;         /* what it puts or deletes */
        char **compare_keys; /* what its compares name */
        bool alone;  /* deletes a range: sent alone */
        bool range;  /* etcd_batch_range(): the callback gets its one op's answer */
        unsigned cost;
        unsigned resent;
        etcd_callback_t cb;
        void *userdata;
};

struct Flight {
        EtcdBatch *batch;
        EtcdRequest *req;
        EtcdBatchTxn **txns; /* NULL where cancelled or answered */
        size_t n_txns;
        bool dispatching;
        LIST_FIELDS(Flight, flights);
};

struct EtcdBatch {
        unsigned n_ref;
        bool freed;
        Etcd *etcd;
        sd_event_source *defer;
        unsigned max_in_flight, n_in_flight;
        EtcdBatchTxn *queue, *queue_tail;
        Flight *flights;
        uint64_t n_batches, n_txns;
};

/* ---- lists ---- */

static void queue_append(EtcdBatch *b, EtcdBatchTxn *t) {
        t->queue_next = NULL;
        t->queue_prev = b->queue_tail;
        if (b->queue_tail)
                b->queue_tail->queue_next = t;
        else
                b->queue = t;
        b->queue_tail = t;
}

static void queue_remove(EtcdBatch *b, EtcdBatchTxn *t) {
        if (b->queue_tail == t)
                b->queue_tail = t->queue_prev;
        LIST_REMOVE(queue, b->queue, t);
}

static void txn_free(EtcdBatchTxn *t) {
        etcd_bytes_done(&t->op);
        strv_free(t->keys);
        strv_free(t->compare_keys);
        free(t);
}

static void flight_free(Flight *f) {
        for (size_t i = 0; i < f->n_txns; i++)
                if (f->txns[i])
                        txn_free(f->txns[i]);
        free(f->txns);
        free(f);
}

static void batch_unref(EtcdBatch *b) {
        if (!b || --b->n_ref > 0)
                return;
        sd_event_source_disable_unref(b->defer);
        free(b);
}

/* ---- answers ---- */

/* The answer of txn i of f: its own (or, for a range, its one op's), or the request's
 * failure (shared by all). */
static const EtcdResponse *flight_txn_answer(const Flight *f, const EtcdResponse *resp,
                                             size_t i, EtcdResponse *bad) {
        const EtcdResponse *mine;

        if (resp->error < 0)
                return resp;
        if (!resp->succeeded || resp->n_responses != f->n_txns) {
                *bad = (EtcdResponse){ .error = -EBADMSG,
                                       .message = "etcd answered a batch of txns with another "
                                                  "number of answers" };
                return bad;
        }
        mine = &resp->responses[i];
        if (!f->txns[i]->range)
                return mine;
        if (mine->n_responses != 1) {
                *bad = (EtcdResponse){ .error = -EBADMSG,
                                       .message = "etcd answered a read in a batch without "
                                                  "its range" };
                return bad;
        }
        return &mine->responses[0];
}

static bool txn_read_only(const EtcdBatchTxn *t) {
        return !t->alone && strv_length(t->keys) == 0;
}

/* A request that broke after it was sent (its member died): its reads go again, first in the
 * queue and in their order, as a range of their own would go to the next member; its writes
 * fail (their outcome is unknown). */
static void flight_requeue_reads(Flight *f, const EtcdResponse *resp) {
        EtcdBatch *b = f->batch;
        EtcdBatchTxn *after = NULL;

        if (resp->error != -ECONNRESET || b->freed)
                return;
        for (size_t i = 0; i < f->n_txns; i++) {
                EtcdBatchTxn *t = f->txns[i];

                if (!t || !txn_read_only(t) || !t->op.data || t->resent >= BATCH_RESEND_MAX)
                        continue;
                f->txns[i] = NULL;
                t->flight = NULL;
                t->resent++;
                if (after) {
                        t->queue_prev = after;
                        t->queue_next = after->queue_next;
                        if (after->queue_next)
                                after->queue_next->queue_prev = t;
                        else
                                b->queue_tail = t;
                        after->queue_next = t;
                } else {
                        LIST_PREPEND(queue, b->queue, t);
                        if (!b->queue_tail)
                                b->queue_tail = t;
                }
                after = t;
        }
}

static void flight_dispatch(Flight *f, Etcd *e, const EtcdResponse *resp) {
        EtcdBatch *b = f->batch;
        EtcdResponse bad;

        flight_requeue_reads(f, resp);
        f->dispatching = true;
        for (size_t i = 0; i < f->n_txns; i++) {
                EtcdBatchTxn *t = f->txns[i];

                if (!t)
                        continue;
                if (!b->freed) {
                        const EtcdResponse *answer = flight_txn_answer(f, resp, i, &bad);
                        f->txns[i] = NULL;
                        t->dispatching = true;
                        t->cb(e, answer, t->userdata);
                } else
                        f->txns[i] = NULL;
                txn_free(t);
        }
        flight_free(f);
}

static void batch_schedule(EtcdBatch *b);

static void on_flight_answer(Etcd *e, const EtcdResponse *resp, void *userdata) {
        Flight *f = userdata;
        EtcdBatch *b = f->batch;

        b->n_ref++;
        f->req = NULL;
        LIST_REMOVE(flights, b->flights, f);
        b->n_in_flight--;
        flight_dispatch(f, e, resp);
        if (!b->freed)
                batch_schedule(b);
        batch_unref(b);
}

/* ---- sending ---- */

typedef enum Fit {
        FIT_YES,
        FIT_FULL, /* the batch is full for it: it goes first next time */
        FIT_KEY,  /* it writes or compares a key the batch writes, or one a txn before it
                   * waits for */
} Fit;

/* Whether t may join the batch being made (keys: what the batch writes so far, and what the
 * txns left queued before t write). */
static Fit txn_fit(const EtcdBatchTxn *t, const Hashmap *keys, size_t n, size_t bytes,
                   unsigned cost) {
        if (n == 0)
                return FIT_YES;
        if (t->alone || bytes + t->size > BATCH_BYTES_MAX ||
            n + 1 + MAX(cost, t->cost) > BATCH_OPS_MAX)
                return FIT_FULL;
        STRV_FOREACH(k, t->keys)
                if (hashmap_get(keys, *k))
                        return FIT_KEY;
        /* etcd decides a request's compares before it applies any of its ops */
        STRV_FOREACH(k, t->compare_keys)
                if (hashmap_get(keys, *k))
                        return FIT_KEY;
        return FIT_YES;
}

static int keys_add(Hashmap *keys, const EtcdBatchTxn *t) {
        int r;

        STRV_FOREACH(k, t->keys) {
                r = hashmap_put(keys, *k, (void *) t);
                if (r < 0 && r != -EEXIST)
                        return r;
        }
        return 0;
}

/* The txns of the next batch, taken from the queue in order into f. A txn left queued keeps
 * every later one writing one of its keys queued too: a key's writes leave in their order. */
static int batch_take(EtcdBatch *b, Flight *f) {
        _cleanup_(hashmap_done) Hashmap keys = {};
        size_t bytes = 0, scanned = 0;
        unsigned cost = 0;
        EtcdBatchTxn *t, *next;
        Fit fit;
        int r;

        for (t = b->queue; t && f->n_txns < BATCH_OPS_MAX && scanned < BATCH_SCAN_MAX; t = next) {
                next = t->queue_next;
                scanned++;
                fit = txn_fit(t, &keys, f->n_txns, bytes, cost);
                if (fit == FIT_FULL)
                        break;
                r = keys_add(&keys, t);
                if (r < 0)
                        return r;
                if (fit == FIT_KEY)
                        continue;
                queue_remove(b, t);
                t->flight = f;
                t->index = f->n_txns;
                f->txns[f->n_txns++] = t;
                bytes += t->size;
                cost = MAX(cost, t->cost);
                if (t->alone)
                        break;
        }
        return 0;
}

/* The body: the taken txns' ops, which they need no more. */
static int flight_body(Flight *f, EtcdBytes *ret) {
        _cleanup_free_ EtcdBytes *ops = new0(EtcdBytes, f->n_txns + 1);
        int r;

        if (!ops)
                return -ENOMEM;
        for (size_t i = 0; i < f->n_txns; i++)
                ops[i] = f->txns[i]->op;
        r = etcd_grpc_txn_of_ops(ops, f->n_txns, ret);
        if (r < 0)
                return r;
        /* A read keeps its op: it may go again (flight_requeue_reads). */
        for (size_t i = 0; i < f->n_txns; i++)
                if (!txn_read_only(f->txns[i]))
                        etcd_bytes_done(&f->txns[i]->op);
        return 0;
}

/* Whether the taken txns write nothing (reads only): such a batch may be sent again. */
static bool flight_read_only(const Flight *f) {
        for (size_t i = 0; i < f->n_txns; i++)
                if (!txn_read_only(f->txns[i]))
                        return false;
        return true;
}

static void batch_send(EtcdBatch *b) {
        Etcd *e = b->etcd;
        Flight *f = new0(Flight, 1);
        EtcdBytes body = {};
        size_t queued = 0;
        int r = -ENOMEM;

        for (EtcdBatchTxn *t = b->queue; t && queued < BATCH_OPS_MAX; t = t->queue_next)
                queued++;
        if (f) {
                f->batch = b;
                f->txns = new0(EtcdBatchTxn *, queued);
                r = f->txns ? batch_take(b, f) : -ENOMEM;
        }
        if (r >= 0)
                r = flight_body(f, &body);
        if (r >= 0)
                r = etcd_txn_body(e, &body, flight_read_only(f), on_flight_answer, f, &f->req);
        etcd_bytes_done(&body);
        if (r >= 0) {
                LIST_PREPEND(flights, b->flights, f);
                b->n_in_flight++;
                b->n_batches++;
                b->n_txns += f->n_txns;
                return;
        }
        if (!f) /* nothing taken: the queue waits for the next event */
                return;
        /* Nothing was sent: the txns taken fail as a request that could not be made. */
        flight_dispatch(f, e, &(EtcdResponse){ .error = r, .message = "cannot send a batch "
                                                                      "of txns to etcd" });
}

static int on_defer(sd_event_source *s, void *userdata) {
        EtcdBatch *b = userdata;

        b->n_ref++;
        while (!b->freed && b->queue && b->n_in_flight < b->max_in_flight) {
                EtcdBatchTxn *first = b->queue;
                batch_send(b);
                if (!b->freed && b->queue == first)
                        break; /* could not even take the first: out of memory */
        }
        batch_unref(b);
        return 0;
}

static void batch_schedule(EtcdBatch *b) {
        if (b->queue && b->n_in_flight < b->max_in_flight)
                (void) sd_event_source_set_enabled(b->defer, SD_EVENT_ONESHOT);
}

/* ---- the calls ---- */

int etcd_batch_new(EtcdBatch **ret, Etcd *e, sd_event *event, unsigned max_in_flight) {
        EtcdBatch *b;
        int r;

        if (!ret || !e || !event || max_in_flight == 0)
                return -EINVAL;
        b = new0(EtcdBatch, 1);
        if (!b)
                return -ENOMEM;
        *b = (EtcdBatch){ .n_ref = 1, .etcd = e, .max_in_flight = max_in_flight };
        r = sd_event_add_defer(event, &b->defer, on_defer, b);
        if (r >= 0) {
                (void) sd_event_source_set_description(b->defer, "etcd-batch");
                r = sd_event_source_set_enabled(b->defer, SD_EVENT_OFF);
        }
        if (r < 0) {
                batch_unref(b);
                return r;
        }
        *ret = b;
        return 0;
}

EtcdBatch *etcd_batch_free(EtcdBatch *b) {
        if (!b || b->freed)
                return NULL;
        b->freed = true;
        while (b->queue) {
                EtcdBatchTxn *t = b->queue;
                queue_remove(b, t);
                txn_free(t);
        }
        while (b->flights) {
                Flight *f = b->flights;
                LIST_REMOVE(flights, b->flights, f);
                etcd_request_cancel(f->req);
                flight_free(f);
        }
        (void) sd_event_source_set_enabled(b->defer, SD_EVENT_OFF);
        batch_unref(b);
        return NULL;
}

static int batch_queue(EtcdBatch *b, const EtcdOp *op, bool range, etcd_callback_t cb,
                       void *userdata, EtcdBatchTxn **ret) {
        EtcdBatchTxn *t;
        int r;

        if (!b || b->freed || !cb)
                return -EINVAL;
        t = new0(EtcdBatchTxn, 1);
        if (!t)
                return -ENOMEM;
        *t = (EtcdBatchTxn){ .batch = b, .range = range, .cb = cb, .userdata = userdata,
                             .cost = etcd_txn_op_cost(op) };
        r = etcd_grpc_op(op, &t->op);
        if (r >= 0)
                r = etcd_txn_op_write_keys(op, &t->keys, &t->alone);
        if (r >= 0)
                r = etcd_txn_op_compare_keys(op, &t->compare_keys);
        if (r < 0) {
                txn_free(t);
                return r;
        }
        t->size = t->op.size + 11; /* with its tag and length in the batch */
        queue_append(b, t);
        batch_schedule(b);
        if (ret)
                *ret = t;
        return 0;
}

int etcd_batch_txn(EtcdBatch *b, const EtcdCompare *compare, size_t n_compare,
                   const EtcdOp *success, size_t n_success, const EtcdOp *failure,
                   size_t n_failure, etcd_callback_t cb, void *userdata, EtcdBatchTxn **ret) {
        const EtcdOp op = { .type = ETCD_OP_TXN, .compare = compare, .n_compare = n_compare,
                            .success = success, .n_success = n_success, .failure = failure,
                            .n_failure = n_failure };

        return batch_queue(b, &op, false, cb, userdata, ret);
}

int etcd_batch_range(EtcdBatch *b, const char *key, const char *range_end, int64_t limit,
                     etcd_callback_t cb, void *userdata, EtcdBatchTxn **ret) {
        const EtcdOp range = { .type = ETCD_OP_RANGE, .key = key, .range_end = range_end,
                               .limit = limit };
        const EtcdOp op = { .type = ETCD_OP_TXN, .success = &range, .n_success = 1 };

        return batch_queue(b, &op, true, cb, userdata, ret);
}

void etcd_batch_txn_cancel(EtcdBatchTxn *t) {
        if (!t || t->dispatching)
                return;
        if (t->flight) {
                /* Sent: its answer will find no one. */
                t->flight->txns[t->index] = NULL;
                txn_free(t);
                return;
        }
        queue_remove(t->batch, t);
        txn_free(t);
}

bool etcd_batch_txn_sent(const EtcdBatchTxn *t) {
        return t && t->flight;
}

void etcd_batch_counts(const EtcdBatch *b, uint64_t *ret_batches, uint64_t *ret_txns) {
        if (ret_batches)
                *ret_batches = b ? b->n_batches : 0;
        if (ret_txns)
                *ret_txns = b ? b->n_txns : 0;
}
