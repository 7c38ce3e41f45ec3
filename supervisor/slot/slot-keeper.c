/* SPDX-License-Identifier: MIT */
/* A slot's keeper (keeper.c, spawn.h) as slotd sees it: its status file, the restart token
 * it may take (arming), the restarts it made and slotd accounts, its exit, and keepers an
 * earlier slotd started, found in their cgroups and adopted. */
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "exec-check.h"
#include "log.h"
#include "slot-internal.h"
#include "spawn.h"

/* <state_dir>/exit/<id>: the keeper writes the server's exit status there, where a slotd
 * that was not running at the time still finds it. A new keeper's starts empty ('create');
 * an earlier keeper's is taken as it is. */
int slot_open_status(Slot *s, bool create) {
        char name[16];
        int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW;

        snprintf(name, sizeof(name), "%u", s->id);
        s->status_fd = safe_close(s->status_fd);
        s->status_fd = openat(s->host->exit_dir_fd, name,
                              create ? flags | O_CREAT | O_TRUNC : flags, 0600);
        return s->status_fd < 0 ? negative_errno() : 0;
}

static bool slot_may_arm(Slot *s) {
        const FleetConfig *f = s->fleet->config;

        if (s->token_fd < 0 || s->restart_pending || s->keeper_outdated || s->main_pid == 0 ||
            (s->process_state != PROCESS_STARTING && s->process_state != PROCESS_RUNNING) ||
            s->retired || s->stale || s->start_defer || s->pending_cause != FAILURE_NONE)
                return false;
        return slot_exit_always_restarts(&(ExitInput){
                .stop_requested = s->stop_requested,
                .restart_requested = s->restart_requested,
                .allocated = slot_is_allocated(s),
                .start_on_provision = f->start_on_provision,
                .pre_recovery = f->pre_recovery,
                .crashes_in_window = time_window_count(&s->crashes, now_usec(CLOCK_MONOTONIC),
                                                       f->crash_window),
                .crash_restarts = f->crash_restarts,
        });
}

int slot_disarm(Slot *s) {
        uint64_t v;

        if (!s->armed)
                return s->restart_pending ? -ECHILD : 0;
        s->armed = false;
        if (read(s->token_fd, &v, sizeof(v)) == sizeof(v))
                return 0;
        /* EAGAIN: the keeper read it first. */
        s->restart_pending = true;
        log_slot_debug(s, "The keeper took its restart first: the server has ended");
        return -ECHILD;
}

void slot_update_arming(Slot *s) {
        static const uint64_t one = 1;
        bool want = slot_may_arm(s);

        if (want == s->armed)
                return;
        if (!want) {
                (void) slot_disarm(s);
                return;
        }
        if (write(s->token_fd, &one, sizeof(one)) == sizeof(one))
                s->armed = true;
}

/* The keeper restarted the server (keeper.c): account for that exit as slotd would have
 * handled it (SPEC §6: a crash counts against crash.restarts and is announced), and follow
 * the new server. With keeper_gone the keeper has ended since: its own exit follows. */
void slot_account_keeper_restart(Slot *s, bool keeper_gone) {
        FailureReason cause;
        pid_t server = s->server_pid;
        unsigned n;
        int code, sig;
        bool clean, failed, core;

        if (s->status_fd < 0 ||
            spawn_read_restart(s->status_fd, &n, &failed, &code, &sig, &core) <= 0 ||
            n <= s->keeper_restarts)
                return;
        s->keeper_restarts = n;
        s->keeper_restart_failed = failed;
        s->armed = s->restart_pending = false;
        /* The fork failed: the keeper ends, and its exit is handled as any other (had the
         * record been read before it said so: slot_keeper_restart_raced()). */
        if (failed)
                return;
        cause = slot_checks_exit_cause(s);
        clean = sig == 0 && code == 0 && cause == FAILURE_NONE;
        s->exit_code = s->last_exit_code = code;
        s->exit_signal = s->last_exit_signal = sig;
        s->exit_core = core;
        s->restarts++;
        s->server_pid = 0; /* found again when asked for */
        if (!clean) {
                char how[SLOT_EXIT_DESCRIPTION_MAX];

                time_window_add(&s->crashes, now_usec(CLOCK_MONOTONIC));
                if (core)
                        slot_collect_core(s, server, sig);
                slot_describe_exit(how, code, sig);
                log_slot_warning(s, "Server crashed: %s%s%s; restarted by its keeper", how,
                                 cause != FAILURE_NONE ? ", cause " : "",
                                 failure_reason_to_string(cause));
                slot_hook_crashed(s, cause);
        } else
                log_slot_info(s, "Server exited with code 0; restarted by its keeper");
        s->failure = clean ? FAILURE_NONE : cause;
        if (keeper_gone)
                return;

        s->exit_code = s->exit_signal = 0;
        s->ready = false;
        s->status = mfree_str(s->status);
        s->started_at = now_usec(CLOCK_BOOTTIME);
        if (s->process_state == PROCESS_STARTING || s->process_state == PROCESS_RUNNING) {
                slot_checks_start(s);
                slot_set_process_state(s, PROCESS_STARTING);
        }
        slot_hook_changed(s, true);
}

static int slot_on_account_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;

        s->account_timer = sd_event_source_disable_unref(s->account_timer);
        if (s->main_pid > 0)
                slot_account_keeper_restart(s, false);
        return 0;
}

/* A keeper's restart is accounted a moment after it is heard of, so that slotd's share of
 * it (signals, dbus-daemon's routing of them, the state commit) does not compete for the
 * CPUs with the new server's exec; anything the new server sends, and the keeper's exit,
 * account for it first (slot_handle_notify(), slot_keeper_exited()). */
#define KEEPER_ACCOUNT_DELAY_USEC (5 * USEC_PER_MSEC)

void slot_keeper_status_changed(Slot *s) {
        int r;

        if (s->main_pid <= 0 || s->account_timer)
                return;
        r = sd_event_add_time_relative(s->host->event, &s->account_timer, CLOCK_MONOTONIC,
                                       KEEPER_ACCOUNT_DELAY_USEC, USEC_PER_MSEC,
                                       slot_on_account_timer, s);
        if (r < 0)
                slot_account_keeper_restart(s, false);
}

/* The server never ran: its execve() failed with s->exec_errno. One line that says what,
 * where, and (looked up now, as root, from the file modes) what stops the fleet's user. */
static void slot_log_exec_failure(Slot *s) {
        const char *build = slot_build_config(s)->build;
        const ExecIdentity id = {
                .user = s->fleet->config->user, .uid = s->fleet->uid, .gid = s->fleet->gid,
        };
        _cleanup_free_ ExecFinding *f = new0(ExecFinding, 1);
        char name[16], why[EXEC_PATH_MAX + 512] = "";

        if (f && exec_diagnose(build, &id, f) >= 0 && f->problem != EXEC_OK &&
            f->error == s->exec_errno) {
                why[0] = ';', why[1] = ' ';
                exec_describe(f, &id, why + 2, sizeof(why) - 2);
        }
        log_slot_error_errno(s, s->exec_errno, "cannot execute %s: %s (%s)%s", build,
                             strerrordesc_np(s->exec_errno) ?: "unknown error",
                             exec_errno_name(s->exec_errno, name), why);
}

/* The keeper's restart was accounted as made, from its record written before the fork; then
 * the fork failed (pids.max, RLIMIT_NPROC: the host's fault) and the keeper ended. Its exit is
 * the same crash: not counted again, and the restart that never happened is slotd's to make
 * (which meets the host fault fork itself, and waits). */
static bool slot_keeper_restart_raced(Slot *s) {
        unsigned n;
        int code, sig;
        bool failed;

        if (s->status_fd < 0 ||
            spawn_read_restart(s->status_fd, &n, &failed, &code, &sig, NULL) <= 0 || !failed || n == 0 || n != s->keeper_restarts || s->keeper_restart_failed)
                return false;
        s->keeper_restart_failed = true;
        if (s->restarts > 0)
                s->restarts--;
        log_slot_warning(s, "Its keeper could not start the server again (its fork was refused); "
                         "slotd starts it");
        return true;
}

/* The keeper is gone: how the server ended is in the status file, or, when the keeper was
 * killed before it could write it, in how the keeper itself ended. */
void slot_keeper_exited(Slot *s, int keeper_code, int keeper_signal) {
        pid_t server;

        /* A restart the keeper made before it ended, not yet accounted: first that exit. */
        s->account_timer = sd_event_source_disable_unref(s->account_timer);
        slot_account_keeper_restart(s, true);
        s->exit_accounted = slot_keeper_restart_raced(s);
        s->token_fd = safe_close(s->token_fd);
        s->armed = s->restart_pending = false;
        server = s->server_pid;
        s->main_pid = s->server_pid = 0;
        s->child_source = sd_event_source_disable_unref(s->child_source);
        s->keeper_io = sd_event_source_disable_unref(s->keeper_io);
        s->keeper_pidfd = safe_close(s->keeper_pidfd);
        slot_checks_stop(s);
        slot_close_notify(s);
        /* What a keeper killed outright left in the pipe: in server.log before the exit is
         * told, as the keeper does with the server's last lines. */
        slot_output_drain(s);
        if (s->status_fd < 0 ||
            spawn_read_status(s->status_fd, &s->exit_code, &s->exit_signal, &s->exit_core) <= 0) {
                s->exit_code = keeper_code;
                s->exit_signal = keeper_signal;
                s->exit_core = false;
        }
        s->last_exit_code = s->exit_code;
        s->last_exit_signal = s->exit_signal;
        (void) slot_log_bytes_lost(s); /* the keeper's last count */
        s->exec_errno = 0;
        if (s->exit_signal == 0 && s->exit_code == SPAWN_EXIT_SETUP && s->status_fd >= 0 &&
            spawn_read_exec_failure(s->status_fd, &s->exec_errno) > 0)
                slot_log_exec_failure(s);
        else if (s->exit_signal)
                log_slot_info(s, "Server %d was killed by signal %d (%s)%s", (int) server,
                              s->exit_signal, sigabbrev_np(s->exit_signal) ?: "?",
                              s->exit_core ? ", core dumped" : "");
        else
                log_slot_info(s, "Server %d exited with code %d", (int) server, s->exit_code);
        if (s->exit_core)
                slot_collect_core(s, server, s->exit_signal);
        slot_dispatch(s, SLOT_EVENT_EXIT);
}

int slot_on_exit(sd_event_source *source, const siginfo_t *si, void *userdata) {
        slot_keeper_exited(userdata, si->si_code == CLD_EXITED ? si->si_status : 0,
                           si->si_code == CLD_EXITED ? 0 : si->si_status);
        return 0;
}

/* An adopted keeper that is not our child: its pidfd turns readable when it exits, and its
 * real parent reaps it. Without the status file, assume the SIGKILL of a cgroup kill. */
static int slot_on_keeper_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        slot_keeper_exited(userdata, 0, SIGKILL);
        return 0;
}

/* The keeper of a cgroup: the process that is PID 1 of its own namespace ("NSpid: N 1"). */
pid_t slot_find_keeper(Slot *s) {
        char buf[8192], *save = NULL;

        if (cg_read_at(s->cgroup_fd, "cgroup.procs", buf, sizeof(buf)) < 0)
                return 0;
        for (char *p = strtok_r(buf, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
                char path[64], line[256];
                long pid = strtol(p, NULL, 10);
                _cleanup_fclose_ FILE *f = NULL;

                snprintf(path, sizeof(path), "/proc/%ld/status", pid);
                f = fopen(path, "re");
                while (f && fgets(line, sizeof(line), f))
                        if (strncmp(line, "NSpid:", 6) == 0) {
                                const char *last = strrchr(line, '\t');
                                if (last && strtol(last + 1, NULL, 10) == 1 && strchr(line + 7, '\t'))
                                        return (pid_t) pid;
                                break;
                        }
        }
        return 0;
}

/* Waits for an adopted keeper's exit: after Reexecute the keepers are still our children,
 * reaped through the pidfd; after a restart of slotd their pidfd turns readable. Closes
 * pidfd on failure. */
static int slot_watch_adopted(Slot *s, pid_t keeper, int pidfd) {
        int r;

        if (pid_is_our_child(keeper)) {
                r = sd_event_add_child_pidfd(s->host->event, &s->child_source, pidfd, WEXITED,
                                             slot_on_exit, s);
                if (r >= 0)
                        (void) sd_event_source_set_child_pidfd_own(s->child_source, true);
        } else {
                s->keeper_pidfd = pidfd;
                r = sd_event_add_io(s->host->event, &s->keeper_io, pidfd, EPOLLIN,
                                    slot_on_keeper_io, s);
        }
        if (r < 0) {
                safe_close(pidfd);
                s->keeper_pidfd = -EBADF;
        }
        return r;
}

/* Its restarts: an earlier slotd armed them for a command line we cannot check, so this
 * keeper makes no more; take back what may be armed, and account for a restart it made
 * while we were away (before what its new server sent is read). */
static void slot_adopt_restarts(Slot *s, int pidfd) {
        s->keeper_outdated = true;
        s->armed = s->restart_pending = false;
        s->token_fd = safe_close(s->token_fd);
        s->token_fd = (int) syscall(SYS_pidfd_getfd, pidfd, KEEPER_TOKEN_FD, 0);
        if (s->token_fd >= 0) {
                uint64_t v;
                (void) !read(s->token_fd, &v, sizeof(v));
        }
        s->keeper_restarts = s->restored_keeper_restarts;
        slot_account_keeper_restart(s, false);
}

/* The socket the keeper kept: what the server sent while we were away is in it. */
static void slot_adopt_notify(Slot *s, pid_t keeper, int pidfd) {
        s->notify_fd = safe_close(s->notify_fd);
        s->notify_fd = (int) syscall(SYS_pidfd_getfd, pidfd, KEEPER_NOTIFY_FD, 0);
        if (s->notify_fd < 0 || slot_watch_notify(s) < 0)
                log_slot_warning(s, "Cannot take back the notify socket of keeper %d: "
                                    "READY=1 and heartbeats of this server go unheard", (int) keeper);
}

/* Live restore: a server an earlier slotd started (before a SIGKILL, a crash or a Reexecute)
 * runs on under its keeper. Take it back as it is: no restart, no second server. */
int slot_adopt(Slot *s, pid_t keeper) {
        int pidfd, output, r;

        pidfd = (int) syscall(SYS_pidfd_open, keeper, 0);
        if (pidfd < 0)
                return negative_errno();
        (void) slot_open_status(s, false);
        r = slot_watch_adopted(s, keeper, pidfd);
        if (r < 0)
                return r;
        s->main_pid = keeper;
        s->ready = s->restored_ready;
        slot_set_process_state(s, s->ready ? PROCESS_RUNNING : PROCESS_STARTING);
        slot_checks_start(s);
        if (s->ready)
                slot_checks_ready(s);
        slot_adopt_restarts(s, pidfd);
        /* The slotd before us heard READY=1 from this very server and died before it was
         * committed: the datagram is gone, the status file's mark is not. */
        if (!s->ready && s->status_fd >= 0 && spawn_marked_ready(s->status_fd, s->keeper_restarts) > 0)
                slot_became_ready(s, "READY=1, as marked before slotd went away");
        slot_adopt_notify(s, keeper, pidfd);
        /* The log pipe too: a keeper killed from here on leaves its content to us. */
        output = (int) syscall(SYS_pidfd_getfd, pidfd, KEEPER_PIPE_FD, 0);
        if (output < 0)
                (void) log_slot_full_errno(s, LOG_DEBUG, errno, "Cannot take back the log pipe "
                                           "of keeper %d: %m", (int) keeper);
        slot_output_hold(s, output);
        log_slot_info(s, "Adopted the running server %d (keeper %d)%s", (int) slot_server_pid(s),
                      (int) keeper, s->allocation_uuid ? ", its allocation goes on" : "");
        slot_hook_changed(s, true);
        return 0;
}
