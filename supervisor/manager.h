/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "slot.h"

/* A fleet as it runs: its config section, its cgroup, its identity, its slots. */
typedef struct Fleet {
        Manager *manager;
        const FleetConfig *config;   /* owned by manager->config */
        char *cgroup_path;
        uid_t uid;
        gid_t gid;
        Slot **slots;
        size_t n_slots;
} Fleet;

typedef struct Manager {
        sd_event *event;
        sd_bus *bus;
        Config *config;

        char *machine_id;
        char *ip;
        char *ipv6;
        MachineResources resources;

        char *cgroup_mount;          /* e.g. /sys/fs/cgroup */
        char *cgroup_root;           /* absolute path of the slot tree */
        char *cgroup_root_relative;  /* the same below the mount, as /proc/PID/cgroup says */
        unsigned enforced;           /* CGROUP_MASK of controllers in force for slots */
        bool killed_cgroup_bug;      /* see spawn_probe_killed_cgroup_bug() */

        Fleet *fleets;
        size_t n_fleets;
        Slot **slots;                /* by id */
        size_t n_slots;

        char *notify_path;
        int notify_fd;
        sd_event_source *notify_source;
} Manager;

int manager_new(Config *config, Manager **ret);  /* takes the config */
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

/* Cgroups, notify socket, slots, bus; then starts what should run. */
int manager_startup(Manager *m, const char *bus_override);
int manager_run(Manager *m);

Slot *manager_get_slot(Manager *m, unsigned id);
Slot *manager_slot_by_pid(Manager *m, pid_t pid);
void manager_stop_all(Manager *m);

/* D-Bus (manager-bus.c, slot-bus.c). */
int manager_bus_setup(Manager *m, const char *bus);
void manager_bus_slot_changed(Manager *m, Slot *s);
void manager_bus_slot_crashed(Manager *m, Slot *s, const char *reason);
int bus_check_admin(sd_bus_message *msg, Manager *m, sd_bus_error *error);

/* What the slot tree would look like, for --check. */
int manager_resolve_cgroup_root(const Config *c, bool create, char **ret_mount, char **ret_root);

extern const sd_bus_vtable manager_vtable[];
extern const sd_bus_vtable slot_vtable[];
int slot_bus_find(sd_bus *bus, const char *path, const char *interface, void *userdata,
                  void **ret_found, sd_bus_error *error);
int slot_bus_enumerate(sd_bus *bus, const char *prefix, void *userdata, char ***ret_nodes,
                       sd_bus_error *error);

#define BUS_NAME "org.slotd.Supervisor1"
#define BUS_PATH "/org/slotd/Supervisor1"
#define BUS_MANAGER_INTERFACE "org.slotd.Supervisor1.Manager"
#define BUS_SLOT_INTERFACE "org.slotd.Supervisor1.Slot"
#define BUS_SLOT_PREFIX "/org/slotd/Supervisor1/slot"
#define BUS_ERROR_PREFIX "org.slotd.Supervisor1.Error."
