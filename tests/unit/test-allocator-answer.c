/* SPDX-License-Identifier: MIT */
/* allocator-answer.h: every outcome of an allocation (allocator-ops.h) as the API answers it,
 * status and body byte for byte (SPEC §13; the integration tests expect these words), and as
 * the metrics count it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "allocator-answer.h"
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

                assert_true(status == 200 || status == 400 || status == 409 || status == 503);
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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_created),
                cmocka_unit_test(test_invalid),
                cmocka_unit_test(test_view_not_read),
                cmocka_unit_test(test_conflicts),
                cmocka_unit_test(test_no_capacity),
                cmocka_unit_test(test_contended),
                cmocka_unit_test(test_etcd_failed),
                cmocka_unit_test(test_no_memory),
                cmocka_unit_test(test_every_outcome),
                cmocka_unit_test(test_error_json),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
