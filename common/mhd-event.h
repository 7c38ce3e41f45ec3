/* SPDX-License-Identifier: MIT */
#pragma once

/* microhttpd daemons in external epoll mode (MHD_USE_EPOLL), run from one sd-event loop: each
 * daemon's epoll fd tells when it has work, MHD_get_timeout() when it must run anyway (at
 * once when it has work queued that no fd announces, such as a resumed connection, later for
 * idle connections). Shared by slotd-proxy (its localproxy.listen and metrics.listen daemons)
 * and slotd-allocator. */

#include <microhttpd.h>
#include <systemd/sd-event.h>

typedef struct MhdEvent MhdEvent;

int mhd_event_new(sd_event *event, MhdEvent **ret);
/* Stops watching; the daemons are the caller's to stop (after this). */
MhdEvent *mhd_event_free(MhdEvent *m);
/* Watches d (at most MHD_EVENT_DAEMONS_MAX of them). */
#define MHD_EVENT_DAEMONS_MAX 32
int mhd_event_add_daemon(MhdEvent *m, struct MHD_Daemon *d);
/* Stops watching d (before the caller stops it); one not watched is ignored. */
void mhd_event_remove_daemon(MhdEvent *m, struct MHD_Daemon *d);
/* Runs the daemons at the loop's next turn: after MHD_resume_connection(), which no fd
 * announces. */
void mhd_event_kick(MhdEvent *m);
