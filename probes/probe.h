/* SPDX-License-Identifier: MIT */
#pragma once

#include <netinet/in.h>
#include <systemd/sd-event.h>

#include "config.h"

/* One query-protocol probe of one game server on the event loop: a fresh connected UDP socket
 * per probe (SQP servers drop a second challenge from the same source port), a deadline, and
 * replies parsed as hostile input. */

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

/* result: 0 with *info on a valid answer; -ETIMEDOUT, -ECONNREFUSED, -EBADMSG or another
 * negative errno otherwise. The probe is finished when this is called: free it there or
 * later. */
typedef void (*probe_done_t)(Probe *p, int result, const ProbeResult *info, void *userdata);

/* At most one probe per target address at a time (-EBUSY). */
int probe_start(ProbeHub *hub, QueryType type, const struct sockaddr_in *addr, usec_t timeout,
                probe_done_t done, void *userdata, Probe **ret);
Probe *probe_free(Probe *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(Probe *, probe_free);
