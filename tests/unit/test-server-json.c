/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "macro.h"
#include "server-json.h"

static const ServerJson sample = {
        .server_id = "7",
        .allocated_uuid = "0f3c5a4e-1b2d-4c8e-9a7f-5d6e7f8a9b0c",
        .machine_id = "4517599999261404022", /* the machine number, in decimal */
        .fleet_id = "shooter",
        .ip = "192.0.2.10",
        .ipv6 = NULL,
        .port = "9007",
        .query_port = "9607",
        .query_type = "sqp",
        .server_log_dir = "/var/lib/slotd/slots/shooter/slot-7/logs",
        .server_files_dir = "/var/lib/slotd/slots/shooter/slot-7",
        .local_proxy_url = "http://localhost:8086",
        .region_id = "eu-west",
        .region_name = "Europe West",
};

static const char sample_text[] =
        "{\n"
        "  \"serverID\": \"7\",\n"
        "  \"allocatedUUID\": \"0f3c5a4e-1b2d-4c8e-9a7f-5d6e7f8a9b0c\",\n"
        "  \"machineID\": \"4517599999261404022\",\n"
        "  \"fleetID\": \"shooter\",\n"
        "  \"ip\": \"192.0.2.10\",\n"
        "  \"ipv6\": \"\",\n"
        "  \"port\": \"9007\",\n"
        "  \"queryPort\": \"9607\",\n"
        "  \"queryType\": \"sqp\",\n"
        "  \"serverLogDir\": \"/var/lib/slotd/slots/shooter/slot-7/logs\",\n"
        "  \"serverFilesDir\": \"/var/lib/slotd/slots/shooter/slot-7\",\n"
        "  \"localProxyUrl\": \"http://localhost:8086\",\n"
        "  \"regionID\": \"eu-west\",\n"
        "  \"regionName\": \"Europe West\"\n"
        "}\n";

static void test_format_exact(_unused_ void **state) {
        _cleanup_free_ char *buf = NULL;
        int n = server_json_format(&sample, &buf);

        assert_int_equal(n, (int) strlen(sample_text));
        assert_string_equal(buf, sample_text);
}

static void test_format_escapes(_unused_ void **state) {
        ServerJson j = { .fleet_id = "a\"b\\c\nd\x01" };
        _cleanup_free_ char *buf = NULL;

        assert_true(server_json_format(&j, &buf) > 0);
        assert_non_null(strstr(buf, "\"fleetID\": \"a\\\"b\\\\c\\nd\\u0001\""));
        /* NULL values are empty strings, never missing keys. */
        assert_non_null(strstr(buf, "\"allocatedUUID\": \"\""));
        /* Without a proxy the key is absent: the SDKs then use their default. */
        assert_null(strstr(buf, "localProxyUrl"));
}

/* A build configuration's variables come after the fixed keys, as strings, in their order;
 * one named like a fixed key never replaces it. */
static void test_format_variables(_unused_ void **state) {
        char *names[] = { (char *) "maxPlayers", (char *) "map", (char *) "serverID" };
        char *values[] = { (char *) "16", (char *) "arena \"2\"", (char *) "666" };
        ServerJson j = sample;
        _cleanup_free_ char *buf = NULL;
        const char *fixed_end, *max_players;

        j.variable_names = names;
        j.variable_values = values;
        j.n_variables = ELEMENTSOF(names);
        assert_true(server_json_format(&j, &buf) > 0);
        fixed_end = strstr(buf, "\"regionName\"");
        max_players = strstr(buf, "\"maxPlayers\": \"16\",\n  \"map\": \"arena \\\"2\\\"\"\n}");
        assert_non_null(fixed_end);
        assert_non_null(max_players);
        assert_true(max_players > fixed_end);
        assert_non_null(strstr(buf, "\"serverID\": \"7\""));
        assert_null(strstr(buf, "666"));
}

static void test_format_invalid_utf8(_unused_ void **state) {
        ServerJson j = { .fleet_id = "bad\xff" };
        char *buf = NULL;

        assert_int_equal(server_json_format(&j, &buf), -EINVAL);
        assert_null(buf);
}

static void test_write_in_place_and_refuse_links(_unused_ void **state) {
        char dir[] = "/tmp/test-server-json-XXXXXX", path[256], victim[256], buf[4096];
        _cleanup_close_ int dfd = -EBADF, fd = -EBADF;
        struct stat before, after;
        ssize_t n;

        assert_non_null(mkdtemp(dir));
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        snprintf(path, sizeof(path), "%s/server.json", dir);

        assert_int_equal(server_json_write_at(dfd, &sample, getuid(), getgid(), NULL), 0);
        assert_int_equal(stat(path, &before), 0);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        n = read(fd, buf, sizeof(buf) - 1);
        assert_true(n > 0);
        buf[n] = '\0';
        assert_string_equal(buf, sample_text);

        /* Rewritten in place: same inode, new shorter content, no stale tail. */
        ServerJson j = sample;
        j.allocated_uuid = "";
        assert_int_equal(server_json_write_at(dfd, &j, getuid(), getgid(), NULL), 0);
        assert_int_equal(stat(path, &after), 0);
        assert_int_equal(before.st_ino, after.st_ino);
        n = pread(fd, buf, sizeof(buf) - 1, 0);
        buf[n] = '\0';
        assert_non_null(strstr(buf, "\"allocatedUUID\": \"\","));
        assert_int_equal((size_t) n, strlen(sample_text) - strlen(sample.allocated_uuid));

        /* A symlink planted in place of server.json is never followed. */
        assert_int_equal(unlink(path), 0);
        snprintf(victim, sizeof(victim), "%s/victim", dir);
        close(open(victim, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
        assert_int_equal(symlink(victim, path), 0);
        assert_int_equal(server_json_write_at(dfd, &sample, getuid(), getgid(), NULL), -ELOOP);
        assert_int_equal(stat(victim, &after), 0);
        assert_int_equal(after.st_size, 0);

        /* Nor is a hard link to another file truncated. */
        assert_int_equal(unlink(path), 0);
        assert_int_equal(link(victim, path), 0);
        assert_int_equal(server_json_write_at(dfd, &sample, getuid(), getgid(), NULL), -EPERM);
        assert_int_equal(stat(victim, &after), 0);
        assert_int_equal(after.st_size, 0);

        unlink(path);
        unlink(victim);
        assert_int_equal(rmdir(dir), 0);
}

/* What an earlier slotd wrote and never made durable is told from what the state says. */
static void test_same_at(_unused_ void **state) {
        char dir[] = "/tmp/test-server-json-XXXXXX", path[256];
        _cleanup_close_ int dfd = -EBADF;
        ServerJson j = sample;

        assert_non_null(mkdtemp(dir));
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        snprintf(path, sizeof(path), "%s/server.json", dir);

        assert_int_equal(server_json_same_at(dfd, &sample), 0); /* missing */
        assert_int_equal(server_json_write_at(dfd, &sample, getuid(), getgid(), NULL), 0);
        assert_int_equal(server_json_same_at(dfd, &sample), 1);
        j.allocated_uuid = "";
        assert_int_equal(server_json_same_at(dfd, &j), 0); /* shorter */
        assert_int_equal(server_json_write_at(dfd, &j, getuid(), getgid(), NULL), 0);
        assert_int_equal(server_json_same_at(dfd, &j), 1);
        assert_int_equal(server_json_same_at(dfd, &sample), 0); /* longer */
        j.allocated_uuid = "00000000-0000-4000-8000-000000000000";
        assert_int_equal(strlen(j.allocated_uuid), strlen(sample.allocated_uuid));
        assert_int_equal(server_json_write_at(dfd, &j, getuid(), getgid(), NULL), 0);
        assert_int_equal(server_json_same_at(dfd, &sample), 0); /* same length, other UUID */

        unlink(path);
        assert_int_equal(rmdir(dir), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_format_exact),
                cmocka_unit_test(test_format_escapes),
                cmocka_unit_test(test_format_variables),
                cmocka_unit_test(test_format_invalid_utf8),
                cmocka_unit_test(test_write_in_place_and_refuse_links),
                cmocka_unit_test(test_same_at),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
