/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared by the files of one slot's life (slot.c, slot-process.c, slot-keeper.c,
 * slot-alloc.c, slot-checks.c); nothing else includes it. */

#include "fleet.h"
#include "slot.h"

/* slot.c: the slot itself. */
void slot_set_process_state(Slot *s, ProcessState state);
int slot_write_server_json(Slot *s);
/* server.json as it would be with this allocation (NULL: none) and build configuration. A
 * failure is the slots_dir fault (and retried) when the disk is to blame. */
int slot_write_server_json_as(Slot *s, const char *uuid, const char *build_configuration);
/* The home and its logs directory, home_fd open. */
int slot_setup_home(Slot *s);
/* Before each start: the cgroup exists (made anew if it was removed) and holds the limits. */
int slot_prepare_cgroup(Slot *s);
/* Tells the host that these details (a SlotChange mask), and nothing else, changed. */
void slot_details_changed(Slot *s, unsigned changes);

/* slot-process.c: the process and the state machine. */
void slot_dispatch(Slot *s, SlotEvent event);
int slot_schedule_start(Slot *s);
void slot_became_ready(Slot *s, const char *how);
int slot_watch_notify(Slot *s);
void slot_close_notify(Slot *s);
#define SLOT_EXIT_DESCRIPTION_MAX 64
/* "exit code N" or "killed by signal N (NAME)", for the log. */
void slot_describe_exit(char how[static SLOT_EXIT_DESCRIPTION_MAX], int code, int sig);
/* slot-core.c: the server 'pid' (0: not known) left a core on 'sig': files it (limits.core,
 * limits.cores_kept) and sets s->last_core to where it is. */
void slot_collect_core(Slot *s, pid_t pid, int sig);

/* slot-keeper.c: the keeper's status file, its restarts, its exit, and keepers an earlier
 * slotd started. */
int slot_open_status(Slot *s, bool create);
int slot_on_exit(sd_event_source *source, const siginfo_t *si, void *userdata);
void slot_account_keeper_restart(Slot *s, bool keeper_gone);
void slot_keeper_exited(Slot *s, int keeper_code, int keeper_signal);
pid_t slot_find_keeper(Slot *s);
int slot_adopt(Slot *s, pid_t keeper);

/* slot-output.c: slotd's own hold on the log pipe's read end (fd: taken, or -EBADF), and at
 * the keeper's exit what the keeper left there moved into server.log (or counted lost). */
void slot_output_hold(Slot *s, int fd);
/* logs/server.log (DIR is logs/) as the keeper writes it: a regular file with one link, the
 * fleet's, positioned at its end (not O_APPEND: splice() refuses it), opened with FLAGS
 * besides. Returns the fd, and its size in *ret_size (may be NULL). */
int slot_open_server_log(Slot *s, int dir, int flags, uint64_t *ret_size);
void slot_output_drain(Slot *s);

/* slot-alloc.c: allocation, reservation, hold. */
int slot_set_allocation(Slot *s, const char *uuid);

/* slot-fault.c: faults of the host. slot_fault() records one (logged once per episode) and
 * arms the retry; it returns error. slot_start_fault() is the same for a start that could
 * not be made: the slot starts by itself once the retry succeeds. */
_printf_(4, 5) int slot_fault(Slot *s, SlotFault f, int error, const char *format, ...);
_printf_(4, 5) int slot_start_fault(Slot *s, SlotFault f, int error, const char *format, ...);
void slot_fault_clear(Slot *s);
/* Stop, or a start by other means: no retry waits any more. */
void slot_fault_cancel_start(Slot *s);
/* After a start that failed: true when a fault of the host holds it back (the slot is then
 * stopped, its retry armed), false when the failure is the build's (a crash). */
bool slot_start_waits(Slot *s);
/* Errors of writing a file that are the disk's, not the game server's. */
bool slot_storage_fault(int error);
void slot_fault_done(Slot *s);

/* What the slot tells its host (slot-host.h). */
static inline void slot_hook_changed(Slot *s, bool durable) {
        s->host->hooks->changed(s, durable, s->host->userdata);
}

static inline int slot_hook_uuid_link(Slot *s, const char *uuid) {
        return s->host->hooks->uuid_link(s, uuid, s->host->userdata);
}

static inline void slot_hook_uuid_unlink(Slot *s, const char *uuid) {
        s->host->hooks->uuid_unlink(s, uuid, s->host->userdata);
}

static inline void slot_hook_retire(Slot *s) {
        s->host->hooks->retire(s, s->host->userdata);
}

static inline void slot_hook_crashed(Slot *s, FailureReason cause) {
        s->host->hooks->crashed(s, failure_reason_to_string(cause), s->host->userdata);
}

static inline void slot_hook_misbehaved(Slot *s, CheckKind check, unsigned strikes) {
        s->host->hooks->misbehaved(s, check, strikes, s->host->userdata);
}

static inline void slot_hook_hold_started(Slot *s, usec_t until) {
        s->host->hooks->hold_started(s, until, s->host->userdata);
}

static inline void slot_hook_hold_ended(Slot *s, usec_t until) {
        s->host->hooks->hold_ended(s, until, s->host->userdata);
}

static inline void slot_hook_fault_changed(Slot *s, SlotFault old) {
        s->host->hooks->fault_changed(s, (int) old, s->host->userdata);
}

static inline bool slot_hook_receive_notify(Slot *s, int fd) {
        return s->host->hooks->receive_notify(s, fd, s->host->userdata);
}
