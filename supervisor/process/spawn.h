/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "confine.h"

/* Starting a build executable inside its slot's cgroup, behind a keeper.
 *
 * The keeper is cloned straight into the slot's cgroup as PID 1 of a new PID namespace. It
 * forks the game server, which confines itself and execs the build, and then execs
 * slotd-keeper (keeper.c), a freestanding program of a few hundred bytes: that forwards the
 * signals slotd sends it, reaps what dies in the namespace, moves the servers' output from a
 * pipe into logs/server.log and rotates it (logs.max_size, logs.keep), and when the server
 * exits writes its exit status to a file slotd gave it and exits, taking the rest of the
 * namespace with it. Because of it a game server cannot see or signal the processes of
 * another slot, and an exit that happens while slotd is not running is not lost. */

typedef struct SpawnParams {
        const char *path;
        char *const *argv;
        char *const *envp;
        const char *working_directory;
        ConfineParams confine;
        int cgroup_fd;   /* the slot's cgroup directory */
        int output_fd;   /* the servers' stdout and stderr (the write end of the log pipe);
                          * stdin is /dev/null */
        int pipe_fd;     /* the log pipe's read end, non-blocking: the keeper's */
        int log_fd;      /* logs/server.log, not O_APPEND (splice() refuses it) */
        int logs_dir_fd; /* logs/, where the keeper rotates server.log */
        uint64_t log_max_size; /* logs.max_size: rotated at that size; 0 never */
        unsigned log_keep;     /* logs.keep: older files kept, 1 to 99 */
        int status_fd;   /* where the keeper writes the server's exit status */
        int notify_fd;   /* the slot's notify socket: the keeper holds it (see spawn.h) */
        int keeper_fd;   /* slotd-keeper, opened O_PATH (spawn_open_keeper()) */
        /* An eventfd through which slotd arms the keeper's restarts (keeper.c), or -1. The
         * keeper then runs confined as the server is (confine above, seccomp filter
         * included: the caller checks that the filter lets the keeper work, see
         * confine_keeper_allowed()), in the working directory, and restarts the server
         * itself when armed. */
        int token_fd;
        bool fork_and_attach; /* skip CLONE_INTO_CGROUP (see spawn_probe_killed_cgroup_bug()) */

        /* Filled in by spawn_process() itself. */
        char **keeper_argv;
        int null_fd;
} SpawnParams;

/* Exit code of a server that could not get as far as exec; the reason is written to its
 * output (the slot's server.log) first. */
#define SPAWN_EXIT_SETUP 203

/* Opens the few descriptors every spawn passes through: call first thing in main(), so that
 * they are low in the table. Called by spawn_process() otherwise. */
int spawn_reserve_fds(void);

/* Starts the keeper (and through it the server). Never blocks on the child. ret_pid and
 * ret_pidfd are the keeper's, slotd's own child. */
int spawn_process(const SpawnParams *p, pid_t *ret_pid, int *ret_pidfd);

/* The status the keeper wrote: 1 and the code or signal when there is one (*ret_core, if
 * given: the signal left a core, WCOREDUMP), 0 when the file is empty (the keeper was killed:
 * by cgroup.kill, the OOM killer, or SIGKILL). */
int spawn_read_status(int status_fd, int *ret_code, int *ret_signal, bool *ret_core);

/* The keeper holds the slot's notify socket as this descriptor, so that the socket (and what
 * servers send while slotd is away) outlives slotd; a new slotd takes it back with
 * pidfd_getfd(). */
#define KEEPER_NOTIFY_FD 4
/* ... and the eventfd of its restarts as this one (keeper.c). */
#define KEEPER_TOKEN_FD 5
/* Where in the status file the keeper writes its last restart (keeper.c). */
#define KEEPER_RESTART_OFFSET 32

/* Where in the status file slotd marks that the keeper's current server said READY=1: the
 * mark outlives slotd (a file's page survives a SIGKILL), where a state commit may not have
 * been made yet. The file is emptied at each keeper start. */
#define KEEPER_READY_OFFSET 64

/* Where in the status file a server whose execve() failed writes "exec ERRNO" before it exits
 * SPAWN_EXIT_SETUP (spawn.c for the first server, keeper.c for the ones it restarts). The
 * keeper restarts no server that exits SPAWN_EXIT_SETUP and the file is emptied at each
 * keeper start, so a record there is always the last server's. Being in the file, it
 * outlives slotd as the exit status does: a slotd that adopts the keeper still reads it. */
#define KEEPER_EXEC_OFFSET 96

/* Where in the status file the keeper counts the bytes of output it had to drop, in all, with
 * the errno of the last failure: "lost BYTES ERRNO" (keeper.c). */
#define KEEPER_LOG_LOST_OFFSET 128

/* The keeper's descriptors for the servers' output (keeper.c): the log pipe's read end, the
 * logs directory and server.log. slotd takes the read end back from an adopted keeper with
 * pidfd_getfd(), to empty the pipe should the keeper be killed (slot-output.c). */
#define KEEPER_PIPE_FD 7
#define KEEPER_LOGS_DIR_FD 8
#define KEEPER_LOG_FD 9

/* The keeper's count of dropped output: 1 with the bytes and the last errno, 0 when it has
 * dropped nothing. */
int spawn_read_log_lost(int status_fd, uint64_t *ret_bytes, int *ret_errno);

/* The errno of the last server's failed execve(): 1 and *ret_errno when the record is there,
 * 0 when not. */
int spawn_read_exec_failure(int status_fd, int *ret_errno);

/* Marks the server READY=1 after the keeper's 'restarts'-th restart (0: its first server). */
int spawn_mark_ready(int status_fd, unsigned restarts);
/* 1 if the server after the keeper's 'restarts'-th restart is marked ready, else 0. */
int spawn_marked_ready(int status_fd, unsigned restarts);

/* The keeper's last restart record: 1 with the number of restarts it has made and how the
 * server before the last one ended (*ret_failed: the last one could not be forked, and the
 * keeper ends instead; *ret_core, if given: it left a core), 0 when it has made none. */
int spawn_read_restart(int status_fd, unsigned *ret_restarts, bool *ret_failed, int *ret_code,
                       int *ret_signal, bool *ret_core);

/* The game server's PID (in slotd's namespace) under a keeper, 0 while there is none. */
pid_t spawn_server_pid(int cgroup_fd, pid_t keeper);

int pidfd_send_signal_wrapper(int pidfd, int sig);
int pidfd_open_wrapper(pid_t pid);
/* pid is a child of this process (after Reexecute, those of the image before are): its exit
 * can be waited for; another's is only seen through its pidfd. */
bool pid_is_our_child(pid_t pid);

/* Opens slotd-keeper (O_PATH, close-on-exec): the one next to 'self_exe' (slotd's own
 * binary, so that a build tree runs its own), else SLOTD_KEEPER_PATH. Returns the fd, or a
 * negative errno with the path last tried in *ret_path (malloc'd). */
int spawn_open_keeper(const char *self_exe, char **ret_path);
/* The same for any program of slotd's: 'name' next to self_exe, else 'installed'. */
int spawn_open_helper(const char *self_exe, const char *name, const char *installed,
                      char **ret_path);

/* Some kernels (seen on 6.18) SIGKILL every child that clone3 puts into a cgroup which has
 * ever been emptied through cgroup.kill: the kill sequence number of the parent's cgroup is
 * compared with the target's. Tries it once in a scratch group below 'parent_path'; returns
 * 1 if the bug is there (spawns into killed groups must then clone and attach), 0 if not,
 * negative errno if it could not tell. Blocks for one short-lived child: call at start-up. */
int spawn_probe_killed_cgroup_bug(const char *parent_path);
