/* SPDX-License-Identifier: MIT */
/* busprop PORTFILE: answers the test harness's property reads (lib.sh's mprop, sprop and
 * sprops) with what `busctl get-property` prints for them, without a busctl start for each.
 *
 * In the TCG VM of tests/vm a busctl start costs about 80 ms of the guest's CPU, and the
 * harness reads a property in nearly every poll; busctl was a quarter to a third of the
 * VM's CPU (docs/test-time.md). This server starts once per test and answers each read in a
 * process forked from it, which connects to the bus as busctl does (sd-bus, a bus client),
 * calls org.freedesktop.DBus.Properties.Get once per property and prints the value in
 * busctl's own format ("TYPE VALUE", systemd 252's format_cmdline). Whatever it does not
 * print exactly as busctl would (an error, a file descriptor, a string with a control or
 * non-ASCII byte, which busctl escapes) it declines, and the harness runs busctl instead:
 * the answer is busctl's either way, and only busctl reports errors.
 *
 * It listens on 127.0.0.1 (a port the kernel picks, written to PORTFILE when it listens),
 * one request a connection, and dies with the shell that started it (PR_SET_PDEATHSIG):
 *
 *     request: ADDRESS "\n" DESTINATION "\n" PATH "\n" INTERFACE "\n" PROPERTY... "\n"
 *              (the properties separated by spaces)
 *     answer:  "0 LEN\n" and LEN bytes, busctl's output; or "1 0\n": run busctl. */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#define REQUEST_MAX 4096
#define ANSWER_TIMEOUT_SEC 60

/* A string as busctl prints it, or -EINVAL where busctl would escape a byte. */
static int put_string(FILE *f, const char *s) {
        for (const char *p = s; *p; p++)
                if ((unsigned char) *p < ' ' || (unsigned char) *p >= 127 || *p == '\\' ||
                    *p == '"' || *p == '\'')
                        return -EINVAL;
        fprintf(f, "\"%s\"", s);
        return 0;
}

static int put_basic(sd_bus_message *m, char type, FILE *f) {
        union {
                uint8_t u8;
                int16_t s16;
                uint16_t u16;
                int32_t s32;
                uint32_t u32;
                int64_t s64;
                uint64_t u64;
                double d64;
                const char *string;
                int i;
        } v;
        int r = sd_bus_message_read_basic(m, type, &v);

        if (r < 0)
                return r;
        switch (type) {
        case SD_BUS_TYPE_BYTE: fprintf(f, "%u", v.u8); return 0;
        case SD_BUS_TYPE_BOOLEAN: fputs(v.i ? "true" : "false", f); return 0;
        case SD_BUS_TYPE_INT16: fprintf(f, "%i", v.s16); return 0;
        case SD_BUS_TYPE_UINT16: fprintf(f, "%u", v.u16); return 0;
        case SD_BUS_TYPE_INT32: fprintf(f, "%i", v.s32); return 0;
        case SD_BUS_TYPE_UINT32: fprintf(f, "%u", v.u32); return 0;
        case SD_BUS_TYPE_INT64: fprintf(f, "%" PRIi64, v.s64); return 0;
        case SD_BUS_TYPE_UINT64: fprintf(f, "%" PRIu64, v.u64); return 0;
        case SD_BUS_TYPE_DOUBLE: fprintf(f, "%g", v.d64); return 0;
        case SD_BUS_TYPE_STRING:
        case SD_BUS_TYPE_OBJECT_PATH:
        case SD_BUS_TYPE_SIGNATURE: return put_string(f, v.string);
        default: return -EOPNOTSUPP; /* a file descriptor: busctl's number is its own */
        }
}

/* The values of m's current container, as busctl's format_cmdline prints them: an array
 * as its length and its elements, a variant as its signature and its value, a struct's
 * members in a row, all separated by single spaces. Returns whether anything was printed. */
static int put_values(sd_bus_message *m, FILE *f, bool space) {
        for (;;) {
                const char *contents = NULL;
                char type;
                int r = sd_bus_message_peek_type(m, &type, &contents);

                if (r <= 0)
                        return r < 0 ? r : space;
                if (space)
                        fputc(' ', f);
                if (type == SD_BUS_TYPE_ARRAY || type == SD_BUS_TYPE_VARIANT ||
                    type == SD_BUS_TYPE_STRUCT || type == SD_BUS_TYPE_DICT_ENTRY) {
                        unsigned n = 0;

                        r = sd_bus_message_enter_container(m, type, contents);
                        if (r < 0)
                                return r;
                        if (type == SD_BUS_TYPE_ARRAY) {
                                while ((r = sd_bus_message_skip(m, contents)) > 0)
                                        n++;
                                if (r < 0 || (r = sd_bus_message_rewind(m, false)) < 0)
                                        return r;
                                fprintf(f, "%u", n);
                                space = true;
                        } else if (type == SD_BUS_TYPE_VARIANT) {
                                fputs(contents, f);
                                space = true;
                        } else
                                space = false; /* the separator is already out */
                        r = put_values(m, f, space);
                        if (r < 0)
                                return r;
                        space = r > 0 || space;
                        r = sd_bus_message_exit_container(m);
                        if (r < 0)
                                return r;
                        continue;
                }
                r = put_basic(m, type, f);
                if (r < 0)
                        return r;
                space = true;
        }
}

/* One property's line, "SIGNATURE VALUE\n", as `busctl get-property` prints it. */
static int put_property(sd_bus *bus, const char *const req[4], const char *property, FILE *f) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *contents = NULL;
        int r;

        r = sd_bus_call_method(bus, req[1], req[2], "org.freedesktop.DBus.Properties", "Get",
                               &error, &reply, "ss", req[3], property);
        sd_bus_error_free(&error);
        if (r >= 0)
                r = sd_bus_message_peek_type(reply, NULL, &contents);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_VARIANT, contents);
        if (r >= 0) {
                fprintf(f, "%s ", contents);
                r = put_values(reply, f, false);
        }
        if (r >= 0)
                fputc('\n', f);
        sd_bus_message_unref(reply);
        return r < 0 ? r : 0;
}

/* The answer to one request (req: address, destination, path, interface; properties). */
static int answer(char *const req[4], char *properties, char **out, size_t *out_len) {
        sd_bus *bus = NULL;
        FILE *f = open_memstream(out, out_len);
        char *saveptr = NULL;
        int r;

        if (!f)
                return -ENOMEM;
        r = sd_bus_new(&bus);
        if (r >= 0)
                r = sd_bus_set_address(bus, req[0]);
        if (r >= 0)
                r = sd_bus_set_bus_client(bus, 1);
        if (r >= 0)
                r = sd_bus_start(bus);
        for (char *p = strtok_r(properties, " ", &saveptr); r >= 0 && p;
             p = strtok_r(NULL, " ", &saveptr))
                r = put_property(bus, (const char *const *) req, p, f);
        sd_bus_flush_close_unref(bus);
        if (fclose(f) != 0 && r >= 0)
                r = -errno;
        return r;
}

/* Serves the connection fd, in a process of its own. */
static void serve(int fd) {
        char buf[REQUEST_MAX + 1], *line[5], *p = buf, *out = NULL;
        size_t len = 0, out_len = 0;
        int n = 0, r;
        FILE *reply;

        alarm(ANSWER_TIMEOUT_SEC);
        while (len < REQUEST_MAX) {
                ssize_t k = read(fd, buf + len, REQUEST_MAX - len);

                if (k <= 0)
                        _exit(1);
                len += (size_t) k;
                buf[len] = 0;
                n = 0;
                for (char *q = buf; (q = strchr(q, '\n')); q++)
                        n++;
                if (n >= 5)
                        break;
        }
        if (n < 5)
                _exit(1);
        for (int i = 0; i < 5; i++) {
                line[i] = p;
                p = strchr(p, '\n');
                *p++ = 0;
        }
        r = answer(line, line[4], &out, &out_len);
        reply = fdopen(fd, "w");
        if (!reply)
                _exit(1);
        if (r < 0)
                fputs("1 0\n", reply);
        else
                fprintf(reply, "0 %zu\n%s", out_len, out);
        _exit(fclose(reply) == 0 ? 0 : 1);
}

int main(int argc, char **argv) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t sa_len = sizeof(sa);
        FILE *portfile;
        int s;

        if (argc != 2) {
                fprintf(stderr, "usage: busprop PORTFILE\n");
                return 2;
        }
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() == 1)
                return 1;
        signal(SIGCHLD, SIG_IGN); /* the kernel reaps the children */
        s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0 || bind(s, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(s, 64) < 0 ||
            getsockname(s, (struct sockaddr *) &sa, &sa_len) < 0) {
                perror("busprop: listening on 127.0.0.1");
                return 1;
        }
        portfile = fopen(argv[1], "we");
        if (!portfile || fprintf(portfile, "%u\n", ntohs(sa.sin_port)) < 0 ||
            fclose(portfile) != 0) {
                perror(argv[1]);
                return 1;
        }
        for (;;) {
                int fd = accept4(s, NULL, NULL, SOCK_CLOEXEC);
                pid_t pid;

                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        perror("busprop: accept");
                        return 1;
                }
                pid = fork();
                if (pid == 0) {
                        close(s);
                        serve(fd);
                }
                close(fd); /* a failed fork: the harness sees no answer and runs busctl */
        }
}
