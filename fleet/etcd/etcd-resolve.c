/* SPDX-License-Identifier: MIT */
/* Host names resolved by c-ares on sd-event (etcd-resolve.h). */
#include <ares.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "etcd-resolve.h"
#include "macro.h"
#include "time-util.h"

#define RESOLVE_SOCKETS_MAX 16 /* c-ares' sockets at once: one per name server and protocol */

typedef struct ResolveSocket {
        int fd;
        sd_event_source *io;
} ResolveSocket;

struct EtcdResolver {
        sd_event *event;
        ares_channel channel;
        bool channel_ready;
        ResolveSocket sockets[RESOLVE_SOCKETS_MAX];
        sd_event_source *timer, *dispatch;
        /* the lookup: under way (busy), then its result waiting for the dispatch (done) */
        bool busy, done;
        unsigned generation; /* a cancelled lookup's late answer is not this one's */
        int error;
        char detail[128];
        struct sockaddr_storage addrs[ETCD_RESOLVE_MAX];
        socklen_t lens[ETCD_RESOLVE_MAX];
        size_t n;
        etcd_resolve_callback_t cb;
        void *userdata;
};

typedef struct Lookup {
        EtcdResolver *r;
        unsigned generation;
        uint16_t port;
} Lookup;

static void resolver_timer_update(EtcdResolver *r) {
        struct timeval tv, *t;

        if (!r->channel_ready)
                return;
        t = ares_timeout(r->channel, NULL, &tv);
        if (!t) {
                (void) sd_event_source_set_enabled(r->timer, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time_relative(r->timer, (usec_t) t->tv_sec * USEC_PER_SEC +
                                                                  (usec_t) t->tv_usec);
        (void) sd_event_source_set_enabled(r->timer, SD_EVENT_ONESHOT);
}

static int on_resolve_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        EtcdResolver *r = userdata;

        ares_process_fd(r->channel,
                        revents & (EPOLLIN | EPOLLHUP | EPOLLERR) ? fd : ARES_SOCKET_BAD,
                        revents & EPOLLOUT ? fd : ARES_SOCKET_BAD);
        resolver_timer_update(r);
        return 0;
}

static int on_resolve_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        EtcdResolver *r = userdata;

        ares_process_fd(r->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
        resolver_timer_update(r);
        return 0;
}

/* c-ares opens, watches or closes one of its sockets. */
static void on_sock_state(void *data, ares_socket_t fd, int readable, int writable) {
        EtcdResolver *r = data;
        uint32_t events = (readable ? EPOLLIN : 0) | (writable ? EPOLLOUT : 0);
        ResolveSocket *free_slot = NULL;

        for (size_t i = 0; i < RESOLVE_SOCKETS_MAX; i++) {
                ResolveSocket *k = &r->sockets[i];

                if (k->io && k->fd == fd) {
                        if (events == 0)
                                k->io = sd_event_source_disable_unref(k->io);
                        else
                                (void) sd_event_source_set_io_events(k->io, events);
                        return;
                }
                if (!k->io && !free_slot)
                        free_slot = k;
        }
        if (events == 0 || !free_slot ||
            sd_event_add_io(r->event, &free_slot->io, fd, events, on_resolve_io, r) < 0)
                return; /* its query times out (ares_timeout), as a lost packet's would */
        free_slot->fd = fd;
        (void) sd_event_source_set_description(free_slot->io, "etcd-resolve-io");
}

static int status_to_errno(int status) {
        switch (status) {
        case ARES_ENOTFOUND:
        case ARES_ENODATA:
        case ARES_ENONAME:
                return -EHOSTUNREACH;
        case ARES_ETIMEOUT:
                return -ETIMEDOUT;
        case ARES_ENOMEM:
                return -ENOMEM;
        default:
                return -EIO;
        }
}

/* c-ares' answer (maybe inside ares_getaddrinfo itself, from /etc/hosts): kept for the
 * dispatch, which runs the callback from the loop. */
static void on_addrinfo(void *arg, int status, int timeouts, struct ares_addrinfo *res) {
        Lookup *l = arg;
        EtcdResolver *r = l->r;

        if (status == ARES_ECANCELLED || status == ARES_EDESTRUCTION ||
            l->generation != r->generation || !r->busy) {
                free(l);
                ares_freeaddrinfo(res);
                return;
        }
        r->n = 0;
        for (struct ares_addrinfo_node *a = res ? res->nodes : NULL;
             a && status == ARES_SUCCESS && r->n < ETCD_RESOLVE_MAX; a = a->ai_next) {
                if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
                    a->ai_addrlen > sizeof(struct sockaddr_storage))
                        continue;
                memcpy(&r->addrs[r->n], a->ai_addr, a->ai_addrlen);
                if (a->ai_family == AF_INET)
                        ((struct sockaddr_in *) &r->addrs[r->n])->sin_port = htons(l->port);
                else
                        ((struct sockaddr_in6 *) &r->addrs[r->n])->sin6_port = htons(l->port);
                r->lens[r->n++] = a->ai_addrlen;
        }
        r->error = status != ARES_SUCCESS ? status_to_errno(status)
                   : r->n == 0            ? -EHOSTUNREACH
                                          : 0;
        (void) snprintf(r->detail, sizeof(r->detail), "%s",
                        status != ARES_SUCCESS ? ares_strerror(status)
                        : r->n == 0            ? "no IPv4 or IPv6 address"
                                               : "");
        r->busy = false;
        r->done = true;
        (void) sd_event_source_set_enabled(r->dispatch, SD_EVENT_ONESHOT);
        free(l);
        ares_freeaddrinfo(res);
}

static int on_resolve_dispatch(sd_event_source *s, void *userdata) {
        EtcdResolver *r = userdata;

        if (!r->done)
                return 0;
        r->done = false;
        r->cb(r, r->error, r->addrs, r->lens, r->n, r->detail, r->userdata);
        return 0;
}

int etcd_resolver_new(EtcdResolver **ret, sd_event *event) {
        EtcdResolver *r = new0(EtcdResolver, 1);
        int k;

        if (!r)
                return -ENOMEM;
        r->event = sd_event_ref(event);
        k = sd_event_add_time(event, &r->timer, CLOCK_MONOTONIC, 0, 0, on_resolve_timer, r);
        if (k >= 0)
                k = sd_event_source_set_enabled(r->timer, SD_EVENT_OFF);
        if (k >= 0)
                k = sd_event_add_defer(event, &r->dispatch, on_resolve_dispatch, r);
        if (k >= 0)
                k = sd_event_source_set_enabled(r->dispatch, SD_EVENT_OFF);
        if (k < 0) {
                etcd_resolver_free(r);
                return k;
        }
        (void) sd_event_source_set_description(r->timer, "etcd-resolve-timer");
        (void) sd_event_source_set_description(r->dispatch, "etcd-resolve-dispatch");
        *ret = r;
        return 0;
}

EtcdResolver *etcd_resolver_free(EtcdResolver *r) {
        if (!r)
                return NULL;
        r->busy = r->done = false;
        if (r->channel_ready)
                ares_destroy(r->channel); /* closes its sockets: on_sock_state unwatches them */
        for (size_t i = 0; i < RESOLVE_SOCKETS_MAX; i++)
                sd_event_source_disable_unref(r->sockets[i].io);
        sd_event_source_disable_unref(r->timer);
        sd_event_source_disable_unref(r->dispatch);
        sd_event_unref(r->event);
        free(r);
        return NULL;
}

/* The channel, made at the first lookup (it reads /etc/resolv.conf and /etc/hosts' path:
 * small local files, as the configuration's). */
static int resolver_channel(EtcdResolver *r) {
        static bool library_ready = false;
        struct ares_options o = { .sock_state_cb = on_sock_state, .sock_state_cb_data = r };

        if (r->channel_ready)
                return 0;
        if (!library_ready) {
                if (ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS)
                        return -ENOMEM;
                library_ready = true;
        }
        if (ares_init_options(&r->channel, &o, ARES_OPT_SOCK_STATE_CB) != ARES_SUCCESS)
                return -ENOMEM;
        r->channel_ready = true;
        return 0;
}

int etcd_resolve(EtcdResolver *r, const char *host, uint16_t port, etcd_resolve_callback_t cb,
                 void *userdata) {
        const struct ares_addrinfo_hints hints = { .ai_family = AF_UNSPEC,
                                                   .ai_socktype = SOCK_STREAM };
        Lookup *l;
        int k;

        if (!r || !host || !cb)
                return -EINVAL;
        if (r->busy || r->done)
                return -EBUSY;
        k = resolver_channel(r);
        if (k < 0)
                return k;
        l = new0(Lookup, 1);
        if (!l)
                return -ENOMEM;
        *l = (Lookup) { .r = r, .generation = ++r->generation, .port = port };
        r->busy = true;
        r->cb = cb;
        r->userdata = userdata;
        ares_getaddrinfo(r->channel, host, NULL, &hints, on_addrinfo, l);
        resolver_timer_update(r);
        return 0;
}

void etcd_resolve_cancel(EtcdResolver *r) {
        if (!r)
                return;
        r->busy = r->done = false;
        r->generation++;
        (void) sd_event_source_set_enabled(r->dispatch, SD_EVENT_OFF);
        if (r->channel_ready)
                ares_cancel(r->channel); /* on_addrinfo frees the lookup */
        resolver_timer_update(r);
}
