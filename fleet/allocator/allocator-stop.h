/* SPDX-License-Identifier: MIT */
#pragma once

/* The allocator's stop (allocator-stop.c). */

typedef struct Allocator Allocator;

/* The longest a stop waits for what must reach etcd first (claims in doubt fenced, the
 * scaler's lease revoked): four of etcd's timeouts, within these (the unit's TimeoutStopSec
 * is above the most). */
#define STOP_WAIT_MIN_SEC 10
#define STOP_WAIT_MAX_SEC 15

/* On SIGTERM or SIGINT: no new request of the API is taken (503), those waiting are answered
 * 503 at once (a claim on its way is then in doubt, and fenced: alloc_claim_cancel), the
 * scaler resigns, and the loop ends once every claim in doubt is fenced or undone, the
 * scaler's lease is revoked and every answer has left, or after the stop's wait, saying what
 * was left. A second signal ends it at once. */
void allocator_stop(Allocator *a, int signo);
void allocator_stop_done(Allocator *a);
