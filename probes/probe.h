/* SPDX-License-Identifier: MIT */
#pragma once

#include <netinet/in.h>
#include <systemd/sd-event.h>

#include "config.h"

/* One query-protocol probe of one game server on the event loop: a datagram exchange through
 * the loop's one UDP socket (ProbeHub), a deadline, and replies parsed as hostile input. */

#define PROBE_STR_MAX 256

typedef struct ProbeResult {
        unsigned players;
        unsigned max_players;
        char name[PROBE_STR_MAX];
        char map[PROBE_STR_MAX];
        uint32_t challenge;     /* SQP: the challenge the answer came with (for the next probe) */
} ProbeResult;

typedef struct Probe Probe;
typedef struct ProbeHub ProbeHub;

/* The one UDP socket all probes of a loop share (see probe.c). */
int probe_hub_new(sd_event *event, ProbeHub **ret);
ProbeHub *probe_hub_free(ProbeHub *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(ProbeHub *, probe_hub_free);

/* result: 0 with *info on a valid answer. What the server did: -ETIMEDOUT (no valid answer
 * in time), -EBADMSG (a garbled one), -ECONNREFUSED (nothing listens). Any other negative
 * errno is the host's: the probe could not be made (check_error_is_local()): a send the
 * kernel refused (ENETUNREACH, EPERM, ENOBUFS...), or -ENETDOWN, silence while the loopback
 * interface is down. The probe is finished when this is called: free it there or later. */
typedef void (*probe_done_t)(Probe *p, int result, const ProbeResult *info, void *userdata);

/* At most one probe per target address at a time (-EBUSY). For SQP, 'challenge' (0: none) is
 * the one the server gave the last probe: the query goes out with it at once, one round trip
 * instead of two, since a server keeps a client's challenge until it asks for a new one. If
 * no answer has come by half the timeout, the probe asks for a challenge after all (and
 * still takes a late answer to the first query); a server that answers the query with a
 * new challenge gets the query again with that one. */
int probe_start(ProbeHub *hub, QueryType type, const struct sockaddr_in *addr, usec_t timeout,
                uint32_t challenge, probe_done_t done, void *userdata, Probe **ret);
Probe *probe_free(Probe *p);

/* Between cork and uncork (they nest) the probes' datagrams wait and leave by one sendmmsg
 * at the last uncork; a datagram refused then fails its probe from the probe's timer, in a
 * later event. A hub is corked while it handles answers. */
void probe_hub_cork(ProbeHub *h);
void probe_hub_uncork(ProbeHub *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(Probe *, probe_free);
