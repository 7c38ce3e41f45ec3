/* SPDX-License-Identifier: MIT */
/* The sock_diag fault (SPEC §12). The local proxy names each caller by its TCP socket
 * (sockdiag.h), which takes the kernel's inet_diag and tcp_diag; where they are missing and
 * cannot be loaded (a chroot, kernel.modules_disabled=1) a lookup answers ENOENT, as it does
 * for a client already gone. So it is proved, not assumed: a lookup of a connection of slotd's
 * own when the proxy starts, again when a lookup fails for another reason than ENOENT, and
 * with back-off while it fails. Meanwhile an ENOENT is sock_diag's, not the client's
 * (proxy.c), and callers are answered 503, never taken for strangers. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cgroup.h"
#include "log.h"
#include "manager.h"
#include "sockdiag.h"

#define SOCK_DIAG_FAULT "sock_diag"
#define RETRY_MIN_USEC USEC_PER_SEC
#define RETRY_MAX_USEC (60 * USEC_PER_SEC)

/* The id of slotd's own cgroup (v2: its directory's inode), 0 when it cannot be had: the
 * self-test then does not compare it. */
static uint64_t own_cgroup_id(Manager *m) {
        _cleanup_free_ char *path = NULL, *dir = NULL;
        struct stat st;

        if (cg_pid_path(0, &path) < 0 || asprintf(&dir, "%s%s", m->cgroup_mount, path) < 0 ||
            stat(dir, &st) < 0) {
                log_debug("Cannot tell slotd's own cgroup id: the sock_diag self-test does not "
                          "compare it");
                return 0;
        }
        return (uint64_t) st.st_ino;
}

static int on_sock_diag_retry(sd_event_source *source, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        m->sock_diag_retry = sd_event_source_disable_unref(m->sock_diag_retry);
        (void) manager_sock_diag_check(m);
        return 0;
}

static void sock_diag_arm_retry(Manager *m) {
        int r;

        if (m->sock_diag_retry)
                return;
        m->sock_diag_retry_usec = MIN(MAX(m->sock_diag_retry_usec * 2, RETRY_MIN_USEC),
                                      RETRY_MAX_USEC);
        r = sd_event_add_time_relative(m->event, &m->sock_diag_retry, CLOCK_MONOTONIC,
                                       m->sock_diag_retry_usec, 0, on_sock_diag_retry, m);
        if (r < 0)
                log_error_errno(r, "Failed to arm the retry of the sock_diag self-test: %m");
}

const char *manager_sock_diag_remedy(int error) {
        if (error == EOPNOTSUPP)
                return "the kernel gives sockets no cgroup id (Linux 5.7 or later needed)";
        if (error == EPROTO)
                return "the kernel's answer named another socket, owner or cgroup";
        return "the kernel needs the modules inet_diag and tcp_diag";
}

static void sock_diag_failed(Manager *m, int error) {
        m->sock_diag_error = -error;
        if (!manager_fault_raise(m, SOCK_DIAG_FAULT,
                                 "the local proxy cannot tell which slot a caller is in: a "
                                 "NETLINK_SOCK_DIAG lookup of a TCP socket fails (%s); %s; callers "
                                 "are answered 503 until then", strerror(-error),
                                 manager_sock_diag_remedy(-error))) {
                log_debug_errno(error, "The sock_diag self-test failed again: %m");
                return;
        }
        if (error == -EOPNOTSUPP || error == -EPROTO)
                log_error_errno(error, "sock_diag cannot name the local proxy's callers: a lookup "
                                "of a TCP socket of slotd's own failed: %m; %s. Until then the "
                                "local proxy answers 503 to every caller",
                                manager_sock_diag_remedy(-error));
        else
                log_error_errno(error, "sock_diag cannot name the local proxy's callers: a lookup "
                                "of a TCP socket of slotd's own failed: %m. Load the kernel "
                                "modules inet_diag and tcp_diag (modprobe inet_diag tcp_diag, "
                                "or build them in). Until then the local proxy answers 503 to "
                                "every caller; tried again with back-off (1 s to 60 s)");
}

int manager_sock_diag_check(Manager *m) {
        bool untested;
        int r;

        r = sockdiag_self_test(own_cgroup_id(m), &untested);
        if (r >= 0) {
                m->sock_diag_error = 0;
                m->sock_diag_retry_usec = 0;
                m->sock_diag_retry = sd_event_source_disable_unref(m->sock_diag_retry);
                if (manager_fault_clear(m, SOCK_DIAG_FAULT))
                        log_info("sock_diag names the local proxy's callers again");
                else
                        log_debug("sock_diag names a TCP socket of slotd's own: the local "
                                  "proxy can name its callers");
                return 0;
        }
        /* Without a loopback connection nothing is proved either way: no fault, and what was
         * known stays. */
        if (!untested)
                sock_diag_failed(m, r);
        else if (m->sock_diag_retry_usec == 0)
                log_warning_errno(r, "Cannot test sock_diag, by which the local proxy names its "
                                  "callers: no TCP connection on 127.0.0.1: %m; trying again");
        else
                log_debug_errno(r, "Still no TCP connection on 127.0.0.1 to test sock_diag: %m");
        sock_diag_arm_retry(m);
        return r;
}

void manager_sock_diag_done(Manager *m) {
        m->sock_diag_retry = sd_event_source_disable_unref(m->sock_diag_retry);
}
