/* SPDX-License-Identifier: MIT */
/* One slot's process: the state machine's dispatch (slot-fsm.c decides, this file acts),
 * the start under a keeper of its own, SIGTERM and the stop timer, the kill, the settling of
 * an exit by the exit policy, and what the server sends to its notify socket. */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "expand.h"
#include "log.h"
#include "notify.h"
#include "slot-internal.h"
#include "spawn.h"
#include "strv.h"

/* The slot's output as its keeper takes it: logs/ (where it rotates server.log),
 * logs/server.log positioned at its end, and a pipe whose write end is the servers' stdout
 * and stderr. fds[]: logs dir, server.log, pipe read end (non-blocking), pipe write end. */
typedef struct SlotLog {
        int dir, file, pipe[2];
} SlotLog;

static void slot_log_close(SlotLog *l) {
        l->dir = safe_close(l->dir);
        l->file = safe_close(l->file);
        l->pipe[0] = safe_close(l->pipe[0]);
        l->pipe[1] = safe_close(l->pipe[1]);
}

static int slot_open_log(Slot *s, SlotLog *ret) {
        _cleanup_close_ int logs = -EBADF, fd = -EBADF;
        int pipefd[2];

        logs = openat(s->home_fd, "logs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (logs < 0)
                return negative_errno();
        /* The keeper is its one writer. */
        fd = slot_open_server_log(s, logs, 0, NULL);
        if (fd < 0)
                return fd;
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return negative_errno();
        if (fcntl(pipefd[0], F_SETFL, O_NONBLOCK) < 0) {
                int r = negative_errno();
                (void) close(pipefd[0]);
                (void) close(pipefd[1]);
                return r;
        }
        ret->dir = TAKE_FD(logs);
        ret->file = TAKE_FD(fd);
        ret->pipe[0] = pipefd[0];
        ret->pipe[1] = pipefd[1];
        return 0;
}

/* The words joined by single spaces: $$commandline$$. */
static char *words_join(char *const *words) {
        size_t n = 1;
        char *j, *p;

        STRV_FOREACH(w, words)
                n += strlen(*w) + 1;
        j = p = malloc(n);
        if (!j)
                return NULL;
        *p = '\0';
        STRV_FOREACH(w, words)
                p = stpcpy(stpcpy(p, p == j ? "" : " "), *w);
        return j;
}

/* The buffers of a start's variables. */
typedef struct SlotVariables {
        char port[8], query_port[8], timestamp[24];
        const char *game_exe;
} SlotVariables;

#define SLOT_N_FIXED_VARIABLES 23

/* slotd's ${NAME} and Multiplay's $$name$$ with this start's values (SPEC §2 and "Launch
 * parameters"), then the build configuration's variables as $$name$$. $$commandline$$ is
 * filled in once the args are expanded; it is the last of the fixed ones. */
static ExpandVariable *slot_variables(Slot *s, const BuildConfig *bc, SlotVariables *b,
                                      unsigned *ret_n) {
        const FleetConfig *f = s->fleet->config;
        const char *query = bc->query == QUERY_NONE ? "" : query_type_to_string(bc->query);
        ExpandVariable *v;
        unsigned n;

        snprintf(b->port, sizeof(b->port), "%u", s->port);
        snprintf(b->query_port, sizeof(b->query_port), "%u", s->query_port);
        snprintf(b->timestamp, sizeof(b->timestamp), "%" PRIu64,
                 (uint64_t) (now_usec(CLOCK_REALTIME) / USEC_PER_SEC));
        b->game_exe = strrchr(bc->build, '/') ? strrchr(bc->build, '/') + 1 : bc->build;

        v = new0(ExpandVariable, SLOT_N_FIXED_VARIABLES + bc->n_variables);
        if (!v)
                return NULL;
        memcpy(v, (const ExpandVariable[SLOT_N_FIXED_VARIABLES]) {
                { "PORT", b->port }, { "QUERY_PORT", b->query_port },
                { "SERVER_ID", s->id_string }, { "ALLOCATION_UUID", strempty(s->allocation_uuid) },
                { "SERVER_LOG_DIR", s->log_dir }, { "HOME", s->home },
                { "BUILD_CONFIGURATION", s->build_configuration },
                { "port", b->port, true }, { "query_port", b->query_port, true },
                { "query_type", query, true }, { "log_dir", s->log_dir, true },
                { "file_dir", s->home, true }, { "config_dir", s->home, true },
                { "game_exe", b->game_exe, true }, { "serverid", s->id_string, true },
                { "machineid", strempty(s->host->machine_number), true }, { "fleetid", f->name, true },
                { "regionid", f->region_id, true }, { "regionname", f->region_name, true },
                { "ip", strempty(s->host->ip), true }, { "ipv6", strempty(s->host->ipv6), true },
                { "timestamp", b->timestamp, true }, { "commandline", "", true },
        }, SLOT_N_FIXED_VARIABLES * sizeof(ExpandVariable));
        n = SLOT_N_FIXED_VARIABLES;
        for (size_t i = 0; i < bc->n_variables; i++)
                v[n++] = (ExpandVariable) { bc->variable_names[i], bc->variable_values[i], true };
        *ret_n = n;
        return v;
}

static int slot_expand_words(char *const *words, const ExpandVariable *vars, unsigned n,
                             char ***l) {
        STRV_FOREACH(w, words) {
                char *v;
                int r = expand_variables(*w, vars, n, &v, NULL);
                if (r < 0 || (r = strv_push(l, v)) < 0)
                        return r;
        }
        return 0;
}

static int slot_build_command(Slot *s, char ***ret_argv, char ***ret_envp) {
        const FleetConfig *f = s->fleet->config;
        const BuildConfig *bc = slot_build_config(s);
        _cleanup_free_ ExpandVariable *vars = NULL;
        _cleanup_free_ char *commandline = NULL;
        _cleanup_strv_free_ char **argv = NULL, **envp = NULL;
        SlotVariables b;
        unsigned n = 0;
        char *v;
        int r;

        vars = slot_variables(s, bc, &b, &n);
        if (!vars)
                return -ENOMEM;

        r = strv_extend(&argv, bc->build);
        if (r < 0 || (r = slot_expand_words(bc->args, vars, n, &argv)) < 0)
                return r;
        commandline = words_join(argv + 1);
        if (!commandline)
                return -ENOMEM;
        vars[SLOT_N_FIXED_VARIABLES - 1].value = commandline;

        for (size_t i = 0; i < expand_n_known_names; i++) {
                if (asprintf(&v, "%s=%s", vars[i].name, vars[i].value) < 0)
                        return -ENOMEM;
                if ((r = strv_push(&envp, v)) < 0) {
                        free(v);
                        return r;
                }
        }
        if (asprintf(&v, "NOTIFY_SOCKET=%s", s->notify_path) < 0 ||
            strv_push(&envp, v) < 0)
                return -ENOMEM;
        r = strv_extend(&envp, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        if (r < 0)
                return r;
        if (asprintf(&v, "USER=%s", f->user) < 0 || strv_push(&envp, v) < 0)
                return -ENOMEM;
        /* systemd's convention: the watchdog period, of which a server pings at half. */
        if (f->heartbeat > 0 &&
            (asprintf(&v, "WATCHDOG_USEC=%" PRIu64, (uint64_t) f->heartbeat) < 0 || strv_push(&envp, v) < 0))
                return -ENOMEM;
        r = slot_expand_words(bc->environment, vars, n, &envp);
        if (r < 0)
                return r;
        *ret_argv = TAKE_PTR(argv);
        *ret_envp = TAKE_PTR(envp);
        return 0;
}

static int slot_on_notify(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Slot *s = userdata;

        /* The queue is short (net.unix.max_dgram_qlen) and servers block while it is full:
         * empty it, in bounded rounds so that one flood cannot starve the loop. */
        for (unsigned i = 0; i < 64; i++)
                if (!slot_hook_receive_notify(s, fd))
                        break;
        return 0;
}

/* Watches the slot's notify socket, and takes what is already queued (a READY=1 sent while
 * slotd was away). */
int slot_watch_notify(Slot *s) {
        int r;

        s->notify_source = sd_event_source_disable_unref(s->notify_source);
        r = sd_event_add_io(s->host->event, &s->notify_source, s->notify_fd, EPOLLIN,
                            slot_on_notify, s);
        if (r < 0)
                return r;
        (void) slot_on_notify(s->notify_source, s->notify_fd, EPOLLIN, s);
        return 0;
}

/* Each slot has a notify socket of its own, held by its keeper as well: it survives slotd,
 * queues what servers send meanwhile, and a server is heard only by its own slot. */
static int slot_open_notify(Slot *s) {
        int r;

        s->notify_source = sd_event_source_disable_unref(s->notify_source);
        s->notify_fd = safe_close(s->notify_fd);
        r = notify_socket_open(s->notify_path, &s->notify_fd);
        if (r < 0)
                return r;
        return slot_watch_notify(s);
}

void slot_close_notify(Slot *s) {
        s->notify_source = sd_event_source_disable_unref(s->notify_source);
        s->notify_fd = safe_close(s->notify_fd);
}

uint64_t slot_log_bytes_lost(Slot *s) {
        uint64_t bytes;
        int error;

        if (s->status_fd < 0 || spawn_read_log_lost(s->status_fd, &bytes, &error) <= 0 ||
            bytes <= s->log_lost_seen)
                return s->log_bytes_lost;
        s->log_bytes_lost += bytes - s->log_lost_seen;
        log_slot_warning_errno(s, error, "Dropped %" PRIu64 " bytes of the server's output that "
                               "%s/server.log could not take: %m (%" PRIu64 " in all)",
                               bytes - s->log_lost_seen, s->log_dir, s->log_bytes_lost);
        s->log_lost_seen = bytes;
        slot_hook_changed(s, false);
        return s->log_bytes_lost;
}

/* A keeper of its own for every start: its restarts begin unarmed. */
static void slot_new_token(Slot *s) {
        s->token_fd = safe_close(s->token_fd);
        s->armed = s->restart_pending = s->keeper_outdated = false;
        s->keeper_restarts = 0;
        s->keeper_restart_failed = false;
        if (s->fleet->keeper_restarts) {
                s->token_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                if (s->token_fd < 0)
                        log_slot_warning_errno(s, errno, "No eventfd, the keeper will not restart "
                                                         "the server itself: %m");
        }
}

/* What a start needs before the keeper exists: the command line, the log, server.json, and
 * what the keeper shares with slotd (status file, notify socket, restart token). argv, envp
 * and log are the caller's to free, also on failure. */
static int slot_prepare_spawn(Slot *s, char ***argv, char ***envp, SlotLog *log) {
        int r;

        r = slot_build_command(s, argv, envp);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to build the command line: %m");
        /* Faults of the host from here on are no crash (slot-fault.c): the start waits. */
        r = slot_prepare_cgroup(s);
        if (r < 0)
                return r;
        if (s->home_fd < 0 && (r = slot_setup_home(s)) < 0)
                return slot_storage_fault(r) ? slot_start_fault(s, SLOT_FAULT_SLOTS_DIR, r,
                                                                "cannot set up home %s: %m", s->home)
                                             : r;
        r = slot_open_log(s, log);
        if (r < 0 && slot_storage_fault(r))
                return slot_start_fault(s, SLOT_FAULT_SLOTS_DIR, r, "cannot open %s/server.log: %m",
                                        s->log_dir);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to open %s/server.log: %m", s->log_dir);
        /* server.json is complete before the server's first instruction. */
        r = slot_write_server_json(s);
        if (r < 0 && slot_storage_fault(r)) {
                s->start_blocked = true; /* the fault is raised, its retry armed */
                return r;
        }
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to write %s/server.json: %m", s->home);

        /* The last keeper's count, before the new keeper's file empties it. */
        (void) slot_log_bytes_lost(s);
        s->log_lost_seen = 0;
        r = slot_open_status(s, true);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to open the exit status file: %m");
        r = slot_open_notify(s);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to open %s: %m", s->notify_path);
        slot_new_token(s);
        return 0;
}

/* The keeper is our child: its exit comes through its pidfd, which the source takes. */
static int slot_watch_child(Slot *s, pid_t pid, int pidfd) {
        int r;

        s->child_source = sd_event_source_disable_unref(s->child_source);
        r = sd_event_add_child_pidfd(s->host->event, &s->child_source, pidfd, WEXITED,
                                     slot_on_exit, s);
        if (r < 0) {
                (void) pidfd_send_signal_wrapper(pidfd, SIGKILL);
                return log_slot_error_errno(s, r, "Failed to watch process %d: %m", (int) pid);
        }
        (void) sd_event_source_set_child_pidfd_own(s->child_source, true);
        return 0;
}

static int slot_spawn(Slot *s) {
        _cleanup_strv_free_ char **argv = NULL, **envp = NULL;
        _cleanup_close_ int pidfd = -EBADF;
        _cleanup_(slot_log_close) SlotLog log = { -EBADF, -EBADF, { -EBADF, -EBADF } };
        bool attach = s->cgroup_killed && s->host->hooks->killed_cgroup_bug &&
                      s->host->hooks->killed_cgroup_bug(s, s->host->userdata);
        pid_t pid;
        int r;

        r = slot_prepare_spawn(s, &argv, &envp, &log);
        if (r < 0)
                return r;
        r = spawn_process(&(SpawnParams){
                                  .path = slot_build_config(s)->build,
                                  .argv = argv,
                                  .envp = envp,
                                  .working_directory = s->home,
                                  .confine = {
                                          .uid = s->fleet->uid,
                                          .gid = s->fleet->gid,
                                          .nofile = s->fleet->config->nofile,
                                          .core = s->fleet->config->core_size,
                                          .seccomp = s->fleet->seccomp,
                                  },
                                  .cgroup_fd = s->cgroup_fd,
                                  .output_fd = log.pipe[1],
                                  .pipe_fd = log.pipe[0],
                                  .log_fd = log.file,
                                  .logs_dir_fd = log.dir,
                                  .log_max_size = s->fleet->config->log_max_size,
                                  .log_keep = s->fleet->config->log_keep,
                                  .status_fd = s->status_fd,
                                  .notify_fd = s->notify_fd,
                                  .keeper_fd = s->host->keeper_fd,
                                  .token_fd = s->token_fd >= 0 ? s->token_fd : -1,
                                  .fork_and_attach = attach,
                          },
                          &pid, &pidfd);
        /* pids.max or the kernel's own limits: the machine's shortage, not the build's. */
        if (r == -EAGAIN || r == -ENOMEM)
                return slot_start_fault(s, SLOT_FAULT_FORK, r, "cannot fork the keeper of %s: %m",
                                        slot_build_config(s)->build);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to start %s: %m", slot_build_config(s)->build);
        r = slot_watch_child(s, pid, pidfd);
        if (r < 0)
                return r;
        TAKE_FD(pidfd);
        slot_output_hold(s, TAKE_FD(log.pipe[0]));

        s->main_pid = pid;
        s->ready = false;
        s->exit_code = s->exit_signal = s->exec_errno = 0;
        s->status = mfree_str(s->status);
        s->started_at = now_usec(CLOCK_BOOTTIME);
        slot_fault_clear(s);
        slot_checks_start(s);
        log_slot_info(s, "Started %s under keeper %d", slot_build_config(s)->build, (int) pid);
        return 0;
}

static int slot_on_start_defer(sd_event_source *source, void *userdata) {
        Slot *s = userdata;

        s->start_defer = sd_event_source_disable_unref(s->start_defer);
        slot_dispatch(s, SLOT_EVENT_START);
        return 0;
}

/* Restarts go through the event loop so that a server which dies at once never recurses
 * into its own restart, and so do the starts of a cold start (slot_provision()). A start
 * waits behind the other events ready at the time (exits, a keeper's restart to account
 * for, D-Bus calls): a thousand slots starting do not hold up the slots already running. */
int slot_schedule_start(Slot *s) {
        int r;

        if (s->start_defer)
                return 0;
        r = sd_event_add_defer(s->host->event, &s->start_defer, slot_on_start_defer, s);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to schedule a start: %m");
        (void) sd_event_source_set_priority(s->start_defer, SD_EVENT_PRIORITY_NORMAL + 1);
        return 0;
}

bool slot_start_scheduled_now(Slot *s) {
        if (!s->start_defer)
                return false;
        s->start_defer = sd_event_source_disable_unref(s->start_defer);
        slot_dispatch(s, SLOT_EVENT_START);
        return true;
}

static int slot_on_stop_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;

        s->stop_timer = sd_event_source_disable_unref(s->stop_timer);
        log_slot_notice(s, "Still running %s after SIGTERM, killing the slot's cgroup",
                        "fleet.stop_timeout");
        slot_dispatch(s, SLOT_EVENT_STOP_TIMEOUT);
        return 0;
}

static void slot_terminate(Slot *s) {
        usec_t timeout = s->fleet->config->stop_timeout;
        int r;

        if (s->main_pid > 0) {
                r = slot_signal(s, SIGTERM);
                if (r < 0)
                        log_slot_warning_errno(s, r, "Failed to send SIGTERM: %m");
        }
        if (timeout == 0) {
                slot_dispatch(s, SLOT_EVENT_STOP_TIMEOUT);
                return;
        }
        s->stop_timer = sd_event_source_disable_unref(s->stop_timer);
        r = sd_event_add_time_relative(s->host->event, &s->stop_timer, CLOCK_MONOTONIC, timeout,
                                       USEC_PER_MSEC, slot_on_stop_timeout, s);
        if (r < 0) {
                log_slot_error_errno(s, r, "Failed to arm the stop timer, killing now: %m");
                slot_dispatch(s, SLOT_EVENT_STOP_TIMEOUT);
        }
}

void slot_kill(Slot *s) {
        int r;

        (void) slot_disarm(s);
        s->cgroup_killed = true;
        r = cg_kill_at(s->cgroup_fd);
        if (r < 0)
                log_slot_error_errno(s, r, "Failed to kill cgroup %s: %m", s->cgroup_path);
}

void slot_describe_exit(char how[static SLOT_EXIT_DESCRIPTION_MAX], int code, int sig) {
        if (sig)
                snprintf(how, SLOT_EXIT_DESCRIPTION_MAX, "killed by signal %d (%s)", sig,
                         sigabbrev_np(sig) ?: "?");
        else
                snprintf(how, SLOT_EXIT_DESCRIPTION_MAX, "exit code %d", code);
}

static ExitVerdict slot_judge_exit(Slot *s, bool clean, FailureReason cause, usec_t now) {
        const FleetConfig *f = s->fleet->config;

        return slot_exit_policy(&(ExitInput){
                .stop_requested = s->stop_requested,
                .restart_requested = s->restart_requested,
                .clean_exit = clean,
                .allocated = slot_is_allocated(s),
                .start_on_provision = f->start_on_provision,
                .pre_recovery = f->pre_recovery,
                .crashes_in_window = time_window_count(&s->crashes, now, f->crash_window),
                .crash_restarts = f->crash_restarts,
                .cause = cause,
        });
}

static void slot_log_crash(Slot *s, FailureReason cause, ExitVerdict v) {
        char how[SLOT_EXIT_DESCRIPTION_MAX];

        slot_describe_exit(how, s->exit_code, s->exit_signal);
        log_slot_warning(s, "Server crashed: %s%s%s; %s%s", how,
                         cause != FAILURE_NONE ? ", cause " : "",
                         failure_reason_to_string(cause),
                         v.decision == EXIT_DECISION_RESTART ? "restarting" : "not restarting: ",
                         v.decision == EXIT_DECISION_RESTART ? "" : failure_reason_to_string(v.reason));
        slot_hook_crashed(s, cause);
}

/* Carries out the exit policy's verdict on a settled slot. */
static void slot_follow_verdict(Slot *s, ExitVerdict v, usec_t now) {
        s->failure = v.reason;
        switch (v.decision) {
        case EXIT_DECISION_RESTART:
                slot_set_process_state(s, PROCESS_STOPPED);
                s->restarts++;
                slot_schedule_start(s);
                break;
        case EXIT_DECISION_STOP:
                slot_set_process_state(s, PROCESS_STOPPED);
                break;
        case EXIT_DECISION_FAIL:
                if (v.reason == FAILURE_EXEC)
                        log_slot_warning(s, "The build cannot be executed, not restarting until "
                                         "Start or ResetFailed (fix it first: slotd --check says what)");
                else
                        log_slot_warning(s, "Crashed %u times within crash.window, not restarting "
                                         "until Start or ResetFailed",
                                         time_window_count(&s->crashes, now, s->fleet->config->crash_window));
                slot_set_process_state(s, PROCESS_FAILED);
                break;
        }
}

/* The process and everything it started are gone: decide what comes next (SPEC §6). */
static void slot_settle(Slot *s) {
        FailureReason cause = s->exec_errno ? FAILURE_EXEC : slot_checks_exit_cause(s);
        bool clean = s->exit_signal == 0 && s->exit_code == 0 && cause == FAILURE_NONE;
        bool requested = s->stop_requested || s->restart_requested;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        ExitVerdict v;

        /* Counted, logged and announced already, as its keeper's restart (slot-keeper.c). */
        bool counted = s->exit_accounted;

        s->exit_accounted = false;
        s->stop_timer = sd_event_source_disable_unref(s->stop_timer);
        if (!requested && !clean && !counted)
                time_window_add(&s->crashes, now);
        v = slot_judge_exit(s, clean, cause, now);
        s->ready = false;

        if (v.deallocate && !requested) {
                if (s->allocation_uuid)
                        log_slot_info(s, "Server exited 0: allocation %s is over", s->allocation_uuid);
                (void) slot_set_allocation(s, NULL);
        }
        /* Whatever starts next starts with the fleet's current configuration. */
        if (!slot_is_allocated(s) && s->stale) {
                s->stale = false;
                (void) free_and_strdup(&s->build_configuration, s->fleet->config->build_configuration);
        }
        if (!requested && !clean && !counted)
                slot_log_crash(s, cause, v);

        s->stop_requested = s->restart_requested = false;
        if (s->retired && !slot_is_allocated(s)) {
                slot_set_process_state(s, PROCESS_STOPPED);
                slot_hook_retire(s);
                return;
        }
        slot_follow_verdict(s, v, now);
}

static void slot_apply(Slot *s, SlotTransition t) {
        if (t.actions & SLOT_ACTION_CLEAR_FAILURE) {
                s->failure = FAILURE_NONE;
                time_window_reset(&s->crashes);
        }
        slot_set_process_state(s, t.next);
        if (t.actions & SLOT_ACTION_SPAWN) {
                if (slot_spawn(s) < 0 && !slot_start_waits(s)) {
                        /* A start that fails before the process exists counts as a crash, so
                         * the back-off stops a slot that can never start. */
                        s->exit_code = SPAWN_EXIT_SETUP;
                        s->exit_signal = s->exec_errno = 0;
                        s->last_exit_code = SPAWN_EXIT_SETUP;
                        s->last_exit_signal = 0;
                        slot_set_process_state(s, PROCESS_STOPPING);
                        slot_settle(s);
                }
        }
        if (t.actions & SLOT_ACTION_TERMINATE)
                slot_terminate(s);
        if (t.actions & SLOT_ACTION_KILL)
                slot_kill(s);
        if (t.actions & SLOT_ACTION_SETTLE)
                slot_settle(s);
}

void slot_dispatch(Slot *s, SlotEvent event) {
        bool populated = false;
        SlotTransition t;

        if (event == SLOT_EVENT_EXIT)
                populated = cg_is_populated_at(s->cgroup_fd) > 0;
        t = slot_fsm_next(s->process_state, event, populated);
        if (!t.valid)
                return;
        if (event == SLOT_EVENT_START && s->process_state == PROCESS_STOPPING)
                s->restart_requested = true;
        slot_apply(s, t);
        slot_hook_changed(s, true);
}

int slot_start(Slot *s) {
        if (s->process_state == PROCESS_STOPPING && s->stop_requested) {
                s->restart_requested = true;
                return 0;
        }
        slot_dispatch(s, SLOT_EVENT_START);
        return 0;
}

int slot_stop(Slot *s) {
        slot_fault_cancel_start(s);
        slot_end_hold(s, HOLD_EVENT_STOP);
        s->start_defer = sd_event_source_disable_unref(s->start_defer);
        if (s->process_state == PROCESS_STARTING || s->process_state == PROCESS_RUNNING ||
            s->process_state == PROCESS_STOPPING) {
                s->stop_requested = true;
                s->restart_requested = false;
        }
        slot_dispatch(s, SLOT_EVENT_STOP);
        return 0;
}

int slot_restart(Slot *s) {
        slot_end_hold(s, HOLD_EVENT_RESTART);
        if (s->process_state == PROCESS_STARTING || s->process_state == PROCESS_RUNNING ||
            s->process_state == PROCESS_STOPPING) {
                s->restart_requested = true;
                slot_dispatch(s, SLOT_EVENT_STOP);
                return 0;
        }
        slot_dispatch(s, SLOT_EVENT_START);
        return 0;
}

int slot_reset_failed(Slot *s) {
        if (s->process_state != PROCESS_FAILED)
                return -EBUSY;
        slot_dispatch(s, SLOT_EVENT_RESET);
        return 0;
}

/* The server said READY=1 (or a slotd before us heard it say so: 'how'). The mark in the
 * status file tells the next slotd, should this one die before its state commit. */
void slot_became_ready(Slot *s, const char *how) {
        s->ready = true;
        if (s->status_fd >= 0)
                (void) spawn_mark_ready(s->status_fd, s->keeper_restarts);
        slot_checks_ready(s);
        log_slot_debug(s, "%s", how);
        slot_dispatch(s, SLOT_EVENT_READY);
}

void slot_handle_notify(Slot *s, const char *buf, size_t size) {
        NotifyMessage msg;

        /* From a server its keeper has just started? Then that restart comes first. */
        if (s->main_pid > 0 && s->token_fd >= 0)
                slot_account_keeper_restart(s, false);

        if (notify_parse(buf, size, &msg) < 0) {
                unsigned untold;
                /* The slot's own garbage: told at most once per FLOOD_LOG_INTERVAL. */
                if (ratelimit_tell(&s->notify_garbage_log, now_usec(CLOCK_MONOTONIC),
                                   FLOOD_LOG_INTERVAL, &untold))
                        log_slot_debug(s, "Ignoring a malformed notify message (%u more untold "
                                       "since the last such line)", untold);
                return;
        }
        /* Heartbeats arrive all the time: only what changed is announced. */
        if (msg.has_status && !streq_ptr(s->status, msg.status)) {
                (void) free_and_strdup(&s->status, msg.status);
                slot_details_changed(s, SLOT_CHANGE_STATUS);
        }
        if (msg.watchdog)
                slot_checks_watchdog(s);
        if (msg.ready && !s->ready)
                slot_became_ready(s, "READY=1");
}

int slot_signal(Slot *s, int sig) {
        /* The exit this causes is slotd's to handle. */
        (void) slot_disarm(s);
        if (s->child_source)
                return sd_event_source_send_child_signal(s->child_source, sig, NULL, 0);
        if (s->keeper_pidfd >= 0)
                return pidfd_send_signal_wrapper(s->keeper_pidfd, sig);
        return -ESRCH;
}

