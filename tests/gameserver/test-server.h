/* SPDX-License-Identifier: MIT */
/*
 * slotd-test-server's private declarations: the one struct server that
 * every part works on (only ever from the main thread), and each part's
 * entry points.  See slotd-test-server.c for what the program is.
 */
#pragma once

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

typedef uint64_t usec_t;

#define USEC_PER_SEC  1000000ULL
#define USEC_PER_MSEC 1000ULL

#define FILE_CHECK_USEC    (50 * USEC_PER_MSEC)
#define STATE_REFRESH_USEC (1 * USEC_PER_SEC)
/* An unterminated last line is applied only once the file has been still this long. */
#define CONTROL_TAIL_USEC  (100 * USEC_PER_MSEC)
#define CONTROL_MAX_BYTES  (64 * 1024)
#define JSON_MAX_BYTES     (64 * 1024)

#define BURN_PERIOD_USEC  (10 * USEC_PER_MSEC)
#define BURN_MAX_CORES    1024.0
/* Pages are touched at most this much per loop turn so signals and queries stay answered. */
#define MEMORY_STEP_BYTES   (64ULL << 20)
#define MEMORY_REGION_BYTES (64ULL << 20)
#define MEMORY_RATE_MAX     (1ULL << 40)
#define CHILDREN_MAX      1024
#define PEERS_MAX         128
#define PACKET_MAX        1400
#define VALUE_MAX         256

#define STATE_NAME    "test-server.state"
#define STARTS_NAME   "test-server.starts"
#define CONTROL_NAME  "test-server.control"
#define AT_START_NAME "test-server.at-start"
#define JSON_NAME     "server.json"
#define SDK_PAYLOAD_NAME "sdk-payload"

#define SQP_CHUNK_SERVER_INFO 0x01

enum {
        SJ_SERVER_ID,
        SJ_ALLOCATED_UUID,
        SJ_MACHINE_ID,
        SJ_FLEET_ID,
        SJ_IP,
        SJ_IPV6,
        SJ_PORT,
        SJ_QUERY_PORT,
        SJ_QUERY_TYPE,
        SJ_SERVER_LOG_DIR,
        _SJ_MAX,
};


struct server_json {
        bool present[_SJ_MAX];
        char value[_SJ_MAX][VALUE_MAX];
};

/* Enough of a stat result to notice a rewrite without reading the file. */
struct file_stamp {
        bool exists;
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtim;
        struct timespec ctim;
};

struct memory_region {
        uint8_t *base;
        size_t size;
        size_t used;
};

/* A query client (ip:port) and the challenges it was given, as the SDK's QueryBase keeps
 * them: one per address, until the query that takes it or a purge after it expired. */
struct peer {
        bool in_use;
        struct sockaddr_in addr;
        usec_t last_used;
        bool has_sqp;
        uint32_t sqp_challenge;
        usec_t sqp_expiry;
        bool has_a2s;
        uint8_t a2s_challenge[4];
        usec_t a2s_expiry;
};

/* What the query port answers: both (the plain mode), or as an SDK server only the
 * protocol of server.json's queryType (its switchQueryProtocol). */
enum query_protocol {
        QUERY_PROTOCOL_BOTH,
        QUERY_PROTOCOL_SQP,
        QUERY_PROTOCOL_A2S,
};

/* --sdk: behave like a game server built on a Unity Multiplay SDK (test-server-sdk.c). */
struct sdk_settings {
        bool enabled;
        bool file_control;          /* --sdk-file-control: still obey the control files */
        uint64_t hold_sec;          /* --sdk-hold: ask the proxy to hold the server */
        uint64_t session_sec;       /* --sdk-session: end the session this long after allocation */
        /* --sdk-recovering-client: keep hearing events after a resubscription, as clients
         * such as centrifuge-js do; Unity's Go SDK v0.5.4 goes deaf (test-server-sdk-ws.c). */
        bool recovering_client;
};

/* What the SDK thread last reported; the main thread keeps a copy for the state file. */
struct sdk_status {
        char phase[32];             /* starting, connecting, connected, subscribed, ... */
        char proxy[VALUE_MAX];      /* localProxyUrl as used */
        char allocation[VALUE_MAX]; /* the allocation being served, "" when none */
        unsigned connects;          /* Centrifuge connect replies received */
        unsigned allocations;       /* allocations acted on */
        bool ready;                 /* PATCH ready:true answered 204, and not undone since */
        uint64_t offset;            /* the last publication offset seen */
        int hold_status;            /* HTTP status of the hold, 0 when none */
        int payload_status;         /* HTTP status of the last payload fetch, 0 when none */
        bool session_over;          /* --sdk-session ran out and the server unreadied */
        bool deaf;                  /* resubscribed: publications are never handled again */
};

struct sdk;

struct server {
        usec_t start_monotonic;
        usec_t start_realtime;
        char *argv_joined;

        char home[PATH_MAX];
        char state_path[PATH_MAX + 32];
        char starts_path[PATH_MAX + 32];
        char control_path[PATH_MAX + 32];
        char at_start_path[PATH_MAX + 32];
        char json_path[PATH_MAX + 32];

        /* Identity: command line, then environment, then server.json. */
        char server_id[VALUE_MAX];
        char allocated_uuid[VALUE_MAX];
        char server_log_dir[PATH_MAX];
        char notify_socket[sizeof(((struct sockaddr_un *) NULL)->sun_path) + 1];
        char build_id[VALUE_MAX];
        uint16_t port;
        uint16_t query_port;

        struct server_json json;
        bool json_valid;
        struct file_stamp json_stamp;
        struct file_stamp json_bad_stamp;
        unsigned json_seq;

        /* Behaviour. */
        bool query_enabled;
        enum query_protocol query_protocol;
        bool a2s_challenge;
        bool ready;
        bool ready_wanted;
        usec_t ready_delay;
        usec_t ready_at;
        bool watchdog_enabled;
        usec_t watchdog_usec;
        usec_t watchdog_next;
        char status[VALUE_MAX];
        unsigned players;
        unsigned max_players;
        char map[VALUE_MAX];
        char name[VALUE_MAX];
        bool ignore_term;
        bool core_dump;
        int crash_signal;
        usec_t crash_at;
        int exit_code;
        usec_t exit_at;
        double burn_cores;
        pthread_t *burners;
        size_t n_burners;

        struct memory_region *regions;
        size_t n_regions;
        uint64_t memory_bytes;
        uint64_t memory_pending;
        uint64_t leak_rate;
        uint64_t leak_carry;
        usec_t leak_last;
        bool memory_error_shown;

        pid_t children[CHILDREN_MAX];
        size_t n_children;

        /* File descriptors. */
        int query_fd;
        int notify_fd;
        int signal_fd;
        int inotify_fd;
        struct sockaddr_un notify_addr;
        socklen_t notify_addr_len;
        bool notify_error_shown;
        bool state_error_shown;

        /* Control file. */
        char *control_applied;
        size_t control_applied_len;
        struct file_stamp control_stamp;
        usec_t control_stamp_since;
        unsigned control_seq;

        struct peer peers[PEERS_MAX];
        uint64_t queries_answered;
        uint64_t queries_dropped;
        uint64_t watchdogs_sent;

        char cgroup[PATH_MAX];
        bool state_dirty;
        bool counters_dirty;
        usec_t state_written_at;
        usec_t next_file_check;
        usec_t file_check_usec;     /* the stat backstop's period (--file-check) */
        usec_t next_refresh;
        bool control_event;
        bool json_event;
        /* False in SDK mode without --sdk-file-control: no at-start or control file. */
        bool control_enabled;

        struct sdk_settings sdk;
        struct sdk *sdk_client;     /* owned by the SDK thread once it runs */
        int sdk_fd;                 /* readable when the SDK thread has news */
        struct sdk_status sdk_status;
};

enum json_read {
        JSON_IF_STAMP_CHANGED,
        /*
         * Timestamps tick by the jiffy: two same-size rewrites within one
         * tick look alike, so after an inotify event the content decides.
         */
        JSON_IF_CONTENT_CHANGED,
        JSON_ALWAYS,
};

extern const char *const server_json_keys[_SJ_MAX];

/* test-server-base.c: leaves that know nothing of struct server. */
void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
usec_t now_usec(clockid_t clock);
void copy_string(char *dst, size_t size, const char *src);
const char *signal_name(int sig);
int parse_uint(const char *s, uint64_t max, uint64_t *ret);
int parse_double(const char *s, double *ret);
int parse_size(const char *s, uint64_t *ret);
int parse_bool(const char *s, bool *ret);
int parse_signal(const char *s, int *ret);
int parse_msec(const char *s, usec_t *ret);
int read_file(const char *path, size_t max, char **ret, size_t *ret_len);
int write_all(int fd, const char *buf, size_t len);
void file_stamp_get(const char *path, struct file_stamp *ret);
bool file_stamp_equal(const struct file_stamp *a, const struct file_stamp *b);

/* test-server-config.c */
void json_check(struct server *s, enum json_read how);

/* test-server-notify.c */
int notify_open(struct server *s);
bool notify_send(struct server *s, const char *msg);
void ready_set(struct server *s, bool ready);
void watchdog_ping(struct server *s, usec_t now);
void watchdog_from_env(struct server *s);

/* test-server-misbehave.c */
void memory_free(struct server *s);
void memory_step(struct server *s, usec_t now);
int burn_start(struct server *s, double cores);
int child_spawn(struct server *s);
void children_reap(struct server *s);
void __attribute__((noreturn)) die_by_signal(int sig);
void __attribute__((noreturn)) exit_with(int code, const char *why);

/* test-server-commands.c */
int command_run_line(struct server *s, const char *line, const char *origin);
void command_run_text(struct server *s, const char *text, size_t len, const char *origin);
void control_check(struct server *s, usec_t now, bool baseline, bool reread);

/* test-server-query.c */
const char *server_name(struct server *s, char *buf, size_t size);
void query_handle(struct server *s);
int query_open(struct server *s);

/* test-server-state.c */
void cgroup_read(char *buf, size_t size);
int host_pid(void);
void state_write(struct server *s, usec_t now);
void starts_append(struct server *s);

/* test-server-loop.c */
void __attribute__((noreturn)) main_loop(struct server *s);
int signals_open(void);
void inotify_open(struct server *s);

/*
 * test-server-sdk.c in slotd-test-server-sdk; test-server-sdk-none.c in the
 * plain binary, which keeps its footprint small by executing the SDK binary
 * instead (sdk_reexec() returns only where the SDK is built in).
 */
void sdk_reexec(char **argv);
int sdk_init(struct server *s);
int sdk_start(struct server *s);
void sdk_handle(struct server *s);
int sdk_ready_request(struct server *s, bool ready);
bool sdk_config_reread(struct server *s, const char *buf, size_t len, bool report);
