/* SPDX-License-Identifier: MIT */
/* The registry's pure half (fleet/registry/registry-state.c): slotd's properties into the model, the
 * model into SPEC §13's documents, the record fulfilled or excluded, the back-off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "registry-state.h"
#include "strv.h"

#define S(v) (&(RegValue){ .type = 's', .s = (v) })
#define B(v) (&(RegValue){ .type = 'b', .b = (v) })
#define Q(v) (&(RegValue){ .type = 'q', .q = (v) })
#define U(v) (&(RegValue){ .type = 'u', .u = (v) })
#define T(v) (&(RegValue){ .type = 't', .t = (v) })
#define A(v) (&(RegValue){ .type = 'a', .strv = (v) })

static RegSlot *slot_new(uint32_t id) {
        RegSlot *s = new0(RegSlot, 1);

        assert_non_null(s);
        s->id = id;
        return s;
}

static void test_slot_set(void **state) {
        RegSlot *s = slot_new(4);

        assert_int_equal(reg_slot_set(s, "State", S("online")), 1);
        assert_string_equal(s->state, "online");
        assert_int_equal(reg_slot_set(s, "State", S("online")), 0); /* no change */
        assert_int_equal(reg_slot_set(s, "State", S("allocated")), 1);
        assert_string_equal(s->state, "allocated");
        assert_int_equal(reg_slot_set(s, "Ready", B(true)), 1);
        assert_int_equal(reg_slot_set(s, "Ready", B(true)), 0);
        assert_true(s->ready);
        assert_int_equal(reg_slot_set(s, "Port", Q(9001)), 1);
        assert_int_equal(s->port, 9001);
        assert_int_equal(reg_slot_set(s, "HoldUntilUSec", T(UINT64_C(1795497950288788))), 1);
        assert_int_equal(s->hold_until, UINT64_C(1795497950288788));
        /* what no document carries, and a type that is not the property's */
        assert_int_equal(reg_slot_set(s, "MainPID", U(42)), 0);
        assert_int_equal(reg_slot_set(s, "CPUUsage", T(1)), 0);
        assert_int_equal(reg_slot_set(s, "Port", U(9002)), 0);
        assert_int_equal(s->port, 9001);
        assert_int_equal(reg_slot_set(s, "State", B(true)), 0);
        assert_string_equal(s->state, "allocated");
        /* an empty string is a value */
        assert_int_equal(reg_slot_set(s, "AllocationUUID", S("")), 1);
        assert_string_equal(s->allocation_uuid, "");
        assert_int_equal(reg_slot_set(s, "AllocationUUID", S("")), 0);
        reg_slot_free(s);
}

static void test_machine_set(void **state) {
        RegMachine m = {};
        char *fleets[] = { (char *) "game", (char *) "bots", NULL };
        char *none[] = { NULL };

        assert_int_equal(reg_machine_set(&m, "MachineID", S("m1")), 1);
        assert_int_equal(reg_machine_set(&m, "MachineNumber", T(42)), 1);
        assert_int_equal(reg_machine_set(&m, "MachineNumber", T(42)), 0);
        assert_true(m.machine_number == 42);
        assert_int_equal(reg_machine_set(&m, "MachineNumber", S("42")), 0); /* type: t */
        assert_int_equal(reg_machine_set(&m, "Fleets", A(fleets)), 1);
        assert_int_equal(reg_machine_set(&m, "Fleets", A(fleets)), 0);
        assert_int_equal(strv_length(m.fleets), 2);
        assert_string_equal(m.fleets[1], "bots");
        assert_int_equal(reg_machine_set(&m, "Faults", A(none)), 1); /* [] once read */
        assert_non_null(m.faults);
        assert_int_equal(reg_machine_set(&m, "Faults", A(none)), 0);
        assert_int_equal(reg_machine_set(&m, "SlotCount", U(12)), 1);
        assert_int_equal(m.slot_count, 12);
        assert_int_equal(reg_machine_set(&m, "Draining", B(true)), 1);
        assert_int_equal(reg_machine_set(&m, "CPUs", T(2)), 0);
        assert_true(reg_machine_property_in_slots("Draining"));
        assert_true(reg_machine_property_in_slots("IPv4"));
        assert_true(reg_machine_property_in_slots("MachineNumber"));
        assert_false(reg_machine_property_in_slots("HoldUntilUSec"));
        assert_false(reg_machine_property_in_slots("Faults"));
        reg_machine_done(&m);
        assert_null(m.machine_id);
}

static void fill(RegMachine *m, RegSlot *s) {
        char *fleets[] = { (char *) "game", NULL }, *faults[] = { (char *) "bus: lost", NULL };

        assert_int_equal(reg_machine_set(m, "MachineID", S("0123abcd")), 1);
        assert_int_equal(reg_machine_set(m, "MachineNumber", T(UINT64_C(4517599999261404022))),
                         1);
        assert_int_equal(reg_machine_set(m, "IPv4", S("192.0.2.1")), 1);
        assert_int_equal(reg_machine_set(m, "IPv6", S("2001:db8::1")), 1);
        assert_int_equal(reg_machine_set(m, "Version", S("0.1.0")), 1);
        assert_int_equal(reg_machine_set(m, "Fleets", A(fleets)), 1);
        assert_int_equal(reg_machine_set(m, "Faults", A(faults)), 1);
        assert_int_equal(reg_machine_set(m, "Draining", B(true)), 1);
        assert_int_equal(reg_machine_set(m, "SlotCount", U(3)), 1);
        assert_int_equal(reg_machine_set(m, "HoldUntilUSec", T(UINT64_C(1795497950288000))), 1);
        assert_int_equal(reg_slot_set(s, "Fleet", S("game")), 1);
        assert_int_equal(reg_slot_set(s, "RegionID", S("eu-west")), 1);
        assert_int_equal(reg_slot_set(s, "State", S("held")), 1);
        assert_int_equal(reg_slot_set(s, "ProcessState", S("running")), 1);
        assert_int_equal(reg_slot_set(s, "AllocationUUID", S("")), 1);
        assert_int_equal(reg_slot_set(s, "BuildConfiguration", S("default")), 1);
        assert_int_equal(reg_slot_set(s, "BuildConfigurations",
                                      A(((char *[]){ (char *) "default", (char *) "1001", NULL }))),
                         1);
        assert_int_equal(reg_slot_set(s, "ReadyForPlayers", B(true)), 1);
        assert_int_equal(reg_slot_set(s, "Port", Q(36701)), 1);
        assert_int_equal(reg_slot_set(s, "QueryPort", Q(36801)), 1);
        assert_int_equal(reg_slot_set(s, "HoldUntilUSec", T(UINT64_C(1795497950288000))), 1);
}

static void test_slot_doc(void **state) {
        _cleanup_free_ char *text = NULL;
        RegMachine m = {};
        RegSlot *s = slot_new(1);
        SlotDoc d, back = {};

        fill(&m, s);
        reg_slot_doc(&m, s, &d);
        assert_int_equal(slot_doc_format(&d, &text), 0);
        assert_int_equal(slot_doc_parse(text, strlen(text), &back), 0);
        assert_string_equal(back.machine_id, "0123abcd");
        assert_true(back.machine_number == UINT64_C(4517599999261404022));
        assert_int_equal(back.slot_id, 1);
        assert_string_equal(back.fleet_id, "game");
        assert_string_equal(back.region_id, "eu-west");
        assert_string_equal(back.state, "held");
        assert_string_equal(back.process_state, "running");
        assert_false(back.ready);
        assert_true(back.ready_for_players);
        assert_string_equal(back.build_configuration_id, "default");
        assert_int_equal(strv_length(back.build_configurations), 2);
        assert_string_equal(back.build_configurations[1], "1001");
        assert_string_equal(back.ipv4, "192.0.2.1");
        assert_string_equal(back.ipv6, "2001:db8::1");
        assert_int_equal(back.game_port, 36701);
        assert_int_equal(back.query_port, 36801);
        assert_string_equal(back.allocation_id, "");
        assert_true(back.draining); /* the machine's */
        assert_int_equal(back.hold_until, UINT64_C(1795497950288000));
        assert_int_equal(back.reserved_until, 0);
        assert_non_null(strstr(text, "\"holdUntil\":\"2026-11-24T"));
        assert_non_null(strstr(text, "\"reservedUntil\":\"\""));
        slot_doc_done(&back);
        reg_slot_free(s);
        reg_machine_done(&m);
}

static void test_machine_doc(void **state) {
        _cleanup_free_ char *text = NULL;
        char *regions[] = { (char *) "eu-west", NULL };
        RegMachine m = {};
        RegSlot *s = slot_new(0);
        MachineDoc d, back = {};

        fill(&m, s);
        reg_machine_doc(&m, regions, 1800, UINT64_C(1795497000000000), &d);
        assert_int_equal(machine_doc_format(&d, &text), 0);
        assert_int_equal(machine_doc_parse(text, strlen(text), &back), 0);
        assert_string_equal(back.machine_id, "0123abcd");
        assert_true(back.machine_number == UINT64_C(4517599999261404022));
        assert_string_equal(back.ipv4, "192.0.2.1");
        assert_string_equal(back.fleets[0], "game");
        assert_string_equal(back.regions[0], "eu-west");
        assert_string_equal(back.faults[0], "bus: lost");
        assert_true(back.draining);
        assert_false(back.deprovisionable);
        assert_int_equal(back.idle_ttl_sec, 1800);
        assert_int_equal(back.slots, 3);
        assert_string_equal(back.slotd, "0.1.0");
        assert_int_equal(back.hold_until, UINT64_C(1795497950288000));
        assert_int_equal(back.registered_at, UINT64_C(1795497000000000));
        machine_doc_done(&back);
        reg_slot_free(s);
        reg_machine_done(&m);
}

static void test_record(void **state) {
        AllocationRecord rec = {};
        const char *text = "{\"allocationId\":\"u1\",\"projectId\":\"p\",\"fleetId\":\"game\","
                           "\"payload\":\"x=1\",\"status\":\"claimed\",\"machineID\":\"other\","
                           "\"slotID\":9,\"attempts\":2,\"excluded\":[\"m0\"]}";
        RegMachine m = {};
        RegSlot *s = slot_new(1);

        fill(&m, s);
        assert_int_equal(allocation_record_parse(text, strlen(text), &rec), 0);
        assert_false(reg_record_fulfilled_here(&rec, "0123abcd", 1));
        assert_int_equal(reg_record_fulfil(&rec, &m, s, UINT64_C(1795497950288000)), 0);
        assert_int_equal(rec.status, ALLOCATION_FULFILLED);
        assert_string_equal(rec.machine_id, "0123abcd");
        assert_true(rec.machine_number == UINT64_C(4517599999261404022));
        assert_int_equal(rec.slot_id, 1);
        assert_int_equal(rec.game_port, 36701);
        assert_string_equal(rec.ipv4, "192.0.2.1");
        assert_string_equal(rec.ipv6, "2001:db8::1");
        assert_int_equal(rec.fulfilled, UINT64_C(1795497950288000));
        /* the allocator's fields stay */
        assert_string_equal(rec.project_id, "p");
        assert_string_equal(rec.payload, "x=1");
        assert_int_equal(rec.attempts, 2);
        assert_true(reg_record_fulfilled_here(&rec, "0123abcd", 1));
        assert_false(reg_record_fulfilled_here(&rec, "0123abcd", 2));
        assert_false(reg_record_fulfilled_here(&rec, "other", 1));

        assert_int_equal(reg_record_exclude(&rec, "0123abcd"), 0);
        assert_int_equal(reg_record_exclude(&rec, "0123abcd"), 0); /* once */
        assert_int_equal(strv_length(rec.excluded), 2);
        assert_string_equal(rec.excluded[0], "m0");
        assert_string_equal(rec.excluded[1], "0123abcd");
        allocation_record_done(&rec);
        reg_slot_free(s);
        reg_machine_done(&m);
}

static void test_backoff(void **state) {
        Backoff b = { .first = 100, .max = 450 };

        assert_int_equal(backoff_next(&b), 100);
        assert_int_equal(backoff_next(&b), 200);
        assert_int_equal(backoff_next(&b), 400);
        assert_int_equal(backoff_next(&b), 450);
        assert_int_equal(backoff_next(&b), 450);
        backoff_reset(&b);
        assert_int_equal(backoff_next(&b), 100);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_slot_set),
                cmocka_unit_test(test_machine_set),
                cmocka_unit_test(test_slot_doc),
                cmocka_unit_test(test_machine_doc),
                cmocka_unit_test(test_record),
                cmocka_unit_test(test_backoff),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
