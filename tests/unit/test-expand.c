/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "expand.h"
#include "macro.h"

static const ExpandVariable vars[] = {
        { "PORT", "9001" }, { "QUERY_PORT", "9601" }, { "SERVER_ID", "1" },
        { "ALLOCATION_UUID", "" }, { "HOME", "/srv/h" },
};

static void check(const char *in, const char *expected) {
        _cleanup_free_ char *out = NULL;
        assert_int_equal(expand_variables(in, vars, ELEMENTSOF(vars), &out, NULL), 0);
        assert_string_equal(out, expected);
}

static void test_expands(_unused_ void **state) {
        check("-port=${PORT}", "-port=9001");
        check("${PORT}${QUERY_PORT}", "90019601");
        check("${HOME}/logs/${SERVER_ID}.log", "/srv/h/logs/1.log");
        check("uuid=${ALLOCATION_UUID}.", "uuid=.");
        check("plain", "plain");
        check("", "");
        check("$PORT and $ alone", "$PORT and $ alone");
}

static void test_rejects(_unused_ void **state) {
        const char *bad = NULL, *in;
        char *out = (char *) 0x1;

        in = "x${NOPE}y";
        assert_int_equal(expand_variables(in, vars, ELEMENTSOF(vars), &out, &bad), -EINVAL);
        assert_ptr_equal(bad, in + 1);
        assert_ptr_equal(out, (char *) 0x1);
        in = "${PORT";
        assert_int_equal(expand_variables(in, vars, ELEMENTSOF(vars), &out, &bad), -EINVAL);
        assert_ptr_equal(bad, in);
        in = "${}";
        assert_int_equal(expand_variables(in, vars, ELEMENTSOF(vars), &out, &bad), -EINVAL);
        /* A name must match whole, not as a prefix. */
        assert_int_equal(expand_variables("${PORTS}", vars, ELEMENTSOF(vars), &out, NULL), -EINVAL);
}

/* Multiplay's server variables, each with the value slot-process.c gives it, and a build
 * configuration's variable, as $$name$$. */
static const ExpandVariable launch[] = {
        { "port", "9001", true }, { "query_port", "9601", true }, { "query_type", "sqp", true },
        { "log_dir", "/srv/s/1/logs", true }, { "file_dir", "/srv/s/1", true },
        { "config_dir", "/srv/s/1", true }, { "game_exe", "server-linux", true },
        { "serverid", "1", true }, { "machineid", "123456", true }, { "fleetid", "eu", true },
        { "regionid", "r-1", true }, { "regionname", "North America", true },
        { "ip", "1.2.3.4", true }, { "ipv6", "2001:db8::1", true },
        { "timestamp", "1661430055", true }, { "commandline", "-port 9001 -log x", true },
        { "map", "de_dust2", true }, { "PORT", "9001" },
};

static void check_launch(const char *in, const char *expected) {
        _cleanup_free_ char *out = NULL;
        assert_int_equal(expand_variables(in, launch, ELEMENTSOF(launch), &out, NULL), 0);
        assert_string_equal(out, expected);
}

static void test_launch_each(_unused_ void **state) {
        check_launch("-port $$port$$ -queryport $$query_port$$ -log $$log_dir$$",
                     "-port 9001 -queryport 9601 -log /srv/s/1/logs");
        check_launch("$$query_type$$", "sqp");
        check_launch("$$file_dir$$|$$config_dir$$/server.json", "/srv/s/1|/srv/s/1/server.json");
        check_launch("$$game_exe$$", "server-linux");
        check_launch("id=$$serverid$$,m=$$machineid$$", "id=1,m=123456");
        check_launch("$$fleetid$$ $$regionid$$ $$regionname$$", "eu r-1 North America");
        check_launch("$$ip$$ [$$ipv6$$]", "1.2.3.4 [2001:db8::1]");
        check_launch("$$timestamp$$", "1661430055");
        check_launch("CMD=$$commandline$$", "CMD=-port 9001 -log x");
        check_launch("-map $$map$$", "-map de_dust2");
        /* Both syntaxes in one word; each finds only its own kind. */
        check_launch("${PORT}:$$port$$", "9001:9001");
        /* Adjacent references. */
        check_launch("$$port$$$$query_port$$", "90019601");
}

static void test_launch_literal(_unused_ void **state) {
        /* A "$$" that starts no name is text (Multiplay documents no escape). */
        check_launch("$$", "$$");
        check_launch("cost $$ 5", "cost $$ 5");
        check_launch("$$$$", "$$$$");
        check_launch("a$", "a$");
        check_launch("$$/x", "$$/x");
        /* Dollars that name nothing are text, one at a time: the reference starts at the
         * last "$$" before a name, and "$${" still starts a ${NAME}. */
        check_launch("$$$$port$$", "$$9001");
        check_launch("$$$port$$", "$9001");
        check_launch("$${PORT}", "$9001");
}

static void test_launch_rejects(_unused_ void **state) {
        const char *bad = NULL, *in;
        char *out = (char *) 0x1, what[256];

        in = "-map $$nope$$";
        assert_int_equal(expand_variables(in, launch, ELEMENTSOF(launch), &out, &bad), -EINVAL);
        assert_ptr_equal(bad, in + 5);
        assert_ptr_equal(out, (char *) 0x1);
        expand_describe_error(bad, what, sizeof(what));
        assert_string_equal(what, "unknown variable '$$nope$$'");

        in = "-port $$port";
        assert_int_equal(expand_variables(in, launch, ELEMENTSOF(launch), &out, &bad), -EINVAL);
        assert_ptr_equal(bad, in + 6);
        expand_describe_error(bad, what, sizeof(what));
        assert_string_equal(what, "unterminated '$$port' (a $$name$$ ends with $$)");

        in = "$$port$";
        assert_int_equal(expand_variables(in, launch, ELEMENTSOF(launch), &out, &bad), -EINVAL);
        assert_ptr_equal(bad, in);

        /* Case counts, as Multiplay's names are lower case. */
        assert_int_equal(expand_variables("$$PORT$$", launch, ELEMENTSOF(launch), &out, NULL),
                         -EINVAL);
        /* A ${NAME} does not find a $$name$$ variable, nor the reverse. */
        assert_int_equal(expand_variables("${port}", launch, ELEMENTSOF(launch), &out, NULL),
                         -EINVAL);
        assert_int_equal(expand_variables("$$PORT$$", vars, ELEMENTSOF(vars), &out, NULL),
                         -EINVAL);
        /* Names match whole. */
        assert_int_equal(expand_variables("$$ports$$", launch, ELEMENTSOF(launch), &out, NULL),
                         -EINVAL);
        assert_ptr_equal(out, (char *) 0x1);

        expand_describe_error("${NOPE}x", what, sizeof(what));
        assert_string_equal(what, "unknown variable '${NOPE}'");
        expand_describe_error("${A\tB}", what, sizeof(what));
        assert_string_equal(what, "unknown variable '${A\\x09B}'");
        expand_describe_error("${x", what, sizeof(what));
        assert_string_equal(what, "unterminated '${'");
        expand_describe_error("${}", what, sizeof(what));
        assert_string_equal(what, "empty variable name '${}'");
}

static void test_launch_keep_unknown(_unused_ void **state) {
        _cleanup_free_ char *out = NULL;
        const char *bad = NULL;

        /* The parser's pass: an unknown but well-formed $$name$$ is let through... */
        assert_int_equal(expand_variables_full("-map $$map$$", vars, ELEMENTSOF(vars),
                                               EXPAND_KEEP_UNKNOWN_LAUNCH, &out, NULL), 0);
        /* ...but not an unterminated one, nor an unknown ${NAME}. */
        assert_int_equal(expand_variables_full("$$map", vars, ELEMENTSOF(vars),
                                               EXPAND_KEEP_UNKNOWN_LAUNCH, &out, &bad), -EINVAL);
        assert_int_equal(expand_variables_full("${MAP}", vars, ELEMENTSOF(vars),
                                               EXPAND_KEEP_UNKNOWN_LAUNCH, &out, &bad), -EINVAL);
}

static void test_known_names(_unused_ void **state) {
        assert_int_equal(expand_n_known_names, 7);
        assert_string_equal(expand_known_names[0], "PORT");
        assert_string_equal(expand_known_names[5], "HOME");
        assert_string_equal(expand_known_names[6], "BUILD_CONFIGURATION");
        /* Multiplay's "Launch parameters" page lists sixteen server variables. */
        assert_int_equal(expand_n_launch_names, 16);
        assert_string_equal(expand_launch_names[0], "port");
        assert_string_equal(expand_launch_names[14], "timestamp");
        assert_string_equal(expand_launch_names[15], "commandline");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_expands),
                cmocka_unit_test(test_rejects),
                cmocka_unit_test(test_launch_each),
                cmocka_unit_test(test_launch_literal),
                cmocka_unit_test(test_launch_rejects),
                cmocka_unit_test(test_launch_keep_unknown),
                cmocka_unit_test(test_known_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
