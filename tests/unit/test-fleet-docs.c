/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "docs.h"
#include "macro.h"
#include "strv.h"

#define P "/slotd/v1"
/* 2026-11-24T10:00:00.123Z */
#define T1 ((usec_t) 1795514400123000ULL)

static void test_rfc3339(_unused_ void **state) {
        char buf[RFC3339_MAX];
        usec_t t = 42;

        assert_string_equal(rfc3339_format(0, buf), "");
        assert_string_equal(rfc3339_format(T1, buf), "2026-11-24T10:00:00.123Z");
        /* Below the millisecond is cut, not rounded. */
        assert_string_equal(rfc3339_format(T1 + 999, buf), "2026-11-24T10:00:00.123Z");
        assert_string_equal(rfc3339_format(1, buf), "1970-01-01T00:00:00.000Z");
        assert_string_equal(rfc3339_format(USEC_INFINITY, buf), "9999-12-31T23:59:59.999Z");

        assert_int_equal(rfc3339_parse("", &t), 0);
        assert_int_equal(t, 0);
        assert_int_equal(rfc3339_parse("2026-11-24T10:00:00.123Z", &t), 0);
        assert_int_equal(t, T1);
        assert_int_equal(rfc3339_parse("2026-11-24t10:00:00.123456789z", &t), 0);
        assert_int_equal(t, T1 + 456);
        assert_int_equal(rfc3339_parse("2026-11-24T11:30:00.123+01:30", &t), 0);
        assert_int_equal(t, T1);
        assert_int_equal(rfc3339_parse("2026-11-24T08:00:00.123-02:00", &t), 0);
        assert_int_equal(t, T1);
        assert_int_equal(rfc3339_parse("2026-11-24T10:00:00Z", &t), 0);
        assert_int_equal(t, T1 - 123000);
        assert_int_equal(rfc3339_parse("2024-02-29T00:00:00Z", &t), 0);

        t = 7;
        assert_int_equal(rfc3339_parse("2023-02-29T00:00:00Z", &t), -EINVAL);
        assert_int_equal(rfc3339_parse("2026-11-24T10:00:00", &t), -EINVAL);
        assert_int_equal(rfc3339_parse("2026-11-24T10:00:00.Z", &t), -EINVAL);
        assert_int_equal(rfc3339_parse("2026-11-24 10:00:00Z", &t), -EINVAL);
        assert_int_equal(rfc3339_parse("2026-13-24T10:00:00Z", &t), -EINVAL);
        assert_int_equal(rfc3339_parse("2026-11-24T24:00:00Z", &t), -EINVAL);
        assert_int_equal(rfc3339_parse("1969-12-31T23:59:59Z", &t), -EINVAL);
        assert_int_equal(rfc3339_parse("1970-01-01T00:00:00+00:01", &t), -EINVAL);
        assert_int_equal(rfc3339_parse("2026-11-24T10:00:00Zjunk", &t), -EINVAL);
        assert_int_equal(rfc3339_parse("2026-11-24T10:00:00+1:00", &t), -EINVAL);
        assert_int_equal(t, 7);
}

static void test_keys(_unused_ void **state) {
        _cleanup_free_ char *k = NULL, *fleet = NULL, *machine = NULL, *alloc = NULL;
        FleetHostKeyKind kind;
        uint32_t id = 0;

        assert_true(fleet_key_component_valid("shooter-eu_1.x"));
        assert_false(fleet_key_component_valid(""));
        assert_false(fleet_key_component_valid(".."));
        assert_false(fleet_key_component_valid("a/b"));
        assert_false(fleet_key_component_valid("a b"));

        k = fleet_key_slot(P, "shooter", "m1", 42);
        assert_string_equal(k, P "/slots/shooter/m1/42");
        assert_int_equal(fleet_key_parse_slot(P, k, &fleet, &machine, &id), 0);
        assert_string_equal(fleet, "shooter");
        assert_string_equal(machine, "m1");
        assert_int_equal(id, 42);
        fleet = mfree(fleet);
        machine = mfree(machine);
        assert_int_equal(fleet_key_parse_slot(P, P "/slots/shooter/m1/042", NULL, NULL, &id),
                         -EINVAL);
        assert_int_equal(fleet_key_parse_slot(P, P "/slots/shooter/m1/4294967296", NULL, NULL,
                                              &id), -EINVAL);
        assert_int_equal(fleet_key_parse_slot(P, P "/slots/shooter/m1/1/x", NULL, NULL, &id),
                         -EINVAL);
        assert_int_equal(fleet_key_parse_slot(P, P "/slots/shooter//1", NULL, NULL, &id),
                         -EINVAL);
        assert_int_equal(fleet_key_parse_slot(P, "/other/slots/shooter/m1/1", NULL, NULL, &id),
                         -EINVAL);
        assert_int_equal(fleet_key_parse_slot(P, P "/machines/m1", NULL, NULL, &id), -EINVAL);
        assert_int_equal(fleet_key_parse_slot(P, P "/slots/shooter/m1/4294967295", NULL, NULL,
                                              &id), 0);
        assert_int_equal(id, UINT32_MAX);

        k = mfree(k);
        k = fleet_key_machine(P, "m1");
        assert_int_equal(fleet_key_parse_machine(P, k, &machine), 0);
        assert_string_equal(machine, "m1");
        machine = mfree(machine);

        k = mfree(k);
        k = fleet_key_allocation(P, "shooter", "a-1");
        assert_string_equal(k, P "/allocations/shooter/a-1");
        assert_int_equal(fleet_key_parse_allocation(P, k, &fleet, &alloc), 0);
        assert_string_equal(fleet, "shooter");
        assert_string_equal(alloc, "a-1");
        alloc = mfree(alloc);

        k = mfree(k);
        k = fleet_key_claim(P, "m2", 7);
        assert_string_equal(k, P "/hosts/m2/claims/7");
        assert_int_equal(fleet_key_parse_host(P, k, &kind, &machine, &id, &alloc), 0);
        assert_int_equal(kind, FLEET_HOST_KEY_CLAIM);
        assert_string_equal(machine, "m2");
        assert_int_equal(id, 7);
        assert_null(alloc);
        machine = mfree(machine);

        k = mfree(k);
        k = fleet_key_deallocation(P, "m2", "a-9");
        assert_int_equal(fleet_key_parse_host(P, k, &kind, &machine, &id, &alloc), 0);
        assert_int_equal(kind, FLEET_HOST_KEY_DEALLOCATION);
        assert_string_equal(alloc, "a-9");
        assert_int_equal(fleet_key_parse_host(P, P "/hosts/m2/other/1", &kind, NULL, NULL, NULL),
                         -EINVAL);
        alloc = mfree(alloc);
        machine = mfree(machine);

        /* The scaler's command to a slot. */
        k = mfree(k);
        k = fleet_key_scale(P, "m2", 3);
        assert_string_equal(k, P "/hosts/m2/scale/3");
        id = 0;
        assert_int_equal(fleet_key_parse_host(P, k, &kind, &machine, &id, &alloc), 0);
        assert_int_equal(kind, FLEET_HOST_KEY_SCALE);
        assert_string_equal(machine, "m2");
        assert_int_equal(id, 3);
        assert_null(alloc);
        assert_int_equal(fleet_key_parse_host(P, P "/hosts/m2/scale/x", &kind, NULL, NULL, NULL),
                         -EINVAL);
        assert_int_equal(fleet_key_parse_host(P, P "/hosts/m2/claims/x", &kind, NULL, NULL, NULL),
                         -EINVAL);

        /* The allocationId index: outside allocations/ (the list of a fleet's records) and
         * outside the ranges the allocator watches (slots/, machines/, hosts/). */
        k = mfree(k);
        k = fleet_key_allocation_id(P, "a-9");
        assert_string_equal(k, P "/allocation-ids/a-9");
        assert_int_equal(fleet_key_parse_allocation(P, k, NULL, NULL), -EINVAL);
        assert_int_equal(fleet_key_parse_host(P, k, &kind, NULL, NULL, NULL), -EINVAL);
}

static void test_slot_doc(_unused_ void **state) {
        SlotDoc d = {
                .machine_id = (char *) "m1", .machine_number = UINT64_C(9223372036854775807),
                .slot_id = 3, .fleet_id = (char *) "shooter",
                .region_id = (char *) "eu", .state = (char *) "online",
                .process_state = (char *) "running", .ready = true,
                .build_configuration_id = (char *) "b1", .ipv4 = (char *) "10.0.0.1",
                .game_port = 7000, .query_port = 7100, .hold_until = T1,
        };
        _cleanup_free_ char *text = NULL, *again = NULL;
        SlotDoc p;

        assert_int_equal(slot_doc_format(&d, &text), 0);
        assert_string_equal(text,
                "{\"machineID\":\"m1\",\"machineNumber\":9223372036854775807,\"slotID\":3,"
                "\"fleetId\":\"shooter\",\"regionId\":\"eu\","
                "\"state\":\"online\",\"processState\":\"running\",\"ready\":true,"
                "\"readyForPlayers\":false,\"readyForPlayersAt\":\"\",\"buildConfigurationId\":\"b1\","
                "\"buildConfigurations\":[],\"ipv4\":\"10.0.0.1\","
                "\"ipv6\":\"\",\"gamePort\":7000,\"queryPort\":7100,\"allocationId\":\"\","
                "\"draining\":false,\"holdUntil\":\"2026-11-24T10:00:00.123Z\","
                "\"reservedUntil\":\"\"}");
        assert_int_equal(slot_doc_parse(text, strlen(text), &p), 0);
        assert_string_equal(p.machine_id, "m1");
        assert_true(p.machine_number == UINT64_C(9223372036854775807));
        assert_int_equal(p.slot_id, 3);
        assert_int_equal(p.game_port, 7000);
        assert_true(p.ready);
        assert_int_equal(p.hold_until, T1);
        assert_string_equal(p.allocation_id, "");
        assert_int_equal(slot_doc_format(&p, &again), 0);
        assert_string_equal(text, again);
        slot_doc_done(&p);
        assert_null(p.machine_id);
        slot_doc_done(&p);
}

/* buildConfigurations: the IDs its fleet runs; none (absent or []) reads as any. */
static void test_slot_doc_builds(_unused_ void **state) {
        char *ids[] = { (char *) "1001", (char *) "1002", NULL };
        SlotDoc d = { .machine_id = (char *) "m1", .slot_id = 1, .fleet_id = (char *) "f",
                      .build_configurations = ids };
        const char *old = "{\"machineID\":\"m1\",\"slotID\":1,\"fleetId\":\"f\"}";
        const char *wrong = "{\"machineID\":\"m1\",\"slotID\":1,\"fleetId\":\"f\","
                            "\"buildConfigurations\":\"1001\"}";
        _cleanup_free_ char *text = NULL, *big = NULL;
        char *many[3];
        SlotDoc p;

        assert_int_equal(slot_doc_format(&d, &text), 0);
        assert_non_null(strstr(text, "\"buildConfigurations\":[\"1001\",\"1002\"]"));
        assert_int_equal(slot_doc_parse(text, strlen(text), &p), 0);
        assert_true(slot_doc_runs_build(&p, "1001"));
        assert_true(slot_doc_runs_build(&p, "1002"));
        assert_false(slot_doc_runs_build(&p, "9999"));
        assert_true(slot_doc_runs_build(&p, ""));   /* the fleet's default */
        assert_true(slot_doc_runs_build(&p, NULL));
        slot_doc_done(&p);

        /* A document written before the field, or of a fleet without sections: any ID. */
        assert_int_equal(slot_doc_parse(old, strlen(old), &p), 0);
        assert_null(p.build_configurations);
        assert_true(slot_doc_runs_build(&p, "9999"));
        slot_doc_done(&p);
        d.build_configurations = (char *[]){ NULL };
        assert_true(slot_doc_runs_build(&d, "9999"));
        assert_int_equal(slot_doc_parse(wrong, strlen(wrong), &p), -EBADMSG);

        /* A list of more than SLOT_DOC_BUILDS_MAX bytes is left out (read as any). */
        assert_ptr_equal(slot_doc_builds_bounded(ids), ids);
        assert_null(slot_doc_builds_bounded(NULL));
        big = malloc(SLOT_DOC_BUILDS_MAX / 2 + 1);
        assert_non_null(big);
        memset(big, 'a', SLOT_DOC_BUILDS_MAX / 2);
        big[SLOT_DOC_BUILDS_MAX / 2] = '\0';
        many[0] = big, many[1] = big, many[2] = NULL;
        assert_ptr_equal(slot_doc_builds_bounded(many), many); /* exactly the maximum */
        many[1] = (char *) "x"; /* one byte less: kept */
        assert_ptr_equal(slot_doc_builds_bounded(many), many);
        char *over[] = { big, big, (char *) "x", NULL }; /* one byte more */
        assert_null(slot_doc_builds_bounded(over));
}

static void assert_slot_refused(const char *text) {
        SlotDoc p;

        assert_int_equal(slot_doc_parse(text, strlen(text), &p), -EBADMSG);
        assert_null(p.machine_id);
        assert_null(p.fleet_id);
}

static void test_slot_doc_hostile(_unused_ void **state) {
        const char *minimal = "{\"machineID\":\"m\",\"slotID\":0,\"fleetId\":\"f\","
                              "\"future\":{\"x\":[1,2]}}";
        SlotDoc p;

        /* Unknown fields are ignored, missing optional ones empty (machineNumber too: a
         * registry before it wrote none). */
        assert_int_equal(slot_doc_parse(minimal, strlen(minimal), &p), 0);
        assert_true(p.machine_number == 0);
        assert_null(p.state);
        assert_false(p.ready);
        slot_doc_done(&p);

        assert_slot_refused("");
        assert_slot_refused("[]");
        assert_slot_refused("null");
        assert_slot_refused("{\"machineID\":\"m\",\"slotID\":0}");
        assert_slot_refused("{\"machineID\":\"m\",\"slotID\":-1,\"fleetId\":\"f\"}");
        assert_slot_refused("{\"machineID\":\"m\",\"slotID\":4294967296,\"fleetId\":\"f\"}");
        assert_slot_refused("{\"machineID\":\"m\",\"slotID\":1.5,\"fleetId\":\"f\"}");
        /* machineNumber: an integer of Unity's int64, never a string or above INT64_MAX. */
        assert_slot_refused("{\"machineID\":\"m\",\"machineNumber\":\"42\",\"slotID\":1,"
                            "\"fleetId\":\"f\"}");
        assert_slot_refused("{\"machineID\":\"m\",\"machineNumber\":9223372036854775808,"
                            "\"slotID\":1,\"fleetId\":\"f\"}");
        assert_slot_refused("{\"machineID\":\"m\",\"machineNumber\":-1,\"slotID\":1,"
                            "\"fleetId\":\"f\"}");
        assert_slot_refused("{\"machineID\":\"m\",\"slotID\":1,\"fleetId\":\"f\","
                            "\"gamePort\":65536}");
        assert_slot_refused("{\"machineID\":\"m\",\"slotID\":1,\"fleetId\":\"f\","
                            "\"ready\":\"yes\"}");
        assert_slot_refused("{\"machineID\":\"m\",\"slotID\":1,\"fleetId\":\"f\","
                            "\"holdUntil\":\"tomorrow\"}");
        assert_slot_refused("{\"machineID\":\"m\",\"slotID\":1,\"fleetId\":\"f\","
                            "\"state\":\"a\\u0000b\"}");
        assert_slot_refused("{\"machineID\":\"m\",\"machineID\":\"n\",\"slotID\":1,"
                            "\"fleetId\":\"f\"}");
        assert_slot_refused("{\"machineID\":\"m\",\"slotID\":1,\"fleetId\":\"f\"} trailing");
}

static void test_machine_doc(_unused_ void **state) {
        char *fleets[] = { (char *) "shooter", (char *) "racer", NULL };
        MachineDoc d = {
                .machine_id = (char *) "m1", .machine_number = 42, .fleets = fleets,
                .draining = true,
                .idle_since = T1, .idle_ttl_sec = 3600, .slots = 10, .slotd = (char *) "0.1.0",
        };
        _cleanup_free_ char *text = NULL;
        MachineDoc p;

        assert_int_equal(machine_doc_format(&d, &text), 0);
        assert_non_null(strstr(text, "\"fleets\":[\"shooter\",\"racer\"],\"regions\":[]"));
        assert_non_null(strstr(text, "{\"machineID\":\"m1\",\"machineNumber\":42,"));
        assert_int_equal(machine_doc_parse(text, strlen(text), &p), 0);
        assert_true(p.machine_number == 42);
        assert_true(strv_equal(p.fleets, fleets));
        assert_null(p.regions);
        assert_true(p.draining);
        assert_int_equal(p.idle_since, T1);
        assert_int_equal(p.idle_ttl_sec, 3600);
        assert_int_equal(p.slots, 10);
        machine_doc_done(&p);

        assert_int_equal(machine_doc_parse("{\"machineID\":\"m\",\"fleets\":[1]}", 33, &p),
                         -EBADMSG);
        assert_int_equal(machine_doc_parse("{\"machineID\":\"m\",\"fleets\":\"x\"}", 33, &p),
                         -EBADMSG);
}

static void test_record(_unused_ void **state) {
        char *excluded[] = { (char *) "m9", NULL };
        AllocationRecord d = {
                .allocation_id = (char *) "a-1", .fleet_id = (char *) "shooter",
                .payload = (char *) "{\"map\":\"dust\"}", .status = ALLOCATION_FULFILLED,
                .machine_id = (char *) "m1", .machine_number = 42, .slot_id = 2,
                .game_port = 7001,
                .requested = T1, .fulfilled = T1 + 5000, .attempts = 2, .excluded = excluded,
        };
        _cleanup_free_ char *text = NULL, *big = NULL;
        AllocationRecord p;
        size_t n;

        assert_int_equal(allocation_record_format(&d, &text), 0);
        assert_non_null(strstr(text, "\"status\":\"fulfilled\""));
        assert_non_null(strstr(text, "\"machineID\":\"m1\",\"machineNumber\":42,"));
        assert_non_null(strstr(text, "\"payload\":\"{\\\"map\\\":\\\"dust\\\"}\""));
        assert_int_equal(allocation_record_parse(text, strlen(text), &p), 0);
        assert_int_equal(p.status, ALLOCATION_FULFILLED);
        assert_true(p.machine_number == 42);
        assert_string_equal(p.payload, "{\"map\":\"dust\"}");
        assert_int_equal(p.fulfilled, T1 + 5000);
        assert_true(strv_equal(p.excluded, excluded));
        assert_string_equal(p.answered_request_id, ""); /* none: written "" as any string */
        assert_int_equal(p.answered, 0);
        assert_false(allocation_record_answered(&p));
        allocation_record_done(&p);

        /* A later POST answered 200 with it: its requestId and time, kept through a rewrite
         * (a fence's resolution reads them, SPEC §13). */
        text = mfree(text);
        d.answered_request_id = (char *) "7f0e4b2c-1d3a-4e5f-8a9b-0c1d2e3f4a5b";
        d.answered = T1 + 9000;
        assert_int_equal(allocation_record_format(&d, &text), 0);
        assert_non_null(strstr(text, "\"answeredRequestId\":\"7f0e4b2c-1d3a-4e5f-8a9b-0c1d2e3f4a5b\""));
        assert_int_equal(allocation_record_parse(text, strlen(text), &p), 0);
        assert_string_equal(p.answered_request_id, "7f0e4b2c-1d3a-4e5f-8a9b-0c1d2e3f4a5b");
        assert_int_equal(p.answered, T1 + 9000);
        assert_int_equal(p.fulfilled, T1 + 5000);
        assert_true(allocation_record_answered(&p));
        allocation_record_done(&p);

        assert_int_equal(allocation_record_parse(
                                 "{\"allocationId\":\"a\",\"fleetId\":\"f\",\"status\":\"lost\"}",
                                 51, &p), -EBADMSG);
        assert_int_equal(allocation_record_parse("{\"allocationId\":\"a\",\"fleetId\":\"f\"}", 35,
                                                 &p), -EBADMSG);

        /* The payload may reach FLEET_PAYLOAD_MAX, other strings FLEET_STRING_MAX. */
        big = malloc(FLEET_PAYLOAD_MAX + 100);
        n = (size_t) sprintf(big, "{\"allocationId\":\"a\",\"fleetId\":\"f\",\"status\":"
                                  "\"claimed\",\"payload\":\"");
        memset(big + n, 'x', FLEET_PAYLOAD_MAX);
        strcpy(big + n + FLEET_PAYLOAD_MAX, "\"}");
        assert_int_equal(allocation_record_parse(big, strlen(big), &p), 0);
        assert_int_equal(strlen(p.payload), FLEET_PAYLOAD_MAX);
        allocation_record_done(&p);
        memset(big + n, 'x', FLEET_PAYLOAD_MAX + 1);
        strcpy(big + n + FLEET_PAYLOAD_MAX + 1, "\"}");
        assert_int_equal(allocation_record_parse(big, strlen(big), &p), -EBADMSG);
        big[n - 4] = 'X'; /* "payloaX": an unknown field, ignored whatever its size */
        assert_int_equal(allocation_record_parse(big, strlen(big), &p), 0);
        allocation_record_done(&p);
}

static void test_claim_and_deallocation(_unused_ void **state) {
        ClaimDoc c = { .allocation_id = (char *) "a-1", .fleet_id = (char *) "f",
                       .deadline = T1 };
        DeallocationDoc d = { .allocation_id = (char *) "a-1", .fleet_id = (char *) "f",
                              .slot_id = 4 };
        _cleanup_free_ char *ct = NULL, *dt = NULL;
        ClaimDoc pc;
        DeallocationDoc pd;
        const char *t;

        assert_int_equal(claim_doc_format(&c, &ct), 0);
        assert_string_equal(ct, "{\"allocationId\":\"a-1\",\"fleetId\":\"f\","
                                "\"buildConfigurationId\":\"\",\"payload\":\"\","
                                "\"deadline\":\"2026-11-24T10:00:00.123Z\",\"draining\":false,"
                                "\"restart\":false}");
        assert_int_equal(claim_doc_parse(ct, strlen(ct), &pc), 0);
        assert_int_equal(pc.deadline, T1);
        assert_false(pc.draining);
        assert_false(pc.restart);
        claim_doc_done(&pc);
        ct = mfree(ct);
        /* A claim on a draining machine, the allocator's last resort, says so. */
        c.draining = true;
        assert_int_equal(claim_doc_format(&c, &ct), 0);
        assert_non_null(strstr(ct, ",\"draining\":true,"));
        assert_int_equal(claim_doc_parse(ct, strlen(ct), &pc), 0);
        assert_true(pc.draining);
        claim_doc_done(&pc);
        ct = mfree(ct);
        /* The POST's restart: the server restarts before it is allocated. */
        c.restart = true;
        assert_int_equal(claim_doc_format(&c, &ct), 0);
        assert_non_null(strstr(ct, ",\"restart\":true}"));
        assert_int_equal(claim_doc_parse(ct, strlen(ct), &pc), 0);
        assert_true(pc.restart);
        claim_doc_done(&pc);
        /* An allocator that does not know the field writes none: not draining. */
        t = "{\"allocationId\":\"a-1\",\"fleetId\":\"f\"}";
        assert_int_equal(claim_doc_parse(t, strlen(t), &pc), 0);
        assert_false(pc.draining);
        claim_doc_done(&pc);
        /* Not a boolean: refused, as every field of the wrong type. */
        t = "{\"allocationId\":\"a-1\",\"fleetId\":\"f\",\"draining\":1}";
        assert_int_equal(claim_doc_parse(t, strlen(t), &pc), -EBADMSG);
        assert_int_equal(deallocation_doc_format(&d, &dt), 0);
        assert_string_equal(dt, "{\"allocationId\":\"a-1\",\"fleetId\":\"f\",\"slotID\":4}");
        assert_int_equal(deallocation_doc_parse(dt, strlen(dt), &pd), 0);
        assert_int_equal(pd.slot_id, 4);
        deallocation_doc_done(&pd);
}

static void test_scale_doc(_unused_ void **state) {
        ScaleDoc d = { .action = SCALE_STOP, .fleet_id = (char *) "f" }, pd;
        _cleanup_free_ char *t = NULL;
        const char *s;

        assert_int_equal(scale_doc_format(&d, &t), 0);
        assert_string_equal(t, "{\"action\":\"stop\",\"fleetId\":\"f\"}");
        assert_int_equal(scale_doc_parse(t, strlen(t), &pd), 0);
        assert_int_equal(pd.action, SCALE_STOP);
        assert_string_equal(pd.fleet_id, "f");
        scale_doc_done(&pd);
        assert_null(pd.fleet_id);
        s = "{\"fleetId\":\"g\",\"action\":\"start\",\"later\":1}";
        assert_int_equal(scale_doc_parse(s, strlen(s), &pd), 0);
        assert_int_equal(pd.action, SCALE_START);
        assert_string_equal(pd.fleet_id, "g");
        scale_doc_done(&pd);
        /* Another word, no action, no fleet, the wrong type: refused. */
        s = "{\"action\":\"restart\",\"fleetId\":\"f\"}";
        assert_int_equal(scale_doc_parse(s, strlen(s), &pd), -EBADMSG);
        assert_null(pd.fleet_id);
        s = "{\"fleetId\":\"f\"}";
        assert_int_equal(scale_doc_parse(s, strlen(s), &pd), -EBADMSG);
        s = "{\"action\":\"start\"}";
        assert_int_equal(scale_doc_parse(s, strlen(s), &pd), -EBADMSG);
        s = "{\"action\":1,\"fleetId\":\"f\"}";
        assert_int_equal(scale_doc_parse(s, strlen(s), &pd), -EBADMSG);
        d.action = _SCALE_ACTION_INVALID;
        t = mfree(t);
        assert_int_equal(scale_doc_format(&d, &t), -EINVAL);
        assert_null(t);
}

static void test_allocation_id_doc(_unused_ void **state) {
        AllocationIdDoc d = { .allocation_id = (char *) "a-1", .fleet_id = (char *) "f" }, pd;
        _cleanup_free_ char *t = NULL;
        const char *s;

        assert_int_equal(allocation_id_doc_format(&d, &t), 0);
        assert_string_equal(t, "{\"allocationId\":\"a-1\",\"fleetId\":\"f\"}");
        assert_int_equal(allocation_id_doc_parse(t, strlen(t), &pd), 0);
        assert_string_equal(pd.allocation_id, "a-1");
        assert_string_equal(pd.fleet_id, "f");
        allocation_id_doc_done(&pd);
        /* Both fields are required: an index that names no fleet refuses nothing in silence. */
        s = "{\"allocationId\":\"a-1\"}";
        assert_int_equal(allocation_id_doc_parse(s, strlen(s), &pd), -EBADMSG);
        s = "{\"allocationId\":\"a-1\",\"fleetId\":7}";
        assert_int_equal(allocation_id_doc_parse(s, strlen(s), &pd), -EBADMSG);
}

static void test_format_refuses_bad_utf8(_unused_ void **state) {
        SlotDoc d = { .machine_id = (char *) "m\xff", .fleet_id = (char *) "f" };
        char *text = NULL;

        assert_int_equal(slot_doc_format(&d, &text), -EINVAL);
        assert_null(text);
        assert_string_equal(allocation_status_to_string(ALLOCATION_CLAIMED), "claimed");
        assert_null(allocation_status_to_string(_ALLOCATION_STATUS_MAX));
        assert_int_equal(allocation_status_from_string("nope"), _ALLOCATION_STATUS_INVALID);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_rfc3339),
                cmocka_unit_test(test_keys),
                cmocka_unit_test(test_slot_doc),
                cmocka_unit_test(test_slot_doc_builds),
                cmocka_unit_test(test_slot_doc_hostile),
                cmocka_unit_test(test_machine_doc),
                cmocka_unit_test(test_record),
                cmocka_unit_test(test_claim_and_deallocation),
                cmocka_unit_test(test_scale_doc),
                cmocka_unit_test(test_allocation_id_doc),
                cmocka_unit_test(test_format_refuses_bad_utf8),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
