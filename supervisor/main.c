/* SPDX-License-Identifier: MIT */
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "config.h"
#include "exec-check.h"
#include "exec-check.h"
#include "fileio.h"
#include "log.h"
#include "bus-door.h"
#include "manager.h"
#include "manager-hooks.h"
#include "proxy-door.h"
#include "spawn.h"
#include "slotd-config.h"
#include "strv.h"

static const char *arg_config = SLOTD_SYSCONFDIR "/slotd.ini";
static bool arg_config_given;   /* --config: a path that must exist */
static char *arg_fleets;
static const char *arg_bus;
static bool arg_check;

static void help(void) {
        printf("slotd " SLOTD_VERSION " - supervisor for dedicated game server slots\n\n"
               "Usage: slotd [OPTIONS]\n\n"
               "  -c --config FILE   slotd.ini to read (default " SLOTD_SYSCONFDIR "/slotd.ini)\n"
               "  -f --fleets DIR    fleet files (default: fleets.d beside the config file)\n"
               "  -b --bus BUS       'system', 'session' or a D-Bus address (overrides "
               "supervisor.bus)\n"
               "  -t --check         validate the configuration, print the plan, start nothing\n"
               "  -h --help          show this help\n"
               "     --version       show the version\n");
}

static int parse_argv(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100 };
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },
                { "fleets", required_argument, NULL, 'f' },
                { "bus", required_argument, NULL, 'b' },
                { "check", no_argument, NULL, 't' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "c:f:b:th", options, NULL)) >= 0)
                switch (c) {
                case 'c':
                        arg_config = optarg;
                        arg_config_given = true;
                        break;
                case 'f':
                        free(arg_fleets);
                        arg_fleets = strdup(optarg);
                        if (!arg_fleets)
                                return log_oom();
                        break;
                case 'b':
                        arg_bus = optarg;
                        break;
                case 't':
                        arg_check = true;
                        break;
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("slotd " SLOTD_VERSION "\n");
                        return 0;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                log_error("Unexpected argument '%s'; see --help", argv[optind]);
                return -EINVAL;
        }
        if (!arg_fleets) {
                const char *slash = strrchr(arg_config, '/');
                if (asprintf(&arg_fleets, "%.*sfleets.d", slash ? (int) (slash - arg_config + 1) : 0,
                             arg_config) < 0)
                        return log_oom();
        }
        return 1;
}

static void format_size(uint64_t v, char buf[static 32]) {
        static const char units[] = "KMGT";
        double d = (double) v;
        int u = -1;

        while (d >= 1024.0 && u < 3) {
                d /= 1024.0;
                u++;
        }
        if (u < 0)
                snprintf(buf, 32, "%llu", (unsigned long long) v);
        else
                snprintf(buf, 32, "%.4g%c", d, units[u]);
}

/* One build as the fleet's user would start it: false, with one line saying what stops it,
 * when it cannot be executed. */
static bool check_build(const FleetConfig *f, const char *bc_id, const char *path,
                        const ExecIdentity *id, bool *warned) {
        _cleanup_free_ ExecFinding *finding = new0(ExecFinding, 1);
        char why[EXEC_PATH_MAX + 512], name[16];
        bool as_user = false;
        int r;

        if (!finding) {
                log_oom();
                return false;
        }
        r = exec_check(path, id, finding, &as_user);
        if (r < 0) {
                log_error_errno(r, "fleet %s%s%s: cannot check the build %s: %m", f->name,
                                bc_id ? ", build configuration " : "", strempty(bc_id), path);
                return false;
        }
        if (!as_user && !*warned) {
                log_notice("Not running as root: builds are judged from their file modes only "
                           "(ACLs and security modules unseen)");
                *warned = true;
        }
        if (finding->problem == EXEC_OK)
                return true;
        exec_describe(finding, id, why, sizeof(why));
        log_error("fleet %s%s%s: user %s (uid %u) cannot execute %s: %s [%s]", f->name,
                  bc_id ? ", build configuration " : "", strempty(bc_id), id->user,
                  (unsigned) id->uid, path, why, exec_errno_name(finding->error, name));
        return false;
}

static bool runs_at_all(const char *path) {
        struct stat st;

        return path && stat(path, &st) >= 0 && S_ISREG(st.st_mode) && access(path, X_OK) >= 0;
}

/* Every build of every fleet (SPEC §2): the number that cannot be executed. With 'told', a
 * build that cannot run at all (missing, not a regular file, no execute bit) was told by the
 * configuration's own checks (config_load_for_check()) and is not told again. */
static unsigned check_builds(const Config *c, bool told) {
        bool warned = false;
        unsigned bad = 0;

        for (size_t i = 0; i < c->n_fleets; i++) {
                const FleetConfig *f = &c->fleets[i];
                _cleanup_free_ char *error = NULL;
                ExecIdentity id = { .user = f->user };
                int r = resolve_identity(f, &id.uid, &id.gid, &error);

                if (r < 0) {
                        log_error("%s", error ?: "Failed to resolve a fleet's user");
                        bad++;
                        continue;
                }
                for (size_t j = 0; j < f->n_build_configs; j++) {
                        const BuildConfig *bc = &f->build_configs[j];
                        bool seen = told && !runs_at_all(bc->build);

                        for (size_t k = 0; k < j; k++)
                                seen = seen || streq(f->build_configs[k].build, bc->build);
                        if (!seen && !check_build(f, f->n_build_configs > 1 ? bc->id : NULL,
                                                  bc->build, &id, &warned))
                                bad++;
                }
        }
        return bad;
}

static void print_fleet_layer(const FleetLayerConfig *f) {
        if (!f->etcd_endpoints) {
                printf("fleet layer: off\n");
                return;
        }
        printf("fleet layer: etcd");
        STRV_FOREACH(e, f->etcd_endpoints)
                printf("%s%s", e == f->etcd_endpoints ? " " : ",", *e);
        printf(", prefix %s, lease_ttl %llus, registry as %s", f->prefix,
               (unsigned long long) (f->lease_ttl / USEC_PER_SEC), f->registry_user);
        if (f->etcd_ca || f->etcd_cert)
                printf("; TLS: CA %s, client certificate %s", f->etcd_ca ?: "(system store)",
                       f->etcd_cert ?: "none");
        printf("\n");
}

/* In a child, as slotd-registry: fleet.registry_user with its groups when we are root. */
static int check_fleet_files_as_registry(const FleetLayerConfig *f, const struct passwd *pw) {
        const char *paths[] = { f->etcd_ca, f->etcd_cert, f->etcd_key };
        static const char *const keys[] = { "fleet.etcd_ca", "fleet.etcd_cert", "fleet.etcd_key" };
        int bad = 0;

        if (pw && (initgroups(pw->pw_name, pw->pw_gid) < 0 ||
                   setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0 ||
                   setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0)) {
                log_error_errno(errno, "Failed to become user '%s' to check fleet.etcd_*: %m",
                                pw->pw_name);
                return 1;
        }
        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                if (check_file_readable(paths[i], keys[i]) < 0)
                        bad++;
        return bad;
}

/* [fleet]'s TLS files, opened as slotd-registry will (libcurl opens them as that user on each
 * connection to etcd): the number that cannot be read. */
static unsigned check_fleet_files(const FleetLayerConfig *f) {
        struct passwd *pw = NULL;
        int status;
        pid_t pid;

        if (!f->etcd_endpoints || (!f->etcd_ca && !f->etcd_cert))
                return 0;
        if (geteuid() == 0) {
                pw = getpwnam(f->registry_user);
                if (!pw) {
                        log_error("fleet.registry_user: no such user '%s': slotd-registry "
                                  "cannot start", f->registry_user);
                        return 1;
                }
        }
        pid = fork();
        if (pid < 0) {
                log_error_errno(errno, "Failed to fork to check fleet.etcd_*: %m");
                return 1;
        }
        if (pid == 0)
                _exit(check_fleet_files_as_registry(f, pw));
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
                return 1;
        return (unsigned) WEXITSTATUS(status);
}

static void print_fleet(const FleetConfig *f) {
        char a[32], b[32], h[32];

        format_size(f->usage_memory, a);
        format_size(f->memory_max, b);
        if (f->memory_high == UINT64_MAX)
                strcpy(h, "max");
        else
                format_size(f->memory_high, h);
        printf("fleet %s (%s): %u slots, %.4g cpus and %s memory each (memory.max %s, "
               "memory.high %s), ports %u-%u, query ports %u-%u, build %s\n",
               f->name, f->file, f->slots, f->usage_cpu, a, b, h, f->game_port_base,
               f->game_port_base + f->slots - 1, f->query_port_base,
               f->query_port_base + f->slots - 1, f->build);
        if (f->gsh_name)
                printf("  named '%s' in its .gsh file\n", f->gsh_name);
        printf("  readiness %s, region %s%s%s\n", readiness_source_to_string(f->readiness),
               f->region_id[0] ? f->region_id : "-",
               f->region_name[0] ? " " : "", f->region_name);
        for (size_t j = 0; j < f->n_build_configs; j++) {
                const BuildConfig *bc = &f->build_configs[j];
                printf("  build configuration %s%s%s%s%s: build %s, query %s, %zu variables\n",
                       bc->id, bc->gsh_name ? " ('" : "", strempty(bc->gsh_name),
                       bc->gsh_name ? "' in its .gsh file)" : "", j == 0 ? " (default)" : "",
                       bc->build, query_type_to_string(bc->query), bc->n_variables);
                if (f->n_regions == 0 && !f->ports_auto)
                        continue;
                /* A .gsh fleet's: what its file said, as slotd runs it. */
                printf("    args:");
                STRV_FOREACH(arg, bc->args)
                        printf(" %s", *arg);
                printf("\n");
                for (size_t k = 0; k < bc->n_variables; k++)
                        printf("    variable %s = %s\n", bc->variable_names[k],
                               bc->variable_values[k]);
        }
        if (f->usage_speed_mhz > 0 || f->usage_max_per_core > 0 || f->usage_max_per_machine > 0)
                printf("  usage settings: speed %u MHz, at most %u a core, at most %u a machine "
                       "(0 = no limit)\n", f->usage_speed_mhz, f->usage_max_per_core,
                       f->usage_max_per_machine);
        for (size_t k = 0; k < f->n_regions; k++)
                printf("  region %s: minAvailable %u, maxServers %u%s%s\n", f->regions[k].name,
                       f->regions[k].min_available, f->regions[k].max_servers,
                       f->regions[k].online ? "" : ", offline",
                       streq(f->regions[k].name, f->region_name) ? " (this machine's)" : "");
}

static void print_localproxy(const LocalProxyConfig *p) {
        if (!p->enabled) {
                printf("localproxy: off\n");
                return;
        }
        printf("localproxy: listen");
        for (size_t i = 0; i < p->n_listen; i++)
                printf(" %s", p->listen[i].text);
        printf(", payload_ttl %llus, as %s:%s\n",
               (unsigned long long) (p->payload_ttl / USEC_PER_SEC), p->user, p->group);
}

/* The controllers the slot tree can get: the nearest existing group's, 'root' itself or one
 * of its parents below 'mount'. */
static unsigned nearest_available_controllers(const char *mount, const char *root) {
        unsigned available = 0;

        for (char *p = strdup(root); p; ) {
                char *slash;
                if (access(p, F_OK) == 0) {
                        available = cg_available_controllers(p);
                        free(p);
                        break;
                }
                slash = strrchr(p, '/');
                if (!slash || slash == p || strlen(p) <= strlen(mount)) {
                        free(p);
                        break;
                }
                *slash = '\0';
        }
        return available;
}

static void print_cgroups(const Config *c) {
        _cleanup_free_ char *mount = NULL, *root = NULL, *scope = NULL;
        unsigned available;
        int r;

        r = manager_resolve_cgroup_root(c, false, &mount, &root, &scope);
        if (r < 0) {
                printf("cgroups: no cgroup v2 tree found (%s): slots cannot run here\n",
                       strerror(-r));
                return;
        }
        available = nearest_available_controllers(mount, root);
        printf("cgroups: slot tree %s", root);
        if (scope)
                printf(" (in the scope %s, made by slotd at start-up)", scope);
        printf("; enforceable:");
        for (int k = 0; k < _CGROUP_CONTROLLER_MAX; k++)
                printf(" %s=%s", cgroup_controller_to_string(k),
                       available & CGROUP_MASK(k) ? "yes" : "no");
        printf("\n");
}

/* What server.json's machineID and the fleet's documents will say of this machine. */
static int print_identity(const Config *c) {
        _cleanup_free_ char *id = NULL;
        const char *from;
        uint64_t number;

        if (manager_resolve_identity(c, &id, &number, &from) < 0)
                return log_oom();
        printf("machine ID %s, machine number %" PRIu64 " (%s)\n", id[0] ? id : "(none)", number,
               from);
        return 0;
}

/* Like nginx -t: what would run, and what this host can hold it to. */
static int print_plan(const Config *c, const MachineResources *res) {
        char a[32], b[32];
        int r;

        printf("configuration: %s%s, fleets from %s\n", c->config_file ?: arg_config,
               access(arg_config, F_OK) < 0 && errno == ENOENT ? " (absent: slotd's defaults)" : "",
               c->fleets_dir ?: arg_fleets);
        format_size(res->memory, a);
        format_size(c->reserved_memory, b);
        printf("machine: %.4g cpus (%.4g reserved), %s memory (%s reserved)\n", res->cpus,
               c->reserved_cpus, a, b);
        r = print_identity(c);
        if (r < 0)
                return r;
        for (size_t i = 0; i < c->n_fleets; i++)
                print_fleet(&c->fleets[i]);
        STRV_FOREACH(e, c->fleets_elsewhere)
                printf("%s\n", *e);
        print_localproxy(&c->localproxy);
        printf("metrics: %s\n", c->metrics_listen.text ?: "off");
        print_fleet_layer(&c->fleet);
        print_cgroups(c);
        return 0;
}

/* The binary's path now, so that Reexecute runs an upgraded binary put in its place, not the
 * deleted file /proc/self/exe would name. */
static char *exe_path(void) {
        char buf[4096];
        ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
        const char *suffix = " (deleted)";

        if (n <= 0)
                return NULL;
        buf[n] = '\0';
        if ((size_t) n > strlen(suffix) && streq(buf + n - strlen(suffix), suffix))
                buf[n - strlen(suffix)] = '\0';
        return strdup(buf);
}

/* The identities the configuration names beside the fleets' (check_builds()): the admin
 * group, and the local proxy's user and group when the proxy runs. The number unknown. */
static unsigned check_identities(const Config *c) {
        _cleanup_free_ char *error = NULL;
        const LocalProxyConfig *lp = &c->localproxy;
        unsigned bad = 0;
        bool has;
        gid_t gid;

        if (manager_resolve_admin_group(c, &gid, &has, &error) < 0) {
                log_error("%s", error ?: "supervisor.admin_group: no such group");
                bad++;
        }
        if (!(lp->enabled && lp->n_listen > 0) && c->metrics_listen.family == AF_UNSPEC)
                return bad;
        if (!getpwnam(lp->user)) {
                log_error("%s: localproxy.user: no such user '%s'", c->config_file ?: arg_config,
                          lp->user);
                bad++;
        }
        if (!getgrnam(lp->group)) {
                log_error("%s: localproxy.group: no such group '%s'",
                          c->config_file ?: arg_config, lp->group);
                bad++;
        }
        return bad;
}

/* --check: the plan, and every problem of it (builds the fleets' users cannot execute, names
 * of users and groups that do not exist, files slotd-registry cannot read); "ok" only when
 * there are none. With load_errors (already told) the configuration has no plan: what could
 * be read is checked all the same, so that one run tells every error. */
static int run_check(const Config *config, const MachineResources *detected,
                     unsigned load_errors) {
        MachineResources res = {
                .cpus = config->cpus > 0 ? config->cpus : detected->cpus,
                .memory = config->memory > 0 ? config->memory : detected->memory,
        };
        unsigned bad = check_builds(config, load_errors > 0);
        unsigned bad_files = check_fleet_files(&config->fleet);
        unsigned bad_ids = check_identities(config);
        int r = load_errors > 0 ? -EINVAL : print_plan(config, &res);
        _cleanup_free_ char *density = NULL;

        /* The density's arithmetic, fleet by fleet (it succeeded at load: the same again). */
        if (r >= 0 && density_format(config, detected, &density, NULL) >= 0)
                fputs(density, stdout);

        if (r < 0 && load_errors == 0)
                return r;
        if (bad_files > 0)
                log_error("slotd-registry cannot read %u of [fleet]'s TLS files (fleet.etcd_*)",
                          bad_files);
        if (bad > 0)
                log_error("%u build%s cannot be executed by %s fleet's user: slotd would "
                          "start no server of %s", bad, bad == 1 ? "" : "s",
                          bad == 1 ? "its" : "their", bad == 1 ? "it" : "them");
        if (load_errors + bad + bad_files + bad_ids > 0) {
                unsigned n = load_errors + bad + bad_files + bad_ids;

                log_error("%u error%s: the configuration is not ok", n, n == 1 ? "" : "s");
                return load_errors > 0 ? r : bad > 0 ? -ENOEXEC : bad_files > 0 ? -EACCES : -ESRCH;
        }
        printf("ok\n");
        return 0;
}

/* The signals our parent left ignored, from /proc/self/status's SigIgn: a handler does not
 * survive an exec, so these are the only dispositions to undo. One read rather than a
 * sigaction per signal (60 system calls before the first server's start; issue 24). */
static int ignored_signals(uint64_t *ret) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");
        char line[256];

        if (!f)
                return negative_errno();
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, "SigIgn:", 7) == 0) {
                        char *end;

                        errno = 0;
                        *ret = strtoull(line + 7, &end, 16);
                        return errno == 0 && end != line + 7 ? 0 : -EINVAL;
                }
        return -ENOENT;
}

static void setup_signals(void) {
        uint64_t ignored = UINT64_MAX; /* all, if /proc cannot say */
        sigset_t mask;

        /* sd-event takes these through signalfd and pidfds; they must never be delivered. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        /* Whatever our parent ignored (nohup's SIGHUP…) goes back to its default, so that
         * SIGPIPE is the one ignored signal a spawned child has to reset (spawn.c). */
        if (ignored_signals(&ignored) < 0)
                ignored = UINT64_MAX;
        for (int sig = 1; sig < _NSIG && sig <= 64; sig++)
                if ((ignored & (UINT64_C(1) << (sig - 1))) && sig != SIGKILL && sig != SIGSTOP &&
                    sig != SIGPIPE)
                        (void) sigaction(sig, &(struct sigaction){ .sa_handler = SIG_DFL }, NULL);
        signal(SIGPIPE, SIG_IGN);
}

/* The machine as detected, and the configuration that fits it. */
static int load_config(MachineResources *ret_detected, Config **ret_config, unsigned *ret_errors) {
        _cleanup_free_ char *error = NULL;
        int r;

        /* The default path may be absent (then every default); a path given must exist. */
        if (arg_config_given && access(arg_config, F_OK) < 0) {
                r = negative_errno();
                return log_error_errno(r, "%s (--config): %m", arg_config);
        }
        r = machine_resources_detect(ret_detected);
        if (r < 0)
                return log_error_errno(r, "Failed to read this machine's CPUs and memory: %m");
        r = arg_check ? config_load_for_check(arg_config, arg_fleets, ret_detected, ret_config, &error)
                      : config_load_full(arg_config, arg_fleets, ret_detected, ret_config, &error);
        if (r < 0) {
                log_error("%s", error ?: "Failed to load the configuration");
                /* One error a line (--check goes on with what could be read). */
                *ret_errors = 1;
                for (const char *p = error; p && (p = strchr(p, '\n')); p++)
                        ++*ret_errors;
                return r;
        }
        /* .gsh fleets of other regions: not an error, but no slot either (--check prints
         * them in its plan). */
        if (!arg_check)
                STRV_FOREACH(e, (*ret_config)->fleets_elsewhere)
                        log_notice("%s", *e);
        return 0;
}

static int open_keeper(Manager *m) {
        _cleanup_free_ char *exe = exe_path(), *keeper_path = NULL;
        int r;

        r = spawn_open_keeper(exe, &keeper_path);
        if (r < 0)
                return log_error_errno(r, "Cannot use %s, which holds every slot's server: %m",
                                       strempty(keeper_path));
        m->keeper_fd = r;
        return 0;
}

/* The doors over the core (manager-hooks.h): the D-Bus door (bus/), on the connection main()
 * opened early (bus_connect()), and the local proxy's (proxy/), each with its own state; the
 * core's hooks get them as their userdata, and each hook goes to its door. They outlive the
 * manager, which closes them as it goes. */
typedef struct Doors {
        BusEarly early;
        BusDoor bus;
        ProxyDoor proxy;
} Doors;

static Doors doors;

/* The bus opens first: the proxy's requests may answer over it. */
static int open_doors(Manager *m, void *userdata) {
        Doors *d = userdata;
        int r;

        d->bus.manager = d->proxy.manager = m;
        r = bus_door_setup(&d->bus, arg_bus ?: m->config->bus, &d->early);
        if (r < 0)
                return r;
        return proxy_door_open(&d->proxy);
}

static void close_doors(Manager *m, void *userdata) {
        Doors *d = userdata;

        proxy_door_close(&d->proxy);
        bus_door_done(&d->bus);
}

static void machine_changed(Manager *m, unsigned changes, void *userdata) {
        bus_door_machine_changed(m, changes, &((Doors *) userdata)->bus);
}

static void slot_changed(Manager *m, Slot *s, unsigned changes, void *userdata) {
        bus_door_slot_changed(m, s, changes, &((Doors *) userdata)->bus);
}

static void slot_crashed(Manager *m, Slot *s, const char *reason, void *userdata) {
        bus_door_slot_crashed(m, s, reason, &((Doors *) userdata)->bus);
}

static void slot_misbehaved(Manager *m, Slot *s, CheckKind check, unsigned strikes,
                            void *userdata) {
        bus_door_misbehaved(m, s, check, strikes, &((Doors *) userdata)->bus);
}

static void machine_fault(Manager *m, Fleet *f, CheckKind check, unsigned failing,
                          unsigned checked, void *userdata) {
        bus_door_machine_fault(m, f, check, failing, checked, &((Doors *) userdata)->bus);
}

static void event(Manager *m, const AllocEvent *e, void *userdata) {
        proxy_door_event(m, e, &((Doors *) userdata)->proxy);
}

static int metrics_listen(Manager *m, const ProxyListen *l, bool is_default, char **ret_error,
                          void *userdata) {
        return proxy_door_metrics_listen(&((Doors *) userdata)->proxy, l, is_default, ret_error);
}

static const ManagerHooks door_hooks = {
        .open_doors = open_doors,
        .close_doors = close_doors,
        .machine_changed = machine_changed,
        .slot_changed = slot_changed,
        .slot_crashed = slot_crashed,
        .slot_misbehaved = slot_misbehaved,
        .machine_fault = machine_fault,
        .event = event,
        .metrics_listen = metrics_listen,
};

/* Returns only if the exec failed. */
static int reexecute(Manager *m, char *argv[]) {
        _cleanup_free_ char *exe = exe_path();

        /* Child sources are freed without killing: the keepers stay our children across the
         * exec, and the new image waits for them. */
        manager_free(m);
        free(arg_fleets);
        /* Our old connection still owns the bus name until the bus notices the exec closed
         * it: the new image queues for the name instead of giving up. */
        (void) setenv("SLOTD_REEXECUTED", "1", 1);
        if (exe)
                execv(exe, argv);
        log_error_errno(negative_errno(), "Failed to re-execute %s: %m", strempty(exe));
        return EXIT_FAILURE;
}

int main(int argc, char *argv[]) {
        _cleanup_(manager_freep) Manager *m = NULL;
        Config *config = NULL;
        MachineResources detected;
        unsigned load_errors = 0;
        int r;

        r = spawn_reserve_fds();
        if (r < 0) {
                fprintf(stderr, "slotd: cannot open /dev/null: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }
        log_open();
        r = parse_argv(argc, argv);
        if (r <= 0)
                goto finish;

        r = load_config(&detected, &config, &load_errors);
        if (r < 0 && !(arg_check && config))
                goto finish;
        if (arg_check) {
                r = run_check(config, &detected, load_errors);
                config_free(config);
                goto finish;
        }
        setup_signals();
        /* The bus daemon authenticates us and answers Hello and RequestName while we set up. */
        r = bus_connect(arg_bus ?: config->bus, &doors.early);
        if (r < 0) {
                config_free(config);
                goto finish;
        }

        r = manager_new(config, &m);
        if (r < 0) {
                config_free(config);
                log_error_errno(r, "Failed to create the manager: %m");
                goto finish;
        }
        r = open_keeper(m);
        if (r < 0)
                goto finish;
        m->resources.cpus = config->cpus > 0 ? config->cpus : detected.cpus;
        m->resources.memory = config->memory > 0 ? config->memory : detected.memory;
        manager_set_hooks(m, &door_hooks, &doors);
        r = manager_startup(m);
        if (r < 0)
                goto finish;
        r = manager_run(m);
        if (r < 0)
                log_error_errno(r, "Event loop failed: %m");
        if (r >= 0 && m->reexecute)
                return reexecute(TAKE_PTR(m), argv);
finish:
        m = manager_free(m);
        bus_early_done(&doors.early); /* taken by the bus door once it is set up */
        free(arg_fleets);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
