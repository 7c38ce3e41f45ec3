/* SPDX-License-Identifier: MIT */
#pragma once

/* A host name of an etcd endpoint resolved without blocking the loop or starting a thread:
 * c-ares (ares_getaddrinfo: /etc/hosts, then DNS as /etc/resolv.conf says), its sockets
 * watched by sd-event io sources and its timeouts by an sd-event timer. One lookup at a time
 * per resolver (etcd-h2.c has one per endpoint). glibc's getaddrinfo() would block the loop,
 * and its getaddrinfo_a() runs threads. */

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <systemd/sd-event.h>

#define ETCD_RESOLVE_MAX 8 /* addresses kept of one name */

typedef struct EtcdResolver EtcdResolver;

/* The lookup's end, from the loop (never inside c-ares): error 0 and n >= 1 addresses (their
 * port set), in c-ares' order; or -EHOSTUNREACH (no such name, or no address), -ETIMEDOUT,
 * -ENOMEM, -EIO (another failure of c-ares), with detail (c-ares' words). */
typedef void (*etcd_resolve_callback_t)(EtcdResolver *r, int error,
                                        const struct sockaddr_storage *addrs,
                                        const socklen_t *lens, size_t n, const char *detail,
                                        void *userdata);

int etcd_resolver_new(EtcdResolver **ret, sd_event *event);
/* A lookup under way ends without its callback. */
EtcdResolver *etcd_resolver_free(EtcdResolver *r);

/* Looks host up (IPv4 and IPv6) for port; cb runs later, once, unless cancelled. -EBUSY while
 * another lookup is under way. */
int etcd_resolve(EtcdResolver *r, const char *host, uint16_t port, etcd_resolve_callback_t cb,
                 void *userdata);
/* The lookup under way (if any) ends without its callback. */
void etcd_resolve_cancel(EtcdResolver *r);
