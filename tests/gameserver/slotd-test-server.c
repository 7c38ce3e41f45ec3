/* SPDX-License-Identifier: MIT */
/*
 * slotd-test-server: the fake game server behind the demo and every
 * integration test.  It reads server.json the way a Unity Multiplay server
 * does, answers SQP and A2S_INFO queries, speaks sd_notify, and misbehaves
 * on request (CPU, memory, crashes, exit codes, ignored SIGTERM, stray
 * children) so that each of the supervisor's checks can be driven from a
 * test.  What it did is recorded in $HOME/test-server.state.  With --sdk it
 * behaves like a Unity Multiplay SDK server instead (test-server-sdk.c).
 *
 * Deliberately self-contained: it runs as nobody from an unknown working
 * directory and must not depend on anything the project builds.  This file
 * holds the start-up; test-server.h lists the parts.
 */

#include "test-server.h"

/* ---- start-up ---- */

static void usage(void)
{
        fputs("Usage: slotd-test-server [OPTION...]\n"
              "\n"
              "Fake dedicated game server for slotd's tests. Reads $HOME/server.json,\n"
              "answers SQP and A2S_INFO on the query port, speaks sd_notify, and\n"
              "misbehaves on request. State: $HOME/" STATE_NAME ".\n"
              "Run-time commands: $HOME/" CONTROL_NAME " (changes only) and\n"
              "$HOME/" AT_START_NAME " (applied at every start).\n"
              "Unknown options are ignored, so Unity-style arguments pass through.\n"
              "\n"
              "Identity (command line > environment > server.json):\n"
              "  --home DIR               home directory ($HOME)\n"
              "  --server-id ID           ($SERVER_ID)\n"
              "  --port N                 game port ($PORT)\n"
              "  --query-port N           UDP query port ($QUERY_PORT)\n"
              "  --allocation-uuid UUID   if server.json is unreadable ($ALLOCATION_UUID)\n"
              "  --server-log-dir DIR     ($SERVER_LOG_DIR)\n"
              "  --notify-socket PATH     sd_notify socket, \"@name\" = abstract ($NOTIFY_SOCKET)\n"
              "  --build-id ID            SQP build id ($BUILD_ID, else \"dev\")\n"
              "\n"
              "Queries and readiness:\n"
              "  --no-query               keep the query socket but answer nothing\n"
              "  --a2s-challenge          A2S_INFO demands the S2C_CHALLENGE round\n"
              "  --no-ready               never send READY=1 by itself\n"
              "  --ready-delay MS         send READY=1 this long after start\n"
              "  --file-check MS          stat server.json and the control file this often\n"
              "                           besides inotify (default 50; a bench of a\n"
              "                           thousand servers sets 1000)\n"
              "  --watchdog-usec USEC     send WATCHDOG=1 this often (default: half of\n"
              "                           $WATCHDOG_USEC, else never)\n"
              "  --status TEXT            send STATUS=TEXT at start\n"
              "  --players N  --max-players N  --map NAME  --name NAME\n"
              "                           query answers (0, 16, test-map, slotd-test-<serverID>)\n"
              "\n"
              "Misbehaviour:\n"
              "  --burn-cpu CORES         keep CORES cores busy (e.g. 1.5)\n"
              "  --grow-memory SIZE       allocate and touch SIZE more (K/M/G/T)\n"
              "  --grow-memory-rate SIZE  leak SIZE per second, without end\n"
              "  --crash-after MS         die by the crash signal after MS\n"
              "  --crash-signal SIG       signal for --crash-after (default SIGABRT)\n"
              "  --exit-after MS          exit after MS ...\n"
              "  --exit-code N            ... with this code (default 0)\n"
              "  --ignore-term            survive SIGTERM\n"
              "  --fork N                 fork N children that sleep forever\n"
              "  --core-dump              keep RLIMIT_CORE (default: set to 0)\n"
              "  --help                   this text\n"
              "\n"
              "Unity Multiplay SDK mode (runs slotd-test-server-sdk from the same directory):\n"
              "  --sdk                    talk to the local proxy at server.json's\n"
              "                           localProxyUrl like an SDK server; no sd_notify,\n"
              "                           no control files\n"
              "  --sdk-file-control       obey the control files all the same\n"
              "  --sdk-hold SECONDS       hold the server for SECONDS at start\n"
              "  --sdk-session SECONDS    unready and exit 0 this long after allocation\n"
              "  --sdk-recovering-client  keep hearing events after a resubscription, as\n"
              "                           centrifuge-js does (Unity's Go SDK v0.5.4 goes deaf)\n"
              "\n"
              "Commands (control files; one per line, '#' comments):\n"
              "  burn-cpu CORES | grow-memory SIZE | grow-memory-rate SIZE | free-memory\n"
              "  query on|off | a2s-challenge on|off | ready 0|1 | watchdog on|off\n"
              "  watchdog-usec USEC | status TEXT | notify TEXT (\\n separates lines)\n"
              "  crash [SIG] | crash-after MS [SIG] | exit [CODE] | exit-after MS [CODE]\n"
              "  ignore-term on|off | fork N | kill-children\n"
              "  players N | max-players N | map NAME | name NAME\n"
              "Signals: SIGTERM exits 0 (unless ignore-term); SIGHUP re-reads server.json\n"
              "and the control file.\n",
              stdout);
}

enum {
        OPT_HOME = 256,
        OPT_SERVER_ID,
        OPT_PORT,
        OPT_QUERY_PORT,
        OPT_ALLOCATION_UUID,
        OPT_SERVER_LOG_DIR,
        OPT_NOTIFY_SOCKET,
        OPT_BUILD_ID,
        OPT_NO_READY,
        OPT_READY_DELAY,
        OPT_FILE_CHECK,
        OPT_CRASH_SIGNAL,
        OPT_EXIT_CODE,
        OPT_CORE_DUMP,
        OPT_NO_QUERY,
        OPT_A2S_CHALLENGE,
        OPT_IGNORE_TERM,
        OPT_SDK,
        OPT_SDK_FILE_CONTROL,
        OPT_SDK_HOLD,
        OPT_SDK_SESSION,
        OPT_SDK_RECOVERING_CLIENT,
        OPT_COMMAND,
};

static const struct option longopts[] = {
        { "help", no_argument, NULL, 'h' },
        { "home", required_argument, NULL, OPT_HOME },
        { "server-id", required_argument, NULL, OPT_SERVER_ID },
        { "port", required_argument, NULL, OPT_PORT },
        { "query-port", required_argument, NULL, OPT_QUERY_PORT },
        { "allocation-uuid", required_argument, NULL, OPT_ALLOCATION_UUID },
        { "server-log-dir", required_argument, NULL, OPT_SERVER_LOG_DIR },
        { "notify-socket", required_argument, NULL, OPT_NOTIFY_SOCKET },
        { "build-id", required_argument, NULL, OPT_BUILD_ID },
        { "no-ready", no_argument, NULL, OPT_NO_READY },
        { "ready-delay", required_argument, NULL, OPT_READY_DELAY },
        { "file-check", required_argument, NULL, OPT_FILE_CHECK },
        { "crash-signal", required_argument, NULL, OPT_CRASH_SIGNAL },
        { "exit-code", required_argument, NULL, OPT_EXIT_CODE },
        { "core-dump", no_argument, NULL, OPT_CORE_DUMP },
        { "no-query", no_argument, NULL, OPT_NO_QUERY },
        { "a2s-challenge", no_argument, NULL, OPT_A2S_CHALLENGE },
        { "sdk", no_argument, NULL, OPT_SDK },
        { "sdk-file-control", no_argument, NULL, OPT_SDK_FILE_CONTROL },
        { "sdk-hold", required_argument, NULL, OPT_SDK_HOLD },
        { "sdk-session", required_argument, NULL, OPT_SDK_SESSION },
        { "sdk-recovering-client", no_argument, NULL, OPT_SDK_RECOVERING_CLIENT },
        /* Named like a command: queued as "name argument" and run after start-up. */
        { "watchdog-usec", required_argument, NULL, OPT_COMMAND },
        { "status", required_argument, NULL, OPT_COMMAND },
        { "players", required_argument, NULL, OPT_COMMAND },
        { "max-players", required_argument, NULL, OPT_COMMAND },
        { "map", required_argument, NULL, OPT_COMMAND },
        { "name", required_argument, NULL, OPT_COMMAND },
        { "burn-cpu", required_argument, NULL, OPT_COMMAND },
        { "grow-memory", required_argument, NULL, OPT_COMMAND },
        { "grow-memory-rate", required_argument, NULL, OPT_COMMAND },
        { "crash-after", required_argument, NULL, OPT_COMMAND },
        { "exit-after", required_argument, NULL, OPT_COMMAND },
        { "ignore-term", no_argument, NULL, OPT_IGNORE_TERM },
        { "fork", required_argument, NULL, OPT_COMMAND },
        {}
};

struct options {
        const char *home;
        const char *server_id;
        const char *port;
        const char *query_port;
        const char *allocation_uuid;
        const char *server_log_dir;
        const char *notify_socket;
        const char *build_id;
        char **lines;
        size_t n_lines;
        /* Reported only once the SDK binary has taken over, so that nothing is said twice. */
        const char **ignored;
        size_t n_ignored;
};

static void options_report_ignored(const struct options *o)
{
        for (size_t i = 0; i < o->n_ignored; i++)
                fprintf(stderr, "slotd-test-server: ignoring argument \"%s\"\n", o->ignored[i]);
}

static void __attribute__((noreturn)) usage_error(const struct options *o, const char *what,
                                                  const char *arg)
{
        options_report_ignored(o);
        fprintf(stderr, "slotd-test-server: invalid %s \"%s\"\n", what, arg);
        exit(2);
}

static void option_seconds(const struct options *o, const char *what, const char *arg,
                           uint64_t *ret)
{
        if (parse_uint(arg, UINT32_MAX, ret) < 0 || *ret == 0)
                usage_error(o, what, arg);
}

/* Options that set a value; the others are flags or queued commands (options_parse). */
static bool option_set(struct server *s, struct options *o, int c, const char *arg)
{
        uint64_t v;

        switch (c) {
        case OPT_HOME:
                o->home = arg;
                break;
        case OPT_SERVER_ID:
                o->server_id = arg;
                break;
        case OPT_PORT:
                o->port = arg;
                break;
        case OPT_QUERY_PORT:
                o->query_port = arg;
                break;
        case OPT_ALLOCATION_UUID:
                o->allocation_uuid = arg;
                break;
        case OPT_SERVER_LOG_DIR:
                o->server_log_dir = arg;
                break;
        case OPT_NOTIFY_SOCKET:
                o->notify_socket = arg;
                break;
        case OPT_BUILD_ID:
                o->build_id = arg;
                break;
        case OPT_READY_DELAY:
                if (parse_msec(arg, &s->ready_delay) < 0)
                        usage_error(o, "--ready-delay", arg);
                break;
        case OPT_FILE_CHECK:
                if (parse_msec(arg, &s->file_check_usec) < 0 || s->file_check_usec == 0)
                        usage_error(o, "--file-check", arg);
                break;
        case OPT_CRASH_SIGNAL:
                if (parse_signal(arg, &s->crash_signal) < 0)
                        usage_error(o, "--crash-signal", arg);
                break;
        case OPT_EXIT_CODE:
                if (parse_uint(arg, 255, &v) < 0)
                        usage_error(o, "--exit-code", arg);
                s->exit_code = (int) v;
                break;
        case OPT_SDK_HOLD:
                option_seconds(o, "--sdk-hold", arg, &s->sdk.hold_sec);
                break;
        case OPT_SDK_SESSION:
                option_seconds(o, "--sdk-session", arg, &s->sdk.session_sec);
                break;
        default:
                return false;
        }
        return true;
}

/* Flags are set before any option command runs: "--fork 2 --ignore-term" works. */
static bool option_flag(struct server *s, int c)
{
        switch (c) {
        case OPT_NO_READY:
                s->ready_wanted = false;
                break;
        case OPT_CORE_DUMP:
                s->core_dump = true;
                break;
        case OPT_NO_QUERY:
                s->query_enabled = false;
                break;
        case OPT_A2S_CHALLENGE:
                s->a2s_challenge = true;
                break;
        case OPT_IGNORE_TERM:
                s->ignore_term = true;
                break;
        case OPT_SDK:
                s->sdk.enabled = true;
                break;
        case OPT_SDK_FILE_CONTROL:
                s->sdk.file_control = true;
                break;
        case OPT_SDK_RECOVERING_CLIENT:
                s->sdk.recovering_client = true;
                break;
        default:
                return false;
        }
        return true;
}

static void options_parse(struct server *s, struct options *o, int argc, char **argv)
{
        int c, idx;

        o->lines = calloc((size_t) argc + 1, sizeof(char *));
        o->ignored = calloc((size_t) argc + 1, sizeof(char *));
        if (!o->lines || !o->ignored)
                usage_error(o, "memory", "out of memory");

        /*
         * Long options also match with one dash ("-port 7777"), as Unity
         * servers take them, and anything unknown is passed over: a fleet's
         * arguments are written for real game servers.
         */
        opterr = 0;
        while ((c = getopt_long_only(argc, argv, "h", longopts, &idx)) != -1) {
                if (c == 'h') {
                        usage();
                        exit(0);
                }
                if (option_set(s, o, c, optarg) || option_flag(s, c))
                        continue;
                if (c == OPT_COMMAND) {
                        if (asprintf(&o->lines[o->n_lines], "%s %s", longopts[idx].name,
                                     optarg) < 0)
                                usage_error(o, "memory", "out of memory");
                        o->n_lines++;
                } else
                        o->ignored[o->n_ignored++] = argv[optind - 1];
        }
        for (int i = optind; i < argc; i++)
                o->ignored[o->n_ignored++] = argv[i];
}

static const char *pick(const char *option, const char *env, const char *json)
{
        if (option)
                return option;
        if (env && getenv(env))
                return getenv(env);
        return json;
}

static uint16_t pick_port(const char *what, const char *value)
{
        uint64_t v;

        if (!value || *value == '\0')
                return 0;
        if (parse_uint(value, UINT16_MAX, &v) < 0) {
                log_line("invalid %s \"%s\", ignoring", what, value);
                return 0;
        }
        return (uint16_t) v;
}

static void paths_init(struct server *s, const char *home)
{
        copy_string(s->home, sizeof(s->home), home);
        snprintf(s->state_path, sizeof(s->state_path), "%s/%s", s->home, STATE_NAME);
        snprintf(s->starts_path, sizeof(s->starts_path), "%s/%s", s->home, STARTS_NAME);
        snprintf(s->control_path, sizeof(s->control_path), "%s/%s", s->home, CONTROL_NAME);
        snprintf(s->at_start_path, sizeof(s->at_start_path), "%s/%s", s->home, AT_START_NAME);
        snprintf(s->json_path, sizeof(s->json_path), "%s/%s", s->home, JSON_NAME);
}

static char *argv_join(int argc, char **argv)
{
        size_t len = 1;
        char *buf;

        for (int i = 0; i < argc; i++)
                len += strlen(argv[i]) + 1;
        buf = calloc(1, len);
        if (!buf)
                return NULL;
        for (int i = 0; i < argc; i++) {
                if (i > 0)
                        strcat(buf, " ");
                strcat(buf, argv[i]);
        }
        return buf;
}

static void identity_init(struct server *s, const struct options *o)
{
        const char *v;

        json_check(s, JSON_ALWAYS);
        if (!s->json_valid)
                copy_string(s->allocated_uuid, sizeof(s->allocated_uuid),
                            pick(o->allocation_uuid, "ALLOCATION_UUID", ""));

        v = pick(o->server_id, "SERVER_ID", s->json.value[SJ_SERVER_ID]);
        copy_string(s->server_id, sizeof(s->server_id), v);
        s->port = pick_port("port", pick(o->port, "PORT", s->json.value[SJ_PORT]));
        s->query_port = pick_port("query port", pick(o->query_port, "QUERY_PORT",
                                                     s->json.value[SJ_QUERY_PORT]));
        v = pick(o->server_log_dir, "SERVER_LOG_DIR", s->json.value[SJ_SERVER_LOG_DIR]);
        copy_string(s->server_log_dir, sizeof(s->server_log_dir), v);
        v = pick(o->notify_socket, "NOTIFY_SOCKET", "");
        copy_string(s->notify_socket, sizeof(s->notify_socket), v);
        v = pick(o->build_id, "BUILD_ID", "dev");
        copy_string(s->build_id, sizeof(s->build_id), v);
}

/* Options first, then the at-start file, which may override them per slot. */
static int start_commands_run(struct server *s, const struct options *o)
{
        size_t len;
        char *text;
        int r;

        for (size_t i = 0; i < o->n_lines; i++) {
                r = command_run_line(s, o->lines[i], "option");
                if (r < 0)
                        return r;
        }
        if (!s->control_enabled)
                return 0;
        if (read_file(s->at_start_path, CONTROL_MAX_BYTES, &text, &len) == 0) {
                command_run_text(s, text, len, AT_START_NAME);
                free(text);
        }
        return 0;
}

/* A dumped core of a grown heap would make every crash test slow. */
static void core_dump_limit(const struct server *s)
{
        struct rlimit rl;

        if (s->core_dump || getrlimit(RLIMIT_CORE, &rl) < 0)
                return;
        rl.rlim_cur = 0;
        (void) setrlimit(RLIMIT_CORE, &rl);
}

/* A game server built on a Multiplay SDK has never heard of sd_notify. */
static void sd_notify_start(struct server *s)
{
        int r;

        if (s->sdk.enabled) {
                if (s->notify_socket[0] != '\0')
                        log_line("sdk: not speaking sd_notify, %s unused", s->notify_socket);
                return;
        }
        r = notify_open(s);
        if (r < 0)
                log_line("notify: cannot use \"%s\": %s", s->notify_socket, strerror(-r));
        watchdog_from_env(s);
}

static void query_start(struct server *s)
{
        int r;

        if (s->query_port == 0) {
                log_line("no query port, not answering queries");
                return;
        }
        r = query_open(s);
        if (r < 0)
                log_line("cannot bind UDP 0.0.0.0:%u: %s, not answering queries", s->query_port,
                         strerror(-r));
}

/* Everything up to the start commands: files, limits, signals, identity, sockets. */
static int start_up(struct server *s, const struct options *o)
{
        const char *home = o->home ? o->home : getenv("HOME");

        if (!home || *home == '\0')
                home = ".";
        paths_init(s, home);
        starts_append(s);
        core_dump_limit(s);

        s->signal_fd = signals_open();
        if (s->signal_fd < 0) {
                log_line("cannot set up signals: %s", strerror(errno));
                return -errno;
        }

        identity_init(s, o);
        log_line("start pid=%d serverID=%s port=%u queryPort=%u allocatedUUID=%s",
                 host_pid(), s->server_id, s->port, s->query_port, s->allocated_uuid);
        if (s->sdk.enabled && sdk_init(s) < 0)
                return -EINVAL;
        sd_notify_start(s);
        query_start(s);
        inotify_open(s);
        return 0;
}

int main(int argc, char **argv)
{
        struct server s = {
                .query_fd = -1,
                .notify_fd = -1,
                .signal_fd = -1,
                .inotify_fd = -1,
                .sdk_fd = -1,
                .file_check_usec = FILE_CHECK_USEC,
                .query_enabled = true,
                .ready_wanted = true,
                .control_enabled = true,
                .crash_signal = SIGABRT,
                .max_players = 16,
                .map = "test-map",
        };
        struct options o = {};
        usec_t now;

        /* First, so restart latency is measured from as close to exec as we can get. */
        s.start_monotonic = now_usec(CLOCK_MONOTONIC);
        s.start_realtime = now_usec(CLOCK_REALTIME);
        setvbuf(stdout, NULL, _IOLBF, 0);

        s.argv_joined = argv_join(argc, argv);
        if (!s.argv_joined)
                return 1;
        options_parse(&s, &o, argc, argv);
        if (s.sdk.enabled) {
                sdk_reexec(argv);
                /* Readiness is the allocation's, told to the proxy, never sd_notify's. */
                s.ready_wanted = false;
                s.control_enabled = s.sdk.file_control;
        }
        options_report_ignored(&o);
        if (start_up(&s, &o) < 0)
                return 1;

        now = now_usec(CLOCK_MONOTONIC);
        cgroup_read(s.cgroup, sizeof(s.cgroup));
        s.next_refresh = now + STATE_REFRESH_USEC;
        if (start_commands_run(&s, &o) < 0)
                return 2;
        /* What the control file already says belongs to an earlier run. */
        if (s.control_enabled)
                control_check(&s, now, true, true);

        if (s.ready_wanted) {
                if (s.ready_delay > 0)
                        s.ready_at = now + s.ready_delay;
                else
                        ready_set(&s, true);
        }
        s.next_file_check = now + s.file_check_usec;
        state_write(&s, now);
        if (s.sdk.enabled && sdk_start(&s) < 0)
                return 1;
        main_loop(&s);
}
