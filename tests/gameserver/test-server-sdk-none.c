/* SPDX-License-Identifier: MIT */
/*
 * The plain slotd-test-server has no SDK code: libcurl and libwebsockets
 * would cost every exec of the benchmark's thousand servers some 13 ms and
 * over a megabyte of their own memory.  --sdk therefore executes
 * slotd-test-server-sdk from the same directory, with the same arguments,
 * in the same process.
 */

#include "test-server.h"

#define SDK_BINARY "slotd-test-server-sdk"

void sdk_reexec(char **argv)
{
        char self[PATH_MAX], path[PATH_MAX + sizeof(SDK_BINARY) + 1];
        ssize_t n;
        char *slash;

        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0) {
                fprintf(stderr, "slotd-test-server: --sdk: cannot find this binary: %s\n",
                        strerror(n < 0 ? errno : ENOENT));
                exit(2);
        }
        self[n] = '\0';
        slash = strrchr(self, '/');
        snprintf(path, sizeof(path), "%.*s/%s", slash ? (int) (slash - self) : 1,
                 slash ? self : ".", SDK_BINARY);
        /* argv[0] stays as it was, so the state file's argv does not tell the two apart. */
        execv(path, argv);
        fprintf(stderr, "slotd-test-server: --sdk needs %s: %s\n", path, strerror(errno));
        exit(2);
}

int sdk_init(struct server *s)
{
        return -EOPNOTSUPP;
}

int sdk_start(struct server *s)
{
        return -EOPNOTSUPP;
}

void sdk_handle(struct server *s)
{
}

int sdk_ready_request(struct server *s, bool ready)
{
        return -EOPNOTSUPP;
}

bool sdk_config_reread(struct server *s, const char *buf, size_t len, bool report)
{
        return true;
}
