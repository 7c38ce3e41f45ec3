/* SPDX-License-Identifier: MIT */
/* allocator-answer.h: every outcome of an allocation, of GET, the list and DELETE of records,
 * and of a fleet's capacity (allocator-ops.h) as the API answers it, status and body byte for
 * byte (SPEC §13; the integration tests expect these words), and an allocation's as the
 * metrics count it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "allocator-answer.h"
#include "allocator-request.h"
#include "macro.h"

#define ID "0b6f4c8e-1a2b-4c3d-8e9f-0a1b2c3d4e5f"

static const AllocRequest request = {
        .project = "p1",
        .environment = "prod",
        .fleet = "game",
        .allocation_id = ID,
        .build_configuration_id = "",
        .region_id = "",
        .payload = "",
};

/* The answer's status, and its body as the door sends it (compact, in order). */
static unsigned answer(AllocOutcome o, const AllocRequest *r, const char *detail,
                       unsigned attempts, char **ret_text) {
        json_t *body = NULL;
        unsigned status = alloc_answer_http(&(AllocAnswer){ .outcome = o, .request = r,
                                                            .detail = detail,
                                                            .attempts = attempts },
                                            &body);

        assert_non_null(body);
        *ret_text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(body);
        assert_non_null(*ret_text);
        return status;
}

static void expect(AllocOutcome o, const AllocRequest *r, const char *detail, unsigned attempts,
                   unsigned status, const char *text) {
        char *got = NULL;

        assert_int_equal(answer(o, r, detail, attempts, &got), status);
        assert_string_equal(got, text);
        free(got);
}

static void test_created(void **state) {
        const char *href = "{\"allocationId\":\"" ID "\",\"href\":\"/v1/allocations/projects/p1/"
                           "environments/prod/fleets/game/allocations/" ID "\"}";

        expect(ALLOC_CLAIMED, &request, NULL, 1, 200, href);
        expect(ALLOC_EXISTING, &request, NULL, 0, 200, href);
        assert_int_equal(alloc_outcome_result(ALLOC_CLAIMED), ALLOC_RESULT_CLAIMED);
        assert_int_equal(alloc_outcome_result(ALLOC_EXISTING), ALLOC_RESULT_EXISTING);
}

static void test_invalid(void **state) {
        AllocRequest r = { .project = "p1", .environment = "prod", .fleet = "game" };

        expect(ALLOC_INVALID, &r, "allocationId: not a UUID", 0, 400,
               "{\"error\":\"allocation in fleet game: allocationId: not a UUID\"}");
        /* api_parse_allocate() says nothing when memory ran out */
        expect(ALLOC_INVALID, &r, NULL, 0, 400,
               "{\"error\":\"allocation in fleet game: out of memory\"}");
        assert_int_equal(alloc_outcome_result(ALLOC_INVALID), ALLOC_RESULT_INVALID);
}

static void test_view_not_read(void **state) {
        expect(ALLOC_VIEW_NOT_READY, &request, NULL, 0, 503,
               "{\"error\":\"etcd unavailable: the fleet view is not read from etcd yet "
               "(allocation " ID ")\"}");
        assert_int_equal(alloc_outcome_result(ALLOC_VIEW_NOT_READY), ALLOC_RESULT_UNAVAILABLE);
}

static void test_conflicts(void **state) {
        expect(ALLOC_FLEET_ELSEWHERE, &request, "other", 0, 409,
               "{\"error\":\"allocation " ID " is of fleet other, not game\"}");
        expect(ALLOC_INDEX_ORPHANED, &request, "/slotd/allocation-ids/" ID, 1, 409,
               "{\"error\":\"allocation " ID ": /slotd/allocation-ids/" ID " in etcd has no "
               "record beside it; the allocationId cannot be used until that key is "
               "deleted\"}");
        assert_int_equal(alloc_outcome_result(ALLOC_FLEET_ELSEWHERE), ALLOC_RESULT_CONFLICT);
        assert_int_equal(alloc_outcome_result(ALLOC_INDEX_ORPHANED), ALLOC_RESULT_CONFLICT);
}

static void test_no_capacity(void **state) {
        AllocRequest r = request;

        expect(ALLOC_NO_CAPACITY, &r, NULL, 3, 503,
               "{\"error\":\"no capacity in fleet game\"}");
        r.region_id = "eu-west";
        expect(ALLOC_NO_CAPACITY, &r, NULL, 3, 503,
               "{\"error\":\"no capacity in fleet game (region eu-west)\"}");
        r.region_id = NULL;
        expect(ALLOC_NO_CAPACITY, &r, NULL, 0, 503,
               "{\"error\":\"no capacity in fleet game\"}");
        assert_int_equal(alloc_outcome_result(ALLOC_NO_CAPACITY), ALLOC_RESULT_NO_CAPACITY);
}

static void test_unknown_fleet(void **state) {
        expect(ALLOC_UNKNOWN_FLEET, &request, NULL, 0, 404,
               "{\"error\":\"fleet game not found (allocation " ID ")\"}");
        assert_int_equal(alloc_outcome_result(ALLOC_UNKNOWN_FLEET), ALLOC_RESULT_INVALID);
}

static void test_unknown_build(void **state) {
        AllocRequest r = request;

        r.build_configuration_id = "9999";
        expect(ALLOC_UNKNOWN_BUILD, &r, NULL, 0, 400,
               "{\"error\":\"allocation " ID " in fleet game: no server of the fleet runs "
               "build configuration 9999\"}");
        assert_int_equal(alloc_outcome_result(ALLOC_UNKNOWN_BUILD), ALLOC_RESULT_INVALID);
}

/* The POST's restart (Unity's bool restart): a boolean, false when absent. */
static void test_parse_restart(void **state) {
        const char *yes = "{\"allocationId\":\"" ID "\",\"restart\":true}";
        const char *no = "{\"allocationId\":\"" ID "\"}";
        const char *bad = "{\"allocationId\":\"" ID "\",\"restart\":\"yes\"}";
        ApiAllocateBody b = {};
        const char *error = NULL;

        assert_int_equal(api_parse_allocate(yes, strlen(yes), &b, &error), 0);
        assert_true(b.restart);
        api_allocate_body_done(&b);
        assert_int_equal(api_parse_allocate(no, strlen(no), &b, &error), 0);
        assert_false(b.restart);
        api_allocate_body_done(&b);
        assert_int_equal(api_parse_allocate(bad, strlen(bad), &b, &error), -EBADMSG);
        assert_string_equal(error, "restart must be a boolean");
        api_allocate_body_done(&b);
}

static void test_unknown_environment(void **state) {
        json_t *body = NULL;
        char *text;

        assert_int_equal(environment_unknown_answer_http("p1", "staging", true, &body), 404);
        text = json_dumps(body, JSON_COMPACT);
        assert_string_equal(text, "{\"error\":\"environment staging of project p1 not found\"}");
        free(text);
        json_decref(body);
        assert_int_equal(environment_unknown_answer_http("p9", "prod", false, &body), 404);
        text = json_dumps(body, JSON_COMPACT);
        assert_string_equal(text, "{\"error\":\"project p9 not found\"}");
        free(text);
        json_decref(body);
}

static void test_contended(void **state) {
        expect(ALLOC_CONTENDED, &request, NULL, 16, 503,
               "{\"error\":\"allocation " ID ": each of 16 slots tried was taken by another "
               "claim first; try again\"}");
        assert_int_equal(alloc_outcome_result(ALLOC_CONTENDED), ALLOC_RESULT_CONTENDED);
}

static void test_etcd_failed(void **state) {
        expect(ALLOC_ETCD_FAILED, &request, "context deadline exceeded", 1, 503,
               "{\"error\":\"etcd unavailable: context deadline exceeded\"}");
        expect(ALLOC_ETCD_FAILED, &request, NULL, 1, 503,
               "{\"error\":\"etcd unavailable: no answer\"}");
        expect(ALLOC_ETCD_FAILED, &request, "", 1, 503,
               "{\"error\":\"etcd unavailable: no answer\"}");
        assert_int_equal(alloc_outcome_result(ALLOC_ETCD_FAILED), ALLOC_RESULT_UNAVAILABLE);
}

static void test_no_memory(void **state) {
        expect(ALLOC_NO_MEMORY, &request, NULL, 0, 503, "{\"error\":\"out of memory\"}");
        assert_int_equal(alloc_outcome_result(ALLOC_NO_MEMORY), ALLOC_RESULT_UNAVAILABLE);
}

/* No outcome left out above: each one's status is one the API answers POST with. */
static void test_every_outcome(void **state) {
        for (AllocOutcome o = 0; o < _ALLOC_OUTCOME_MAX; o++) {
                char *text = NULL;
                unsigned status = answer(o, &request, "x", 1, &text);

                assert_true(status == 200 || status == 400 || status == 404 || status == 409 ||
                            status == 503);
                assert_true((status == 200) == (o == ALLOC_CLAIMED || o == ALLOC_EXISTING));
                if (status != 200)
                        assert_non_null(strstr(text, "{\"error\":\""));
                assert_in_range(alloc_outcome_result(o), 0, _ALLOC_RESULT_MAX - 1);
                free(text);
        }
}

static void test_error_json(void **state) {
        json_t *j = api_error_json("allocation %s not found in fleet %s", ID, "game");
        char *text = json_dumps(j, JSON_COMPACT);

        assert_string_equal(text, "{\"error\":\"allocation " ID " not found in fleet game\"}");
        free(text);
        json_decref(j);
}

/* ---- GET, the list, DELETE ---- */

static const RecordRequest one = { .project = "p1", .environment = "prod", .fleet = "game",
                                   .allocation_id = ID };
static const RecordRequest many = { .project = "p1", .environment = "prod", .fleet = "game" };

typedef unsigned (*RecordHttp)(const RecordAnswer *answer, json_t **ret_body);

/* The answer's status, and its body as the door sends it (NULL: none). */
static void expect_record(RecordHttp http, const RecordAnswer *answer, unsigned status,
                          const char *text) {
        json_t *body = (json_t *) 0x1; /* set by every answer */
        char *got;

        assert_int_equal(http(answer, &body), status);
        if (!text) {
                assert_null(body);
                return;
        }
        assert_non_null(body);
        got = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(body);
        assert_non_null(got);
        assert_string_equal(got, text);
        free(got);
}

/* 2023-11-14T22:13:20.250Z */
#define T0 (1700000000ULL * 1000000ULL + 250000ULL)

static RecordShown shown_fulfilled(void) {
        return (RecordShown){
                .record = { .allocation_id = (char *) ID, .project_id = (char *) "p1",
                            .environment_id = (char *) "prod", .fleet_id = (char *) "game",
                            .build_configuration_id = (char *) "42",
                            .region_id = (char *) "eu-west", .status = ALLOCATION_FULFILLED,
                            .machine_id = (char *) "9f1c", .machine_number = 7,
                            .slot_id = 3, .ipv4 = (char *) "192.0.2.7",
                            .ipv6 = (char *) "2001:db8::7", .game_port = 7777,
                            .requested = T0, .claimed = T0 + 1000, .fulfilled = T0 + 2000,
                            .request_id = (char *) "5b0e64f1-2c71-4d2e-9a43-0f6e1c2d3b4a" },
                .readiness = true,
                .ready_at = T0 + 3000,
        };
}

/* Unity's MultiplayAllocationsAllocation: IDs Multiplay numbers as JSON integers, readiness a
 * bool, every time RFC 3339 */
#define FULFILLED_JSON                                                                         \
        "{\"allocationId\":\"" ID "\",\"buildConfigurationId\":42,\"fleetId\":\"game\","     \
        "\"regionId\":\"eu-west\",\"machineId\":7,\"serverId\":3,\"ipv4\":\"192.0.2.7\","       \
        "\"ipv6\":\"2001:db8::7\",\"gamePort\":7777,\"readiness\":true,"                      \
        "\"status\":\"fulfilled\",\"requestId\":\"5b0e64f1-2c71-4d2e-9a43-0f6e1c2d3b4a\","        \
        "\"requested\":\"2023-11-14T22:13:20.250Z\",\"created\":\"2023-11-14T22:13:20.251Z\","   \
        "\"fulfilled\":\"2023-11-14T22:13:20.252Z\",\"ready\":\"2023-11-14T22:13:20.253Z\"}"

/* A claimed record whose machine has left the view: lost, not ready, no address yet. */
static RecordShown shown_lost(void) {
        return (RecordShown){
                .record = { .allocation_id = (char *) ID, .fleet_id = (char *) "game",
                            .status = ALLOCATION_CLAIMED, .machine_id = (char *) "9f1c",
                            .build_configuration_id = (char *) "blue.v2", .slot_id = 0,
                            .requested = T0 },
                /* readiness false: a ready time is not shown */
                .ready_at = T0 + 5000,
                .lost = true,
        };
}

/* A time not yet come is left out (Unity's DateTime is not nullable: "" or null would fail
 * its client), as is a requestId the record lacks (written before it); a build
 * configuration that is no number reads 0. */
#define LOST_JSON                                                                              \
        "{\"allocationId\":\"" ID "\",\"buildConfigurationId\":0,\"fleetId\":\"game\","      \
        "\"regionId\":\"\",\"machineId\":0,\"serverId\":0,\"ipv4\":\"\",\"ipv6\":\"\","         \
        "\"gamePort\":0,\"readiness\":false,\"status\":\"lost\","                              \
        "\"requested\":\"2023-11-14T22:13:20.250Z\"}"

static void test_record_get(void **state) {
        RecordShown s = shown_fulfilled();

        expect_record(record_get_answer_http,
                      &(RecordAnswer){ .outcome = RECORD_FOUND, .request = &one, .shown = &s,
                                       .n_shown = 1 },
                      200, FULFILLED_JSON);
        s = shown_lost();
        expect_record(record_get_answer_http,
                      &(RecordAnswer){ .outcome = RECORD_FOUND, .request = &one, .shown = &s,
                                       .n_shown = 1 },
                      200, LOST_JSON);
        s.lost = false;
        assert_string_equal(record_shown_status(&s), "claimed");
}

/* A failed record (every host refused it, no other slot free): status failed, the host's
 * reason in error, its time in failed; no slot (serverId 0). */
static void test_record_failed(void **state) {
        RecordShown s = {
                .record = { .allocation_id = (char *) ID, .fleet_id = (char *) "demo",
                            .build_configuration_id = (char *) "9999",
                            .status = ALLOCATION_FAILED, .requested = T0,
                            .claimed = T0 + 1000, .failed = T0 + 4000,
                            .error = (char *) "Fleet 'demo' has no build configuration '9999'" },
        };

        expect_record(record_get_answer_http,
                      &(RecordAnswer){ .outcome = RECORD_FOUND, .request = &one, .shown = &s,
                                       .n_shown = 1 },
                      200,
                      "{\"allocationId\":\"" ID "\",\"buildConfigurationId\":9999,"
                      "\"fleetId\":\"demo\",\"regionId\":\"\",\"machineId\":0,\"serverId\":0,"
                      "\"ipv4\":\"\",\"ipv6\":\"\",\"gamePort\":0,\"readiness\":false,"
                      "\"status\":\"failed\",\"requested\":\"2023-11-14T22:13:20.250Z\","
                      "\"created\":\"2023-11-14T22:13:20.251Z\","
                      "\"error\":\"Fleet 'demo' has no build configuration '9999'\","
                      "\"failed\":\"2023-11-14T22:13:20.254Z\"}");
        assert_string_equal(record_shown_status(&s), "failed");
        /* an error kept on a record not failed (a host refused it; placed again) is not shown */
        s.record.status = ALLOCATION_CLAIMED;
        s.record.failed = 0;
        expect_record(record_get_answer_http,
                      &(RecordAnswer){ .outcome = RECORD_FOUND, .request = &one, .shown = &s,
                                       .n_shown = 1 },
                      200,
                      "{\"allocationId\":\"" ID "\",\"buildConfigurationId\":9999,"
                      "\"fleetId\":\"demo\",\"regionId\":\"\",\"machineId\":0,\"serverId\":0,"
                      "\"ipv4\":\"\",\"ipv6\":\"\",\"gamePort\":0,\"readiness\":false,"
                      "\"status\":\"claimed\",\"requested\":\"2023-11-14T22:13:20.250Z\","
                      "\"created\":\"2023-11-14T22:13:20.251Z\"}");
}

static void test_record_list(void **state) {
        RecordShown s[2] = { shown_fulfilled(), shown_lost() };

        expect_record(record_list_answer_http,
                      &(RecordAnswer){ .outcome = RECORD_FOUND, .request = &many, .shown = s,
                                       .n_shown = 2, .limit = 100 },
                      200, "{\"allocations\":[" FULFILLED_JSON "," LOST_JSON "],"
                           "\"pagination\":{\"limit\":100,\"offset\":0}}");
        expect_record(record_list_answer_http,
                      &(RecordAnswer){ .outcome = RECORD_FOUND, .request = &many, .limit = 10,
                                       .offset = 20 },
                      200, "{\"allocations\":[],\"pagination\":{\"limit\":10,\"offset\":20}}");
}

static void test_record_delete(void **state) {
        expect_record(record_delete_answer_http,
                      &(RecordAnswer){ .outcome = RECORD_DELETED, .request = &one }, 204, NULL);
        expect_record(record_delete_answer_http,
                      &(RecordAnswer){ .outcome = RECORD_CHANGED, .request = &one,
                                       .attempts = 4 },
                      503, "{\"error\":\"allocation " ID " changed under each of 4 attempts to "
                           "delete it; try again\"}");
        /* A fence's deletion alone ends so (keep_answered); the door never asks for one. */
        expect_record(record_delete_answer_http,
                      &(RecordAnswer){ .outcome = RECORD_KEPT, .request = &one }, 500,
                      "{\"error\":\"allocation " ID " kept: a POST of it was answered with "
                      "it\"}");
}

/* The outcomes every one of them may end in, answered alike. */
static void test_record_failures(void **state) {
        const RecordHttp http[] = { record_get_answer_http, record_delete_answer_http };

        for (size_t i = 0; i < ELEMENTSOF(http); i++) {
                expect_record(http[i],
                              &(RecordAnswer){ .outcome = RECORD_NOT_FOUND, .request = &one },
                              404, "{\"error\":\"allocation " ID " not found in fleet game\"}");
                expect_record(http[i],
                              &(RecordAnswer){ .outcome = RECORD_ETCD_FAILED, .request = &one,
                                               .detail = "etcdserver: request timed out" },
                              503, "{\"error\":\"etcd unavailable: etcdserver: request timed "
                                   "out\"}");
                expect_record(http[i],
                              &(RecordAnswer){ .outcome = RECORD_ETCD_FAILED, .request = &one },
                              503, "{\"error\":\"etcd unavailable: no answer\"}");
                expect_record(http[i],
                              &(RecordAnswer){ .outcome = RECORD_NO_MEMORY, .request = &one },
                              500, "{\"error\":\"out of memory\"}");
        }
        expect_record(record_list_answer_http,
                      &(RecordAnswer){ .outcome = RECORD_ETCD_FAILED, .request = &many,
                                       .detail = "" },
                      503, "{\"error\":\"etcd unavailable: no answer\"}");
        expect_record(record_list_answer_http,
                      &(RecordAnswer){ .outcome = RECORD_NO_MEMORY, .request = &many }, 500,
                      "{\"error\":\"out of memory\"}");
}

/* Every outcome, in each op's answer: a status the API answers it with; an error's body
 * {"error": …}; an outcome not of the op (GET's DELETED, DELETE's FOUND) as no memory. */
static void test_record_every_outcome(void **state) {
        const RecordHttp http[] = { record_get_answer_http, record_list_answer_http,
                                    record_delete_answer_http };
        RecordShown s = shown_fulfilled();

        for (size_t i = 0; i < ELEMENTSOF(http); i++)
                for (RecordOutcome o = 0; o < _RECORD_OUTCOME_MAX; o++) {
                        RecordAnswer answer = { .outcome = o, .request = &one, .detail = "x",
                                                .attempts = 4, .shown = &s, .n_shown = 1 };
                        bool ok = (o == RECORD_FOUND && http[i] != record_delete_answer_http) ||
                                  (o == RECORD_DELETED && http[i] == record_delete_answer_http);
                        json_t *body = NULL;
                        unsigned status = http[i](&answer, &body);
                        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;

                        assert_true(status == 200 || status == 204 || status == 404 ||
                                    status == 500 || status == 503);
                        assert_true((status / 100 == 2) == ok);
                        if (!ok) {
                                assert_non_null(text);
                                assert_non_null(strstr(text, "{\"error\":\""));
                        }
                        if (o == RECORD_FOUND || o == RECORD_DELETED)
                                assert_int_equal(status, ok ? (o == RECORD_FOUND ? 200 : 204)
                                                            : 500);
                        free(text);
                        json_decref(body);
                }
}

/* ---- a fleet's capacity ---- */

static void test_capacity(void **state) {
        CapacityCount total_states[] = { { "available", 1 }, { "online", 0 }, { "held", 0 },
                                         { "reserved", 0 }, { "allocated", 2 },
                                         { "starting-up", 1 } };
        CapacityCount total_process[] = { { "stopped", 0 }, { "starting", 1 },
                                          { "running", 3 }, { "stopping", 0 }, { "failed", 0 } };
        CapacityCount eu_states[] = { { "available", 1 }, { "online", 0 }, { "held", 0 },
                                      { "reserved", 0 }, { "allocated", 1 } };
        CapacityCount eu_process[] = { { "stopped", 0 }, { "starting", 0 }, { "running", 2 },
                                       { "stopping", 0 }, { "failed", 0 } };
        CapacityCount none_states[] = { { "available", 0 }, { "online", 0 }, { "held", 0 },
                                        { "reserved", 0 }, { "allocated", 1 },
                                        { "starting-up", 1 } };
        CapacityCount none_process[] = { { "stopped", 0 }, { "starting", 1 }, { "running", 1 },
                                         { "stopping", 0 }, { "failed", 0 } };
        /* eu-west has a target of the scaler, "" none (no "scaler" in its answer). */
        const ScalerTarget eu_target = { .fleet = (char *) "game", .region = (char *) "eu-west",
                                         .buffer = 2, .floor = 1, .ceiling = 8 };
        CapacityRegion regions[] = {
                { "eu-west", { .slots = 2, .machines = 1, .claimed = 1,
                               .states = eu_states, .n_states = ELEMENTSOF(eu_states),
                               .process_states = eu_process,
                               .n_process_states = ELEMENTSOF(eu_process) },
                  .target = &eu_target, .busy = 1, .free = 1 },
                { "", { .slots = 2, .machines = 2, .claimed = 0,
                        .states = none_states, .n_states = ELEMENTSOF(none_states),
                        .process_states = none_process,
                        .n_process_states = ELEMENTSOF(none_process) } },
        };
        const char *deprovisionable[] = { "0a1b", "9f1c" };
        FleetCapacity c = {
                .outcome = CAPACITY_TALLIED,
                .fleet = "game",
                .total = { .slots = 4, .machines = 2, .claimed = 1,
                           .states = total_states, .n_states = ELEMENTSOF(total_states),
                           .process_states = total_process,
                           .n_process_states = ELEMENTSOF(total_process) },
                .regions = regions,
                .n_regions = ELEMENTSOF(regions),
                .deprovisionable = deprovisionable,
                .n_deprovisionable = ELEMENTSOF(deprovisionable),
                .hold_until = T0,
        };
        json_t *body = NULL;
        char *text;

        assert_int_equal(capacity_answer_http(&c, &body), 200);
        text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
        assert_string_equal(text,
                "{\"fleetId\":\"game\","
                "\"total\":{\"slots\":4,\"machines\":2,\"states\":{\"available\":1,\"online\":0,"
                "\"held\":0,\"reserved\":0,\"allocated\":2,\"starting-up\":1},"
                "\"processStates\":{\"stopped\":0,\"starting\":1,\"running\":3,\"stopping\":0,"
                "\"failed\":0},\"claimed\":1},"
                "\"regions\":{\"eu-west\":{\"slots\":2,\"machines\":1,\"states\":{\"available\":1,"
                "\"online\":0,\"held\":0,\"reserved\":0,\"allocated\":1},\"processStates\":"
                "{\"stopped\":0,\"starting\":0,\"running\":2,\"stopping\":0,\"failed\":0},"
                "\"claimed\":1,\"scaler\":{\"buffer\":2,\"floor\":1,\"ceiling\":8,\"busy\":1,"
                "\"free\":1,\"wanted\":3}},"
                "\"\":{\"slots\":2,\"machines\":2,\"states\":{\"available\":0,\"online\":0,"
                "\"held\":0,\"reserved\":0,\"allocated\":1,\"starting-up\":1},\"processStates\":"
                "{\"stopped\":0,\"starting\":1,\"running\":1,\"stopping\":0,\"failed\":0},"
                "\"claimed\":0}},"
                "\"deprovisionable\":[\"0a1b\",\"9f1c\"],"
                "\"holdUntil\":\"2023-11-14T22:13:20.250Z\"}");
        free(text);
        json_decref(body);
}

/* A target without a ceiling: null; wanted never above it otherwise, never below floor. */
static void test_capacity_scaler(void **state) {
        CapacityCount st[] = { { "available", 3 } };
        CapacityCount ps[] = { { "stopped", 3 } };
        ScalerTarget open = { .fleet = (char *) "game", .buffer = 1, .floor = 5,
                              .ceiling = SCALER_CEILING_NONE };
        ScalerTarget capped = { .fleet = (char *) "game", .region = (char *) "us",
                                .buffer = 4, .ceiling = 2 };
        CapacityRegion regions[] = {
                { "eu", { .slots = 3, .machines = 1, .states = st, .n_states = 1,
                          .process_states = ps, .n_process_states = 1 },
                  .target = &open, .busy = 0, .free = 0 },
                { "us", { .slots = 3, .machines = 1, .states = st, .n_states = 1,
                          .process_states = ps, .n_process_states = 1 },
                  .target = &capped, .busy = 1, .free = 0 },
        };
        FleetCapacity c = { .outcome = CAPACITY_TALLIED, .fleet = "game",
                            .total = { .slots = 6, .machines = 2, .states = st, .n_states = 1,
                                       .process_states = ps, .n_process_states = 1 },
                            .regions = regions, .n_regions = ELEMENTSOF(regions) };
        json_t *body = NULL;
        char *text;

        assert_int_equal(capacity_answer_http(&c, &body), 200);
        text = json_dumps(json_object_get(body, "regions"), JSON_COMPACT | JSON_PRESERVE_ORDER);
        assert_string_equal(text,
                "{\"eu\":{\"slots\":3,\"machines\":1,\"states\":{\"available\":3},"
                "\"processStates\":{\"stopped\":3},\"claimed\":0,\"scaler\":{\"buffer\":1,"
                "\"floor\":5,\"ceiling\":null,\"busy\":0,\"free\":0,\"wanted\":5}},"
                "\"us\":{\"slots\":3,\"machines\":1,\"states\":{\"available\":3},"
                "\"processStates\":{\"stopped\":3},\"claimed\":0,\"scaler\":{\"buffer\":4,"
                "\"floor\":0,\"ceiling\":2,\"busy\":1,\"free\":0,\"wanted\":2}}}");
        free(text);
        json_decref(body);
}

/* An unknown fleet (or one without slots): nothing counted, every known state at 0. */
static void test_capacity_empty(void **state) {
        CapacityCount st[] = { { "available", 0 }, { "online", 0 }, { "held", 0 },
                               { "reserved", 0 }, { "allocated", 0 } };
        CapacityCount ps[] = { { "stopped", 0 }, { "starting", 0 }, { "running", 0 },
                               { "stopping", 0 }, { "failed", 0 } };
        FleetCapacity c = { .outcome = CAPACITY_TALLIED, .fleet = "nowhere",
                            .total = { .states = st, .n_states = 5, .process_states = ps,
                                       .n_process_states = 5 } };
        json_t *body = NULL;
        char *text;

        assert_int_equal(capacity_answer_http(&c, &body), 200);
        text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
        assert_string_equal(text,
                "{\"fleetId\":\"nowhere\",\"total\":{\"slots\":0,\"machines\":0,\"states\":"
                "{\"available\":0,\"online\":0,\"held\":0,\"reserved\":0,\"allocated\":0},"
                "\"processStates\":{\"stopped\":0,\"starting\":0,\"running\":0,\"stopping\":0,"
                "\"failed\":0},\"claimed\":0},\"regions\":{},\"deprovisionable\":[],"
                "\"holdUntil\":\"\"}");
        free(text);
        json_decref(body);
}

static void expect_capacity(const FleetCapacity *c, unsigned status, const char *text) {
        json_t *body = NULL;
        char *got;

        assert_int_equal(capacity_answer_http(c, &body), status);
        assert_non_null(body);
        got = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
        assert_string_equal(got, text);
        free(got);
        json_decref(body);
}

static void test_capacity_failures(void **state) {
        /* a state name that is not UTF-8 cannot be a JSON key: as no memory, as before */
        CapacityCount bad[] = { { "\xff", 1 } };

        expect_capacity(&(FleetCapacity){ .outcome = CAPACITY_VIEW_NOT_READY, .fleet = "game" },
                        503, "{\"error\":\"etcd unavailable: the fleet view is not read from "
                             "etcd yet (capacity of fleet game)\"}");
        expect_capacity(&(FleetCapacity){ .outcome = CAPACITY_UNKNOWN_FLEET, .fleet = "nofleet" },
                        404, "{\"error\":\"fleet nofleet not found\"}");
        expect_capacity(&(FleetCapacity){ .outcome = CAPACITY_NO_MEMORY, .fleet = "game" },
                        500, "{\"error\":\"out of memory (capacity of fleet game)\"}");
        expect_capacity(&(FleetCapacity){ .outcome = CAPACITY_TALLIED, .fleet = "game",
                                          .total = { .states = bad, .n_states = 1 } },
                        500, "{\"error\":\"out of memory (capacity of fleet game)\"}");
        for (CapacityOutcome o = 0; o < _CAPACITY_OUTCOME_MAX; o++) {
                json_t *body = NULL;
                unsigned status = capacity_answer_http(
                        &(FleetCapacity){ .outcome = o, .fleet = "game" }, &body);

                assert_non_null(body);
                assert_int_equal(status, o == CAPACITY_TALLIED ? 200
                                         : o == CAPACITY_VIEW_NOT_READY ? 503
                                         : o == CAPACITY_UNKNOWN_FLEET ? 404 : 500);
                json_decref(body);
        }
}

/* ---- the list's query (allocator-request.h), and the IDs Unity reads as numbers ---- */

#define LIST_PATH "/v1/allocations/projects/p1/environments/prod/fleets/game/allocations"

static int route_list(const ApiQuery *q, ApiRoute *r, const char **error) {
        return api_route("GET", LIST_PATH, q, r, error);
}

static void test_list_query(void **state) {
        static ApiRoute r;
        const char *error = NULL;

        assert_int_equal(route_list(NULL, &r, &error), 0);
        assert_int_equal(r.op, API_LIST);
        assert_int_equal(r.limit, API_LIST_LIMIT_DEFAULT);
        assert_int_equal(r.offset, 0);
        assert_int_equal(r.age, 0);
        assert_string_equal(r.ids, "");
        assert_int_equal(r.status, -1);

        assert_int_equal(route_list(&(ApiQuery){ .age = "1h30m", .limit = "10", .offset = "20",
                                                 .ids = ID ",5B0E64F1-2C71-4D2E-9A43-0F6E1C2D3B4A",
                                                 .status = "fulfilled" },
                                    &r, &error),
                         0);
        assert_int_equal(r.age, 5400ULL * 1000000ULL);
        assert_int_equal(r.limit, 10);
        assert_int_equal(r.offset, 20);
        assert_int_equal(r.status, ALLOCATION_FULFILLED);
        assert_string_equal(r.ids, ID ",5b0e64f1-2c71-4d2e-9a43-0f6e1c2d3b4a");
        assert_true(list_ids_contain(r.ids, "5b0e64f1-2c71-4d2e-9a43-0f6e1c2d3b4a"));
        assert_true(list_ids_contain(r.ids, ID));
        assert_false(list_ids_contain(r.ids, "5b0e64f1-2c71-4d2e-9a43-0f6e1c2d3b4"));
        assert_false(list_ids_contain("", ID));

        static const struct {
                ApiQuery q;
                const char *error;
        } bad[] = {
                { { .limit = "0" }, "limit must be a number from 1 to 1000" },
                { { .limit = "1001" }, "limit must be a number from 1 to 1000" },
                { { .limit = "-1" }, "limit must be a number from 1 to 1000" },
                { { .limit = "" }, "limit must be a number from 1 to 1000" },
                { { .offset = "x" }, "offset must be a number from 0 to 2147483647" },
                { { .offset = "01" }, "offset must be a number from 0 to 2147483647" },
                { { .age = "24" }, "age must be a duration such as 90s, 30m or 24h" },
                { { .age = "-1h" }, "age must be a duration such as 90s, 30m or 24h" },
                { { .age = "1d" }, "age must be a duration such as 90s, 30m or 24h" },
                { { .ids = "abc" }, "ids must be at most 100 allocation UUIDs, comma-separated" },
                { { .ids = ID "," }, "ids must be at most 100 allocation UUIDs, comma-separated" },
                { { .status = "ready" }, "status must be claimed, fulfilled, failed or lost" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                error = NULL;
                assert_int_equal(route_list(&bad[i].q, &r, &error), -EINVAL);
                assert_string_equal(error, bad[i].error);
        }
}

static void test_duration(void **state) {
        usec_t t;

        assert_int_equal(api_parse_duration("0", &t), 0);
        assert_int_equal(t, 0);
        assert_int_equal(api_parse_duration("24h", &t), 0);
        assert_int_equal(t, 86400ULL * 1000000ULL);
        assert_int_equal(api_parse_duration("2m3s", &t), 0);
        assert_int_equal(t, 123ULL * 1000000ULL);
        assert_int_equal(api_parse_duration("1500ms", &t), 0);
        assert_int_equal(t, 1500000ULL);
        assert_int_equal(api_parse_duration("7us", &t), 0);
        assert_int_equal(t, 7);
        assert_int_equal(api_parse_duration("", &t), -EINVAL);
        assert_int_equal(api_parse_duration("h", &t), -EINVAL);
        assert_int_equal(api_parse_duration("1.5h", &t), -EINVAL);
        assert_int_equal(api_parse_duration("99999999999999999999h", &t), -EINVAL);
}

static void test_build_configuration_number(void **state) {
        static const struct {
                const char *id;
                json_int_t n;
        } cases[] = {
                { "42", 42 }, { "1212", 1212 }, { "999999999999999", 999999999999999LL },
                { "1000000000000000", 0 }, /* 16 digits: not exact in a double */
                { "042", 0 }, { "0", 0 }, { "", 0 }, { NULL, 0 }, { "blue.v2", 0 },
                { "-1", 0 }, { "default", 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_t *j = api_build_configuration_json(cases[i].id);

                assert_true(json_is_integer(j));
                assert_int_equal(json_integer_value(j), cases[i].n);
                json_decref(j);
        }
}

static void test_request_id(void **state) {
        static const uint8_t b[16] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
        char id[37];

        api_request_id_format(b, id);
        assert_string_equal(id, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert_true(api_is_uuid(id));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_created),
                cmocka_unit_test(test_invalid),
                cmocka_unit_test(test_view_not_read),
                cmocka_unit_test(test_conflicts),
                cmocka_unit_test(test_no_capacity),
                cmocka_unit_test(test_unknown_fleet),
                cmocka_unit_test(test_unknown_build),
                cmocka_unit_test(test_parse_restart),
                cmocka_unit_test(test_unknown_environment),
                cmocka_unit_test(test_contended),
                cmocka_unit_test(test_etcd_failed),
                cmocka_unit_test(test_no_memory),
                cmocka_unit_test(test_every_outcome),
                cmocka_unit_test(test_error_json),
                cmocka_unit_test(test_record_get),
                cmocka_unit_test(test_record_failed),
                cmocka_unit_test(test_record_list),
                cmocka_unit_test(test_record_delete),
                cmocka_unit_test(test_record_failures),
                cmocka_unit_test(test_record_every_outcome),
                cmocka_unit_test(test_capacity),
                cmocka_unit_test(test_capacity_scaler),
                cmocka_unit_test(test_capacity_empty),
                cmocka_unit_test(test_capacity_failures),
                cmocka_unit_test(test_list_query),
                cmocka_unit_test(test_duration),
                cmocka_unit_test(test_build_configuration_number),
                cmocka_unit_test(test_request_id),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
