/* SPDX-License-Identifier: MIT */
#pragma once

/* The scaler's election (SPEC §13, "The scaler"): every replica campaigns in etcd's election
 * <prefix>/scaler (etcd's Election service) on a lease of its own of SCALER_LEASE_TTL,
 * kept alive every third of it; the one whose key is the oldest leads until its lease ends
 * (it died, or its keepalives went unanswered for the TTL: etcd without quorum), and the
 * next campaigner takes over within the TTL. Leading is a_scaler_leading(): a replica that
 * saw no keepalive answered within the TTL steps down on its own and campaigns anew. The
 * leader acts on its plan: scaler_view_changed(). */

#include <stdbool.h>

typedef struct Allocator Allocator;

#define SCALER_LEASE_TTL 5 /* seconds */

int scaler_start(Allocator *a);
/* On a stop: the lease revoked, so that the next campaigner leads at once; 1: asked, and
 * scaler_resigning() until etcd answered, or 1 s later (allocator_settled() tells the stop);
 * 0: nothing to wait for. */
int scaler_resign(Allocator *a);
bool scaler_resigning(const Allocator *a);
void scaler_done(Allocator *a);
bool scaler_leading(const Allocator *a);
/* The fleet view changed: while leading, a plan is made (at most one an interval) and its
 * commands written: <prefix>/hosts/<machineID>/scale/<slotID> (SPEC §13, "The scaler"). */
void scaler_view_changed(Allocator *a);
