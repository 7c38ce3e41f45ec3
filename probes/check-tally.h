/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "checks.h"
#include "time-util.h"

/* Mass-failure protection (SPEC §6): the checks of one round over a fleet (a sweep for cpu,
 * memory and query; a heartbeat period for heartbeat) are tallied, and when most of the
 * checked slots failed the same check at once, the machine is the likely cause: that round
 * counts no strikes. Pure. */

/* A round with fewer failures than this is always judged slot by slot: a fleet of one slot
 * (or two, one failing) is never excused. */
#define MACHINE_FAULT_MIN_FAILING 2u

typedef struct CheckTally {
        unsigned checked;   /* slots whose check was made (a check that could not be made is
                             * neither checked nor failing) */
        unsigned failing;
} CheckTally;

void check_tally_add(CheckTally *t, bool failed);

/* More than 'share' (a fraction, 0 = protection off) of the checked slots failed, and at
 * least MACHINE_FAULT_MIN_FAILING did: the round's strikes are dropped. */
bool check_tally_machine_fault(const CheckTally *t, double share);

/* The verdict of a round of a swept check (cpu, memory, query). */
typedef struct SweepVerdict {
        bool machine_fault; /* more than the share failed: the fault check:<check>:<fleet> */
        bool drop_strikes;  /* the round's failures count no strikes */
} SweepVerdict;

/* The verdict of a sweep's round of one check, given whether that check's round before it was
 * a machine fault (*previous_fault, then set to this round's). A machine fault's round strikes
 * nobody, and neither does the first round after it, whatever it finds: servers that stopped
 * together come back at their own moments (a SIGCONT, the scheduler, a page-in), so that round
 * can find a straggler still silent, or one answering the probes the fault left unanswered.
 * The round after that is judged as ever. */
SweepVerdict sweep_round_verdict(const CheckTally *t, double share, bool *previous_fault);

/* What a failed probe or check says: the server's doing (no answer by the deadline, a garbled
 * answer, ECONNREFUSED: nothing listens), or a check slotd could not make (any other errno:
 * ENETUNREACH, ENETDOWN, EPERM from a firewall, ENOBUFS, ENOMEM...), which is no strike. */
bool check_error_is_local(int error);

/* Heartbeat misses come from each slot's own timer; a fleet's round is one checks.heartbeat
 * period, in which each slot's timer fires once. The round starts with the first timer
 * after the last one ended, so a miss waits at most one period for its verdict. */
typedef struct HeartbeatRound {
        uint64_t number;    /* 0 before the first */
        usec_t end;         /* CLOCK_MONOTONIC */
        CheckTally tally;
} HeartbeatRound;

/* At a slot's heartbeat timer (now): when the round under way has ended, *ret_closed gets
 * its tally and true is returned, and a new round of 'period' begins (as it does when none
 * ran yet, returning false). */
bool heartbeat_round_advance(HeartbeatRound *r, usec_t now, usec_t period, CheckTally *ret_closed);
/* The verdict of a closed heartbeat round: a machine fault or not. Timers drift (a slot's may
 * fire twice in one round and not at all in the next), so a round that counted fewer slots
 * than MACHINE_FAULT_MIN_FAILING says nothing new: it keeps the verdict before it. */
bool heartbeat_round_machine_fault(const CheckTally *t, double share, bool previous);
/* Counts a slot's heartbeat in the round under way, once a round whatever its timer does
 * (slot_round: the slot's own record of the last round it was counted in). A miss counts as
 * failing only at the slot's first miss of the round; true when this miss is that first one
 * (then the slot's strike is held for the round's verdict). */
bool heartbeat_round_count(HeartbeatRound *r, uint64_t *slot_round, bool *slot_missed, bool missed);
