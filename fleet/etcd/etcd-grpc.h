/* SPDX-License-Identifier: MIT */
#pragma once

/* etcd v3's own gRPC protocol for the KV service (Range, Put, DeleteRange, Txn; etcd-rpc.proto),
 * the Watch stream and the Lease service (LeaseGrant, LeaseKeepAlive, LeaseRevoke): request
 * bodies built from etcd.h's structs, and answers parsed into EtcdAnswer and EtcdWatchMessage
 * (etcd-answer.h). Pure: no I/O, no logging; etcd-h2.c does the transport (HTTP/2 on nghttp2).
 *
 * Messages are encoded and decoded by protobuf-c. What gRPC adds over HTTP/2 is done here, as
 * gRPC's "PROTOCOL-HTTP2" document describes it: each message is prefixed with 5 bytes (a
 * compressed flag, 0 here, and its length, big-endian), and the call's status is the
 * grpc-status header or trailer (0 = OK), with grpc-message percent-encoded. Debian packages
 * gRPC's own C core (libgrpc), but it runs threads of its own that one sd-event loop cannot
 * drive (docs/fleet.md, "The etcd client").
 *
 * Answers are treated as hostile: at most ETCD_ANSWER_MAX bytes, one
 * uncompressed message, keys non-empty and without NUL bytes, a txn's answers nested at most
 * ETCD_TXN_NESTING_MAX deep (checked on the wire before protobuf-c, which recurses, decodes). */

#include <stddef.h>
#include <stdint.h>

#include "etcd-answer.h"
#include "etcd.h"

/* The length of gRPC's message prefix. */
#define ETCD_GRPC_PREFIX 5U

/* A request body: the prefixed message, to free. */
typedef struct EtcdBytes {
        uint8_t *data;
        size_t size;
} EtcdBytes;

/* The gRPC path of a kind ("/etcdserverpb.KV/Txn", "/etcdserverpb.Lease/LeaseGrant", ...);
 * NULL for another. */
const char *etcd_grpc_path(EtcdAnswerKind kind);

/* Request bodies (prefixed): 0, or -ENOMEM / -EINVAL (a NULL or empty key, a negative lease
 * or limit, an unknown enum value, a VALUE compare without a value, a txn nested deeper than
 * ETCD_TXN_NESTING_MAX). */
int etcd_grpc_range(const char *key, const char *range_end, int64_t limit, EtcdBytes *ret);
int etcd_grpc_put(const char *key, const char *value, int64_t lease, EtcdBytes *ret);
int etcd_grpc_delete(const char *key, const char *range_end, EtcdBytes *ret);
int etcd_grpc_txn(const EtcdCompare *compare, size_t n_compare, const EtcdOp *success,
                  size_t n_success, const EtcdOp *failure, size_t n_failure, EtcdBytes *ret);
/* The Lease service's requests (prefixed): a grant of ttl_sec seconds (etcd picks the ID), a
 * keepalive (one LeaseKeepAliveRequest: a message of the client's one LeaseKeepAlive stream,
 * which stays open for the next ones, etcd-keepalive.c) and a revoke of lease_id; 0, or
 * -EINVAL (a TTL or ID <= 0) / -ENOMEM. */
int etcd_grpc_lease_grant(int64_t ttl_sec, EtcdBytes *ret);
int etcd_grpc_lease_keepalive(int64_t lease_id, EtcdBytes *ret);
int etcd_grpc_lease_revoke(int64_t lease_id, EtcdBytes *ret);
/* The Election service's requests (prefixed): a campaign of lease_id in the election name
 * with value, a read of its leader, a resignation of leader; 0, or -EINVAL (a NULL or empty
 * name or key, a lease or rev <= 0) / -ENOMEM. */
int etcd_grpc_election_campaign(const char *name, int64_t lease_id, const char *value,
                                EtcdBytes *ret);
int etcd_grpc_election_leader(const char *name, EtcdBytes *ret);
int etcd_grpc_election_resign(const EtcdLeaderKey *leader, EtcdBytes *ret);
/* One op of a txn's branch, encoded as a RequestOp (not prefixed), and a txn without compares
 * whose success ops are ops made so (prefixed): the pieces of a group commit. */
int etcd_grpc_op(const EtcdOp *op, EtcdBytes *ret);
int etcd_grpc_txn_of_ops(const EtcdBytes *ops, size_t n, EtcdBytes *ret);
void etcd_bytes_done(EtcdBytes *b);

/* Parses the answer to a call of kind: the HTTP status, the grpc-status and grpc-message
 * (NULL when the answer had none; grpc_message still percent-encoded) and the body. Always
 * fills a (even on failure: a->response.error says why, a->message in words) and returns
 * a->response.error: 0; -ETIMEDOUT for gRPC's DEADLINE_EXCEEDED (4: the call's grpc-timeout
 * passed in etcd) and etcd's "etcdserver: request timed out..." (14); -EIO for another error of etcd (a grpc-status other than 0, or an HTTP
 * status other than 200); -EBADMSG for an answer that is not a gRPC answer of that kind;
 * -ENOMEM. Free with etcd_answer_done(). */
int etcd_grpc_answer_parse(EtcdAnswerKind kind, long http_status, const char *grpc_status,
                           const char *grpc_message, const uint8_t *body, size_t size,
                           EtcdAnswer *a);

/* The Watch service's stream (etcd-rpc.proto): the body of a streaming call that creates one
 * watch of key (with range_end: the range; "" as in etcd_range) from start_revision (0 = now),
 * prefixed; 0, or -EINVAL (a NULL or empty key, a negative revision) / -ENOMEM. */
int etcd_grpc_watch_create(const char *key, const char *range_end, int64_t start_revision,
                           EtcdBytes *ret);
/* Whether p starts with a whole gRPC message: 1 (*ret_len its length, prefix included), 0 (not
 * yet: more bytes needed), -EBADMSG (a compressed one, or one longer than ETCD_ANSWER_MAX). */
int etcd_grpc_frame_next(const uint8_t *p, size_t size, size_t *ret_len);
/* One WatchResponse of the stream (p: exactly one prefixed message) into m, as
 * the watch's callbacks take it: 0, -EBADMSG (not a WatchResponse, an
 * event without its kv or of another type, a fragment, a key empty or with a NUL byte),
 * -ENOMEM. Free with etcd_watch_message_done(). */
int etcd_grpc_watch_message_parse(const uint8_t *p, size_t size, EtcdWatchMessage *m);

/* One LeaseKeepAliveResponse of the LeaseKeepAlive stream (p: exactly one prefixed message)
 * into a, as etcd_grpc_answer_parse() fills a keepalive's answer (revision, lease_id, ttl; ttl
 * <= 0: the lease is gone): 0, -EBADMSG (not one LeaseKeepAliveResponse, or an ID <= 0, which
 * no request of ours has), -ENOMEM; a->message says which. Free with etcd_answer_done(). */
int etcd_grpc_lease_keepalive_message_parse(const uint8_t *p, size_t size, EtcdAnswer *a);

/* grpc-message's percent-encoding undone (a malformed escape is kept as it is); free it. */
char *etcd_grpc_message_decode(const char *s);
