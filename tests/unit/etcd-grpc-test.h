/* SPDX-License-Identifier: MIT */
/* What the unit tests of etcd's gRPC messages share (test-etcd-grpc-encode.c, -answer.c,
 * -watch.c): gRPC's 5-byte prefix put on and checked, protobuf-c's bytes, a response header.
 * Include after cmocka.h. */
#pragma once

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-grpc.h"
#include "etcd-rpc.pb-c.h"

/* etcd 3.4's header of a single-member cluster at revision rev. */
#define RESPONSE_HEADER(rev)                                                                   \
        {                                                                                      \
                .base = PROTOBUF_C_MESSAGE_INIT(&etcdserverpb__response_header__descriptor),   \
                .cluster_id = 11942735582411456322ULL, .member_id = 1288, .revision = (rev),   \
                .raft_term = 2,                                                                \
        }

static inline ProtobufCBinaryData bin(const char *s, size_t n) {
        return (ProtobufCBinaryData) { .len = n, .data = (uint8_t *) s };
}

static inline void assert_bin(ProtobufCBinaryData d, const char *want, size_t n) {
        assert_int_equal(d.len, n);
        if (n > 0)
                assert_memory_equal(d.data, want, n);
}

/* A message packed by protobuf-c behind gRPC's prefix (uncompressed, its length big-endian),
 * with one spare byte allocated and zeroed after it, for the tests that add a trailing byte. */
static inline EtcdBytes grpc_packed(const void *message) {
        const ProtobufCMessage *m = message;
        size_t n = protobuf_c_message_get_packed_size(m);
        EtcdBytes b = { .data = malloc(ETCD_GRPC_PREFIX + n + 1), .size = ETCD_GRPC_PREFIX + n };

        assert_non_null(b.data);
        b.data[0] = 0;
        b.data[1] = (uint8_t) (n >> 24);
        b.data[2] = (uint8_t) (n >> 16);
        b.data[3] = (uint8_t) (n >> 8);
        b.data[4] = (uint8_t) n;
        assert_int_equal(protobuf_c_message_pack(m, b.data + ETCD_GRPC_PREFIX), n);
        b.data[b.size] = 0;
        return b;
}

/* A raw message (bytes written out, under 256) behind gRPC's prefix, one spare byte after. */
static inline EtcdBytes grpc_raw(const void *message, size_t n) {
        EtcdBytes b = { .data = malloc(ETCD_GRPC_PREFIX + n + 1), .size = ETCD_GRPC_PREFIX + n };

        assert_non_null(b.data);
        assert_true(n < 256);
        memcpy(b.data, (const uint8_t[]) { 0, 0, 0, 0, (uint8_t) n }, ETCD_GRPC_PREFIX);
        if (n > 0)
                memcpy(b.data + ETCD_GRPC_PREFIX, message, n);
        return b;
}

/* The message of a request body, after checking gRPC's prefix: uncompressed, and the length
 * of exactly what follows. */
static inline const uint8_t *grpc_unprefix(const EtcdBytes *b, size_t *ret_size) {
        size_t len;

        assert_true(b->size >= ETCD_GRPC_PREFIX);
        assert_int_equal(b->data[0], 0);
        len = (size_t) b->data[1] << 24 | (size_t) b->data[2] << 16 | (size_t) b->data[3] << 8 |
              b->data[4];
        assert_int_equal(len, b->size - ETCD_GRPC_PREFIX);
        *ret_size = len;
        return b->data + ETCD_GRPC_PREFIX;
}
