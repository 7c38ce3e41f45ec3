/* SPDX-License-Identifier: MIT */
#pragma once

/* What the etcd client's answers become (EtcdResponse in an EtcdAnswer, EtcdWatchMessage),
 * whatever parsed them (etcd-grpc.h), and what etcd checks of a txn's ops beside others in one
 * request (etcd-batch.c). Pure: no I/O, no logging. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd.h"

/* The largest answer (or message of a stream) taken: a fleet's whole range fits. */
#define ETCD_ANSWER_MAX (64U * 1024U * 1024U)

typedef enum EtcdAnswerKind {
        ETCD_ANSWER_RANGE,
        ETCD_ANSWER_PUT,
        ETCD_ANSWER_DELETE,
        ETCD_ANSWER_TXN,
        ETCD_ANSWER_LEASE_GRANT,
        ETCD_ANSWER_LEASE_KEEPALIVE,
        ETCD_ANSWER_LEASE_REVOKE,
        ETCD_ANSWER_ELECTION_CAMPAIGN,
        ETCD_ANSWER_ELECTION_LEADER,
        ETCD_ANSWER_ELECTION_RESIGN,
        _ETCD_ANSWER_MAX,
} EtcdAnswerKind;

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

/* A parsed answer: response.message points at message (or at ""). */
typedef struct EtcdAnswer {
        EtcdResponse response;
        char *message;
} EtcdAnswer;

/* Fills a with error and a message "<what>: <detail>" (detail may be NULL; made printable). */
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
        char *error; /* the cancel's reason, NULL when none */
} EtcdWatchMessage;

void etcd_watch_message_done(EtcdWatchMessage *m);

/* Frees what a parser put in kvs / events / responses (not the arrays' owner struct). */
void etcd_kvs_free(EtcdKv *kvs, size_t n);
void etcd_response_done(EtcdResponse *r);
