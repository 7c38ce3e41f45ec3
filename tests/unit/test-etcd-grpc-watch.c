/* SPDX-License-Identifier: MIT */
/* fleet/etcd/etcd-grpc.c and etcd-grpc-parse.c: etcd's Watch stream over gRPC. The request that
 * creates a watch, read back with protobuf-c's unpack; the stream split into gRPC's prefixed
 * messages; and the WatchResponses etcd sends, made by protobuf-c's packing of the messages
 * (etcd is Go's protobuf: the same wire format), or written out by hand where protobuf-c would
 * not make them. The KV service's are test-etcd-grpc-encode.c's and test-etcd-grpc-answer.c's. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "etcd-grpc-test.h"
#include "etcd-grpc.h"
#include "etcd-rpc.pb-c.h"
#include "macro.h"

static Etcdserverpb__ResponseHeader header7 = RESPONSE_HEADER(7);

/* A parse that must fail with -EBADMSG, on a message filled with junk before: it must come
 * back zeroed, and (under ASan) leave nothing allocated. */
static void assert_bad(const uint8_t *p, size_t size) {
        EtcdWatchMessage m;

        memset(&m, 0xa5, sizeof(m));
        assert_int_equal(etcd_grpc_watch_message_parse(p, size, &m), -EBADMSG);
        assert_null(m.events);
        assert_int_equal(m.n_events, 0);
        assert_null(m.error);
        assert_int_equal(m.revision, 0);
        assert_int_equal(m.compact_revision, 0);
        assert_false(m.created);
        assert_false(m.canceled);
        etcd_watch_message_done(&m);
}

/* The WatchRequest a body holds, after checking gRPC's prefix: uncompressed, and the length
 * of exactly what follows. */
static Etcdserverpb__WatchRequest *request_of(const EtcdBytes *b) {
        Etcdserverpb__WatchRequest *w;
        const uint8_t *m;
        size_t len;

        m = grpc_unprefix(b, &len);
        w = etcdserverpb__watch_request__unpack(NULL, len, m);
        assert_non_null(w);
        assert_int_equal(w->request_union_case,
                         ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST);
        assert_non_null(w->create_request);
        /* nothing we did not ask for */
        assert_false(w->create_request->progress_notify);
        assert_false(w->create_request->prev_kv);
        assert_false(w->create_request->fragment);
        assert_int_equal(w->create_request->watch_id, 0);
        return w;
}

static void test_watch_create(_unused_ void **state) {
        /* WatchRequest{create_request(1){key(1) "/a/", range_end(2) "/a0", start_revision(3)
         * 42}}: what goes on the wire, byte for byte */
        static const uint8_t want[] = { 0,    0,   0,   0,    14,  0x0a, 12,  0x0a, 3,   '/',
                                        'a',  '/', 0x12, 3,   '/', 'a',  '0', 0x18, 42 };
        Etcdserverpb__WatchRequest *w;
        EtcdBytes b = {};

        assert_int_equal(etcd_grpc_watch_create("/a/", "/a0", 42, &b), 0);
        assert_int_equal(b.size, sizeof(want));
        assert_memory_equal(b.data, want, sizeof(want));
        w = request_of(&b);
        assert_bin(w->create_request->key, "/a/", 3);
        assert_bin(w->create_request->range_end, "/a0", 3);
        assert_int_equal(w->create_request->start_revision, 42);
        etcdserverpb__watch_request__free_unpacked(w, NULL);
        etcd_bytes_done(&b);
        assert_null(b.data);
        assert_int_equal(b.size, 0);

        /* one key: no range_end at all; from now: no start_revision */
        assert_int_equal(etcd_grpc_watch_create("/a/b", NULL, 0, &b), 0);
        w = request_of(&b);
        assert_bin(w->create_request->key, "/a/b", 4);
        assert_int_equal(w->create_request->range_end.len, 0);
        assert_int_equal(w->create_request->start_revision, 0);
        etcdserverpb__watch_request__free_unpacked(w, NULL);
        etcd_bytes_done(&b);

        /* "" as in etcd_range(): etcd's "\0", every key from key on */
        assert_int_equal(etcd_grpc_watch_create("/a/", "", INT64_MAX, &b), 0);
        w = request_of(&b);
        assert_bin(w->create_request->range_end, "\0", 1);
        assert_int_equal(w->create_request->start_revision, INT64_MAX);
        etcdserverpb__watch_request__free_unpacked(w, NULL);
        etcd_bytes_done(&b);

        /* refused, and nothing made */
        assert_int_equal(etcd_grpc_watch_create(NULL, "/a0", 1, &b), -EINVAL);
        assert_null(b.data);
        assert_int_equal(etcd_grpc_watch_create("", "/a0", 1, &b), -EINVAL);
        assert_null(b.data);
        assert_int_equal(etcd_grpc_watch_create("/a/", "/a0", -1, &b), -EINVAL);
        assert_null(b.data);
        assert_int_equal(etcd_grpc_watch_create("/a/", NULL, INT64_MIN, &b), -EINVAL);
        assert_null(b.data);
}

static void test_frame_next(_unused_ void **state) {
        /* two messages back to back: 10 bytes, then none */
        static const uint8_t two[] = { 0, 0, 0, 0, 10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                       0, 0, 0, 0, 0 };
        static const uint8_t max[] = { 0, 0x04, 0, 0, 0 };      /* ETCD_ANSWER_MAX */
        static const uint8_t over[] = { 0, 0x04, 0, 0, 1 };     /* ETCD_ANSWER_MAX + 1 */
        static const uint8_t huge[] = { 0, 0xff, 0xff, 0xff, 0xff };
        size_t len = 0;

        assert_int_equal(ETCD_ANSWER_MAX, 0x04000000);
        /* not even the prefix */
        assert_int_equal(etcd_grpc_frame_next(NULL, 0, &len), 0);
        for (size_t n = 0; n < ETCD_GRPC_PREFIX; n++)
                assert_int_equal(etcd_grpc_frame_next(two, n, &len), 0);
        /* the prefix, not all of the message: 10 announced, 0 to 9 there */
        for (size_t n = ETCD_GRPC_PREFIX; n < 15; n++)
                assert_int_equal(etcd_grpc_frame_next(two, n, &len), 0);
        assert_int_equal(len, 0);
        assert_int_equal(etcd_grpc_frame_next(two, 15, &len), 1);
        assert_int_equal(len, 15);
        /* what follows is the next one's */
        len = 0;
        assert_int_equal(etcd_grpc_frame_next(two, sizeof(two), &len), 1);
        assert_int_equal(len, 15);
        assert_int_equal(etcd_grpc_frame_next(two + 15, sizeof(two) - 15, &len), 1);
        assert_int_equal(len, ETCD_GRPC_PREFIX);
        assert_int_equal(etcd_grpc_frame_next(two + 15, 4, &len), 0);

        /* compressed: never asked for, whatever the flag's value */
        for (unsigned flag = 1; flag < 256; flag++) {
                uint8_t c[15];

                memcpy(c, two, sizeof(c));
                c[0] = (uint8_t) flag;
                assert_int_equal(etcd_grpc_frame_next(c, sizeof(c), &len), -EBADMSG);
                assert_int_equal(etcd_grpc_frame_next(c, ETCD_GRPC_PREFIX, &len), -EBADMSG);
        }
        /* as long as an answer may be: more needed; longer: refused from the prefix on */
        assert_int_equal(etcd_grpc_frame_next(max, sizeof(max), &len), 0);
        assert_int_equal(etcd_grpc_frame_next(over, sizeof(over), &len), -EBADMSG);
        assert_int_equal(etcd_grpc_frame_next(huge, sizeof(huge), &len), -EBADMSG);
}

static void test_parse_created(_unused_ void **state) {
        Etcdserverpb__WatchResponse w = ETCDSERVERPB__WATCH_RESPONSE__INIT;
        EtcdWatchMessage m;
        EtcdBytes b;

        w.header = &header7;
        w.watch_id = 0;
        w.created = 1;
        b = grpc_packed(&w);
        assert_int_equal(etcd_grpc_watch_message_parse(b.data, b.size, &m), 0);
        assert_int_equal(m.revision, 7);
        assert_true(m.created);
        assert_false(m.canceled);
        assert_int_equal(m.compact_revision, 0);
        assert_null(m.events);
        assert_int_equal(m.n_events, 0);
        assert_null(m.error);
        etcd_watch_message_done(&m);
        etcd_bytes_done(&b);

        /* another watch id, and no header at all: revision 0 */
        w.header = NULL;
        w.watch_id = 3;
        b = grpc_packed(&w);
        assert_int_equal(etcd_grpc_watch_message_parse(b.data, b.size, &m), 0);
        assert_int_equal(m.revision, 0);
        assert_true(m.created);
        etcd_watch_message_done(&m);
        etcd_bytes_done(&b);

        /* the empty message (a progress notification without its header) */
        b = grpc_raw(NULL, 0);
        assert_int_equal(etcd_grpc_watch_message_parse(b.data, b.size, &m), 0);
        assert_int_equal(m.revision, 0);
        assert_false(m.created);
        assert_false(m.canceled);
        assert_null(m.events);
        assert_null(m.error);
        etcd_watch_message_done(&m);
        etcd_bytes_done(&b);

        /* a field etcd adds later is skipped: created (3) 1, then field 15 as a varint */
        b = grpc_raw((const uint8_t[]) { 0x18, 1, 0x78, 42 }, 4);
        assert_int_equal(etcd_grpc_watch_message_parse(b.data, b.size, &m), 0);
        assert_true(m.created);
        etcd_watch_message_done(&m);
        etcd_bytes_done(&b);
}

static void assert_put_event(const EtcdEvent *ev) {
        assert_int_equal(ev->type, ETCD_EVENT_PUT);
        assert_string_equal(ev->kv.key, "/a/b");
        assert_string_equal(ev->kv.value, "hello");
        assert_int_equal(ev->kv.value_len, 5);
        assert_int_equal(ev->kv.create_revision, 2);
        assert_int_equal(ev->kv.mod_revision, 8);
        assert_int_equal(ev->kv.version, 3);
        assert_int_equal(ev->kv.lease, 8588824136662307345LL);
}

/* a DELETE: the key and its mod_revision, the value "" */
static void assert_delete_event(const EtcdEvent *ev) {
        assert_int_equal(ev->type, ETCD_EVENT_DELETE);
        assert_string_equal(ev->kv.key, "/a/");
        assert_non_null(ev->kv.value);
        assert_string_equal(ev->kv.value, "");
        assert_int_equal(ev->kv.value_len, 0);
        assert_int_equal(ev->kv.create_revision, 0);
        assert_int_equal(ev->kv.mod_revision, 9);
        assert_int_equal(ev->kv.version, 0);
        assert_int_equal(ev->kv.lease, 0);
}

static void test_parse_events(_unused_ void **state) {
        Etcdserverpb__KeyValue kv0 = ETCDSERVERPB__KEY_VALUE__INIT,
                               kv1 = ETCDSERVERPB__KEY_VALUE__INIT;
        Etcdserverpb__Event ev0 = ETCDSERVERPB__EVENT__INIT, ev1 = ETCDSERVERPB__EVENT__INIT;
        Etcdserverpb__Event *evs[] = { &ev0, &ev1 };
        Etcdserverpb__WatchResponse w = ETCDSERVERPB__WATCH_RESPONSE__INIT;
        EtcdWatchMessage m;
        EtcdBytes b;

        kv0.key = bin("/a/b", 4);
        kv0.value = bin("hello", 5);
        kv0.create_revision = 2;
        kv0.mod_revision = 8;
        kv0.version = 3;
        kv0.lease = 8588824136662307345LL;
        ev0.type = ETCDSERVERPB__EVENT__EVENT_TYPE__PUT;
        ev0.kv = &kv0;
        /* a DELETE: the key and its mod_revision, nothing else */
        kv1.key = bin("/a/", 3);
        kv1.mod_revision = 9;
        ev1.type = ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE;
        ev1.kv = &kv1;
        ev1.prev_kv = &kv0; /* never asked for: ignored if it comes */
        w.header = &header7;
        w.watch_id = 1;
        w.n_events = 2;
        w.events = evs;
        b = grpc_packed(&w);
        assert_int_equal(etcd_grpc_watch_message_parse(b.data, b.size, &m), 0);
        assert_int_equal(m.revision, 7);
        assert_false(m.created);
        assert_false(m.canceled);
        assert_null(m.error);
        assert_int_equal(m.n_events, 2);
        assert_non_null(m.events);
        assert_put_event(&m.events[0]);
        assert_delete_event(&m.events[1]);
        etcd_watch_message_done(&m);
        assert_null(m.events);
        assert_int_equal(m.n_events, 0);
        etcd_bytes_done(&b);

        /* a value is bytes: a NUL inside is kept and counted, and one ends it */
        kv0.value = bin("a\0b\0", 4);
        w.n_events = 1;
        b = grpc_packed(&w);
        assert_int_equal(etcd_grpc_watch_message_parse(b.data, b.size, &m), 0);
        assert_int_equal(m.n_events, 1);
        assert_int_equal(m.events[0].kv.value_len, 4);
        assert_memory_equal(m.events[0].kv.value, "a\0b\0", 5);
        etcd_watch_message_done(&m);
        etcd_bytes_done(&b);
}

static void test_parse_compacted(_unused_ void **state) {
        Etcdserverpb__WatchResponse w = ETCDSERVERPB__WATCH_RESPONSE__INIT;
        EtcdWatchMessage m;
        EtcdBytes b;

        /* the revision asked for is gone: etcd cancels the watch and says from where on */
        w.header = &header7;
        w.canceled = 1;
        w.compact_revision = 5;
        b = grpc_packed(&w);
        assert_int_equal(etcd_grpc_watch_message_parse(b.data, b.size, &m), 0);
        assert_int_equal(m.revision, 7);
        assert_int_equal(m.compact_revision, 5);
        assert_true(m.canceled);
        assert_false(m.created);
        assert_null(m.error);
        assert_int_equal(m.n_events, 0);
        etcd_watch_message_done(&m);
        etcd_bytes_done(&b);

        /* compact_revision alone */
        w.canceled = 0;
        w.compact_revision = 1234567890123LL;
        b = grpc_packed(&w);
        assert_int_equal(etcd_grpc_watch_message_parse(b.data, b.size, &m), 0);
        assert_int_equal(m.compact_revision, 1234567890123LL);
        assert_false(m.canceled);
        etcd_watch_message_done(&m);
        etcd_bytes_done(&b);
}

/* A canceled response with reason: its error. */
static char *canceled_error(const char *reason) {
        Etcdserverpb__WatchResponse w = ETCDSERVERPB__WATCH_RESPONSE__INIT;
        EtcdWatchMessage m;
        EtcdBytes b;
        char *e;

        w.header = &header7;
        w.canceled = 1;
        w.cancel_reason = (char *) reason;
        b = grpc_packed(&w);
        assert_int_equal(etcd_grpc_watch_message_parse(b.data, b.size, &m), 0);
        etcd_bytes_done(&b);
        assert_true(m.canceled);
        assert_int_equal(m.revision, 7);
        e = TAKE_PTR(m.error);
        etcd_watch_message_done(&m);
        return e;
}

static void test_parse_canceled(_unused_ void **state) {
        char reason[601], *e;

        /* what ends up in a log: printable ASCII, the others '?' */
        e = canceled_error("etcdserver: no leader\n\x01");
        assert_non_null(e);
        assert_string_equal(e, "etcdserver: no leader??");
        free(e);
        e = canceled_error("\x7f\x1b[31mred\t");
        assert_string_equal(e, "??[31mred?");
        free(e);
        /* at most 512 bytes of it */
        memset(reason, 'x', 600);
        reason[600] = '\0';
        e = canceled_error(reason);
        assert_int_equal(strlen(e), 512);
        assert_memory_equal(e, reason, 512);
        free(e);
        memset(reason, 'y', 512);
        reason[512] = '\0';
        e = canceled_error(reason);
        assert_string_equal(e, reason);
        free(e);
        /* no reason: no error */
        e = canceled_error("");
        assert_null(e);
}

/* A reason with bytes protobuf-c keeps in its string (UTF-8, a NUL): never more than
 * printable ASCII. By hand: canceled (4) 1, cancel_reason (6). */
static void test_parse_canceled_raw(_unused_ void **state) {
        static const uint8_t utf8[] = { 0x20, 1, 0x32, 5, 'c', 'a', 'f', 0xc3, 0xa9 };
        static const uint8_t nul[] = { 0x20, 1, 0x32, 3, 'a', 0, 'b' };
        static const uint8_t not_utf8[] = { 0x20, 1, 0x32, 2, 0xff, 'x' };
        EtcdWatchMessage m;
        EtcdBytes b;

        b = grpc_raw(utf8, sizeof(utf8));
        assert_int_equal(etcd_grpc_watch_message_parse(b.data, b.size, &m), 0);
        assert_true(m.canceled);
        assert_string_equal(m.error, "caf??");
        etcd_watch_message_done(&m);
        etcd_bytes_done(&b);
        /* not UTF-8 (protobuf-c does not check a string's) */
        b = grpc_raw(not_utf8, sizeof(not_utf8));
        assert_int_equal(etcd_grpc_watch_message_parse(b.data, b.size, &m), 0);
        assert_string_equal(m.error, "?x");
        etcd_watch_message_done(&m);
        etcd_bytes_done(&b);
        /* a NUL: protobuf-c's C string ends there, or it is a '?' */
        b = grpc_raw(nul, sizeof(nul));
        assert_int_equal(etcd_grpc_watch_message_parse(b.data, b.size, &m), 0);
        assert_true(m.canceled);
        assert_non_null(m.error);
        assert_true(streq(m.error, "a") || streq(m.error, "a?b"));
        etcd_watch_message_done(&m);
        etcd_bytes_done(&b);
}

/* w packed, and parsed: -EBADMSG. */
static void assert_bad_response(const Etcdserverpb__WatchResponse *w) {
        EtcdBytes b = grpc_packed(w);

        assert_bad(b.data, b.size);
        etcd_bytes_done(&b);
}

static void test_parse_malformed_events(_unused_ void **state) {
        Etcdserverpb__KeyValue good = ETCDSERVERPB__KEY_VALUE__INIT,
                               bad = ETCDSERVERPB__KEY_VALUE__INIT;
        Etcdserverpb__Event ev0 = ETCDSERVERPB__EVENT__INIT, ev1 = ETCDSERVERPB__EVENT__INIT;
        Etcdserverpb__Event *evs[] = { &ev0, &ev1 };
        Etcdserverpb__WatchResponse w = ETCDSERVERPB__WATCH_RESPONSE__INIT;

        good.key = bin("/a/b", 4);
        good.value = bin("hello", 5);
        bad.key = bin("/a/c", 4);
        bad.value = bin("v", 1);
        ev0.kv = &good;
        ev1.kv = &bad;
        w.header = &header7;
        w.events = evs;
        /* each bad event alone, and after a good one (copied already: freed) */
        for (w.n_events = 1; w.n_events <= 2; w.n_events++) {
                Etcdserverpb__Event *last = evs[w.n_events - 1];

                last->kv = NULL; /* an event without its kv */
                assert_bad_response(&w);
                last->kv = w.n_events == 1 ? &good : &bad;
                last->type = (Etcdserverpb__Event__EventType) 2; /* neither PUT nor DELETE */
                assert_bad_response(&w);
                last->type = (Etcdserverpb__Event__EventType) -1;
                assert_bad_response(&w);
                last->type = ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE;
                last->kv->key = bin(NULL, 0); /* an empty key */
                assert_bad_response(&w);
                last->kv->key = bin("/a/\0b", 5); /* a NUL in the key */
                assert_bad_response(&w);
                last->kv->key = bin("\0", 1);
                assert_bad_response(&w);
                last->kv->key = bin("/a/b", 4);
        }
        /* a fragment: never asked for; with a reason and events made already */
        w.n_events = 2;
        w.fragment = 1;
        assert_bad_response(&w);
        w.canceled = 1;
        w.cancel_reason = (char *) "etcdserver: mvcc: required revision has been compacted";
        assert_bad_response(&w);
        w.fragment = 0;
        /* and all of it good again */
        {
                EtcdBytes b = grpc_packed(&w);
                EtcdWatchMessage m;

                assert_int_equal(etcd_grpc_watch_message_parse(b.data, b.size, &m), 0);
                assert_int_equal(m.n_events, 2);
                assert_string_equal(m.error,
                                    "etcdserver: mvcc: required revision has been compacted");
                etcd_watch_message_done(&m);
                etcd_bytes_done(&b);
        }
}

static void test_parse_malformed_framing(_unused_ void **state) {
        static const uint8_t garbage[] = { 0, 0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff,
                                           0xff, 0xff, 0xff, 0xff };
        Etcdserverpb__KeyValue kv = ETCDSERVERPB__KEY_VALUE__INIT;
        Etcdserverpb__Event ev = ETCDSERVERPB__EVENT__INIT, *evs[] = { &ev };
        Etcdserverpb__WatchResponse w = ETCDSERVERPB__WATCH_RESPONSE__INIT;
        EtcdBytes b, two;

        kv.key = bin("/a/b", 4);
        kv.value = bin("hello", 5);
        ev.kv = &kv;
        w.header = &header7;
        w.n_events = 1;
        w.events = evs;
        b = grpc_packed(&w);
        /* cut anywhere, the prefix then announces more than there is */
        for (size_t n = 0; n < b.size; n++)
                assert_bad(n ? b.data : NULL, n);
        /* one byte more than the message (grpc_packed() allocated it) */
        assert_bad(b.data, b.size + 1);
        /* two messages */
        two = (EtcdBytes) { .data = malloc(2 * b.size), .size = 2 * b.size };
        assert_non_null(two.data);
        memcpy(two.data, b.data, b.size);
        memcpy(two.data + b.size, b.data, b.size);
        assert_bad(two.data, two.size);
        etcd_bytes_done(&two);
        /* the prefix agrees, the message is cut: in the value's bytes, in the header's */
        b.data[4]--;
        assert_bad(b.data, b.size - 1);
        b.data[4] = 4;
        assert_bad(b.data, ETCD_GRPC_PREFIX + 4);
        /* compressed */
        b.data[4] = (uint8_t) (b.size - ETCD_GRPC_PREFIX);
        b.data[0] = 1;
        assert_bad(b.data, b.size);
        etcd_bytes_done(&b);
        /* not protobuf: a varint that does not end, a wire type for a group (3) */
        assert_bad(garbage, sizeof(garbage));
        b = grpc_raw((const uint8_t[]) { 0x1b }, 1);
        assert_bad(b.data, b.size);
        etcd_bytes_done(&b);
        /* a length-delimited field longer than the message */
        b = grpc_raw((const uint8_t[]) { 0x32, 10, 'a' }, 3);
        assert_bad(b.data, b.size);
        etcd_bytes_done(&b);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_watch_create),
                cmocka_unit_test(test_frame_next),
                cmocka_unit_test(test_parse_created),
                cmocka_unit_test(test_parse_events),
                cmocka_unit_test(test_parse_compacted),
                cmocka_unit_test(test_parse_canceled),
                cmocka_unit_test(test_parse_canceled_raw),
                cmocka_unit_test(test_parse_malformed_events),
                cmocka_unit_test(test_parse_malformed_framing),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
