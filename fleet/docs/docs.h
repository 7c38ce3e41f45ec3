/* SPDX-License-Identifier: MIT */
#pragma once

/* The fleet's keys and JSON documents (SPEC §13): C structs, *_format() to JSON text,
 * *_parse() from JSON text, and the RFC 3339 times they carry. Pure: no I/O, no logging.
 *
 * Ownership: a struct filled by *_parse() owns every string and list in it; free them with
 * *_done() (which leaves the struct zeroed and may be called again). To format, the fields
 * may point at anything: *_format() only reads them. A NULL string formats as "", a NULL
 * list as [].
 *
 * Parsing treats the text as hostile: at most FLEET_DOC_MAX bytes, an object at the top,
 * unknown fields ignored (SPEC §13: readers ignore what they do not know), a known field of
 * the wrong type or out of range refused with -EBADMSG, a missing field taken as empty (""
 * / 0 / false / []) except the fields each parser names as required. Strings are valid
 * UTF-8 without NUL (jansson checks) and at most FLEET_STRING_MAX bytes, except the payload
 * (FLEET_PAYLOAD_MAX). Times: see rfc3339_parse(). */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "time-util.h"
#include "timestamp.h"

#define FLEET_DOC_MAX (64U * 1024U)
#define FLEET_STRING_MAX 1024U
#define FLEET_PAYLOAD_MAX (30U * 1024U) /* AllocateWithOptions' payload (SPEC §8) */
#define FLEET_LIST_MAX 1024U            /* entries of fleets, regions, faults, excluded */
#define FLEET_PREFIX_DEFAULT "/slotd/v1"

/* ---- times: RFC 3339 in UTC with milliseconds, "" for none ---- */

/* rfc3339_format() is common/timestamp.h's. */
/* Accepts "" (→ 0), and "YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)" (t or T, z or Z; any
 * number of fraction digits, below the microsecond ignored) from 1970 to 9999; a moment
 * before the first microsecond after the epoch is that microsecond (0 means none). -EINVAL
 * otherwise; *ret is untouched on failure. */
int rfc3339_parse(const char *s, usec_t *ret);

/* ---- keys ---- */

/* A key component (machineID, fleet, allocationId): 1..128 bytes of [A-Za-z0-9._-], not "."
 * or "..". Every writer checks its components; readers skip keys whose components fail. */
bool fleet_key_component_valid(const char *s);

/* Each returns a malloc'd key (NULL on ENOMEM). prefix without trailing '/'. */
char *fleet_key_machine(const char *prefix, const char *machine_id);
char *fleet_key_slot(const char *prefix, const char *fleet, const char *machine_id,
                     uint32_t slot_id);
char *fleet_key_allocation(const char *prefix, const char *fleet, const char *allocation_id);
char *fleet_key_claim(const char *prefix, const char *machine_id, uint32_t slot_id);
/* <prefix>/fences/<machineID>/<slotID>: a claim in doubt's fence (allocators only; SPEC §13) */
char *fleet_key_fence(const char *prefix, const char *machine_id, uint32_t slot_id);
char *fleet_key_deallocation(const char *prefix, const char *machine_id,
                             const char *allocation_id);
/* <prefix>/allocation-ids/<allocationId>: which fleet holds the allocationId (AllocationIdDoc). */
char *fleet_key_allocation_id(const char *prefix, const char *allocation_id);
/* <prefix>/hosts/<machineID>/scale/<slotID>: the scaler's command to a slot (ScaleDoc). */
char *fleet_key_scale(const char *prefix, const char *machine_id, uint32_t slot_id);

/* The parts of a key of the named kind under prefix; -EINVAL when key is not one (other
 * prefix, other kind, a component that fails fleet_key_component_valid(), a slot id that is
 * not a decimal uint32). ret_* may be NULL; the strings are malloc'd. */
int fleet_key_parse_machine(const char *prefix, const char *key, char **ret_machine_id);
int fleet_key_parse_slot(const char *prefix, const char *key, char **ret_fleet,
                         char **ret_machine_id, uint32_t *ret_slot_id);
int fleet_key_parse_allocation(const char *prefix, const char *key, char **ret_fleet,
                               char **ret_allocation_id);
/* <prefix>/hosts/<machineID>/claims/<slotID>, …/scale/<slotID> or
 * …/deallocations/<allocationId>: *ret_kind is FLEET_HOST_KEY_CLAIM or FLEET_HOST_KEY_SCALE
 * (ret_slot_id set) or FLEET_HOST_KEY_DEALLOCATION (ret_allocation_id set; the other output
 * is left alone). */
typedef enum FleetHostKeyKind {
        FLEET_HOST_KEY_CLAIM,
        FLEET_HOST_KEY_DEALLOCATION,
        FLEET_HOST_KEY_SCALE,
} FleetHostKeyKind;
int fleet_key_parse_host(const char *prefix, const char *key, FleetHostKeyKind *ret_kind,
                         char **ret_machine_id, uint32_t *ret_slot_id,
                         char **ret_allocation_id);

/* ---- slot document: <prefix>/slots/<fleet>/<machineID>/<slotID> ---- */

typedef struct SlotDoc {
        char *machine_id; /* required */
        uint64_t machine_number; /* slotd's MachineNumber; 0 = absent (a registry before it) */
        uint32_t slot_id; /* required */
        char *fleet_id;   /* required */
        char *region_id;
        char *state;         /* §5 State: available, online, held, reserved, allocated */
        char *process_state; /* §5 ProcessState */
        bool ready;
        bool ready_for_players;
        usec_t ready_for_players_at; /* when readyForPlayers last became true (0: it is not) */
        char *build_configuration_id;
        /* The build configuration IDs its fleet runs (slotd's BuildConfigurations); none
         * (absent, [], NULL): any ID, as far as the document tells (a fleet without
         * [build_configuration] sections, a registry before the field, or a list longer than
         * SLOT_DOC_BUILDS_MAX bytes, not written). */
        char **build_configurations;
        char *ipv4;
        char *ipv6;
        uint16_t game_port;
        uint16_t query_port;
        char *allocation_id; /* "" (or NULL) when none */
        bool draining;
        usec_t hold_until; /* CLOCK_REALTIME µs, 0 = none */
        usec_t reserved_until;
} SlotDoc;

/* The most bytes of IDs a slot document's buildConfigurations carries: a slot's document is
 * rewritten at each of its changes, so a longer list is left out (read as any ID). */
#define SLOT_DOC_BUILDS_MAX 2048U

/* Whether the slot may run build configuration id, as its document tells: id NULL or "" (the
 * fleet's default), no list, or id in it. */
bool slot_doc_runs_build(const SlotDoc *d, const char *id);
/* The list a document carries for these IDs: ids, or NULL when they exceed
 * SLOT_DOC_BUILDS_MAX bytes. */
char **slot_doc_builds_bounded(char **ids);

int slot_doc_format(const SlotDoc *d, char **ret);
int slot_doc_parse(const char *text, size_t len, SlotDoc *ret);
void slot_doc_done(SlotDoc *d);

/* ---- machine document: <prefix>/machines/<machineID> ---- */

typedef struct MachineDoc {
        char *machine_id; /* required */
        uint64_t machine_number; /* slotd's MachineNumber; 0 = absent */
        char *ipv4;
        char *ipv6;
        char **fleets;  /* NULL-terminated; NULL = none */
        char **regions; /* the fleets' region_ids */
        bool draining;
        usec_t idle_since;
        usec_t hold_until; /* the furthest hold */
        bool deprovisionable;
        uint64_t idle_ttl_sec;
        uint32_t slots; /* count */
        char **faults;  /* the Manager's Faults */
        char *slotd;    /* version */
        usec_t registered_at;
} MachineDoc;

int machine_doc_format(const MachineDoc *d, char **ret);
int machine_doc_parse(const char *text, size_t len, MachineDoc *ret);
void machine_doc_done(MachineDoc *d);

/* ---- allocation record: <prefix>/allocations/<fleet>/<allocationId> ---- */

typedef enum AllocationStatus {
        ALLOCATION_CLAIMED,
        ALLOCATION_FULFILLED,
        ALLOCATION_FAILED, /* refused by every host, or no other slot free: kept for
                            * allocator.failed_ttl (the record's lease), with its error */
        _ALLOCATION_STATUS_MAX,
        _ALLOCATION_STATUS_INVALID = -EINVAL,
} AllocationStatus;

const char *allocation_status_to_string(AllocationStatus s);
AllocationStatus allocation_status_from_string(const char *s);

typedef struct AllocationRecord {
        char *allocation_id; /* required */
        char *project_id;
        char *environment_id;
        char *request_id; /* the POST that made it: a UUID (absent: written before it) */
        char *fleet_id; /* required */
        char *build_configuration_id;
        char *region_id;
        char *payload; /* at most FLEET_PAYLOAD_MAX bytes */
        AllocationStatus status; /* required */
        char *machine_id;
        uint64_t machine_number; /* the API's machineId; 0 = absent (written before it) */
        uint32_t slot_id;
        char *ipv4;
        char *ipv6;
        uint16_t game_port;
        usec_t requested;
        usec_t claimed;
        usec_t deadline;
        usec_t fulfilled;
        uint32_t attempts;
        char **excluded; /* machines that failed it */
        char *error;     /* the last host's refusal; failed: why it failed */
        usec_t failed;   /* failed: when */
        bool restart;    /* the POST's restart: each claim of it asks for it (absent: false) */
        /* A later POST of the same allocationId answered 200 with this record (SPEC §13, "a
         * 503 is never an allocation"): its requestId and when (absent or "": none was). A fence's
         * resolution keeps a record so marked. */
        char *answered_request_id;
        usec_t answered;
} AllocationRecord;

int allocation_record_format(const AllocationRecord *d, char **ret);
int allocation_record_parse(const char *text, size_t len, AllocationRecord *ret);
void allocation_record_done(AllocationRecord *d);
/* Whether a later POST of its allocationId was answered 200 with the record. */
static inline bool allocation_record_answered(const AllocationRecord *d) {
        return d->answered != 0 || (d->answered_request_id && d->answered_request_id[0] != '\0');
}

/* ---- claim: <prefix>/hosts/<machineID>/claims/<slotID> ---- */

typedef struct ClaimDoc {
        char *allocation_id; /* required */
        char *fleet_id;      /* required */
        char *build_configuration_id;
        char *payload;
        usec_t deadline;
        bool draining; /* the machine is draining: the allocator's last resort (absent: false) */
        bool restart;  /* the server restarts into the build configuration, even the one it
                        * runs, before it is allocated (absent: false) */
} ClaimDoc;

int claim_doc_format(const ClaimDoc *d, char **ret);
int claim_doc_parse(const char *text, size_t len, ClaimDoc *ret);
void claim_doc_done(ClaimDoc *d);

/* ---- deallocation: <prefix>/hosts/<machineID>/deallocations/<allocationId> ---- */

typedef struct DeallocationDoc {
        char *allocation_id; /* required */
        char *fleet_id;
        uint32_t slot_id;
} DeallocationDoc;

int deallocation_doc_format(const DeallocationDoc *d, char **ret);
int deallocation_doc_parse(const char *text, size_t len, DeallocationDoc *ret);
void deallocation_doc_done(DeallocationDoc *d);

/* ---- allocationId index: <prefix>/allocation-ids/<allocationId> ---- */

/* Put with the allocation record, in the claim's transaction, whose compare wants it absent,
 * and deleted with the record: an allocationId is one fleet's at a time, as etcd decides it
 * (SPEC §13), not only as a replica's view shows it. */
typedef struct AllocationIdDoc {
        char *allocation_id; /* required */
        char *fleet_id;      /* required */
} AllocationIdDoc;

int allocation_id_doc_format(const AllocationIdDoc *d, char **ret);
int allocation_id_doc_parse(const char *text, size_t len, AllocationIdDoc *ret);
void allocation_id_doc_done(AllocationIdDoc *d);

/* ---- scaler command: <prefix>/hosts/<machineID>/scale/<slotID> ---- */

typedef enum ScaleAction {
        SCALE_START,
        SCALE_STOP,
        _SCALE_ACTION_MAX,
        _SCALE_ACTION_INVALID = -EINVAL,
} ScaleAction;

const char *scale_action_to_string(ScaleAction a);
ScaleAction scale_action_from_string(const char *s);

/* Written by the scaler's leader, carried out and deleted by the machine's registry. */
typedef struct ScaleDoc {
        ScaleAction action; /* required: "start" or "stop" (another word: -EBADMSG) */
        char *fleet_id;     /* required */
} ScaleDoc;

int scale_doc_format(const ScaleDoc *d, char **ret);
int scale_doc_parse(const char *text, size_t len, ScaleDoc *ret);
void scale_doc_done(ScaleDoc *d);
