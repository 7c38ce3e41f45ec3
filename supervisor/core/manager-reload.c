/* SPDX-License-Identifier: MIT */
/* Reload (SPEC §7, build configurations): a new configuration replaces the running one only
 * whole. Fleets that stay take their new settings; free servers restart into a changed
 * build at once, allocated ones when their session ends. Fleets that go drain; fleets that
 * come get slots. */
#include "confine.h"
#include "log.h"
#include "manager.h"
#include "strv.h"

/* What a running server was started with, or wrote into its server.json: builds, arguments,
 * environments, query types, variables of every build configuration, identity, ports,
 * region. */
static bool build_changed(const FleetConfig *a, const FleetConfig *b) {
        return !fleet_config_build_equal(a, b);
}

/* The proxy's sockets are bound once, as root, and kept across its restarts. */
static bool localproxy_listen_equal(const LocalProxyConfig *a, const LocalProxyConfig *b) {
        if (a->enabled != b->enabled || a->n_listen != b->n_listen)
                return false;
        for (size_t i = 0; i < a->n_listen; i++)
                if (!streq(a->listen[i].text, b->listen[i].text))
                        return false;
        return true;
}

static int refuse(char **ret_error, const char *key, const char *old, const char *new) {
        if (asprintf(ret_error, "%s cannot change while slotd runs ('%s' → '%s'); restart slotd",
                     key, strempty(old), strempty(new)) < 0)
                *ret_error = NULL;
        return -EINVAL;
}

/* A slot that has to go: now if free, else when its session ends. */
static void retire_slot(Manager *m, Slot *s) {
        s->retired = true;
        slot_end_hold(s, HOLD_EVENT_STOP);
        slot_end_reservation(s);
        if (slot_is_allocated(s)) {
                manager_slot_changed(m, s, true);
                return;
        }
        if (s->process_state == PROCESS_STOPPED || s->process_state == PROCESS_FAILED)
                manager_retire_slot(m, s);
        else
                (void) slot_stop(s);
}

/* The fleet keeps a copy of its old settings: its draining slots still run by them. */
static int retire_fleet(Manager *m, Fleet *f) {
        FleetConfig *own = malloc(sizeof(FleetConfig));

        if (!own)
                return -ENOMEM;
        *own = *f->config;
        *(FleetConfig *) f->config = (FleetConfig){}; /* moved: the old Config frees nothing */
        f->owned_config = own;
        f->config = own;
        f->retired = true;
        log_info("Fleet %s is gone from the configuration: its slots drain", own->name);
        for (size_t i = f->n_slots; i > 0; i--)
                retire_slot(m, f->slots[i - 1]);
        return 0;
}

static void update_fleet(Manager *m, Fleet *f, const FleetConfig *nf, uid_t uid, gid_t gid,
                         struct sock_fprog *seccomp, bool keeper_restarts) {
        bool changed = build_changed(f->config, nf);
        size_t live = 0;

        confine_seccomp_program_free(f->seccomp);
        f->seccomp = seccomp;
        f->keeper_restarts = keeper_restarts;
        f->config = nf;
        f->uid = uid;
        f->gid = gid;
        for (size_t i = 0; i < f->n_slots; i++)
                if (!f->slots[i]->retired)
                        live++;
        /* Fewer slots: the highest indices go, so the ports left stay a range. */
        for (size_t i = f->n_slots; i > 0 && live > nf->slots; i--) {
                Slot *s = f->slots[i - 1];
                if (s->retired || s->index < nf->slots)
                        continue;
                retire_slot(m, s);
                live--;
        }
        for (size_t i = 0; i < f->n_slots; i++)
                if (!f->slots[i]->retired)
                        slot_reconfigure(f->slots[i], changed);
        if (live < nf->slots) {
                size_t first = m->n_slots;
                if (manager_add_slots(m, f, (unsigned) (nf->slots - live)) < 0) {
                        log_oom();
                        return;
                }
                for (size_t id = first; id < m->n_slots; id++)
                        if (slot_provision(m->slots[id]) < 0)
                                log_slot_warning(m->slots[id], "Failed to provision, it stays stopped");
        }
        if (changed)
                log_info("Fleet %s: new build, arguments or build configuration; free servers "
                         "restart into it, allocated ones when their session ends", nf->name);
}

/* Settings bound once at start-up: a change to one refuses the whole reload. */
static int refuse_fixed_changes(const Config *old, const Config *c, char **ret_error) {
        if (!streq_ptr(c->cgroup, old->cgroup))
                return refuse(ret_error, "supervisor.cgroup", old->cgroup, c->cgroup);
        if (!streq(c->state_dir, old->state_dir))
                return refuse(ret_error, "supervisor.state_dir", old->state_dir, c->state_dir);
        if (!streq(c->slots_dir, old->slots_dir))
                return refuse(ret_error, "supervisor.slots_dir", old->slots_dir, c->slots_dir);
        if (!streq(c->bus, old->bus))
                return refuse(ret_error, "supervisor.bus", old->bus, c->bus);
        if (!localproxy_listen_equal(&c->localproxy, &old->localproxy))
                return refuse(ret_error, "localproxy.listen", "(the running one)", "(the new one)");
        if (!streq(c->localproxy.user, old->localproxy.user) ||
            !streq(c->localproxy.group, old->localproxy.group))
                return refuse(ret_error, "localproxy.user/group", old->localproxy.user,
                              c->localproxy.user);
        return 0;
}

/* What each fleet of the new configuration runs as, index by index. */
typedef struct FleetSetup {
        uid_t *uids;
        gid_t *gids;
        struct sock_fprog **filters;
        bool *keeper_ok;
} FleetSetup;

/* Frees the filters no fleet took, of the first 'n' fleets, and the arrays. */
static void fleet_setup_done(FleetSetup *s, size_t n) {
        for (size_t i = 0; s->filters && i < n; i++)
                confine_seccomp_program_free(s->filters[i]);
        free(s->filters);
        free(s->uids);
        free(s->gids);
        free(s->keeper_ok);
}

/* Users and seccomp filters can fail to resolve: all of them are, before anything changes.
 * On failure nothing is left allocated. */
static int fleet_setup_resolve(const Config *c, FleetSetup *s, char **ret_error) {
        int r;

        s->uids = calloc(c->n_fleets + 1, sizeof(uid_t));
        s->gids = calloc(c->n_fleets + 1, sizeof(gid_t));
        s->filters = calloc(c->n_fleets + 1, sizeof(struct sock_fprog *));
        s->keeper_ok = calloc(c->n_fleets + 1, sizeof(bool));
        r = s->uids && s->gids && s->filters && s->keeper_ok ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < c->n_fleets; i++) {
                r = resolve_identity(&c->fleets[i], &s->uids[i], &s->gids[i], ret_error);
                if (r >= 0)
                        r = fleet_build_seccomp(&c->fleets[i], &s->filters[i], &s->keeper_ok[i],
                                                ret_error);
        }
        if (r < 0)
                fleet_setup_done(s, c->n_fleets);
        return r;
}

static void retire_gone_fleets(Manager *m) {
        for (size_t i = 0, n = m->n_fleets; i < n; i++) {
                Fleet *f = m->fleets[i];
                if (!f->retired && !config_find_fleet(m->config, f->config->name))
                        if (retire_fleet(m, f) < 0)
                                log_oom();
        }
}

/* Fleets that stay take their new settings, new ones are added; a fleet that cannot be added
 * is logged and the others go on. */
static void apply_fleets(Manager *m, FleetSetup *s) {
        for (size_t i = 0; i < m->config->n_fleets; i++) {
                const FleetConfig *nf = &m->config->fleets[i];
                _cleanup_free_ char *error = NULL;
                Fleet *f = manager_find_fleet(m, nf->name);
                int r;

                if (f) {
                        update_fleet(m, f, nf, s->uids[i], s->gids[i], TAKE_PTR(s->filters[i]),
                                     s->keeper_ok[i]);
                        continue;
                }
                r = manager_add_fleet(m, nf, &f, &error);
                if (r < 0) {
                        log_error_errno(r, "Fleet %s cannot be added: %s", nf->name,
                                        error ?: strerror(-r));
                        continue;
                }
                log_info("Fleet %s added with %u slots", nf->name, nf->slots);
                update_fleet(m, f, nf, s->uids[i], s->gids[i], TAKE_PTR(s->filters[i]),
                             s->keeper_ok[i]);
        }
}

/* metrics.listen moves without a restart: the doors bind the new address and hand it to the
 * local proxy, whose SDK connections stay (SPEC §14). Asked on every Reload: the doors know
 * what is served (a default skipped at start-up is tried again). */
static int reload_metrics_listen(Manager *m, const Config *c, char **ret_error) {
        if (!m->hooks || !m->hooks->metrics_listen)
                return 0;
        return m->hooks->metrics_listen(m, &c->metrics_listen, c->metrics_listen_default,
                                        ret_error, m->hooks_userdata);
}

static void announce_reload(Manager *m) {
        manager_hook(m, machine_changed, MACHINE_CHANGE_FLEETS | MACHINE_CHANGE_SLOT_COUNT |
                                         MACHINE_CHANGE_CPUS | MACHINE_CHANGE_MEMORY);
        manager_state_snapshot(m);
}

int manager_reload(Manager *m, char **ret_error) {
        _cleanup_(config_freep) Config *c = NULL;
        MachineResources detected;
        FleetSetup setup = {};
        gid_t admin_gid = 0;
        bool has_admin_gid;
        Config *old;
        int r;

        r = machine_resources_detect(&detected);
        if (r < 0)
                return r;
        r = config_load_full(m->config->config_file ?: NULL, m->config->fleets_dir, &detected, &c,
                             ret_error);
        if (r < 0)
                return r;
        r = refuse_fixed_changes(m->config, c, ret_error);
        if (r < 0)
                return r;

        /* Everything that can fail is checked before anything changes. */
        r = manager_resolve_admin_group(c, &admin_gid, &has_admin_gid, ret_error);
        if (r < 0)
                return r;
        r = fleet_setup_resolve(c, &setup, ret_error);
        if (r < 0)
                return r;
        /* Last, as it acts: the proxy serves the new address from here on. */
        r = reload_metrics_listen(m, c, ret_error);
        if (r < 0) {
                fleet_setup_done(&setup, c->n_fleets);
                return r;
        }

        log_info("Reloading the configuration from %s and %s", strempty(c->config_file),
                 strempty(c->fleets_dir));
        STRV_FOREACH(e, c->fleets_elsewhere)
                log_notice("%s", *e);
        old = m->config;
        m->config = TAKE_PTR(c);
        m->payloads.ttl = m->config->localproxy.payload_ttl;
        m->config_admin_gid = admin_gid;
        m->config_has_admin_gid = has_admin_gid;
        m->resources.cpus = m->config->cpus > 0 ? m->config->cpus : detected.cpus;
        m->resources.memory = m->config->memory > 0 ? m->config->memory : detected.memory;

        retire_gone_fleets(m);
        apply_fleets(m, &setup);
        fleet_setup_done(&setup, m->config->n_fleets);
        /* Fleets that stayed point into the new config now, retired ones own their copy. */
        config_free(old);

        announce_reload(m);
        return 0;
}
