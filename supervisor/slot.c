/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "expand.h"
#include "log.h"
#include "manager.h"
#include "notify.h"
#include "server-json.h"
#include "slot.h"
#include "spawn.h"
#include "strv.h"

static void slot_dispatch(Slot *s, SlotEvent event);
static void slot_became_ready(Slot *s, const char *how);
static void slot_keeper_exited(Slot *s, int keeper_code, int keeper_signal);
static pid_t slot_find_keeper(Slot *s);
static int slot_adopt(Slot *s, pid_t keeper);

bool slot_is_allocated(const Slot *s) {
        return s->allocation_uuid != NULL;
}

bool slot_is_running(const Slot *s) {
        return s->process_state == PROCESS_STARTING || s->process_state == PROCESS_RUNNING;
}

SlotFacts slot_facts(const Slot *s) {
        return (SlotFacts){
                .allocated = s->allocation_uuid != NULL,
                .reserved = s->reservation_uuid != NULL,
                .held = s->hold_until != 0,
                .running = slot_is_running(s),
                .ready = s->ready,
                .failed = s->process_state == PROCESS_FAILED,
                /* Mid-restart, or due for one: not a slot to hand out as it is. */
                .busy = s->process_state == PROCESS_STOPPING || s->start_defer || s->stale ||
                        s->retired || s->restart_pending,
        };
}

SlotState slot_state(const Slot *s) {
        SlotFacts f = slot_facts(s);
        return slot_state_from_facts(&f);
}

static void slot_set_process_state(Slot *s, ProcessState state) {
        if (s->process_state == state)
                return;
        log_slot_debug(s, "%s → %s", process_state_to_string(s->process_state),
                       process_state_to_string(state));
        s->process_state = state;
}

int slot_new(Manager *m, Fleet *f, unsigned id, unsigned index, Slot **ret) {
        Slot *s = calloc(1, sizeof(Slot));

        if (!s)
                return -ENOMEM;
        s->manager = m;
        s->fleet = f;
        s->id = id;
        s->index = index;
        s->cgroup_fd = s->home_fd = s->status_fd = s->keeper_pidfd = s->notify_fd = -EBADF;
        s->token_fd = -EBADF;
        s->cpu_stat_fd = s->memory_fd = -EBADF;
        s->statm = CG_STATM_INIT;
        s->port = (uint16_t) (f->config->game_port_base + index);
        s->query_port = (uint16_t) (f->config->query_port_base + index);
        snprintf(s->id_string, sizeof(s->id_string), "%u", id);
        snprintf(s->log_prefix, sizeof(s->log_prefix), "slot %u (%s): ", id, f->config->name);
        if (asprintf(&s->object_path, BUS_SLOT_PREFIX "/%u", id) < 0 ||
            asprintf(&s->cgroup_path, "%s/slot-%u", f->cgroup_path, id) < 0 ||
            asprintf(&s->home, "%s/%s/slot-%u", m->config->slots_dir, f->config->name, id) < 0 ||
            asprintf(&s->log_dir, "%s/logs", s->home) < 0 ||
            asprintf(&s->notify_path, "%s/%u", m->notify_path, id) < 0 ||
            asprintf(&s->log_fields[0], "SLOT_ID=%u", id) < 0 ||
            asprintf(&s->log_fields[1], "FLEET=%s", f->config->name) < 0 ||
            !(s->build_configuration = strdup(f->config->build_configuration))) {
                slot_free(s);
                return -ENOMEM;
        }
        s->announced_state = slot_state(s);
        s->announced_process_state = s->process_state;
        *ret = s;
        return 0;
}

Slot *slot_free(Slot *s) {
        if (!s)
                return NULL;
        sd_event_source_disable_unref(s->events_source);
        sd_event_source_disable_unref(s->child_source);
        sd_event_source_disable_unref(s->keeper_io);
        safe_close(s->keeper_pidfd);
        safe_close(s->token_fd);
        sd_event_source_disable_unref(s->account_timer);
        sd_event_source_disable_unref(s->stop_timer);
        sd_event_source_disable_unref(s->start_defer);
        sd_event_source_disable_unref(s->reserve_timer);
        sd_event_source_disable_unref(s->hold_timer);
        slot_checks_stop(s);
        for (int k = 0; k < _CHECK_KIND_MAX; k++)
                free(s->strikes[k]);
        free(s->query);
        safe_close(s->cgroup_fd);
        safe_close(s->cpu_stat_fd);
        safe_close(s->memory_fd);
        safe_close(s->home_fd);
        safe_close(s->status_fd);
        sd_event_source_disable_unref(s->notify_source);
        safe_close(s->notify_fd);
        free(s->notify_path);
        free(s->object_path);
        free(s->cgroup_path);
        free(s->home);
        free(s->log_dir);
        free(s->log_fields[0]);
        free(s->log_fields[1]);
        free(s->allocation_uuid);
        free(s->reservation_uuid);
        free(s->build_configuration);
        free(s->status);
        free(s);
        return NULL;
}

static int make_owned_dir_at(int dirfd, const char *name, uid_t uid, gid_t gid, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (mkdirat(dirfd, name, 0750) < 0 && errno != EEXIST)
                return negative_errno();
        /* O_NOFOLLOW: the directory belongs to the game server, which may have replaced it
         * with a symlink to somewhere root writes. */
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if ((st.st_uid != uid || st.st_gid != gid) && fchown(fd, uid, gid) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int slot_setup_home(Slot *s) {
        _cleanup_free_ char *fleet_dir = NULL;
        _cleanup_close_ int parent = -EBADF, logs = -EBADF;
        int r;

        if (asprintf(&fleet_dir, "%s/%s", s->manager->config->slots_dir,
                     s->fleet->config->name) < 0)
                return -ENOMEM;
        r = cg_create(fleet_dir); /* plain mkdir -p, root-owned 0755 */
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to create %s: %m", fleet_dir);
        parent = open(fleet_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (parent < 0)
                return log_slot_error_errno(s, negative_errno(), "Failed to open %s: %m",
                                            fleet_dir);
        s->home_fd = safe_close(s->home_fd);
        r = make_owned_dir_at(parent, strrchr(s->home, '/') + 1, s->fleet->uid, s->fleet->gid,
                              &s->home_fd);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to set up home %s: %m", s->home);
        r = make_owned_dir_at(s->home_fd, "logs", s->fleet->uid, s->fleet->gid, &logs);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to set up %s: %m", s->log_dir);
        return 0;
}

static CgroupLimits slot_limits(const Slot *s) {
        const FleetConfig *f = s->fleet->config;
        uint64_t weight = (uint64_t) (f->usage_cpu * 100.0 + 0.5);

        return (CgroupLimits){
                .memory_high = f->usage_memory + f->memory_tolerance,
                .memory_max = f->memory_max,
                .cpu_weight = MIN(MAX(weight, 1u), 10000u),
                .cpu_max_period = 100000,
                .cpu_max_quota = f->cpu_max > 0 ? (uint64_t) (f->cpu_max * 100000.0 + 0.5)
                                                : UINT64_MAX,
                .pids_max = f->pids_max,
        };
}

static int slot_on_cgroup_events(sd_event_source *source, const struct inotify_event *ev,
                                 void *userdata) {
        Slot *s = userdata;

        /* The main process is reaped through its pidfd; until then its exit decides. */
        if (s->main_pid == 0 && s->process_state == PROCESS_STOPPING &&
            cg_is_populated_at(s->cgroup_fd) == 0)
                slot_dispatch(s, SLOT_EVENT_EMPTY);
        return 0;
}

static int slot_setup_cgroup(Slot *s) {
        _cleanup_free_ char *events = NULL;
        CgroupLimits limits = slot_limits(s);
        int r;

        r = cg_create(s->cgroup_path);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to create cgroup %s: %m",
                                            s->cgroup_path);
        s->cgroup_fd = safe_close(s->cgroup_fd);
        s->cpu_stat_fd = safe_close(s->cpu_stat_fd);
        s->memory_fd = safe_close(s->memory_fd);
        r = cg_open(s->cgroup_path, &s->cgroup_fd);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to open cgroup %s: %m", s->cgroup_path);
        r = cg_apply_limits(s->cgroup_fd, s->manager->enforced, &limits);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to write the limits of %s: %m",
                                            s->cgroup_path);
        if (asprintf(&events, "%s/cgroup.events", s->cgroup_path) < 0)
                return -ENOMEM;
        s->events_source = sd_event_source_disable_unref(s->events_source);
        r = sd_event_add_inotify(s->manager->event, &s->events_source, events, IN_MODIFY,
                                 slot_on_cgroup_events, s);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to watch %s: %m", events);
        return 0;
}

/* At provisioning: run if the fleet starts on provision or a session lives here, unless the
 * slot was left failed or stopped by pre-recovery. */
static bool slot_wants_to_run(const Slot *s) {
        if (s->process_state == PROCESS_FAILED || s->failure == FAILURE_PRE_RECOVERY)
                return false;
        return s->fleet->config->start_on_provision || slot_is_allocated(s);
}

static int slot_schedule_start(Slot *s);

int slot_provision(Slot *s) {
        int r;

        r = slot_setup_cgroup(s);
        if (r < 0)
                return r;
        r = slot_setup_home(s);
        if (r < 0)
                return r;

        r = cg_is_populated_at(s->cgroup_fd);
        if (r > 0) {
                pid_t keeper = slot_find_keeper(s);

                if (keeper > 0) {
                        r = slot_adopt(s, keeper);
                        if (r >= 0)
                                return 0;
                        log_slot_warning_errno(s, r, "Failed to adopt keeper %d: %m", (int) keeper);
                }
                /* Processes without a keeper (an older slotd's, or strays) cannot be watched
                 * for their exit status; they are ended rather than left to run twice. */
                log_slot_warning(s, "Cgroup %s holds processes slotd cannot adopt, killing "
                                 "them before starting anew", s->cgroup_path);
                slot_set_process_state(s, PROCESS_STOPPING);
                s->stop_requested = true;
                s->restart_requested = slot_wants_to_run(s);
                s->cgroup_killed = true;
                r = cg_kill_at(s->cgroup_fd);
                if (r < 0)
                        return log_slot_error_errno(s, r, "Failed to kill %s: %m", s->cgroup_path);
                if (cg_is_populated_at(s->cgroup_fd) == 0)
                        slot_dispatch(s, SLOT_EVENT_EMPTY);
                return 0;
        }
        if (s->restored_keeper > 0) {
                /* It ran when slotd went away and ended since: its keeper left the status. */
                char name[16];

                snprintf(name, sizeof(name), "%u", s->id);
                s->status_fd = safe_close(s->status_fd);
                s->status_fd = openat(s->manager->exit_dir_fd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
                s->main_pid = s->restored_keeper;
                slot_set_process_state(s, s->restored_ready ? PROCESS_RUNNING : PROCESS_STARTING);
                log_slot_info(s, "Its server ended while slotd was not running");
                s->keeper_restarts = s->restored_keeper_restarts;
                slot_keeper_exited(s, 0, SIGKILL);
                return 0;
        }
        /* Started from the event loop, one slot an event: the slots started first are
         * served (their exits, their keepers' restarts) while the rest start. */
        if (slot_wants_to_run(s) && slot_schedule_start(s) < 0)
                slot_dispatch(s, SLOT_EVENT_START);
        else
                manager_slot_changed(s->manager, s, false);
        return 0;
}

static int slot_write_server_json(Slot *s) {
        char port[8], query_port[8];
        const FleetConfig *f = s->fleet->config;
        ServerJson j = {
                .server_id = s->id_string,
                .allocated_uuid = s->allocation_uuid,
                .machine_id = s->manager->machine_id,
                .fleet_id = f->name,
                .ip = s->manager->ip,
                .ipv6 = s->manager->ipv6,
                .port = port,
                .query_port = query_port,
                .query_type = f->query == QUERY_NONE ? "" : query_type_to_string(f->query),
                .server_log_dir = s->log_dir,
        };

        snprintf(port, sizeof(port), "%u", s->port);
        snprintf(query_port, sizeof(query_port), "%u", s->query_port);
        return server_json_write_at(s->home_fd, &j, 0, 0);
}

static int slot_open_log(Slot *s, int *ret_fd) {
        _cleanup_close_ int logs = -EBADF, fd = -EBADF;
        struct stat st;

        logs = openat(s->home_fd, "logs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (logs < 0)
                return negative_errno();
        fd = openat(logs, "server.log",
                    O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0640);
        if (fd < 0)
                return negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
                return -EPERM;
        if ((st.st_uid != s->fleet->uid || st.st_gid != s->fleet->gid) &&
            fchown(fd, s->fleet->uid, s->fleet->gid) < 0)
                return negative_errno();
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int slot_build_command(Slot *s, char ***ret_argv, char ***ret_envp) {
        const FleetConfig *f = s->fleet->config;
        char port[8], query_port[8];
        const ExpandVariable vars[] = {
                { "PORT", port },
                { "QUERY_PORT", query_port },
                { "SERVER_ID", s->id_string },
                { "ALLOCATION_UUID", strempty(s->allocation_uuid) },
                { "SERVER_LOG_DIR", s->log_dir },
                { "HOME", s->home },
                { "BUILD_CONFIGURATION", s->build_configuration },
        };
        _cleanup_strv_free_ char **argv = NULL, **envp = NULL;
        char *v;
        int r;

        snprintf(port, sizeof(port), "%u", s->port);
        snprintf(query_port, sizeof(query_port), "%u", s->query_port);

        r = strv_extend(&argv, f->build);
        if (r < 0)
                return r;
        STRV_FOREACH(a, f->args) {
                r = expand_variables(*a, vars, ELEMENTSOF(vars), &v, NULL);
                if (r < 0 || (r = strv_push(&argv, v)) < 0)
                        return r;
        }

        for (size_t i = 0; i < ELEMENTSOF(vars); i++) {
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
        STRV_FOREACH(e, f->environment) {
                r = expand_variables(*e, vars, ELEMENTSOF(vars), &v, NULL);
                if (r < 0 || (r = strv_push(&envp, v)) < 0)
                        return r;
        }
        *ret_argv = TAKE_PTR(argv);
        *ret_envp = TAKE_PTR(envp);
        return 0;
}

static int slot_on_exit(sd_event_source *source, const siginfo_t *si, void *userdata);

static int slot_on_notify(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Slot *s = userdata;

        /* The queue is short (net.unix.max_dgram_qlen) and servers block while it is full:
         * empty it, in bounded rounds so that one flood cannot starve the loop. */
        for (unsigned i = 0; i < 64; i++)
                if (!manager_receive_notify(s->manager, fd, s))
                        break;
        return 0;
}

/* Watches the slot's notify socket, and takes what is already queued (a READY=1 sent while
 * slotd was away). */
static int slot_watch_notify(Slot *s) {
        int r;

        s->notify_source = sd_event_source_disable_unref(s->notify_source);
        r = sd_event_add_io(s->manager->event, &s->notify_source, s->notify_fd, EPOLLIN,
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

static void slot_close_notify(Slot *s) {
        s->notify_source = sd_event_source_disable_unref(s->notify_source);
        s->notify_fd = safe_close(s->notify_fd);
}

/* <state_dir>/exit/<id>: the keeper writes the server's exit status there, where a slotd
 * that was not running at the time still finds it. */
static int slot_open_status(Slot *s) {
        char name[16];

        snprintf(name, sizeof(name), "%u", s->id);
        s->status_fd = safe_close(s->status_fd);
        s->status_fd = openat(s->manager->exit_dir_fd, name,
                              O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        return s->status_fd < 0 ? negative_errno() : 0;
}

static int slot_spawn(Slot *s) {
        _cleanup_strv_free_ char **argv = NULL, **envp = NULL;
        _cleanup_close_ int log_fd = -EBADF, pidfd = -EBADF;
        pid_t pid;
        int r;

        r = slot_build_command(s, &argv, &envp);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to build the command line: %m");
        r = slot_open_log(s, &log_fd);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to open %s/server.log: %m", s->log_dir);
        /* server.json is complete before the server's first instruction. */
        r = slot_write_server_json(s);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to write %s/server.json: %m", s->home);

        r = slot_open_status(s);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to open the exit status file: %m");
        r = slot_open_notify(s);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to open %s: %m", s->notify_path);
        /* A keeper of its own for every start: its restarts begin unarmed. */
        s->token_fd = safe_close(s->token_fd);
        s->armed = s->restart_pending = s->keeper_outdated = false;
        s->keeper_restarts = 0;
        if (s->fleet->keeper_restarts) {
                s->token_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                if (s->token_fd < 0)
                        log_slot_warning_errno(s, errno, "No eventfd, the keeper will not restart "
                                                         "the server itself: %m");
        }
        r = spawn_process(&(SpawnParams){
                                  .path = s->fleet->config->build,
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
                                  .output_fd = log_fd,
                                  .status_fd = s->status_fd,
                                  .notify_fd = s->notify_fd,
                                  .keeper_fd = s->manager->keeper_fd,
                                  .token_fd = s->token_fd >= 0 ? s->token_fd : -1,
                                  .fork_and_attach = s->cgroup_killed &&
                                                     s->manager->killed_cgroup_bug,
                          },
                          &pid, &pidfd);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to start %s: %m", s->fleet->config->build);

        s->child_source = sd_event_source_disable_unref(s->child_source);
        r = sd_event_add_child_pidfd(s->manager->event, &s->child_source, pidfd, WEXITED,
                                     slot_on_exit, s);
        if (r < 0) {
                (void) pidfd_send_signal_wrapper(pidfd, SIGKILL);
                return log_slot_error_errno(s, r, "Failed to watch process %d: %m", (int) pid);
        }
        (void) sd_event_source_set_child_pidfd_own(s->child_source, true);
        TAKE_FD(pidfd);

        s->main_pid = pid;
        s->ready = false;
        s->exit_code = s->exit_signal = 0;
        s->status = mfree_str(s->status);
        s->started_at = now_usec(CLOCK_REALTIME);
        slot_checks_start(s);
        log_slot_info(s, "Started %s under keeper %d", s->fleet->config->build, (int) pid);
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
static int slot_schedule_start(Slot *s) {
        int r;

        if (s->start_defer)
                return 0;
        r = sd_event_add_defer(s->manager->event, &s->start_defer, slot_on_start_defer, s);
        if (r < 0)
                return log_slot_error_errno(s, r, "Failed to schedule a start: %m");
        (void) sd_event_source_set_priority(s->start_defer, SD_EVENT_PRIORITY_NORMAL + 1);
        return 0;
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
        r = sd_event_add_time_relative(s->manager->event, &s->stop_timer, CLOCK_MONOTONIC, timeout,
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

static int slot_set_allocation(Slot *s, const char *uuid) {
        char *copy = NULL;
        int r;

        if (streq_ptr(s->allocation_uuid, uuid))
                return 0;
        if (uuid && !(copy = strdup(uuid)))
                return -ENOMEM;
        if (copy) {
                r = manager_uuid_link(s->manager, copy, s);
                if (r < 0) {
                        free(copy);
                        return r;
                }
        }
        if (s->allocation_uuid)
                manager_uuid_unlink(s->manager, s->allocation_uuid, s);
        free(s->allocation_uuid);
        s->allocation_uuid = copy;
        /* Rewritten before anything announces the change (SPEC §4). Before provisioning
         * (a restore) there is no home yet: the start writes it. */
        if (s->home_fd >= 0) {
                r = slot_write_server_json(s);
                if (r < 0)
                        log_slot_warning_errno(s, r, "Failed to rewrite server.json: %m");
        }
        return 0;
}

/* The process and everything it started are gone: decide what comes next (SPEC §6). */
static void slot_settle(Slot *s) {
        FailureReason cause = slot_checks_exit_cause(s);
        bool clean = s->exit_signal == 0 && s->exit_code == 0 && cause == FAILURE_NONE;
        bool requested = s->stop_requested || s->restart_requested;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        const FleetConfig *f = s->fleet->config;
        ExitVerdict v;

        s->stop_timer = sd_event_source_disable_unref(s->stop_timer);
        if (!requested && !clean)
                time_window_add(&s->crashes, now);

        v = slot_exit_policy(&(ExitInput){
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
        s->ready = false;

        if (v.deallocate && !requested) {
                if (s->allocation_uuid)
                        log_slot_info(s, "Server exited 0: allocation %s is over", s->allocation_uuid);
                (void) slot_set_allocation(s, NULL);
        }
        /* Whatever starts next starts with the fleet's current configuration. */
        if (!slot_is_allocated(s) && s->stale) {
                s->stale = false;
                (void) free_and_strdup(&s->build_configuration, f->build_configuration);
        }
        if (!requested && !clean) {
                char how[64];
                if (s->exit_signal)
                        snprintf(how, sizeof(how), "killed by signal %d (%s)", s->exit_signal,
                                 sigabbrev_np(s->exit_signal) ?: "?");
                else
                        snprintf(how, sizeof(how), "exit code %d", s->exit_code);
                log_slot_warning(s, "Server crashed: %s%s%s; %s%s", how,
                                 cause != FAILURE_NONE ? ", cause " : "",
                                 failure_reason_to_string(cause),
                                 v.decision == EXIT_DECISION_RESTART ? "restarting" : "not restarting: ",
                                 v.decision == EXIT_DECISION_RESTART ? "" : failure_reason_to_string(v.reason));
                manager_bus_slot_crashed(s->manager, s, failure_reason_to_string(cause));
        }

        s->stop_requested = s->restart_requested = false;
        if (s->retired && !slot_is_allocated(s)) {
                slot_set_process_state(s, PROCESS_STOPPED);
                manager_retire_slot(s->manager, s);
                return;
        }
        switch (v.decision) {
        case EXIT_DECISION_RESTART:
                s->failure = v.reason;
                slot_set_process_state(s, PROCESS_STOPPED);
                s->restarts++;
                slot_schedule_start(s);
                break;
        case EXIT_DECISION_STOP:
                s->failure = v.reason;
                slot_set_process_state(s, PROCESS_STOPPED);
                break;
        case EXIT_DECISION_FAIL:
                s->failure = v.reason;
                log_slot_warning(s, "Crashed %u times within crash.window, not restarting "
                                 "until Start or ResetFailed",
                                 time_window_count(&s->crashes, now, f->crash_window));
                slot_set_process_state(s, PROCESS_FAILED);
                break;
        }
}

static void slot_apply(Slot *s, SlotTransition t) {
        if (t.actions & SLOT_ACTION_CLEAR_FAILURE) {
                s->failure = FAILURE_NONE;
                time_window_reset(&s->crashes);
        }
        slot_set_process_state(s, t.next);
        if (t.actions & SLOT_ACTION_SPAWN) {
                if (slot_spawn(s) < 0) {
                        /* A start that fails before the process exists counts as a crash, so
                         * the back-off stops a slot that can never start. */
                        s->exit_code = SPAWN_EXIT_SETUP;
                        s->exit_signal = 0;
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

static void slot_dispatch(Slot *s, SlotEvent event) {
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
        manager_slot_changed(s->manager, s, true);
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
static void slot_account_keeper_restart(Slot *s, bool keeper_gone) {
        FailureReason cause;
        unsigned n;
        int code, sig;
        bool clean, failed;

        if (s->status_fd < 0 || spawn_read_restart(s->status_fd, &n, &failed, &code, &sig) <= 0 ||
            n <= s->keeper_restarts)
                return;
        s->keeper_restarts = n;
        s->armed = s->restart_pending = false;
        /* The fork failed: the keeper ends, and its exit is handled as any other. (Had the
         * record been read before it said so, that exit counts twice: a fork failing in a
         * process of a few KiB is not worth more.) */
        if (failed)
                return;
        cause = slot_checks_exit_cause(s);
        clean = sig == 0 && code == 0 && cause == FAILURE_NONE;
        s->exit_code = s->last_exit_code = code;
        s->exit_signal = s->last_exit_signal = sig;
        s->restarts++;
        s->server_pid = 0; /* found again when asked for */
        if (!clean) {
                char how[64];

                time_window_add(&s->crashes, now_usec(CLOCK_MONOTONIC));
                if (sig)
                        snprintf(how, sizeof(how), "killed by signal %d (%s)", sig,
                                 sigabbrev_np(sig) ?: "?");
                else
                        snprintf(how, sizeof(how), "exit code %d", code);
                log_slot_warning(s, "Server crashed: %s%s%s; restarted by its keeper", how,
                                 cause != FAILURE_NONE ? ", cause " : "",
                                 failure_reason_to_string(cause));
                manager_bus_slot_crashed(s->manager, s, failure_reason_to_string(cause));
        } else
                log_slot_info(s, "Server exited with code 0; restarted by its keeper");
        s->failure = clean ? FAILURE_NONE : cause;
        if (keeper_gone)
                return;

        s->exit_code = s->exit_signal = 0;
        s->ready = false;
        s->status = mfree_str(s->status);
        s->started_at = now_usec(CLOCK_REALTIME);
        if (s->process_state == PROCESS_STARTING || s->process_state == PROCESS_RUNNING) {
                slot_checks_start(s);
                slot_set_process_state(s, PROCESS_STARTING);
        }
        manager_slot_changed(s->manager, s, true);
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
        r = sd_event_add_time_relative(s->manager->event, &s->account_timer, CLOCK_MONOTONIC,
                                       KEEPER_ACCOUNT_DELAY_USEC, USEC_PER_MSEC,
                                       slot_on_account_timer, s);
        if (r < 0)
                slot_account_keeper_restart(s, false);
}

/* The keeper is gone: how the server ended is in the status file, or, when the keeper was
 * killed before it could write it, in how the keeper itself ended. */
static void slot_keeper_exited(Slot *s, int keeper_code, int keeper_signal) {
        pid_t server;

        /* A restart the keeper made before it ended, not yet accounted: first that exit. */
        s->account_timer = sd_event_source_disable_unref(s->account_timer);
        slot_account_keeper_restart(s, true);
        s->token_fd = safe_close(s->token_fd);
        s->armed = s->restart_pending = false;
        server = s->server_pid;
        s->main_pid = s->server_pid = 0;
        s->child_source = sd_event_source_disable_unref(s->child_source);
        s->keeper_io = sd_event_source_disable_unref(s->keeper_io);
        s->keeper_pidfd = safe_close(s->keeper_pidfd);
        slot_checks_stop(s);
        slot_close_notify(s);
        if (s->status_fd < 0 || spawn_read_status(s->status_fd, &s->exit_code, &s->exit_signal) <= 0) {
                s->exit_code = keeper_code;
                s->exit_signal = keeper_signal;
        }
        s->last_exit_code = s->exit_code;
        s->last_exit_signal = s->exit_signal;
        if (s->exit_signal)
                log_slot_info(s, "Server %d was killed by signal %d (%s)", (int) server,
                              s->exit_signal, sigabbrev_np(s->exit_signal) ?: "?");
        else
                log_slot_info(s, "Server %d exited with code %d", (int) server, s->exit_code);
        slot_dispatch(s, SLOT_EVENT_EXIT);
}

static int slot_on_exit(sd_event_source *source, const siginfo_t *si, void *userdata) {
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

int slot_signal(Slot *s, int sig) {
        /* The exit this causes is slotd's to handle. */
        (void) slot_disarm(s);
        if (s->child_source)
                return sd_event_source_send_child_signal(s->child_source, sig, NULL, 0);
        if (s->keeper_pidfd >= 0)
                return pidfd_send_signal_wrapper(s->keeper_pidfd, sig);
        return -ESRCH;
}

/* The keeper of a cgroup: the process that is PID 1 of its own namespace ("NSpid: N 1"). */
static pid_t slot_find_keeper(Slot *s) {
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

static bool pid_is_our_child(pid_t pid) {
        char path[64], stat[512], *paren;
        _cleanup_close_ int fd = -EBADF;
        long ppid;
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        n = read(fd, stat, sizeof(stat) - 1);
        if (n <= 0)
                return false;
        stat[n] = '\0';
        paren = strrchr(stat, ')');
        return paren && sscanf(paren + 1, " %*c %ld", &ppid) == 1 && ppid == getpid();
}

/* Live restore: a server an earlier slotd started (before a SIGKILL, a crash or a Reexecute)
 * runs on under its keeper. Take it back as it is: no restart, no second server. */
static int slot_adopt(Slot *s, pid_t keeper) {
        char name[16];
        int pidfd, r;

        pidfd = (int) syscall(SYS_pidfd_open, keeper, 0);
        if (pidfd < 0)
                return negative_errno();
        snprintf(name, sizeof(name), "%u", s->id);
        s->status_fd = safe_close(s->status_fd);
        s->status_fd = openat(s->manager->exit_dir_fd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (pid_is_our_child(keeper)) {
                /* After Reexecute the keepers are still our children: wait for them. */
                r = sd_event_add_child_pidfd(s->manager->event, &s->child_source, pidfd, WEXITED,
                                             slot_on_exit, s);
                if (r >= 0)
                        (void) sd_event_source_set_child_pidfd_own(s->child_source, true);
        } else {
                s->keeper_pidfd = pidfd;
                r = sd_event_add_io(s->manager->event, &s->keeper_io, pidfd, EPOLLIN,
                                    slot_on_keeper_io, s);
        }
        if (r < 0) {
                safe_close(pidfd);
                s->keeper_pidfd = -EBADF;
                return r;
        }
        s->main_pid = keeper;
        s->ready = s->restored_ready;
        slot_set_process_state(s, s->ready ? PROCESS_RUNNING : PROCESS_STARTING);
        slot_checks_start(s);
        if (s->ready)
                slot_checks_ready(s);
        /* Its restarts: an earlier slotd armed them for a command line we cannot check, so
         * this keeper makes no more; take back what may be armed, and account for a restart
         * it made while we were away (before what its new server sent is read, below). */
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
        /* The slotd before us heard READY=1 from this very server and died before it was
         * committed: the datagram is gone, the status file's mark is not. */
        if (!s->ready && s->status_fd >= 0 && spawn_marked_ready(s->status_fd, s->keeper_restarts) > 0)
                slot_became_ready(s, "READY=1, as marked before slotd went away");
        /* The socket the keeper kept: what the server sent while we were away is in it. */
        s->notify_fd = safe_close(s->notify_fd);
        s->notify_fd = (int) syscall(SYS_pidfd_getfd, pidfd, KEEPER_NOTIFY_FD, 0);
        if (s->notify_fd < 0 || slot_watch_notify(s) < 0)
                log_slot_warning(s, "Cannot take back the notify socket of keeper %d: "
                                    "READY=1 and heartbeats of this server go unheard", (int) keeper);
        log_slot_info(s, "Adopted the running server %d (keeper %d)%s", (int) slot_server_pid(s),
                      (int) keeper, s->allocation_uuid ? ", its allocation goes on" : "");
        manager_slot_changed(s->manager, s, true);
        return 0;
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
static void slot_became_ready(Slot *s, const char *how) {
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
                log_slot_debug(s, "Ignoring a malformed notify message");
                return;
        }
        /* Heartbeats arrive all the time: only what changed is announced. */
        if (msg.has_status && !streq_ptr(s->status, msg.status)) {
                (void) free_and_strdup(&s->status, msg.status);
                manager_bus_slot_properties(s->manager, s, "Status", NULL);
        }
        if (msg.watchdog)
                slot_checks_watchdog(s);
        if (msg.ready && !s->ready)
                slot_became_ready(s, "READY=1");
}

uint64_t slot_memory_current(Slot *s) {
        bool controller = s->manager->enforced & CGROUP_MASK(CGROUP_MEMORY);
        uint64_t v = 0;

        /* Kept open, as cpu.stat is: a check is a pread, not an open, a read and a close.
         * Without the controller the keeper's few pages are left out, and while the
         * checks run the server's statm stays open too (closed by slot_checks_stop()). */
        if (s->memory_fd < 0 && s->cgroup_fd >= 0)
                s->memory_fd = openat(s->cgroup_fd, cg_memory_file(controller),
                                      O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (s->memory_fd < 0 ||
            cg_memory_current_fd(s->memory_fd, controller, s->main_pid,
                                 s->checks_on ? &s->statm : NULL, &v) < 0)
                return 0;
        return v;
}

double slot_cpu_usage(Slot *s) {
        usec_t usage, now = now_usec(CLOCK_MONOTONIC);

        /* With checks on, the figure is the last interval's, as the check judged it. */
        if (s->fleet->config->check_interval > 0)
                return s->cpu_usage;
        if (s->cgroup_fd < 0 || cg_cpu_usage_at(s->cgroup_fd, &usage) < 0)
                return s->cpu_usage;
        /* Cores over the time since the previous sample, at most every 100 ms, so that
         * property reads in a burst do not turn noise into a figure. */
        if (s->cpu_sample_at == 0 || now - s->cpu_sample_at >= 100 * USEC_PER_MSEC) {
                if (s->cpu_sample_at != 0 && usage >= s->cpu_sample_usage)
                        s->cpu_usage = (double) (usage - s->cpu_sample_usage) /
                                       (double) (now - s->cpu_sample_at);
                s->cpu_sample_usage = usage;
                s->cpu_sample_at = now;
        }
        return s->cpu_usage;
}

static int slot_on_hold_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;

        log_slot_info(s, "Hold expired");
        slot_end_hold(s, HOLD_EVENT_TIMEOUT);
        manager_slot_changed(s->manager, s, true);
        return 0;
}

void slot_end_hold(Slot *s, HoldEvent event) {
        usec_t until = s->hold_until;

        if (until == 0 || !hold_ends_on(event))
                return;
        s->hold_until = 0;
        s->hold_timer = sd_event_source_disable_unref(s->hold_timer);
        manager_hold_ended(s->manager, until);
}

/* Deadlines are kept as CLOCK_REALTIME (shown and persisted) and armed on CLOCK_MONOTONIC,
 * which wall-clock steps do not move. */
static int slot_arm_deadline(Slot *s, sd_event_source **source, usec_t until_realtime,
                             sd_event_time_handler_t handler) {
        usec_t now = now_usec(CLOCK_REALTIME);
        usec_t left = until_realtime > now ? until_realtime - now : 0;

        *source = sd_event_source_disable_unref(*source);
        return sd_event_add_time_relative(s->manager->event, source, CLOCK_MONOTONIC, left,
                                          USEC_PER_MSEC, handler, s);
}

static int slot_hold_until(Slot *s, usec_t until, usec_t *ret_until) {
        int r;

        if (!hold_allowed(slot_state(s)))
                return -EBUSY;
        r = slot_arm_deadline(s, &s->hold_timer, until, slot_on_hold_timeout);
        if (r < 0)
                return r;
        s->hold_until = until;
        manager_hold_started(s->manager, until);
        log_slot_info(s, "Held until %" PRIu64, until);
        manager_slot_changed(s->manager, s, true);
        *ret_until = until;
        return 0;
}

int slot_hold(Slot *s, usec_t timeout, usec_t *ret_until) {
        return slot_hold_until(s, now_usec(CLOCK_REALTIME) + timeout, ret_until);
}

void slot_end_reservation(Slot *s) {
        if (!s->reservation_uuid)
                return;
        manager_uuid_unlink(s->manager, s->reservation_uuid, s);
        s->reservation_uuid = mfree_str(s->reservation_uuid);
        s->reserved_until = 0;
        s->reserve_timer = sd_event_source_disable_unref(s->reserve_timer);
}

static int slot_on_reserve_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        Slot *s = userdata;

        log_slot_info(s, "Reservation for %s expired", s->reservation_uuid);
        slot_end_reservation(s);
        manager_slot_changed(s->manager, s, true);
        return 0;
}

static int slot_reserve_until(Slot *s, const char *uuid, usec_t until) {
        _cleanup_free_ char *copy = strdup(uuid);
        int r;

        if (!copy)
                return -ENOMEM;
        if (slot_is_allocated(s) || s->reservation_uuid ||
            s->process_state == PROCESS_FAILED)
                return -EBUSY;
        r = slot_arm_deadline(s, &s->reserve_timer, until, slot_on_reserve_timeout);
        if (r < 0)
                return r;
        r = manager_uuid_link(s->manager, copy, s);
        if (r < 0) {
                s->reserve_timer = sd_event_source_disable_unref(s->reserve_timer);
                return r;
        }
        slot_end_hold(s, HOLD_EVENT_RESERVE);
        s->reservation_uuid = TAKE_PTR(copy);
        s->reserved_until = until;
        log_slot_info(s, "Reserved for %s", s->reservation_uuid);
        manager_slot_changed(s->manager, s, true);
        return 0;
}

int slot_reserve(Slot *s, const char *uuid, usec_t timeout) {
        return slot_reserve_until(s, uuid, now_usec(CLOCK_REALTIME) + timeout);
}

int slot_allocate(Slot *s, const char *uuid, const char *build_configuration) {
        bool restart, start, pre_recovery = s->failure == FAILURE_PRE_RECOVERY;
        const char *bc = build_configuration ?: s->build_configuration;
        int r;

        if (streq_ptr(s->allocation_uuid, uuid))
                return 0;
        /* A slot stopped by pre-recovery keeps its session until a new allocation replaces
         * it (SPEC §6); any other allocated or foreign-reserved slot is taken. */
        if ((slot_is_allocated(s) && !pre_recovery) ||
            (s->reservation_uuid && !streq(s->reservation_uuid, uuid)) || s->retired ||
            s->process_state == PROCESS_STOPPING)
                return -EBUSY;
        /* From here on a crash of this server is a crash while allocated: its keeper must
         * not restart it. If the keeper was first, the server ended before the allocation
         * and the next one, starting, takes it. */
        (void) slot_disarm(s);

        restart = slot_is_running(s) && (!streq(bc, s->build_configuration) || s->stale);
        start = !slot_is_running(s);
        if (!streq(bc, s->build_configuration)) {
                r = free_and_strdup(&s->build_configuration, bc);
                if (r < 0)
                        return r;
        }
        slot_end_reservation(s);
        slot_end_hold(s, HOLD_EVENT_ALLOCATE);
        r = slot_set_allocation(s, uuid);
        if (r < 0)
                return r;
        log_slot_info(s, "Allocated to %s (build configuration %s)%s", uuid, bc,
                      restart ? ", restarting into it" : start ? ", starting" : "");
        if (pre_recovery)
                s->failure = FAILURE_NONE;
        if (restart) {
                s->stale = false;
                s->restart_requested = true;
                slot_dispatch(s, SLOT_EVENT_STOP);
        } else if (start)
                /* A failed slot starts again too: a new allocation clears crash-backoff. */
                slot_dispatch(s, SLOT_EVENT_START);
        manager_slot_changed(s->manager, s, true);
        return 0;
}

int slot_deallocate(Slot *s) {
        bool stopped_for_recovery = s->failure == FAILURE_PRE_RECOVERY;
        int r;

        if (!slot_is_allocated(s))
                return -EBUSY;
        log_slot_info(s, "Deallocated %s", s->allocation_uuid);
        r = slot_set_allocation(s, NULL);
        if (r < 0)
                return r;
        if (stopped_for_recovery)
                s->failure = FAILURE_NONE;
        if (s->retired) {
                if (slot_is_running(s))
                        (void) slot_stop(s);
                else
                        manager_retire_slot(s->manager, s);
                return 0;
        }
        if (slot_is_running(s) && s->stale) {
                /* The session ran the configuration Reload replaced; the server it leaves
                 * behind takes the new one. */
                s->stale = false;
                (void) free_and_strdup(&s->build_configuration,
                                       s->fleet->config->build_configuration);
                s->restart_requested = true;
                slot_dispatch(s, SLOT_EVENT_STOP);
        } else if (!slot_is_running(s) && s->process_state != PROCESS_FAILED &&
                   s->fleet->config->start_on_provision)
                slot_dispatch(s, SLOT_EVENT_START);
        manager_slot_changed(s->manager, s, true);
        return 0;
}

void slot_reconfigure(Slot *s, bool build_changed) {
        CgroupLimits limits = slot_limits(s);

        /* The keeper holds the command line and confinement it was started with. */
        s->keeper_outdated = true;
        (void) slot_disarm(s);
        if (s->cgroup_fd >= 0)
                (void) cg_apply_limits(s->cgroup_fd, s->manager->enforced, &limits);
        if (!build_changed)
                return;
        if (slot_is_allocated(s)) {
                s->stale = slot_is_running(s);
                return;
        }
        (void) free_and_strdup(&s->build_configuration, s->fleet->config->build_configuration);
        slot_end_hold(s, HOLD_EVENT_BUILD_CHANGE);
        if (slot_is_running(s) || s->process_state == PROCESS_STOPPING) {
                log_slot_info(s, "Configuration changed, restarting into it");
                s->restart_requested = true;
                slot_dispatch(s, SLOT_EVENT_STOP);
        }
        manager_slot_changed(s->manager, s, true);
}

void slot_restore(Slot *s, const SlotRecord *r) {
        usec_t now = now_usec(CLOCK_REALTIME);

        if (r->build_configuration)
                (void) free_and_strdup(&s->build_configuration, r->build_configuration);
        if (r->allocation_uuid && slot_set_allocation(s, r->allocation_uuid) < 0)
                log_slot_error_errno(s, -ENOMEM, "Failed to restore allocation %s", r->allocation_uuid);
        /* Deadlines come back to the microsecond; those that passed while slotd was away
         * have ended. */
        if (r->reservation_uuid && r->reserved_until > now)
                (void) slot_reserve_until(s, r->reservation_uuid, r->reserved_until);
        if (r->hold_until > now) {
                usec_t until;
                (void) slot_hold_until(s, r->hold_until, &until);
        }
        for (FailureReason f = 0; r->failure && f < _FAILURE_REASON_MAX; f++)
                if (streq(r->failure, failure_reason_to_string(f)))
                        s->failure = f;
        if (r->failed)
                s->process_state = PROCESS_FAILED;
        s->restarts = r->restarts;
        s->last_exit_code = r->last_exit_code;
        s->last_exit_signal = r->last_exit_signal;
        s->restored_keeper = (pid_t) r->keeper;
        s->restored_ready = r->ready;
        s->restored_keeper_restarts = r->keeper_restarts;
        if (r->keeper)
                s->started_at = r->started_at;
}

void slot_record(const Slot *s, SlotRecord *r) {
        *r = (SlotRecord){
                .id = s->id,
                .fleet = (char *) s->fleet->config->name,
                .allocation_uuid = s->allocation_uuid,
                .build_configuration = s->build_configuration,
                .reservation_uuid = s->reservation_uuid,
                .reserved_until = s->reserved_until,
                .hold_until = s->hold_until,
                .failure = s->failure != FAILURE_NONE ? (char *) failure_reason_to_string(s->failure) : NULL,
                .failed = s->process_state == PROCESS_FAILED,
                .restarts = s->restarts,
                .last_exit_code = s->last_exit_code,
                .last_exit_signal = s->last_exit_signal,
                .keeper = s->main_pid > 0 ? (unsigned) s->main_pid : 0,
                .keeper_restarts = s->main_pid > 0 ? s->keeper_restarts : 0,
                .ready = s->ready,
                .started_at = s->started_at,
        };
}

pid_t slot_server_pid(Slot *s) {
        if (s->main_pid > 0 && s->server_pid == 0)
                s->server_pid = spawn_server_pid(s->cgroup_fd, s->main_pid);
        return s->server_pid;
}
