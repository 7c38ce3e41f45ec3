/* SPDX-License-Identifier: MIT */
#pragma once

/* A client of etcd v3 on one sd-event loop, in etcd's own gRPC: its KV service for range, put,
 * delete and txn, its Watch service and its Lease service (grant, keepalive, revoke; every
 * keepalive a message on one long-lived LeaseKeepAlive stream, etcd-keepalive.c)
 * (etcd-grpc.h: protobuf-c; etcd-h2.h: HTTP/2 on nghttp2, TLS on gnutls for https://, host
 * names looked up by c-ares). Every call is asynchronous:
 * it returns at once and its callback runs from the loop,
 * exactly once (unless the request is cancelled with etcd_request_cancel()). No call
 * blocks.
 *
 * A txn's ops may be nested txns (ETCD_OP_TXN); etcd_batch_txn() sends independent txns of
 * one process together as the nested txns of one request (group commit).
 *
 * Endpoints: a request goes to the current endpoint; a failure to connect (nothing was sent)
 * moves to the next endpoint and retries there within the request's timeout. A failure after
 * the request was sent (timeout, reset, HTTP 5xx) is reported to the caller, who decides:
 * the outcome of a write is then unknown. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

typedef struct Etcd Etcd;
typedef struct EtcdRequest EtcdRequest;
typedef struct EtcdWatch EtcdWatch;

typedef struct EtcdConfig {
        char **endpoints;      /* "http://127.0.0.1:2379", ...; NULL-terminated, at least one */
        uint64_t timeout_usec; /* per request (watches excluded); 0 = 2 s */
        const char *ca_file;   /* TLS to etcd: CA, client certificate and key; NULL = none */
        const char *cert_file;
        const char *key_file;
} EtcdConfig;

typedef struct EtcdKv {
        char *key;
        char *value; /* NUL-terminated (the length excludes it) */
        size_t value_len;
        int64_t create_revision, mod_revision, version, lease;
} EtcdKv;

typedef enum EtcdEventType {
        ETCD_EVENT_PUT,
        ETCD_EVENT_DELETE,
} EtcdEventType;

typedef struct EtcdEvent {
        EtcdEventType type;
        EtcdKv kv; /* a DELETE has the key and mod_revision only */
} EtcdEvent;

/* A leader of an election (etcd's v3election LeaderKey): its key (<name>/<lease in hex>),
 * held while its lease lives; rev is the key's create_revision, which a txn made only while
 * leading compares (ETCD_TARGET_CREATE, ETCD_EQUAL). */
typedef struct EtcdLeaderKey {
        char *name;
        char *key;
        int64_t rev;
        int64_t lease;
} EtcdLeaderKey;

/* The answer to one request. error is 0 or a negative errno: -ETIMEDOUT (no answer in
 * time), -ECONNREFUSED (no endpoint took the connection), -ECONNRESET (the connection broke
 * after the request was sent), -EIO (an error of etcd, gRPC's or HTTP's, message says which;
 * or TLS failed), -EBADMSG (an answer that is not what etcd sends), -ENOMEM.
 * Everything points into memory the client frees after the callback returns. */
typedef struct EtcdResponse {
        int error;
        const char *message; /* etcd's or the client's words, "" when error is 0 */
        int64_t revision;    /* the store's revision the answer was made at */
        /* range, and a txn's range ops (responses[i]) */
        EtcdKv *kvs;
        size_t n_kvs;
        bool more;
        int64_t count;
        /* txn, and a nested txn (ETCD_OP_TXN) */
        bool succeeded;
        struct EtcdResponse *responses; /* one per op of the branch taken */
        size_t n_responses;
        /* put with prev_kv; deleterange */
        int64_t deleted;
        /* lease grant / keepalive */
        int64_t lease_id;
        int64_t ttl; /* seconds; a keepalive of an expired lease answers ttl <= 0 */
        /* election campaign: the leader key won; election leader: the leader's key-value in
         * kvs (n_kvs 1) */
        EtcdLeaderKey leader;
} EtcdResponse;

typedef void (*etcd_callback_t)(Etcd *e, const EtcdResponse *r, void *userdata);

typedef enum EtcdCompareTarget {
        ETCD_TARGET_VERSION,
        ETCD_TARGET_CREATE,
        ETCD_TARGET_MOD,
        ETCD_TARGET_VALUE,
        ETCD_TARGET_LEASE,
} EtcdCompareTarget;

typedef enum EtcdCompareResult {
        ETCD_EQUAL,
        ETCD_GREATER,
        ETCD_LESS,
        ETCD_NOT_EQUAL,
} EtcdCompareResult;

typedef struct EtcdCompare {
        const char *key;
        EtcdCompareTarget target;
        EtcdCompareResult result;
        int64_t number;    /* VERSION, CREATE, MOD, LEASE */
        const char *value; /* VALUE (NUL-terminated) */
} EtcdCompare;

typedef enum EtcdOpType {
        ETCD_OP_RANGE,
        ETCD_OP_PUT,
        ETCD_OP_DELETE,
        ETCD_OP_TXN,
} EtcdOpType;

/* At most this many levels of ETCD_OP_TXN inside a txn (-EINVAL beyond; an answer nested
 * deeper is -EBADMSG). */
#define ETCD_TXN_NESTING_MAX 3

/* An op of a txn's branch. ETCD_OP_TXN is a nested transaction (etcd >= 3.3's request_txn):
 * its own compares and branches, evaluated when the enclosing branch runs; its answer, the
 * op's EtcdResponse, has succeeded and the responses of the branch it took, and the
 * enclosing txn's revision. etcd refuses (-EIO, "duplicate key given in txn request") a txn
 * in which two nested txns put, or one puts and one deletes, the same key (even in branches
 * that cannot both run), and counts --max-txn-ops (default 128) along each path: an op list's
 * length plus the longest op list (compares, success, failure) of each nested txn below. */
typedef struct EtcdOp {
        EtcdOpType type;
        const char *key;       /* RANGE, PUT, DELETE */
        const char *range_end; /* RANGE, DELETE: NULL = the key alone */
        const char *value;     /* PUT, NUL-terminated */
        int64_t lease;         /* PUT: 0 = none */
        int64_t limit;         /* RANGE: 0 = all */
        /* TXN */
        const EtcdCompare *compare;
        size_t n_compare;
        const struct EtcdOp *success;
        size_t n_success;
        const struct EtcdOp *failure;
        size_t n_failure;
} EtcdOp;

/* The watch's callback: events (n may be 0: the first call, once etcd created the watch, and
 * progress notifications), or the end of the watch with error < 0 (-ECONNRESET: the stream
 * broke, its member died or lost the leader, or etcd cancelled the watch; -ESTALE:
 * start_revision was compacted, compact_revision says from where to read anew; -EBADMSG: a
 * message that is not etcd's). After an error the watch is over: free it (from the
 * callback too) and, usually, range and watch again. */
typedef void (*etcd_watch_callback_t)(Etcd *e, EtcdWatch *w, const EtcdEvent *events, size_t n,
                                      int64_t revision, int error, int64_t compact_revision,
                                      void *userdata);

int etcd_new(Etcd **ret, sd_event *event, const EtcdConfig *config);
/* Cancels every request and frees every watch (no callback; their pointers are then invalid).
 * Any callback may call it. */
Etcd *etcd_free(Etcd *e);

/* The range_end that makes key a prefix (etcd's "key + 1"); free it. "" (a prefix of only
 * 0xff bytes) is etcd's "\0": every key from key on; a range_end of "" means that everywhere. */
char *etcd_prefix_end(const char *prefix);

/* ret (may be NULL) is for etcd_request_cancel() only; it is gone once the callback ran. */
int etcd_range(Etcd *e, const char *key, const char *range_end, int64_t limit,
               etcd_callback_t cb, void *userdata, EtcdRequest **ret);
int etcd_put(Etcd *e, const char *key, const char *value, int64_t lease, etcd_callback_t cb,
             void *userdata, EtcdRequest **ret);
int etcd_delete(Etcd *e, const char *key, const char *range_end, etcd_callback_t cb,
                void *userdata, EtcdRequest **ret);
int etcd_txn(Etcd *e, const EtcdCompare *compare, size_t n_compare, const EtcdOp *success,
             size_t n_success, const EtcdOp *failure, size_t n_failure, etcd_callback_t cb,
             void *userdata, EtcdRequest **ret);
int etcd_lease_grant(Etcd *e, int64_t ttl_sec, etcd_callback_t cb, void *userdata,
                     EtcdRequest **ret);
/* A keepalive is answered as any request is (the client's timeout, failover as a read's,
 * the same errors), though it is no call of its own: one message on the client's LeaseKeepAlive
 * stream of the current endpoint, which stays open for the next ones (one stream per client
 * however many leases it keeps, as etcd's own clients do: a stream per keepalive costs etcd
 * more than the renewal). */
int etcd_lease_keepalive(Etcd *e, int64_t lease_id, etcd_callback_t cb, void *userdata,
                         EtcdRequest **ret);
int etcd_lease_revoke(Etcd *e, int64_t lease_id, etcd_callback_t cb, void *userdata,
                      EtcdRequest **ret);
/* etcd's Election service (v3election): Campaign answers once the lease's key under name is
 * the oldest of the election (it may wait that long: timeout_usec, 0 = the client's request
 * timeout; a campaign that timed out has its key deleted by etcd, and is made again), with
 * response.leader; Leader reads the election's leader (response.kvs[0]; -EIO "election: no
 * leader" when none); Resign deletes the leader's key (leader: as Campaign answered it). */
int etcd_election_campaign(Etcd *e, const char *name, int64_t lease, const char *value,
                           uint64_t timeout_usec, etcd_callback_t cb, void *userdata,
                           EtcdRequest **ret);
int etcd_election_leader(Etcd *e, const char *name, etcd_callback_t cb, void *userdata,
                         EtcdRequest **ret);
int etcd_election_resign(Etcd *e, const EtcdLeaderKey *leader, etcd_callback_t cb,
                         void *userdata, EtcdRequest **ret);
void etcd_request_cancel(EtcdRequest *req);

/* Group commit (etcd-batch.c). Independent transactions of one process are queued, each as a
 * nested txn (ETCD_OP_TXN), and sent together as the success ops of one txn without compares:
 * one request, one raft entry, one fsync for all of them, each still all-or-nothing on its
 * own compares. A queued txn leaves at the end of the loop's iteration when fewer than
 * max_in_flight batches are in flight, otherwise with the others queued when one answers.
 * Each callback gets its own txn's answer (succeeded, responses, the batch's revision) or,
 * when the batch's request failed, that failure, as etcd_txn's would be: the outcome of every
 * write in the batch is then unknown, and no write is sent again (a txn that writes nothing,
 * as etcd_batch_range's, goes again in the next batch when the connection broke after the
 * request was sent, as a range goes to the next endpoint). A batch holds at most 1 MiB
 * of protobuf and as many txns as --max-txn-ops (128, etcd's default, at least) allows beside
 * the deepest one (a larger txn goes alone); two txns that write (put or delete) the same
 * key never share a batch (etcd would refuse it): the later one waits for the next. */
typedef struct EtcdBatch EtcdBatch;
typedef struct EtcdBatchTxn EtcdBatchTxn;

int etcd_batch_new(EtcdBatch **ret, Etcd *e, sd_event *event, unsigned max_in_flight);
/* Cancels every queued and sent txn (no callback). Free it before its Etcd. */
EtcdBatch *etcd_batch_free(EtcdBatch *b);
/* Like etcd_txn (the arguments are copied); ret (may be NULL) is for etcd_batch_txn_cancel()
 * only, and gone once the callback ran. */
int etcd_batch_txn(EtcdBatch *b, const EtcdCompare *compare, size_t n_compare,
                   const EtcdOp *success, size_t n_success, const EtcdOp *failure,
                   size_t n_failure, etcd_callback_t cb, void *userdata, EtcdBatchTxn **ret);
/* A range read in a batch: a nested txn of that one op, read at the batch's revision (as
 * linearizable as etcd_range()); the callback gets the range's answer as etcd_range's. */
int etcd_batch_range(EtcdBatch *b, const char *key, const char *range_end, int64_t limit,
                     etcd_callback_t cb, void *userdata, EtcdBatchTxn **ret);
/* No callback. A txn already sent may still be applied. */
void etcd_batch_txn_cancel(EtcdBatchTxn *t);
/* Whether t has left the queue in a request (etcd may apply it, answered or not). */
bool etcd_batch_txn_sent(const EtcdBatchTxn *t);
/* Requests sent, and txns answered through them (with or without an error), so far. */
void etcd_batch_counts(const EtcdBatch *b, uint64_t *ret_batches, uint64_t *ret_txns);

/* A txn whose body is made already: a prefixed TxnRequest (etcd-grpc.h); takes *body, always
 * (and clears it). read_only: it writes nothing, so it may be sent again to the next endpoint
 * after a reset, as a range is. For etcd-batch.c. */
typedef struct EtcdBytes EtcdBytes;
int etcd_txn_body(Etcd *e, EtcdBytes *body, bool read_only, etcd_callback_t cb, void *userdata,
                  EtcdRequest **ret);

/* Watches key (with range_end: the range) from start_revision (0 = now) on a streaming
 * request of its own. */
int etcd_watch(Etcd *e, const char *key, const char *range_end, int64_t start_revision,
               etcd_watch_callback_t cb, void *userdata, EtcdWatch **ret);
EtcdWatch *etcd_watch_free(EtcdWatch *w);
