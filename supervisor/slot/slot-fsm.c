/* SPDX-License-Identifier: MIT */
#include "macro.h"
#include "slot-fsm.h"

static const char *const process_state_names[_PROCESS_STATE_MAX] = {
        [PROCESS_STOPPED] = "stopped",   [PROCESS_STARTING] = "starting",
        [PROCESS_RUNNING] = "running",   [PROCESS_STOPPING] = "stopping",
        [PROCESS_FAILED] = "failed",
};

static const char *const slot_event_names[_SLOT_EVENT_MAX] = {
        [SLOT_EVENT_START] = "start", [SLOT_EVENT_STOP] = "stop",
        [SLOT_EVENT_READY] = "ready", [SLOT_EVENT_EXIT] = "exit",
        [SLOT_EVENT_STOP_TIMEOUT] = "stop-timeout", [SLOT_EVENT_EMPTY] = "empty",
        [SLOT_EVENT_RESET] = "reset",
};

static const char *const failure_reason_names[_FAILURE_REASON_MAX] = {
        [FAILURE_NONE] = "",
        [FAILURE_CRASH_BACKOFF] = "crash-backoff",
        [FAILURE_PRE_RECOVERY] = "pre-recovery",
        [FAILURE_MISBEHAVIOUR] = "misbehaviour",
        [FAILURE_START_TIMEOUT] = "start-timeout",
        [FAILURE_OOM] = "oom",
        [FAILURE_EXEC] = "exec",
};

const char *process_state_to_string(ProcessState s) {
        return s >= 0 && s < _PROCESS_STATE_MAX ? process_state_names[s] : "invalid";
}

const char *slot_event_to_string(SlotEvent e) {
        return e >= 0 && e < _SLOT_EVENT_MAX ? slot_event_names[e] : "invalid";
}

const char *failure_reason_to_string(FailureReason r) {
        return r >= 0 && r < _FAILURE_REASON_MAX ? failure_reason_names[r] : "";
}

#define T(n, a) { .next = (n), .actions = (a), .valid = true }
#define IGNORE(s) T(s, SLOT_ACTION_NONE)
#define REFUSE { .valid = false }

/* The whole life of a slot's process. EXIT has two rows, picked by whether the cgroup still
 * holds other processes: exit_empty and exit_populated. */
static const SlotTransition table[_PROCESS_STATE_MAX][_SLOT_EVENT_MAX] = {
        [PROCESS_STOPPED] = {
                [SLOT_EVENT_START] = T(PROCESS_STARTING, SLOT_ACTION_SPAWN),
                [SLOT_EVENT_STOP] = IGNORE(PROCESS_STOPPED),
                [SLOT_EVENT_READY] = IGNORE(PROCESS_STOPPED),
                [SLOT_EVENT_EXIT] = IGNORE(PROCESS_STOPPED),
                [SLOT_EVENT_STOP_TIMEOUT] = IGNORE(PROCESS_STOPPED),
                [SLOT_EVENT_EMPTY] = IGNORE(PROCESS_STOPPED),
                [SLOT_EVENT_RESET] = IGNORE(PROCESS_STOPPED),
        },
        [PROCESS_STARTING] = {
                [SLOT_EVENT_START] = IGNORE(PROCESS_STARTING),
                [SLOT_EVENT_STOP] = T(PROCESS_STOPPING, SLOT_ACTION_TERMINATE),
                [SLOT_EVENT_READY] = IGNORE(PROCESS_RUNNING),
                [SLOT_EVENT_EXIT] = T(PROCESS_STOPPING, SLOT_ACTION_SETTLE),
                [SLOT_EVENT_STOP_TIMEOUT] = IGNORE(PROCESS_STARTING),
                [SLOT_EVENT_EMPTY] = IGNORE(PROCESS_STARTING),
                [SLOT_EVENT_RESET] = REFUSE,
        },
        [PROCESS_RUNNING] = {
                [SLOT_EVENT_START] = IGNORE(PROCESS_RUNNING),
                [SLOT_EVENT_STOP] = T(PROCESS_STOPPING, SLOT_ACTION_TERMINATE),
                [SLOT_EVENT_READY] = IGNORE(PROCESS_RUNNING),
                [SLOT_EVENT_EXIT] = T(PROCESS_STOPPING, SLOT_ACTION_SETTLE),
                [SLOT_EVENT_STOP_TIMEOUT] = IGNORE(PROCESS_RUNNING),
                [SLOT_EVENT_EMPTY] = IGNORE(PROCESS_RUNNING),
                [SLOT_EVENT_RESET] = REFUSE,
        },
        [PROCESS_STOPPING] = {
                [SLOT_EVENT_START] = IGNORE(PROCESS_STOPPING),  /* slot.c remembers it */
                [SLOT_EVENT_STOP] = IGNORE(PROCESS_STOPPING),
                [SLOT_EVENT_READY] = IGNORE(PROCESS_STOPPING),
                [SLOT_EVENT_EXIT] = T(PROCESS_STOPPING, SLOT_ACTION_SETTLE),
                [SLOT_EVENT_STOP_TIMEOUT] = T(PROCESS_STOPPING, SLOT_ACTION_KILL),
                [SLOT_EVENT_EMPTY] = T(PROCESS_STOPPING, SLOT_ACTION_SETTLE),
                [SLOT_EVENT_RESET] = REFUSE,
        },
        [PROCESS_FAILED] = {
                [SLOT_EVENT_START] = T(PROCESS_STARTING, SLOT_ACTION_SPAWN | SLOT_ACTION_CLEAR_FAILURE),
                [SLOT_EVENT_STOP] = IGNORE(PROCESS_FAILED),
                [SLOT_EVENT_READY] = IGNORE(PROCESS_FAILED),
                [SLOT_EVENT_EXIT] = IGNORE(PROCESS_FAILED),
                [SLOT_EVENT_STOP_TIMEOUT] = IGNORE(PROCESS_FAILED),
                [SLOT_EVENT_EMPTY] = IGNORE(PROCESS_FAILED),
                [SLOT_EVENT_RESET] = T(PROCESS_STOPPED, SLOT_ACTION_CLEAR_FAILURE),
        },
};

SlotTransition slot_fsm_next(ProcessState state, SlotEvent event, bool populated) {
        SlotTransition t;

        if (state < 0 || state >= _PROCESS_STATE_MAX || event < 0 || event >= _SLOT_EVENT_MAX)
                return (SlotTransition) REFUSE;
        t = table[state][event];
        /* The main process is gone but others of the slot remain: nothing of a slot outlives
         * it, so kill the rest first and settle when the group reports empty. */
        if (event == SLOT_EVENT_EXIT && t.valid && (t.actions & SLOT_ACTION_SETTLE) && populated)
                t.actions = (t.actions & ~SLOT_ACTION_SETTLE) | SLOT_ACTION_KILL;
        return t;
}

ExitVerdict slot_exit_policy(const ExitInput *in) {
        if (in->restart_requested)
                return (ExitVerdict){ .decision = EXIT_DECISION_RESTART };
        if (in->stop_requested)
                return (ExitVerdict){ .decision = EXIT_DECISION_STOP };
        if (in->clean_exit && in->cause == FAILURE_NONE)
                /* Exit 0 is the server saying its session is over (SPEC §6). */
                return (ExitVerdict){
                        .decision = in->start_on_provision ? EXIT_DECISION_RESTART
                                                           : EXIT_DECISION_STOP,
                        .deallocate = true,
                };
        /* Below: a crash. The verdict's reason is why the slot is held down; without that,
         * what caused the crash. */
        if (in->allocated && in->pre_recovery)
                return (ExitVerdict){ .decision = EXIT_DECISION_STOP,
                                      .reason = FAILURE_PRE_RECOVERY };
        /* A build that cannot be executed fails the same way when started again at once (a
         * restart comes microseconds later): held down at once, with the cause as the
         * reason, until Start, ResetFailed or an allocation (SPEC §6). */
        if (in->cause == FAILURE_EXEC)
                return (ExitVerdict){ .decision = EXIT_DECISION_FAIL, .reason = FAILURE_EXEC };
        if (in->crashes_in_window > in->crash_restarts)
                return (ExitVerdict){ .decision = EXIT_DECISION_FAIL,
                                      .reason = FAILURE_CRASH_BACKOFF };
        return (ExitVerdict){ .decision = EXIT_DECISION_RESTART, .reason = in->cause };
}

bool slot_exit_always_restarts(const ExitInput *in) {
        ExitInput crash = *in, clean = *in;

        if (in->stop_requested || in->restart_requested || in->allocated)
                return false;
        crash.clean_exit = false;
        crash.cause = FAILURE_NONE;
        crash.crashes_in_window = in->crashes_in_window + 1;
        clean.clean_exit = true;
        clean.cause = FAILURE_NONE;
        return slot_exit_policy(&crash).decision == EXIT_DECISION_RESTART &&
               slot_exit_policy(&clean).decision == EXIT_DECISION_RESTART;
}
