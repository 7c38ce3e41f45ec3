/* SPDX-License-Identifier: MIT */
/* etcd's gRPC answers (fleet/etcd/etcd-grpc.h) as hostile input. The first byte picks the kind of
 * call (the KV service's four, the Lease service's three, the Election service's three, and one
 * that is none) and the HTTP
 * status, the second the grpc-status and the grpc-message (one choice is the body itself as
 * text, so that the percent-decoding gets hostile text too); the rest is the body, gRPC's
 * prefix and all. A valid answer's seed is 0x00-0x09 (the kind), 0x00, then the
 * prefixed message. */
#include <errno.h>
#include <string.h>

#include "etcd-grpc.h"
#include "fuzz.h"
#include "macro.h"

static const EtcdAnswerKind kinds[] = {
        ETCD_ANSWER_RANGE, ETCD_ANSWER_PUT, ETCD_ANSWER_DELETE, ETCD_ANSWER_TXN,
        ETCD_ANSWER_LEASE_GRANT, ETCD_ANSWER_LEASE_KEEPALIVE, ETCD_ANSWER_LEASE_REVOKE,
        ETCD_ANSWER_ELECTION_CAMPAIGN, ETCD_ANSWER_ELECTION_LEADER, ETCD_ANSWER_ELECTION_RESIGN,
        _ETCD_ANSWER_MAX, /* no call of ours: refused before the body is read */
};
static const long http_statuses[] = { 200, 404, 503 };
/* NULL: no grpc-status at all (a proxy's answer, lost trailers) */
static const char *const grpc_statuses[] = { "0", NULL, "4", "14", "3", "abc", "", "300" };
#define MESSAGE_FROM_BODY 3
static const char *const grpc_messages[] = { NULL, "etcdserver%3A request timed out",
                                             "bad%0a%zz%4", NULL /* the body */ };

static void check_kvs(const EtcdKv *kvs, size_t n) {
        for (size_t i = 0; i < n; i++) {
                /* keys are C strings: non-empty, no NUL inside (so none before the end) */
                FUZZ_ASSERT(kvs[i].key && kvs[i].key[0] != '\0');
                FUZZ_ASSERT(kvs[i].value && strlen(kvs[i].value) <= kvs[i].value_len);
                FUZZ_ASSERT(kvs[i].value[kvs[i].value_len] == '\0');
        }
}

static void check_response(const EtcdResponse *r, EtcdAnswerKind kind, int depth) {
        FUZZ_ASSERT(depth <= ETCD_TXN_NESTING_MAX + 1); /* a txn's ops, nested txns' below */
        FUZZ_ASSERT(r->error == 0);
        FUZZ_ASSERT(r->message && streq(r->message, ""));
        FUZZ_ASSERT(r->n_kvs == 0 || r->kvs);
        FUZZ_ASSERT(r->n_responses == 0 || r->responses);
        /* each kind fills its own fields only */
        if (kind != ETCD_ANSWER_RANGE && kind != ETCD_ANSWER_ELECTION_LEADER)
                FUZZ_ASSERT(r->n_kvs == 0 && !r->kvs && !r->more && r->count == 0);
        if (kind == ETCD_ANSWER_ELECTION_LEADER)
                FUZZ_ASSERT(r->n_kvs == 1 && !r->more && r->count == 1);
        /* a campaign's leader key: all of it, C strings */
        if (kind == ETCD_ANSWER_ELECTION_CAMPAIGN)
                FUZZ_ASSERT(r->leader.name && r->leader.name[0] && r->leader.key &&
                            r->leader.key[0] && r->leader.rev > 0 && r->leader.lease > 0);
        else
                FUZZ_ASSERT(!r->leader.name && !r->leader.key && r->leader.rev == 0 &&
                            r->leader.lease == 0);
        if (kind != ETCD_ANSWER_TXN)
                FUZZ_ASSERT(r->n_responses == 0 && !r->responses && !r->succeeded);
        if (kind != ETCD_ANSWER_DELETE)
                FUZZ_ASSERT(r->deleted == 0);
        if (kind != ETCD_ANSWER_LEASE_GRANT && kind != ETCD_ANSWER_LEASE_KEEPALIVE)
                FUZZ_ASSERT(r->lease_id == 0 && r->ttl == 0);
        check_kvs(r->kvs, r->n_kvs);
        /* an op's kind is not known from here: any, within its own rules but the kind's */
        for (size_t i = 0; i < r->n_responses; i++) {
                const EtcdResponse *sub = &r->responses[i];
                EtcdAnswerKind k = sub->n_responses > 0 || sub->succeeded ? ETCD_ANSWER_TXN
                                   : sub->n_kvs > 0 || sub->more || sub->count != 0
                                           ? ETCD_ANSWER_RANGE
                                   : sub->deleted != 0 ? ETCD_ANSWER_DELETE
                                                       : ETCD_ANSWER_PUT;
                check_response(sub, k, depth + 1);
        }
}

static bool is_grpc_code(const char *s) {
        return s && (streq(s, "0") || streq(s, "4") || streq(s, "14") || streq(s, "3"));
}

static void fuzz_answer(uint8_t sel, uint8_t status_sel, const uint8_t *body, size_t size) {
        EtcdAnswerKind kind = kinds[sel % ELEMENTSOF(kinds)];
        long http = http_statuses[(sel / ELEMENTSOF(kinds)) % ELEMENTSOF(http_statuses)];
        const char *status = grpc_statuses[status_sel % ELEMENTSOF(grpc_statuses)];
        unsigned m = (status_sel / ELEMENTSOF(grpc_statuses)) % ELEMENTSOF(grpc_messages);
        char *text = NULL;
        const char *message = grpc_messages[m];
        EtcdAnswer a;
        int r;

        if (m == MESSAGE_FROM_BODY) {
                text = strndup((const char *) body, size);
                FUZZ_ASSERT(text);
                message = text;
        }
        r = etcd_grpc_answer_parse(kind, http, status, message, body, size, &a);
        FUZZ_ASSERT(r == a.response.error);
        FUZZ_ASSERT(r == 0 || r == -EIO || r == -EBADMSG || r == -ETIMEDOUT || r == -ENOMEM ||
                    r == -EINVAL);
        /* -EINVAL is ours (a kind without a gRPC call), never the answer's */
        FUZZ_ASSERT((r == -EINVAL) == !etcd_grpc_path(kind));
        /* a success is HTTP 200, grpc-status 0 and one uncompressed message */
        if (r == 0)
                FUZZ_ASSERT(http == 200 && status && streq(status, "0") &&
                            size >= ETCD_GRPC_PREFIX && body[0] == 0);
        /* etcd's own error (a code other than 0) is never taken for a malformed answer */
        if (etcd_grpc_path(kind) && is_grpc_code(status) && !streq(status, "0"))
                FUZZ_ASSERT(r == -EIO || r == -ETIMEDOUT || r == -ENOMEM);
        /* only DEADLINE_EXCEEDED and UNAVAILABLE are the timeouts of a call */
        if (r == -ETIMEDOUT)
                FUZZ_ASSERT(status && (streq(status, "4") || streq(status, "14")));
        if (r == 0) {
                FUZZ_ASSERT(streq(a.response.message, ""));
                check_response(&a.response, kind, 0);
                /* a txn's ops get its revision when they have none */
                for (size_t i = 0; i < a.response.n_responses; i++)
                        FUZZ_ASSERT(a.response.responses[i].revision != 0 ||
                                    a.response.revision == 0);
        } else {
                /* what the message says ends up in logs: printable ASCII only */
                FUZZ_ASSERT(a.response.message);
                FUZZ_ASSERT(r == -ENOMEM || a.response.message[0] != '\0');
                for (const char *p = a.response.message; *p; p++)
                        FUZZ_ASSERT(*p >= 0x20 && *p < 0x7f);
                FUZZ_ASSERT(a.response.n_kvs == 0 && !a.response.kvs);
                FUZZ_ASSERT(a.response.n_responses == 0 && !a.response.responses);
        }
        etcd_answer_done(&a);
        FUZZ_ASSERT(!a.message && a.response.n_kvs == 0 && a.response.n_responses == 0);

        /* the decoding alone: never longer, and text without '%' stays as it is */
        if (text) {
                char *d = etcd_grpc_message_decode(text);
                if (d) {
                        FUZZ_ASSERT(strlen(d) <= strlen(text));
                        if (!strchr(text, '%'))
                                FUZZ_ASSERT(streq(d, text));
                        free(d);
                }
                free(text);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 2)
                return 0;
        fuzz_answer(data[0], data[1], data + 2, size - 2);
        return 0;
}
