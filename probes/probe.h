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

/* At most one probe per target address at a time (-EBUSY). An SQP probe is two round trips,
 * a challenge and then the query with it: a challenge is never reused, since Unity's
 * responders accept each one for a single query. */
int probe_start(ProbeHub *hub, QueryType type, const struct sockaddr_in *addr, usec_t timeout,
                probe_done_t done, void *userdata, Probe **ret);
Probe *probe_free(Probe *p);

/* Between cork and uncork (they nest) the probes' datagrams wait and leave by one sendmmsg
 * at the last uncork; a datagram refused then fails its probe from the probe's timer, in a
 * later event. A hub is corked while it handles answers. */
void probe_hub_cork(ProbeHub *h);
void probe_hub_uncork(ProbeHub *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(Probe *, probe_free);
