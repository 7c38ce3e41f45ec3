/* SPDX-License-Identifier: MIT */
/* The etcd gateway's answers (fleet/etcd/etcd-json.h) as hostile input. The first byte picks what
 * the rest is: an answer of a kind (with an HTTP status), a watch message, or a stream cut
 * into lines. */
#include <string.h>

#include "etcd-json.h"
#include "fuzz.h"
#include "macro.h"

static void check_kvs(const EtcdKv *kvs, size_t n) {
        for (size_t i = 0; i < n; i++) {
                FUZZ_ASSERT(kvs[i].key && kvs[i].key[0] != '\0');
                FUZZ_ASSERT(kvs[i].value && strlen(kvs[i].value) <= kvs[i].value_len);
                FUZZ_ASSERT(kvs[i].value[kvs[i].value_len] == '\0');
        }
}

static void check_response(const EtcdResponse *r, int depth) {
        FUZZ_ASSERT(depth <= ETCD_TXN_NESTING_MAX + 1); /* a txn's ops, nested txns' below */
        FUZZ_ASSERT(r->message);
        FUZZ_ASSERT(r->n_kvs == 0 || r->kvs);
        check_kvs(r->kvs, r->n_kvs);
        FUZZ_ASSERT(r->n_responses == 0 || r->responses);
        for (size_t i = 0; i < r->n_responses; i++)
                check_response(&r->responses[i], depth + 1);
}

static void fuzz_answer(uint8_t sel, const char *data, size_t size) {
        static const long statuses[] = { 200, 400, 404, 500, 503 };
        EtcdAnswer a;
        int r;

        r = etcd_answer_parse((EtcdAnswerKind) (sel % _ETCD_ANSWER_MAX),
                              statuses[(sel / _ETCD_ANSWER_MAX) % ELEMENTSOF(statuses)], data,
                              size, &a);
        FUZZ_ASSERT(r == a.response.error);
        FUZZ_ASSERT(r == 0 || r == -EIO || r == -EBADMSG || r == -ENOMEM);
        FUZZ_ASSERT(r == 0 ? streq(a.response.message, "") : a.response.message[0] != '\0');
        if (r == 0)
                check_response(&a.response, 0);
        else
                FUZZ_ASSERT(a.response.n_kvs == 0 && a.response.n_responses == 0);
        etcd_answer_done(&a);
}

static void fuzz_watch(const char *data, size_t size) {
        EtcdWatchMessage m;

        if (etcd_watch_message_parse(data, size, &m) < 0) {
                FUZZ_ASSERT(m.n_events == 0 && !m.events && !m.error);
                return;
        }
        FUZZ_ASSERT(m.n_events == 0 || m.events);
        for (size_t i = 0; i < m.n_events; i++) {
                FUZZ_ASSERT(m.events[i].type == ETCD_EVENT_PUT ||
                            m.events[i].type == ETCD_EVENT_DELETE);
                check_kvs(&m.events[i].kv, 1);
        }
        etcd_watch_message_done(&m);
}

/* The stream in pieces of varying sizes: every line comes out whole, none is invented. */
static void fuzz_lines(const char *data, size_t size) {
        EtcdLineBuffer b = {};
        size_t off = 0, piece = 1, total = 0, n;
        const char *line;

        while (off < size) {
                size_t len = MIN(piece, size - off);
                FUZZ_ASSERT(etcd_line_buffer_append(&b, data + off, len) == 0);
                off += len;
                piece = piece * 3 % 17 + 1;
                while ((line = etcd_line_buffer_next(&b, &n))) {
                        FUZZ_ASSERT(n > 0 && strlen(line) <= n);
                        total += n;
                        fuzz_watch(line, n);
                }
        }
        FUZZ_ASSERT(total <= size);
        etcd_line_buffer_done(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        switch (data[0] % 4) {
        case 0:
        case 1:
                fuzz_answer(data[0] / 4, (const char *) data + 1, size - 1);
                break;
        case 2:
                fuzz_watch((const char *) data + 1, size - 1);
                break;
        default:
                fuzz_lines((const char *) data + 1, size - 1);
                break;
        }
        return 0;
}
