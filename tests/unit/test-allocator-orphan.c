/* SPDX-License-Identifier: MIT */
/* allocator-orphan.h: which claimed records an allocator places again for want of their
 * claim. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "allocator-orphan.h"
#include "macro.h"

#define NOW (1800000000ULL * USEC_PER_SEC)

#define ID "0b6f4c8e-1a2b-4c3d-8e9f-0a1b2c3d4e5f"

static AllocationRecord record(void) {
        return (AllocationRecord){ .allocation_id = (char *) ID,
                                   .fleet_id = (char *) "game",
                                   .status = ALLOCATION_CLAIMED,
                                   .machine_id = (char *) "m1",
                                   .slot_id = 3,
                                   .deadline = NOW + 5 * USEC_PER_SEC };
}

/* The view has read the claims up to revision 100, and has none on the record's slot. */
static OrphanView view(void) {
        return (OrphanView){ .claims_revision = 100, .now = NOW };
}

static void test_claim_gone(void **state) {
        AllocationRecord rec = record();
        OrphanView v = view();

        /* Written at or before what the view has seen: its claim was deleted since. */
        assert_true(allocation_record_orphaned(&rec, 100, &v));
        assert_true(allocation_record_orphaned(&rec, 42, &v));
        /* Written after: its claim may be on its way (the watch tells), unless its deadline
         * has passed. */
        assert_false(allocation_record_orphaned(&rec, 101, &v));
        v.now = rec.deadline;
        assert_false(allocation_record_orphaned(&rec, 101, &v));
        v.now = rec.deadline + 1;
        assert_true(allocation_record_orphaned(&rec, 101, &v));
        /* No deadline: only the revision tells. */
        rec.deadline = 0;
        assert_false(allocation_record_orphaned(&rec, 101, &v));
        /* The claims not read yet. */
        v = view();
        v.claims_revision = 0;
        assert_false(allocation_record_orphaned(&rec, 1, &v));
}

static void test_claim_there(void **state) {
        AllocationRecord rec = record();
        OrphanView v = view();

        v.claim_present = true;
        v.claim_allocation = ID;
        assert_false(allocation_record_orphaned(&rec, 50, &v));
        v.now = rec.deadline + USEC_PER_SEC; /* past its deadline: the deadline's to move */
        assert_false(allocation_record_orphaned(&rec, 50, &v));
        /* A claim that is no claim document: the slot is taken, leave it be. */
        v.claim_allocation = NULL;
        assert_false(allocation_record_orphaned(&rec, 50, &v));
        /* Another allocation's claim on the slot (put once this one's was gone). */
        v.claim_allocation = "11111111-2222-4333-8444-555555555555";
        assert_true(allocation_record_orphaned(&rec, 50, &v));
}

static void test_not_claimed(void **state) {
        AllocationRecord rec = record();
        OrphanView v = view();

        rec.status = ALLOCATION_FULFILLED;
        assert_false(allocation_record_orphaned(&rec, 50, &v));
        rec = record();
        rec.machine_id = NULL;
        assert_false(allocation_record_orphaned(&rec, 50, &v));
        rec.machine_id = (char *) "";
        assert_false(allocation_record_orphaned(&rec, 50, &v));
        rec.machine_id = (char *) "../m1";
        assert_false(allocation_record_orphaned(&rec, 50, &v));
        rec = record();
        rec.fleet_id = (char *) "a/b";
        assert_false(allocation_record_orphaned(&rec, 50, &v));
        rec = record();
        rec.allocation_id = NULL;
        assert_false(allocation_record_orphaned(&rec, 50, &v));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_claim_gone),
                cmocka_unit_test(test_claim_there),
                cmocka_unit_test(test_not_claimed),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
