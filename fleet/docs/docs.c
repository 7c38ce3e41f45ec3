/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <stdio.h>
#include <time.h>

#include <jansson.h>

#include "docs.h"
#include "macro.h"
#include "strv.h"

/* Each document is a table of its fields: one formatter and one parser serve them all, so a
 * field's JSON name, type and bounds are written once. */
typedef enum FieldType {
        FIELD_STRING,
        FIELD_PAYLOAD, /* a string of up to FLEET_PAYLOAD_MAX bytes */
        FIELD_BOOL,
        FIELD_U16,
        FIELD_U32,
        FIELD_U64,
        FIELD_TIME,
        FIELD_STRV,
        FIELD_STATUS,
} FieldType;

typedef struct Field {
        const char *name;
        FieldType type;
        size_t offset;
        bool required;
} Field;

#define FIELD(s, n, t, m) { n, t, offsetof(s, m), false }
#define REQUIRED(s, n, t, m) { n, t, offsetof(s, m), true }

static const Field slot_fields[] = {
        REQUIRED(SlotDoc, "machineID", FIELD_STRING, machine_id),
        FIELD(SlotDoc, "machineNumber", FIELD_U64, machine_number),
        REQUIRED(SlotDoc, "slotID", FIELD_U32, slot_id),
        REQUIRED(SlotDoc, "fleetId", FIELD_STRING, fleet_id),
        FIELD(SlotDoc, "regionId", FIELD_STRING, region_id),
        FIELD(SlotDoc, "state", FIELD_STRING, state),
        FIELD(SlotDoc, "processState", FIELD_STRING, process_state),
        FIELD(SlotDoc, "ready", FIELD_BOOL, ready),
        FIELD(SlotDoc, "readyForPlayers", FIELD_BOOL, ready_for_players),
        FIELD(SlotDoc, "readyForPlayersAt", FIELD_TIME, ready_for_players_at),
        FIELD(SlotDoc, "buildConfigurationId", FIELD_STRING, build_configuration_id),
        FIELD(SlotDoc, "buildConfigurations", FIELD_STRV, build_configurations),
        FIELD(SlotDoc, "ipv4", FIELD_STRING, ipv4),
        FIELD(SlotDoc, "ipv6", FIELD_STRING, ipv6),
        FIELD(SlotDoc, "gamePort", FIELD_U16, game_port),
        FIELD(SlotDoc, "queryPort", FIELD_U16, query_port),
        FIELD(SlotDoc, "allocationId", FIELD_STRING, allocation_id),
        FIELD(SlotDoc, "draining", FIELD_BOOL, draining),
        FIELD(SlotDoc, "holdUntil", FIELD_TIME, hold_until),
        FIELD(SlotDoc, "reservedUntil", FIELD_TIME, reserved_until),
};

static const Field machine_fields[] = {
        REQUIRED(MachineDoc, "machineID", FIELD_STRING, machine_id),
        FIELD(MachineDoc, "machineNumber", FIELD_U64, machine_number),
        FIELD(MachineDoc, "ipv4", FIELD_STRING, ipv4),
        FIELD(MachineDoc, "ipv6", FIELD_STRING, ipv6),
        FIELD(MachineDoc, "fleets", FIELD_STRV, fleets),
        FIELD(MachineDoc, "regions", FIELD_STRV, regions),
        FIELD(MachineDoc, "draining", FIELD_BOOL, draining),
        FIELD(MachineDoc, "idleSince", FIELD_TIME, idle_since),
        FIELD(MachineDoc, "holdUntil", FIELD_TIME, hold_until),
        FIELD(MachineDoc, "deprovisionable", FIELD_BOOL, deprovisionable),
        FIELD(MachineDoc, "idleTtlSec", FIELD_U64, idle_ttl_sec),
        FIELD(MachineDoc, "slots", FIELD_U32, slots),
        FIELD(MachineDoc, "faults", FIELD_STRV, faults),
        FIELD(MachineDoc, "slotd", FIELD_STRING, slotd),
        FIELD(MachineDoc, "registeredAt", FIELD_TIME, registered_at),
};

static const Field record_fields[] = {
        REQUIRED(AllocationRecord, "allocationId", FIELD_STRING, allocation_id),
        FIELD(AllocationRecord, "projectId", FIELD_STRING, project_id),
        FIELD(AllocationRecord, "environmentId", FIELD_STRING, environment_id),
        FIELD(AllocationRecord, "requestId", FIELD_STRING, request_id),
        REQUIRED(AllocationRecord, "fleetId", FIELD_STRING, fleet_id),
        FIELD(AllocationRecord, "buildConfigurationId", FIELD_STRING, build_configuration_id),
        FIELD(AllocationRecord, "regionId", FIELD_STRING, region_id),
        FIELD(AllocationRecord, "payload", FIELD_PAYLOAD, payload),
        REQUIRED(AllocationRecord, "status", FIELD_STATUS, status),
        FIELD(AllocationRecord, "machineID", FIELD_STRING, machine_id),
        FIELD(AllocationRecord, "machineNumber", FIELD_U64, machine_number),
        FIELD(AllocationRecord, "slotID", FIELD_U32, slot_id),
        FIELD(AllocationRecord, "ipv4", FIELD_STRING, ipv4),
        FIELD(AllocationRecord, "ipv6", FIELD_STRING, ipv6),
        FIELD(AllocationRecord, "gamePort", FIELD_U16, game_port),
        FIELD(AllocationRecord, "requested", FIELD_TIME, requested),
        FIELD(AllocationRecord, "claimed", FIELD_TIME, claimed),
        FIELD(AllocationRecord, "deadline", FIELD_TIME, deadline),
        FIELD(AllocationRecord, "fulfilled", FIELD_TIME, fulfilled),
        FIELD(AllocationRecord, "attempts", FIELD_U32, attempts),
        FIELD(AllocationRecord, "excluded", FIELD_STRV, excluded),
        FIELD(AllocationRecord, "error", FIELD_STRING, error),
        FIELD(AllocationRecord, "failed", FIELD_TIME, failed),
        FIELD(AllocationRecord, "restart", FIELD_BOOL, restart),
        FIELD(AllocationRecord, "answeredRequestId", FIELD_STRING, answered_request_id),
        FIELD(AllocationRecord, "answered", FIELD_TIME, answered),
};

static const Field claim_fields[] = {
        REQUIRED(ClaimDoc, "allocationId", FIELD_STRING, allocation_id),
        REQUIRED(ClaimDoc, "fleetId", FIELD_STRING, fleet_id),
        FIELD(ClaimDoc, "buildConfigurationId", FIELD_STRING, build_configuration_id),
        FIELD(ClaimDoc, "payload", FIELD_PAYLOAD, payload),
        FIELD(ClaimDoc, "deadline", FIELD_TIME, deadline),
        FIELD(ClaimDoc, "draining", FIELD_BOOL, draining),
        FIELD(ClaimDoc, "restart", FIELD_BOOL, restart),
};

static const Field deallocation_fields[] = {
        REQUIRED(DeallocationDoc, "allocationId", FIELD_STRING, allocation_id),
        FIELD(DeallocationDoc, "fleetId", FIELD_STRING, fleet_id),
        FIELD(DeallocationDoc, "slotID", FIELD_U32, slot_id),
};

static const Field allocation_id_fields[] = {
        REQUIRED(AllocationIdDoc, "allocationId", FIELD_STRING, allocation_id),
        REQUIRED(AllocationIdDoc, "fleetId", FIELD_STRING, fleet_id),
};

static const char *const status_names[_ALLOCATION_STATUS_MAX] = {
        [ALLOCATION_CLAIMED] = "claimed",
        [ALLOCATION_FULFILLED] = "fulfilled",
        [ALLOCATION_FAILED] = "failed",
};

const char *allocation_status_to_string(AllocationStatus s) {
        return s >= 0 && s < _ALLOCATION_STATUS_MAX ? status_names[s] : NULL;
}

AllocationStatus allocation_status_from_string(const char *s) {
        for (AllocationStatus i = 0; s && i < _ALLOCATION_STATUS_MAX; i++)
                if (streq(status_names[i], s))
                        return i;
        return _ALLOCATION_STATUS_INVALID;
}

/* jansson.h has json_decrefp(). */
#define _cleanup_json_ _cleanup_(json_decrefp)

/* ---- formatting ---- */

static json_t *field_to_json(const Field *f, const void *doc) {
        const char *p = (const char *) doc + f->offset;
        char buf[RFC3339_MAX];

        switch (f->type) {
        case FIELD_STRING:
        case FIELD_PAYLOAD:
                return json_string(strempty(*(char *const *) p));
        case FIELD_BOOL:
                return json_boolean(*(const bool *) p);
        case FIELD_U16:
                return json_integer(*(const uint16_t *) p);
        case FIELD_U32:
                return json_integer(*(const uint32_t *) p);
        case FIELD_U64:
                return json_integer((json_int_t) MIN(*(const uint64_t *) p,
                                                     (uint64_t) INT64_MAX));
        case FIELD_TIME:
                return json_string(rfc3339_format(*(const usec_t *) p, buf));
        case FIELD_STATUS:
                return json_string(strempty(allocation_status_to_string(
                        *(const AllocationStatus *) p)));
        case FIELD_STRV: {
                json_t *a = json_array();

                STRV_FOREACH(s, *(char **const *) p)
                        if (!a || json_array_append_new(a, json_string(*s)) < 0) {
                                json_decref(a);
                                return NULL;
                        }
                return a;
        }
        }
        return NULL;
}

static int doc_format(const Field *fields, size_t n, const void *doc, char **ret) {
        _cleanup_json_ json_t *o = json_object();
        char *text;

        if (!o)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_t *v = field_to_json(&fields[i], doc);

                /* json_string() refuses invalid UTF-8: a caller's bug or a hostile value. */
                if (!v)
                        return -EINVAL;
                if (json_object_set_new(o, fields[i].name, v) < 0)
                        return -ENOMEM;
        }
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!text)
                return -ENOMEM;
        *ret = text;
        return 0;
}

/* ---- parsing ---- */

static int string_from_json(json_t *v, size_t max, char **ret) {
        char *s;

        if (!json_is_string(v) || json_string_length(v) > max ||
            strlen(json_string_value(v)) != json_string_length(v))
                return -EBADMSG;
        s = strdup(json_string_value(v));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static int strv_from_json(json_t *v, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        size_t i;
        json_t *e;

        if (!json_is_array(v) || json_array_size(v) > FLEET_LIST_MAX)
                return -EBADMSG;
        json_array_foreach(v, i, e) {
                char *s;
                int r = string_from_json(e, FLEET_STRING_MAX, &s);

                if (r < 0)
                        return r;
                r = strv_push(&l, s);
                if (r < 0) {
                        free(s);
                        return r;
                }
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static int integer_from_json(json_t *v, uint64_t max, uint64_t *ret) {
        json_int_t i;

        if (!json_is_integer(v))
                return -EBADMSG;
        i = json_integer_value(v);
        if (i < 0 || (uint64_t) i > max)
                return -EBADMSG;
        *ret = (uint64_t) i;
        return 0;
}

static int field_from_json(const Field *f, json_t *v, void *doc) {
        char *p = (char *) doc + f->offset;
        uint64_t u;
        int r;

        switch (f->type) {
        case FIELD_STRING:
                return string_from_json(v, FLEET_STRING_MAX, (char **) p);
        case FIELD_PAYLOAD:
                return string_from_json(v, FLEET_PAYLOAD_MAX, (char **) p);
        case FIELD_BOOL:
                if (!json_is_boolean(v))
                        return -EBADMSG;
                *(bool *) p = json_is_true(v);
                return 0;
        case FIELD_U16:
        case FIELD_U32:
        case FIELD_U64:
                r = integer_from_json(v, f->type == FIELD_U16   ? UINT16_MAX
                                         : f->type == FIELD_U32 ? UINT32_MAX
                                                                : (uint64_t) INT64_MAX,
                                      &u);
                if (r < 0)
                        return r;
                if (f->type == FIELD_U16)
                        *(uint16_t *) p = (uint16_t) u;
                else if (f->type == FIELD_U32)
                        *(uint32_t *) p = (uint32_t) u;
                else
                        *(uint64_t *) p = u;
                return 0;
        case FIELD_TIME:
                if (!json_is_string(v))
                        return -EBADMSG;
                return rfc3339_parse(json_string_value(v), (usec_t *) p) < 0 ? -EBADMSG : 0;
        case FIELD_STATUS: {
                AllocationStatus s = json_is_string(v)
                                             ? allocation_status_from_string(json_string_value(v))
                                             : _ALLOCATION_STATUS_INVALID;
                if (s < 0)
                        return -EBADMSG;
                *(AllocationStatus *) p = s;
                return 0;
        }
        case FIELD_STRV:
                return strv_from_json(v, (char ***) p);
        }
        return -EBADMSG;
}

static void doc_done(const Field *fields, size_t n, void *doc, size_t size) {
        for (size_t i = 0; i < n; i++) {
                char *p = (char *) doc + fields[i].offset;

                if (fields[i].type == FIELD_STRING || fields[i].type == FIELD_PAYLOAD)
                        free(*(char **) p);
                else if (fields[i].type == FIELD_STRV)
                        strv_free(*(char ***) p);
        }
        memset(doc, 0, size);
}

static int doc_parse(const Field *fields, size_t n, const char *text, size_t len, void *doc,
                     size_t size) {
        _cleanup_json_ json_t *o = NULL;
        int r;

        memset(doc, 0, size);
        if (!text || len > FLEET_DOC_MAX)
                return -EBADMSG;
        o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(o))
                return -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                json_t *v = json_object_get(o, fields[i].name);

                if (!v) {
                        if (fields[i].required) {
                                r = -EBADMSG;
                                goto fail;
                        }
                        continue;
                }
                r = field_from_json(&fields[i], v, doc);
                if (r < 0)
                        goto fail;
        }
        return 0;
fail:
        doc_done(fields, n, doc, size);
        return r;
}

#define DEFINE_DOC(name, type, fields)                                                       \
        int name##_format(const type *d, char **ret) {                                       \
                if (!d || !ret)                                                              \
                        return -EINVAL;                                                      \
                return doc_format(fields, ELEMENTSOF(fields), d, ret);                       \
        }                                                                                    \
        int name##_parse(const char *text, size_t len, type *ret) {                          \
                return doc_parse(fields, ELEMENTSOF(fields), text, len, ret, sizeof(type));  \
        }                                                                                    \
        void name##_done(type *d) {                                                          \
                if (d)                                                                       \
                        doc_done(fields, ELEMENTSOF(fields), d, sizeof(type));               \
        }

DEFINE_DOC(slot_doc, SlotDoc, slot_fields)

bool slot_doc_runs_build(const SlotDoc *d, const char *id) {
        return !id || id[0] == '\0' || !d->build_configurations || !d->build_configurations[0] ||
               strv_contains(d->build_configurations, id);
}

char **slot_doc_builds_bounded(char **ids) {
        size_t bytes = 0, n = 0;

        STRV_FOREACH(i, ids) {
                bytes += strlen(*i);
                n++;
        }
        return bytes > SLOT_DOC_BUILDS_MAX || n > FLEET_LIST_MAX ? NULL : ids;
}
DEFINE_DOC(machine_doc, MachineDoc, machine_fields)
DEFINE_DOC(allocation_record, AllocationRecord, record_fields)
DEFINE_DOC(claim_doc, ClaimDoc, claim_fields)
DEFINE_DOC(deallocation_doc, DeallocationDoc, deallocation_fields)
DEFINE_DOC(allocation_id_doc, AllocationIdDoc, allocation_id_fields)

/* The scaler's command: its action is a word the table of fields does not know, so it is
 * carried as a string and checked here. */
typedef struct ScaleText {
        char *action;
        char *fleet_id;
} ScaleText;

static const Field scale_fields[] = {
        REQUIRED(ScaleText, "action", FIELD_STRING, action),
        REQUIRED(ScaleText, "fleetId", FIELD_STRING, fleet_id),
};

static const char *const scale_action_names[_SCALE_ACTION_MAX] = {
        [SCALE_START] = "start",
        [SCALE_STOP] = "stop",
};

const char *scale_action_to_string(ScaleAction a) {
        return a >= 0 && a < _SCALE_ACTION_MAX ? scale_action_names[a] : NULL;
}

ScaleAction scale_action_from_string(const char *s) {
        for (ScaleAction i = 0; s && i < _SCALE_ACTION_MAX; i++)
                if (streq(scale_action_names[i], s))
                        return i;
        return _SCALE_ACTION_INVALID;
}

int scale_doc_format(const ScaleDoc *d, char **ret) {
        ScaleText t = { .action = (char *) scale_action_to_string(d->action),
                        .fleet_id = d->fleet_id };

        if (!t.action)
                return -EINVAL;
        return doc_format(scale_fields, ELEMENTSOF(scale_fields), &t, ret);
}

int scale_doc_parse(const char *text, size_t len, ScaleDoc *ret) {
        ScaleText t = {};
        ScaleAction a;
        int r;

        if (!ret)
                return -EINVAL;
        *ret = (ScaleDoc){};
        r = doc_parse(scale_fields, ELEMENTSOF(scale_fields), text, len, &t, sizeof(t));
        if (r < 0)
                return r;
        a = scale_action_from_string(t.action);
        free(t.action);
        if (a < 0) {
                free(t.fleet_id);
                return -EBADMSG;
        }
        *ret = (ScaleDoc){ .action = a, .fleet_id = t.fleet_id };
        return 0;
}

void scale_doc_done(ScaleDoc *d) {
        if (!d)
                return;
        d->fleet_id = mfree(d->fleet_id);
        d->action = SCALE_START;
}
