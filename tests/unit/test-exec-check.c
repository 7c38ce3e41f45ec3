/* SPDX-License-Identifier: MIT */
/* Why a build cannot be executed (exec-check.c): the permission classes, what execve() makes
 * of a file's first bytes, the sentences, and the walk over a real path. */
#include <elf.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "exec-check.h"
#include "macro.h"

static const ExecIdentity game = { .user = "game", .uid = 1001, .gid = 1001 };

static void test_mode_classes(_unused_ void **state) {
        /* The owner class alone decides for the owner, even when others could. */
        assert_true(exec_mode_grants(0700, 1001, 0, &game, 1));
        assert_false(exec_mode_grants(0077, 1001, 1001, &game, 1));
        /* Then the group class, then others. */
        assert_true(exec_mode_grants(0010, 0, 1001, &game, 1));
        assert_false(exec_mode_grants(0701, 0, 1001, &game, 1));
        assert_true(exec_mode_grants(0001, 0, 0, &game, 1));
        assert_false(exec_mode_grants(0770, 0, 0, &game, 1));
        /* Read is its own bit. */
        assert_true(exec_mode_grants(0004, 0, 0, &game, 4));
        assert_false(exec_mode_grants(0001, 0, 0, &game, 4));
        /* uid 0 as a slot runs it, without capabilities: the owner class like anyone. */
        ExecIdentity root = { .user = "root", .uid = 0, .gid = 0 };
        assert_false(exec_mode_grants(0644, 0, 0, &root, 1));
        assert_true(exec_mode_grants(0744, 0, 0, &root, 1));
}

static size_t elf_image(uint8_t *buf, size_t size, uint16_t machine, const char *interp) {
        Elf64_Ehdr eh = {
                .e_ident = { ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64, ELFDATA2LSB, EV_CURRENT },
                .e_type = ET_EXEC, .e_machine = machine, .e_phoff = sizeof(Elf64_Ehdr),
                .e_phentsize = sizeof(Elf64_Phdr), .e_phnum = interp ? 2 : 0,
        };
        Elf64_Phdr load = { .p_type = PT_LOAD };
        Elf64_Phdr ph = { .p_type = PT_INTERP, .p_offset = 256,
                          .p_filesz = interp ? strlen(interp) + 1 : 0 };

        memset(buf, 0, size);
        memcpy(buf, &eh, sizeof(eh));
        memcpy(buf + sizeof(eh), &load, sizeof(load));
        memcpy(buf + sizeof(eh) + sizeof(load), &ph, sizeof(ph));
        if (interp)
                memcpy(buf + 256, interp, strlen(interp) + 1);
        return 512;
}

static void test_parse_header(_unused_ void **state) {
        uint8_t buf[512];
        char interp[64];
        size_t n;

#define H(s) (const uint8_t *) (s), strlen(s)
        assert_int_equal(exec_parse_header(H("#!/bin/sh -e\necho"), interp, sizeof(interp)),
                         EXEC_FORMAT_SCRIPT);
        assert_string_equal(interp, "/bin/sh");
        assert_int_equal(exec_parse_header(H("#! \t/usr/bin/env python3\n"), interp, sizeof(interp)),
                         EXEC_FORMAT_SCRIPT);
        assert_string_equal(interp, "/usr/bin/env");
        assert_int_equal(exec_parse_header(H("#!\n"), interp, sizeof(interp)), EXEC_FORMAT_SCRIPT_BAD);
        assert_int_equal(exec_parse_header(H("#!   "), interp, sizeof(interp)), EXEC_FORMAT_SCRIPT_BAD);
        assert_int_equal(exec_parse_header(H("#!/a/very/long/interpreter/path/that/does/not/fit/in/sixty-four/bytes/at/all"),
                                           interp, sizeof(interp)),
                         EXEC_FORMAT_SCRIPT_BAD);
        assert_int_equal(exec_parse_header(H("garbage\x01\x02"), interp, sizeof(interp)),
                         EXEC_FORMAT_UNKNOWN);
        assert_string_equal(interp, "");
        assert_int_equal(exec_parse_header(H(""), interp, sizeof(interp)), EXEC_FORMAT_UNKNOWN);
        assert_int_equal(exec_parse_header(H("#"), interp, sizeof(interp)), EXEC_FORMAT_UNKNOWN);

#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
        const uint16_t native = EM_X86_64, foreign = EM_AARCH64;
#else
        const uint16_t native = EM_AARCH64, foreign = EM_X86_64;
#endif
        n = elf_image(buf, sizeof(buf), native, "/lib64/ld-linux-x86-64.so.2");
        assert_int_equal(exec_parse_header(buf, n, interp, sizeof(interp)), EXEC_FORMAT_ELF);
        assert_string_equal(interp, "/lib64/ld-linux-x86-64.so.2");
        /* Static: no PT_INTERP. */
        n = elf_image(buf, sizeof(buf), native, NULL);
        assert_int_equal(exec_parse_header(buf, n, interp, sizeof(interp)), EXEC_FORMAT_ELF);
        assert_string_equal(interp, "");
        /* PT_INTERP beyond what was read, or without its NUL: not seen. */
        n = elf_image(buf, sizeof(buf), native, "/lib/ld.so");
        assert_int_equal(exec_parse_header(buf, 260, interp, sizeof(interp)), EXEC_FORMAT_ELF);
        assert_string_equal(interp, "");
        buf[256 + strlen("/lib/ld.so")] = 'x';
        assert_int_equal(exec_parse_header(buf, n, interp, sizeof(interp)), EXEC_FORMAT_ELF);
        assert_string_equal(interp, "");
        n = elf_image(buf, sizeof(buf), foreign, "/lib/ld.so");
        assert_int_equal(exec_parse_header(buf, n, interp, sizeof(interp)), EXEC_FORMAT_ELF_FOREIGN);
        /* A header cut short. */
        assert_int_equal(exec_parse_header(buf, 20, interp, sizeof(interp)), EXEC_FORMAT_ELF_FOREIGN);
#endif
}

static void test_describe(_unused_ void **state) {
        ExecFinding f = { .problem = EXEC_NOT_SEARCHABLE, .error = EACCES, .component = "/srv/game",
                          .mode = S_IFDIR | 0700, .owner = 0, .group = 0 };
        char buf[512], name[16];

        exec_describe(&f, &game, buf, sizeof(buf));
        assert_string_equal(buf, "the directory /srv/game is not searchable by user game "
                                 "(uid 1001, gid 1001) (mode 0700, owner uid 0 gid 0)");
        f = (ExecFinding){ .problem = EXEC_INTERPRETER, .interpreter = "/no/sh",
                           .interpreter_problem = EXEC_MISSING, .component = "/no" };
        exec_describe(&f, &game, buf, sizeof(buf));
        assert_string_equal(buf, "its interpreter /no/sh cannot run: /no does not exist");
        f = (ExecFinding){ .problem = EXEC_OK };
        exec_describe(&f, &game, buf, sizeof(buf));
        assert_string_equal(buf, "");
        /* Every problem says something. */
        for (ExecProblem p = EXEC_MISSING; p < _EXEC_PROBLEM_MAX; p++) {
                f = (ExecFinding){ .problem = p, .component = "/x", .interpreter = "/i",
                                   .interpreter_problem = EXEC_MISSING };
                exec_describe(&f, &game, buf, sizeof(buf));
                assert_true(strstr(buf, "/x") || strstr(buf, "/i"));
        }
        assert_string_equal(exec_errno_name(EACCES, name), "EACCES");
        assert_string_equal(exec_errno_name(ENOEXEC, name), "ENOEXEC");
        assert_string_equal(exec_errno_name(100000, name), "errno 100000");
}

static void put_file(const char *path, const char *content, mode_t mode) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, strlen(content)), (ssize_t) strlen(content));
        assert_int_equal(fchmod(fd, mode), 0);
        close(fd);
}

/* The walk over a real tree, judged for an identity that owns nothing of it. */
static void test_diagnose(_unused_ void **state) {
        char dir[] = "/tmp/slotd-test-exec.XXXXXX", path[256], sub[256];
        ExecFinding f;
        const ExecIdentity nobody = { .user = "nobody", .uid = 65534, .gid = 65534 };

        struct statvfs sv;

        if (statvfs("/tmp", &sv) == 0 && (sv.f_flag & ST_NOEXEC))
                skip(); /* every file there would be EXEC_NOEXEC_MOUNT */
        assert_non_null(mkdtemp(dir));
        assert_int_equal(chmod(dir, 0755), 0);
        snprintf(path, sizeof(path), "%s/build", dir);
        put_file(path, "#!/bin/sh\nexit 0\n", 0755);
        assert_int_equal(exec_diagnose(path, &nobody, &f), 0);
        assert_int_equal(f.problem, EXEC_OK);

        put_file(path, "#!/bin/sh\nexit 0\n", 0700);
        assert_int_equal(exec_diagnose(path, &nobody, &f), 0);
        assert_int_equal(f.problem, EXEC_NOT_EXECUTABLE);
        assert_int_equal(f.error, EACCES);
        assert_string_equal(f.component, path);
        assert_int_equal(f.mode & 07777, 0700);

        put_file(path, "#!/bin/sh\nexit 0\n", 0711);
        assert_int_equal(exec_diagnose(path, &nobody, &f), 0);
        assert_int_equal(f.problem, EXEC_NOT_READABLE);

        put_file(path, "\x7f\x01garbage", 0755);
        assert_int_equal(exec_diagnose(path, &nobody, &f), 0);
        assert_int_equal(f.problem, EXEC_BAD_FORMAT);
        assert_int_equal(f.error, ENOEXEC);

        put_file(path, "#!/nonexistent/sh\n", 0755);
        assert_int_equal(exec_diagnose(path, &nobody, &f), 0);
        assert_int_equal(f.problem, EXEC_INTERPRETER);
        assert_int_equal(f.interpreter_problem, EXEC_MISSING);
        assert_int_equal(f.error, ENOENT);
        assert_string_equal(f.interpreter, "/nonexistent/sh");
        assert_string_equal(f.component, "/nonexistent");

        snprintf(sub, sizeof(sub), "%s/missing/build", dir);
        assert_int_equal(exec_diagnose(sub, &nobody, &f), 0);
        assert_int_equal(f.problem, EXEC_MISSING);
        snprintf(sub, sizeof(sub), "%s/missing", dir);
        assert_string_equal(f.component, sub);

        snprintf(sub, sizeof(sub), "%s/build/x", dir);
        assert_int_equal(exec_diagnose(sub, &nobody, &f), 0);
        assert_int_equal(f.problem, EXEC_NOT_DIRECTORY);

        assert_int_equal(exec_diagnose(dir, &nobody, &f), 0);
        assert_int_equal(f.problem, EXEC_NOT_REGULAR);

        put_file(path, "#!/bin/sh\nexit 0\n", 0755);
        assert_int_equal(chmod(dir, 0700), 0);
        assert_int_equal(exec_diagnose(path, &nobody, &f), 0);
        assert_int_equal(f.problem, EXEC_NOT_SEARCHABLE);
        assert_string_equal(f.component, dir);

        assert_int_equal(exec_diagnose("relative/build", &nobody, &f), -EINVAL);
        unlink(path);
        rmdir(dir);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_mode_classes),
                cmocka_unit_test(test_parse_header),
                cmocka_unit_test(test_describe),
                cmocka_unit_test(test_diagnose),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
