/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* An etcd client URL as fleet.etcd_endpoints and the allocator's etcd.endpoints take it (SPEC
 * §13): "http://HOST:PORT" or "https://HOST:PORT", HOST a name, an IPv4 address or a
 * bracketed IPv6 address; the port required (etcd's default one is not assumed); no path (the
 * client adds /v3/...). One parser for the config's check and the client's connect. */
typedef struct EndpointURL {
        bool tls;       /* https:// */
        char host[254]; /* a name of at most 253 bytes, or an address without its brackets */
        uint16_t port;
} EndpointURL;

/* 0, or -EINVAL for anything else; *ret is written only on success. Pure. */
int endpoint_url_parse(const char *s, EndpointURL *ret);

/* The endpoint's numeric address: 0, or -EINVAL where HOST is a name (resolving it would
 * block the loop). */
int endpoint_url_sockaddr(const EndpointURL *u, struct sockaddr_storage *ret, socklen_t *ret_len);

/* "HOST:PORT", brackets back around an IPv6 address: HTTP's :authority. */
int endpoint_url_authority(const EndpointURL *u, char *buf, size_t size);
