/* SPDX-License-Identifier: MIT */
#pragma once

/* The JSON of etcd v3's gRPC gateway (etcd 3.4: /v3/kv/..., /v3/lease/..., /v3/watch): request
 * bodies built from etcd.h's structs, and answers parsed into EtcdResponse and watch messages.
 * Pure: no I/O, no logging; etcd.c does the transport.
 *
 * The gateway's conventions: keys and values are base64 (standard alphabet, padded); int64
 * fields are JSON strings ("revision":"42"); a field at its zero value is omitted ("value"
 * of an empty value, "count" of an empty range, "succeeded" of a failed txn); an error is
 * {"error":"etcdserver: ...","message":"...","code":N} with an HTTP status, or, inside a
 * stream, {"error":{"grpc_code":N,"http_code":N,"message":"...","http_status":"..."}};
 * streaming answers (lease keepalive, watch) are objects {"result":{...}}, one per line.
 *
 * Answers are treated as hostile: at most ETCD_JSON_MAX bytes, every field checked for its
 * type, keys without NUL bytes. An empty (non-NULL) range_end means etcd's "\0": every key
 * from key on. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd.h"

#define ETCD_JSON_MAX (64U * 1024U * 1024U)

typedef enum EtcdAnswerKind {
        ETCD_ANSWER_RANGE,
        ETCD_ANSWER_PUT,
        ETCD_ANSWER_DELETE,
        ETCD_ANSWER_TXN,
        ETCD_ANSWER_LEASE_GRANT,
        ETCD_ANSWER_LEASE_KEEPALIVE,
        ETCD_ANSWER_LEASE_REVOKE,
        _ETCD_ANSWER_MAX,
} EtcdAnswerKind;

/* The gateway's path for a kind: "/v3/kv/range", ... */
const char *etcd_answer_path(EtcdAnswerKind kind);

/* Request bodies: 0 and a NUL-terminated JSON text to free, or -ENOMEM / -EINVAL (a NULL or
 * empty key, an unknown enum value). */
int etcd_json_range(const char *key, const char *range_end, int64_t limit, char **ret);
int etcd_json_put(const char *key, const char *value, int64_t lease, char **ret);
int etcd_json_delete(const char *key, const char *range_end, char **ret);
int etcd_json_txn(const EtcdCompare *compare, size_t n_compare, const EtcdOp *success,
                  size_t n_success, const EtcdOp *failure, size_t n_failure, char **ret);
/* One op of a txn's branch ({"request_txn":{...}}, ...), and a txn without compares whose
 * success ops are ops made so (each a JSON object): the pieces of a group commit. */
int etcd_json_op(const EtcdOp *op, char **ret);
int etcd_json_txn_of_ops(char *const *ops, size_t n, char **ret);
/* What etcd checks of a nested txn (ETCD_OP_TXN; 0 for another op) beside others in one
 * request: its share of --max-txn-ops (the longest of its compares and branches, plus that
 * of its deepest nested txn), and the keys it puts or deletes in either branch, each once
 * (*ret_range: it deletes a range too, whose keys are not listed). */
unsigned etcd_txn_op_cost(const EtcdOp *op);
int etcd_txn_op_write_keys(const EtcdOp *op, char ***ret, bool *ret_range);
/* The keys a txn's compares name, its nested txns' included, each once: etcd decides every
 * compare of a request before it applies any op, so a txn comparing a key that one before it
 * in the same request writes would see the key as it was before that write. */
int etcd_txn_op_compare_keys(const EtcdOp *op, char ***ret);
int etcd_json_lease_grant(int64_t ttl_sec, char **ret);
int etcd_json_lease_id(int64_t lease_id, char **ret); /* keepalive and revoke */
int etcd_json_watch(const char *key, const char *range_end, int64_t start_revision,
                    char **ret);

/* A parsed answer: response.message points at message (or at ""). */
typedef struct EtcdAnswer {
        EtcdResponse response;
        char *message;
} EtcdAnswer;

/* Parses the body of an answer of kind with HTTP status http_status into a. Always fills a
 * (even on failure: a->response.error says why, a->message in words) and returns
 * a->response.error: 0; -EIO for an error answer of etcd or the gateway (any HTTP status
 * other than 200, or an "error" member); -EBADMSG for a body that is not what the gateway
 * sends; -ENOMEM. Free with etcd_answer_done(). */
int etcd_answer_parse(EtcdAnswerKind kind, long http_status, const char *body, size_t size,
                      EtcdAnswer *a);
/* Fills a with error and a message "<what>: <detail>" (detail may be NULL). */
void etcd_answer_fail(EtcdAnswer *a, int error, const char *what, const char *detail);
/* At most max bytes of s, each byte that is not printable ASCII made '?' (a message from the
 * wire, on its way to a log); free it. */
char *etcd_sanitized(const char *s, size_t max);
void etcd_answer_done(EtcdAnswer *a);

/* One message of a watch stream. */
typedef struct EtcdWatchMessage {
        int64_t revision;
        bool created;
        bool canceled;
        int64_t compact_revision;
        EtcdEvent *events;
        size_t n_events;
        char *error; /* the gateway's or the cancel's reason, NULL when none */
} EtcdWatchMessage;

/* Parses one line of a watch stream ({"result":{...}} or {"error":...}). 0 on success (an
 * error message of the gateway is a success with m->error set), -EBADMSG, -ENOMEM. */
int etcd_watch_message_parse(const char *line, size_t size, EtcdWatchMessage *m);
void etcd_watch_message_done(EtcdWatchMessage *m);

/* Frees what a parser put in kvs / events / responses (not the arrays' owner struct). */
void etcd_kvs_free(EtcdKv *kvs, size_t n);
void etcd_response_done(EtcdResponse *r);

/* A stream's bytes, cut into lines. */
typedef struct EtcdLineBuffer {
        char *data;
        size_t size, allocated, start;
} EtcdLineBuffer;

/* Appends; -ENOBUFS when an unfinished line would pass ETCD_JSON_MAX. */
int etcd_line_buffer_append(EtcdLineBuffer *b, const void *data, size_t size);
/* The next complete line (without its '\n', NUL-terminated in place), or NULL. Blank lines
 * are skipped. The pointer is valid until the next append. */
const char *etcd_line_buffer_next(EtcdLineBuffer *b, size_t *ret_size);
void etcd_line_buffer_done(EtcdLineBuffer *b);

/* Base64 (RFC 4648, standard alphabet). decode: padding optional, nothing but the alphabet
 * accepted; the result is NUL-terminated (not counted in *ret_size). */
int etcd_base64_encode(const void *data, size_t size, char **ret);
int etcd_base64_decode(const char *s, size_t len, char **ret, size_t *ret_size);
