/* SPDX-License-Identifier: MIT */
#pragma once

/* slotd-registry (SPEC §13): one process per machine, between slotd (D-Bus) and etcd. It
 * mirrors slotd's Manager and slots as the machine document and one slot document per slot,
 * under a lease of its own, and carries out the claims and deallocations the allocators
 * write for this machine. One sd-event loop; every step asynchronous.
 *
 *   registry-bus.c     slotd: the connection, signals, the full read (resync)
 *   registry-state.c   pure: slotd's properties into the model, documents and records
 *   registry.c         the model: slots by id, the dirty list, the documents' keys
 *   registry-lease.c   etcd: the lease, its keepalive, the flush of dirty documents
 *   registry-host.c    etcd: this machine's claims and deallocations (range, watch)
 *   registry-claim.c   one claim: allocate through slotd, confirm, undo or refuse
 *   registry-scale.c   one command of the scaler: Start() or Stop() through slotd */

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "docs.h"
#include "etcd.h"
#include "hashmap.h"
#include "time-util.h"

#define SLOTD_BUS_NAME "org.slotd.Supervisor1"
#define SLOTD_PATH "/org/slotd/Supervisor1"
#define SLOTD_MANAGER_INTERFACE "org.slotd.Supervisor1.Manager"
#define SLOTD_SLOT_INTERFACE "org.slotd.Supervisor1.Slot"
#define SLOTD_SLOT_PREFIX "/org/slotd/Supervisor1/slot/"
#define SLOTD_ERROR_PREFIX "org.slotd.Supervisor1.Error."

/* etcd's default --max-txn-ops (128), counted along each nesting path, less the one op of
 * the batch's request the flush is nested in: a burst larger than this is several
 * transactions. */
#define REGISTRY_TXN_OPS_MAX 127

typedef struct Registry Registry;
typedef struct RegHostKey RegHostKey;

/* A back-off: first, doubling up to max; reset after a success. */
typedef struct Backoff {
        usec_t first, max, current;
} Backoff;

usec_t backoff_next(Backoff *b);
void backoff_reset(Backoff *b);

/* One slot as slotd last told it (registry-state.c fills it from properties). */
typedef struct RegSlot {
        uint32_t id;
        char *fleet;
        char *region_id;
        char *state;
        char *process_state;
        char *allocation_uuid;
        char *build_configuration;
        char **build_configurations; /* BuildConfigurations */
        bool ready;
        bool ready_for_players;
        usec_t ready_for_players_at; /* when the registry saw it become true; 0 while false */
        uint16_t port;
        uint16_t query_port;
        usec_t hold_until;     /* CLOCK_REALTIME µs, 0 = none */
        usec_t reserved_until;

        uint64_t seen;         /* the sync generation that last listed it */
        bool known;            /* its properties were read (GetAll answered) */
        bool dirty;            /* its document waits for the next flush */
        struct RegSlot *dirty_next;
        char *key;             /* the key its document was last put under, NULL: none */
        /* The document last sent (by a flush or a confirmation) under key, and its lease:
         * the same document under the same key and lease is not sent again (an allocation
         * makes the slot dirty through slotd's signals, and its confirmation carries the
         * document too). A send that failed clears it and makes the slot dirty again. A
         * confirmation that leaves the document out compares etcd's value with it, so it
         * applies only where the send that carried it did (registry-claim.c). */
        char *sent_doc;
        int64_t sent_lease;
} RegSlot;

/* The Manager as slotd last told it. */
typedef struct RegMachine {
        char *machine_id;
        uint64_t machine_number;
        char *version;
        char *ipv4;
        char *ipv6;
        char **fleets;
        char **faults;
        bool draining;
        bool deprovisionable;
        usec_t idle_since;
        usec_t hold_until;
        uint32_t slot_count;
} RegMachine;

typedef enum LeaseState {
        LEASE_NONE,  /* none yet, or lost: a grant is due (after the back-off) */
        LEASE_READY, /* granted and kept alive */
} LeaseState;

struct Registry {
        sd_event *event;

        /* configuration (slotd.ini) */
        char *bus_address;     /* "system", "session" or an address */
        char *prefix;
        usec_t lease_ttl;
        uint64_t idle_ttl_sec;

        /* slotd */
        sd_bus *bus;
        sd_event_source *bus_retry;
        Backoff bus_backoff;
        bool slotd_up;         /* the name has an owner */
        bool synced;           /* the full read of the current owner is complete */
        uint64_t generation;   /* of the current full read; replies of an older one are late */
        unsigned sync_pending; /* calls of the current read still unanswered */
        bool sync_full;        /* the current read is a full one (slotd appeared) */
        RegMachine machine;
        RegSlot **slots;       /* by id; NULL where there is none */
        size_t n_slots;        /* the array's size (highest id + 1) */
        RegSlot *dirty;        /* the dirty list */
        bool machine_dirty;
        char **stale_keys;     /* documents of slots that are gone: deleted at the next flush */
        usec_t registered_at;

        /* etcd: the lease and the flush (registry-lease.c) */
        Etcd *etcd;
        /* The claims' and deallocations' reads and transactions, sent together (etcd.h's
         * group commit). */
        EtcdBatch *batch;
        bool lease_wanted;     /* slotd was read: the machine belongs in the fleet view */
        LeaseState lease_state;
        int64_t lease_id;
        int64_t old_lease_id;  /* revoked once everything is put under lease_id */
        usec_t lease_renewed;  /* CLOCK_MONOTONIC of the last keepalive answered */
        Backoff lease_backoff;
        bool etcd_trouble;     /* told in the log; "back" is told once it is over */
        sd_event_source *lease_timer; /* the keepalive tick, or the next grant */
        EtcdRequest *grant_req;
        EtcdRequest *keepalive_req;
        sd_event_source *slotd_gone_timer;
        sd_event_source *flush_timer;
        EtcdBatchTxn *flush_txn; /* in the batch, behind the confirmations queued before it */
        uint32_t flush_ids[REGISTRY_TXN_OPS_MAX]; /* the slots of the transaction in flight */
        size_t n_flush_ids;
        char **flush_stale;    /* the stale keys it deletes */
        bool flush_machine;    /* the machine document is in it */
        usec_t flush_started;
        void (*stopped)(Registry *r);
        sd_event_source *stop_timer;

        /* etcd: this machine's claims and deallocations (registry-host.c) */
        char *host_prefix;     /* <prefix>/hosts/<machineID>/ */
        EtcdRequest *host_range;
        EtcdWatch *host_watch;
        sd_event_source *host_retry;
        Backoff host_backoff;
        Hashmap host_keys;     /* key → RegHostKey */
        RegHostKey *host_list; /* the same, to walk them */
        unsigned host_epoch;   /* bumped at each range: entries not in it are gone */
};

int registry_new(Registry **ret, sd_event *event);
Registry *registry_free(Registry *r);

/* registry.c: the model. */
RegSlot *registry_slot(Registry *r, uint32_t id);
/* Whether value under key and the registry's lease is what s's last send put (registry.h's
 * RegSlot.sent_doc); and the record of a send (value NULL: none known). */
bool registry_slot_sent(const Registry *r, const RegSlot *s, const char *key, const char *value);
void registry_slot_sending(Registry *r, RegSlot *s, const char *value);
int registry_slot_add(Registry *r, uint32_t id, RegSlot **ret);
void registry_slot_remove(Registry *r, uint32_t id);
void registry_slot_dirty(Registry *r, RegSlot *s);
void registry_machine_dirty(Registry *r);
/* Every document dirty (after a new lease). */
void registry_all_dirty(Registry *r);
/* The slot's document as JSON and its key (both malloc'd). */
int registry_slot_document(Registry *r, const RegSlot *s, char **ret_key, char **ret_value);
int registry_machine_document(Registry *r, char **ret_key, char **ret_value);

/* registry-bus.c: slotd. */
int registry_bus_connect(Registry *r);
void registry_bus_done(Registry *r);
/* Calls slotd; the reply goes to callback. */
int registry_bus_allocate(Registry *r, uint32_t slot_id, const ClaimDoc *claim,
                          sd_bus_message_handler_t callback, void *userdata, sd_bus_slot **ret);
int registry_bus_deallocate(Registry *r, const char *allocation_id,
                            sd_bus_message_handler_t callback, void *userdata,
                            sd_bus_slot **ret);
/* A method of the slot's object without arguments ("Start", "Stop"). */
int registry_bus_slot_call(Registry *r, uint32_t slot_id, const char *method,
                           sd_bus_message_handler_t callback, void *userdata, sd_bus_slot **ret);

/* registry-lease.c: the lease and the documents. */
int registry_etcd_setup(Registry *r, const EtcdConfig *config);
void registry_etcd_done(Registry *r);
/* slotd was read anew: a new lease, everything put under it, the old lease revoked. */
void registry_resync(Registry *r);
void registry_schedule_flush(Registry *r);
/* slotd left: if it is not back within the lease's TTL, the machine leaves the fleet view. */
void registry_slotd_gone(Registry *r);
/* A clean stop: the lease revoked (the machine leaves the fleet view at once), then done(). */
int registry_stop(Registry *r, void (*done)(Registry *r));
bool registry_lease_ready(const Registry *r);

/* registry-host.c: claims and deallocations; start reads them all again (slotd was read
 * anew, or etcd came back) and does what was not done. */
void registry_host_start(Registry *r);
void registry_host_done(Registry *r);
/* The key's work is over and the key deleted: it goes (and is freed). */
void registry_host_forget(RegHostKey *k);

/* registry-claim.c: one key of hosts/<machineID>/. */
typedef enum RegHostKeyKind {
        REG_CLAIM,
        REG_DEALLOCATION,
        REG_SCALE,        /* the scaler's command (slot_id) */
} RegHostKeyKind;

struct RegHostKey {
        Registry *registry;
        char *key;
        RegHostKeyKind kind;
        uint32_t slot_id;        /* REG_CLAIM, REG_SCALE */
        char *allocation_id;     /* REG_DEALLOCATION: from the key */
        unsigned epoch;
        /* The newest version seen (0: deleted) and the one worked on. */
        int64_t mod_revision;
        char *value;
        int64_t working_revision;
        int64_t done_revision;   /* the last version whose work is complete */
        bool busy;
        bool undo;               /* deallocating what a claim that changed had made */
        unsigned attempts;       /* of a transaction whose compares failed */
        int64_t record_revision; /* mod_revision of the allocation record read */
        bool carries_doc;        /* the confirmation in the batch puts the slot's document */
        ClaimDoc claim;          /* of working_revision */
        char *refusal;           /* slotd's reason for refusing it, written into its record */
        sd_bus_slot *call;
        EtcdRequest *req;
        EtcdBatchTxn *txn;
        /* A claim's record, read while slotd allocates (registry-claim.c), so that the
         * confirmation need not wait for a read after slotd's answer: the read in flight,
         * then its outcome (an error, or the record: value NULL when there is none). */
        EtcdBatchTxn *prefetch;
        bool prefetch_asked, prefetch_here, allocated;
        int prefetch_error;
        EtcdKv prefetched;
        sd_event_source *retry;
        Backoff backoff;
        RegHostKey *prev, *next;
};

RegHostKey *reg_host_key_free(RegHostKey *k);
/* A version of the key (mod_revision 0: deleted): worked on now or once the current work is
 * done. */
void reg_host_key_update(RegHostKey *k, int64_t mod_revision, const char *value, size_t len);
