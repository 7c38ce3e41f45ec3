/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "time-util.h"

/* One slot's process life as a pure table (in the way of s6-supervise): every
 * (state, event) pair is decided in slot-fsm.c, and slot.c only carries out the actions. */

typedef enum ProcessState {
        PROCESS_STOPPED,
        PROCESS_STARTING,  /* spawned, READY=1 not yet received */
        PROCESS_RUNNING,   /* READY=1 received */
        PROCESS_STOPPING,  /* main process told to go, or gone while the group empties */
        PROCESS_FAILED,    /* stopped, not restarted until told (FailureReason says why) */
        _PROCESS_STATE_MAX,
} ProcessState;

typedef enum SlotEvent {
        SLOT_EVENT_START,        /* Start(), provisioning, a decided restart */
        SLOT_EVENT_STOP,         /* Stop(), StopAll() */
        SLOT_EVENT_READY,        /* READY=1 */
        SLOT_EVENT_EXIT,         /* the main process exited (other processes may remain) */
        SLOT_EVENT_STOP_TIMEOUT, /* fleet.stop_timeout passed since SIGTERM */
        SLOT_EVENT_EMPTY,        /* main process gone and the cgroup empty */
        SLOT_EVENT_RESET,        /* ResetFailed() */
        _SLOT_EVENT_MAX,
} SlotEvent;

typedef enum SlotAction {
        SLOT_ACTION_NONE = 0,
        SLOT_ACTION_SPAWN = 1 << 0,      /* start the build executable */
        SLOT_ACTION_TERMINATE = 1 << 1,  /* SIGTERM to the main process, arm the stop timer */
        SLOT_ACTION_KILL = 1 << 2,       /* cgroup.kill what is left */
        SLOT_ACTION_SETTLE = 1 << 3,     /* everything is gone: apply the exit policy */
        SLOT_ACTION_CLEAR_FAILURE = 1 << 4,
} SlotAction;

typedef struct SlotTransition {
        ProcessState next;
        unsigned actions;
        bool valid;              /* false: the event is refused in this state */
} SlotTransition;

const char *process_state_to_string(ProcessState s);
const char *slot_event_to_string(SlotEvent e);

/* 'populated' tells whether the cgroup still holds processes when the main one exits. */
SlotTransition slot_fsm_next(ProcessState state, SlotEvent event, bool populated);

/* What a settled slot does next (SPEC §6). Pure. */
typedef enum FailureReason {
        FAILURE_NONE,
        FAILURE_CRASH_BACKOFF,
        FAILURE_PRE_RECOVERY,
        FAILURE_MISBEHAVIOUR,
        FAILURE_START_TIMEOUT,
        FAILURE_OOM,
        FAILURE_EXEC,            /* the build could not be executed (spawn.h, exec-check.h) */
        _FAILURE_REASON_MAX,
} FailureReason;

const char *failure_reason_to_string(FailureReason r);

typedef enum ExitDecision {
        EXIT_DECISION_STOP,      /* stay stopped (available or, if allocated, kept) */
        EXIT_DECISION_RESTART,   /* start again now */
        EXIT_DECISION_FAIL,      /* failed, with a reason */
} ExitDecision;

typedef struct ExitInput {
        bool stop_requested;     /* Stop()/StopAll(): no restart */
        bool restart_requested;  /* Restart(): start again whatever the exit */
        bool clean_exit;         /* exit code 0 */
        bool allocated;
        bool start_on_provision;
        bool pre_recovery;
        unsigned crashes_in_window; /* crashes within crash.window, this one included */
        unsigned crash_restarts;    /* crash.restarts */
        FailureReason cause;        /* misbehaviour, start-timeout, oom, exec: a crash whatever the code */
} ExitInput;

typedef struct ExitVerdict {
        ExitDecision decision;
        FailureReason reason;    /* for EXIT_DECISION_FAIL and pre-recovery stops */
        bool deallocate;         /* exit 0 ends the session */
} ExitVerdict;

ExitVerdict slot_exit_policy(const ExitInput *in);

/* Whether the keeper may restart the server by itself (keeper.c): true when any exit of it
 * now, a crash or exit 0, with nothing requested, would be followed by a restart at once
 * (slot_exit_policy()), with no session to end. 'in' describes the slot before the exit:
 * crashes_in_window without the one to come, clean_exit and cause unused. */
bool slot_exit_always_restarts(const ExitInput *in);

