/* SPDX-License-Identifier: MIT */
/* Run by slotd as a build executable, this tries what a game server must not be able to do
 * and writes one line per attempt to $HOME/escape.results: "NAME denied ERRNO" or
 * "NAME ALLOWED". Then it waits to be stopped. Every attempt is harmless if it succeeds
 * (a mount on a directory of its own, a bad reboot magic, the clock set to what it is). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static FILE *out;

static void report(const char *name, int r) {
        if (r < 0)
                fprintf(out, "%s denied %d\n", name, errno);
        else
                fprintf(out, "%s ALLOWED\n", name);
        fflush(out);
}

static long read_target(const char *home) {
        char path[4096];
        long pid = 0;

        snprintf(path, sizeof(path), "%s/target.pid", home);
        for (int i = 0; i < 2000 && pid == 0; i++) {
                FILE *f = fopen(path, "re");
                if (f) {
                        if (fscanf(f, "%ld", &pid) != 1)
                                pid = 0;
                        fclose(f);
                }
                if (pid == 0)
                        usleep(10000);
        }
        return pid;
}

static int write_file(const char *path, const char *value) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return -1;
        n = write(fd, value, strlen(value));
        close(fd);
        return n < 0 ? -1 : 0;
}

int main(void) {
        const char *home = getenv("HOME");
        char path[4096], line[4096], mine[4096] = "", status[8192];
        struct timespec now;
        long target;
        FILE *f;

        if (!home)
                return 2;
        snprintf(path, sizeof(path), "%s/escape.results.tmp", home);
        out = fopen(path, "we");
        if (!out)
                return 2;

        /* Capabilities and no_new_privs, as the kernel reports them. */
        f = fopen("/proc/self/status", "re");
        while (f && fgets(line, sizeof(line), f))
                if (!strncmp(line, "Cap", 3) || !strncmp(line, "NoNewPrivs", 10) ||
                    !strncmp(line, "Seccomp:", 8) || !strncmp(line, "Uid", 3))
                        fprintf(out, "status %s", line);
        if (f)
                fclose(f);

        report("setuid-root", setuid(0));
        report("capset", prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, 21 /* CAP_SYS_ADMIN */, 0, 0));

        target = read_target(home);
        fprintf(out, "target %ld\n", target);
        report("kill-other-slot", kill((pid_t) target, 0));
        report("ptrace-other-slot", (int) ptrace(PTRACE_ATTACH, (pid_t) target, NULL, NULL));
        report("process_vm_readv", (int) syscall(SYS_process_vm_readv, (pid_t) target, NULL, 0, NULL, 0, 0));
        report("kill-all", kill(-1, 0) == 0 ? 0 : -1);

        /* Our own cgroup, from /proc/self/cgroup. */
        f = fopen("/proc/self/cgroup", "re");
        while (f && fgets(line, sizeof(line), f))
                if (!strncmp(line, "0::", 3)) {
                        line[strcspn(line, "\n")] = '\0';
                        snprintf(mine, sizeof(mine), "%s", line + 3);
                }
        if (f)
                fclose(f);
        fprintf(out, "cgroup %s\n", mine);
        /* The mount point of the v2 tree, from mountinfo. */
        {
                char mnt[1024] = "";
                f = fopen("/proc/self/mountinfo", "re");
                while (f && fgets(line, sizeof(line), f)) {
                        char *sep = strstr(line, " - cgroup2 ");
                        char a[64], b[64], c[64], d[1024], e[1024];
                        if (sep && sscanf(line, "%63s %63s %63s %1023s %1023s", a, b, c, d, e) == 5) {
                                snprintf(mnt, sizeof(mnt), "%s", e);
                                break;
                        }
                }
                if (f)
                        fclose(f);
                snprintf(path, sizeof(path), "%s%s/cgroup.procs", mnt, mine);
                report("write-own-cgroup.procs", write_file(path, "0"));
                snprintf(path, sizeof(path), "%s%s/pids.max", mnt, mine);
                report("write-own-limit", write_file(path, "max"));
                snprintf(path, sizeof(path), "%s%s/../cgroup.procs", mnt, mine);
                report("move-to-parent-cgroup", write_file(path, "0"));
                snprintf(path, sizeof(path), "%s/cgroup.procs", mnt);
                report("move-to-root-cgroup", write_file(path, "0"));
        }

        snprintf(path, sizeof(path), "%s/mnt", home);
        (void) mkdir(path, 0700);
        report("mount", mount("none", path, "tmpfs", 0, NULL));
        report("unshare-user-mount", unshare(CLONE_NEWUSER | CLONE_NEWNS));
        report("init_module", (int) syscall(SYS_init_module, NULL, 0, ""));
        report("finit_module", (int) syscall(SYS_finit_module, -1, "", 0));
        clock_gettime(CLOCK_REALTIME, &now);
        report("clock_settime", clock_settime(CLOCK_REALTIME, &now));
        report("settimeofday", (int) syscall(SYS_settimeofday, NULL, NULL));
        /* A bad magic: if this call reached the kernel's reboot code it would fail with
         * EINVAL, never reboot. */
        report("reboot", (int) syscall(SYS_reboot, 0, 0, 0, NULL));
        report("chroot", chroot(home));

        /* The keeper is PID 1 here: the kernel drops a SIGKILL sent to it from inside, and if
         * it did not, the namespace would die with it and this file would never be complete. */
        (void) kill(1, SIGKILL);
        usleep(100000);
        fprintf(out, "survived-kill-keeper yes\n");
        snprintf(status, sizeof(status), "%d", (int) getpid());
        fprintf(out, "pid %s\n", status);
        fclose(out);
        snprintf(path, sizeof(path), "%s/escape.results.tmp", home);
        snprintf(line, sizeof(line), "%s/escape.results", home);
        rename(path, line);
        for (;;)
                pause();
}
