/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Starting a build executable directly inside its slot's cgroup. */

typedef struct SpawnParams {
        const char *path;
        char *const *argv;
        char *const *envp;
        const char *working_directory;
        uid_t uid;
        gid_t gid;
        int cgroup_fd;   /* the slot's cgroup directory */
        int output_fd;   /* stdout and stderr; stdin is /dev/null */
        bool fork_and_attach; /* skip CLONE_INTO_CGROUP (see spawn_probe_killed_cgroup_bug()) */
        unsigned long nofile; /* RLIMIT_NOFILE soft limit for the server, 0 = inherit */
} SpawnParams;

/* Exit code of a child that could not get as far as exec; the reason is written to its
 * output (the slot's server.log) first. */
#define SPAWN_EXIT_SETUP 203

/* clone3(CLONE_INTO_CGROUP|CLONE_PIDFD), falling back to fork + cgroup.procs + pidfd_open on
 * kernels without it. Never blocks on the child: failures after the fork show up as an exit
 * with SPAWN_EXIT_SETUP. */
int spawn_process(const SpawnParams *p, pid_t *ret_pid, int *ret_pidfd);

int pidfd_send_signal_wrapper(int pidfd, int sig);

/* Some kernels (seen on 6.18) SIGKILL every child that clone3 puts into a cgroup which has
 * ever been emptied through cgroup.kill: the kill sequence number of the parent's cgroup is
 * compared with the target's. Tries it once in a scratch group below 'parent_path'; returns
 * 1 if the bug is there (spawns into killed groups must then fork and attach), 0 if not,
 * negative errno if it could not tell. Blocks for one short-lived child: call at start-up. */
int spawn_probe_killed_cgroup_bug(const char *parent_path);
