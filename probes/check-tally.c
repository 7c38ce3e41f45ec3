/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "check-tally.h"

void check_tally_add(CheckTally *t, bool failed) {
        t->checked++;
        if (failed)
                t->failing++;
}

bool check_tally_machine_fault(const CheckTally *t, double share) {
        if (share <= 0.0 || t->failing < MACHINE_FAULT_MIN_FAILING)
                return false;
        return (double) t->failing > share * (double) t->checked;
}

SweepVerdict sweep_round_verdict(const CheckTally *t, double share, bool *previous_fault) {
        SweepVerdict v = { .machine_fault = check_tally_machine_fault(t, share) };

        v.drop_strikes = v.machine_fault || *previous_fault;
        *previous_fault = v.machine_fault;
        return v;
}

bool check_error_is_local(int error) {
        switch (error < 0 ? -error : error) {
        case 0:
        case ETIMEDOUT:    /* no valid answer by checks.query_timeout */
        case EBADMSG:      /* a garbled answer */
        case ECONNREFUSED: /* ICMP port unreachable: nothing listens on the query port */
                return false;
        default:
                return true;
        }
}

bool heartbeat_round_advance(HeartbeatRound *r, usec_t now, usec_t period, CheckTally *ret_closed) {
        bool closed = r->number > 0 && now >= r->end;

        if (r->number > 0 && !closed)
                return false;
        if (closed)
                *ret_closed = r->tally;
        r->number++;
        r->end = now + period;
        r->tally = (CheckTally) {};
        return closed;
}

bool heartbeat_round_machine_fault(const CheckTally *t, double share, bool previous) {
        if (t->checked < MACHINE_FAULT_MIN_FAILING)
                return share > 0.0 && previous;
        return check_tally_machine_fault(t, share);
}

bool heartbeat_round_count(HeartbeatRound *r, uint64_t *slot_round, bool *slot_missed,
                           bool missed) {
        if (*slot_round != r->number) {
                *slot_round = r->number;
                *slot_missed = false;
                r->tally.checked++;
        }
        if (!missed || *slot_missed)
                return false;
        *slot_missed = true;
        r->tally.failing++;
        return true;
}
