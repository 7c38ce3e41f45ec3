/* SPDX-License-Identifier: MIT */
#include <elf.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "exec-check.h"
#include "macro.h"

bool exec_mode_grants(mode_t mode, uid_t owner, gid_t group, const ExecIdentity *id, unsigned bit) {
        if (id->uid == owner)
                return mode & (bit << 6);
        if (id->gid == group)
                return mode & (bit << 3);
        return mode & bit;
}

#if defined(__x86_64__)
#define NATIVE_MACHINE EM_X86_64
#define COMPAT_MACHINE EM_386
#elif defined(__aarch64__)
#define NATIVE_MACHINE EM_AARCH64
#define COMPAT_MACHINE EM_ARM
#else
#define NATIVE_MACHINE EM_NONE
#define COMPAT_MACHINE EM_NONE
#endif

/* PT_INTERP of a little-endian ELF file whose program headers lie in 'buf'. */
static void elf_interpreter(const uint8_t *buf, size_t size, bool is64, char *interp,
                            size_t interp_size) {
        uint64_t phoff;
        uint16_t phentsize, phnum;

        if (is64) {
                Elf64_Ehdr eh;
                memcpy(&eh, buf, sizeof(eh));
                phoff = eh.e_phoff, phentsize = eh.e_phentsize, phnum = eh.e_phnum;
        } else {
                Elf32_Ehdr eh;
                memcpy(&eh, buf, sizeof(eh));
                phoff = eh.e_phoff, phentsize = eh.e_phentsize, phnum = eh.e_phnum;
        }
        if (phentsize < (is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)))
                return;
        for (uint16_t i = 0; i < phnum; i++) {
                uint64_t at = phoff + (uint64_t) i * phentsize, off, len;
                uint32_t type;

                if (phoff > size || at > size || size - at < phentsize)
                        return;
                if (is64) {
                        Elf64_Phdr ph;
                        memcpy(&ph, buf + at, sizeof(ph));
                        type = ph.p_type, off = ph.p_offset, len = ph.p_filesz;
                } else {
                        Elf32_Phdr ph;
                        memcpy(&ph, buf + at, sizeof(ph));
                        type = ph.p_type, off = ph.p_offset, len = ph.p_filesz;
                }
                if (type != PT_INTERP)
                        continue;
                /* A NUL-terminated path wholly within what we read, or nothing said. */
                if (off > size || len < 2 || len > size - off || len > interp_size ||
                    buf[off + len - 1] != '\0' || memchr(buf + off, '\0', len - 1))
                        return;
                memcpy(interp, buf + off, len);
                return;
        }
}

static ExecFormat parse_elf(const uint8_t *buf, size_t size, char *interp, size_t interp_size) {
        bool is64;
        uint16_t machine;

        if (size < EI_NIDENT + 4 || buf[EI_DATA] != ELFDATA2LSB ||
            (buf[EI_CLASS] != ELFCLASS64 && buf[EI_CLASS] != ELFCLASS32))
                return EXEC_FORMAT_ELF_FOREIGN;
        is64 = buf[EI_CLASS] == ELFCLASS64;
        if (size < (is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr)))
                return EXEC_FORMAT_ELF_FOREIGN;
        memcpy(&machine, buf + EI_NIDENT + 2, sizeof(machine)); /* e_machine, both classes */
        if (!(is64 && machine == NATIVE_MACHINE) && !(!is64 && machine == COMPAT_MACHINE))
                return EXEC_FORMAT_ELF_FOREIGN;
        elf_interpreter(buf, size, is64, interp, interp_size);
        return EXEC_FORMAT_ELF;
}

/* The kernel's rules (fs/binfmt_script.c): blanks after "#!", the interpreter up to the next
 * blank or newline, all within the first 256 bytes. */
static ExecFormat parse_script(const uint8_t *buf, size_t size, char *interp, size_t interp_size) {
        size_t i = 2, start, len;

        size = MIN(size, (size_t) 256);
        while (i < size && (buf[i] == ' ' || buf[i] == '\t'))
                i++;
        start = i;
        while (i < size && buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\n' && buf[i] != '\0')
                i++;
        len = i - start;
        if (len == 0 || len >= interp_size)
                return EXEC_FORMAT_SCRIPT_BAD;
        memcpy(interp, buf + start, len);
        interp[len] = '\0';
        return EXEC_FORMAT_SCRIPT;
}

ExecFormat exec_parse_header(const uint8_t *buf, size_t size, char *interpreter,
                             size_t interpreter_size) {
        if (interpreter_size > 0)
                interpreter[0] = '\0';
        if (size >= 4 && memcmp(buf, ELFMAG, SELFMAG) == 0)
                return parse_elf(buf, size, interpreter, interpreter_size);
        if (size >= 2 && buf[0] == '#' && buf[1] == '!')
                return parse_script(buf, size, interpreter, interpreter_size);
        return EXEC_FORMAT_UNKNOWN;
}

const char *exec_errno_name(int error, char buf[static 16]) {
        const char *name = strerrorname_np(error);

        if (name)
                return name;
        snprintf(buf, 16, "errno %d", error);
        return buf;
}

static const char *mode_kind(mode_t mode) {
        switch (mode & S_IFMT) {
        case S_IFDIR: return "a directory";
        case S_IFCHR: return "a character device";
        case S_IFBLK: return "a block device";
        case S_IFIFO: return "a FIFO";
        case S_IFSOCK: return "a socket";
        default: return "not a regular file";
        }
}

void exec_describe(const ExecFinding *f, const ExecIdentity *id, char *buf, size_t size) {
        char who[128], mode[64];
        const char *c = f->component;

        snprintf(who, sizeof(who), "user %s (uid %u, gid %u)", id->user ?: "?", (unsigned) id->uid,
                 (unsigned) id->gid);
        snprintf(mode, sizeof(mode), "mode %04o, owner uid %u gid %u", (unsigned) (f->mode & 07777),
                 (unsigned) f->owner, (unsigned) f->group);
        switch (f->problem) {
        case EXEC_OK:
        case _EXEC_PROBLEM_MAX:
                snprintf(buf, size, "%s", "");
                break;
        case EXEC_MISSING:
                snprintf(buf, size, "%s does not exist", c);
                break;
        case EXEC_NOT_DIRECTORY:
                snprintf(buf, size, "%s, on its path, is not a directory", c);
                break;
        case EXEC_NOT_SEARCHABLE:
                snprintf(buf, size, "the directory %s is not searchable by %s (%s)", c, who, mode);
                break;
        case EXEC_NOT_REGULAR:
                snprintf(buf, size, "%s is %s", c, mode_kind(f->mode));
                break;
        case EXEC_NOT_EXECUTABLE:
                snprintf(buf, size, "%s is not executable by %s (%s)", c, who, mode);
                break;
        case EXEC_NOT_READABLE:
                snprintf(buf, size, "%s is a #! script that its interpreter cannot read as %s (%s)",
                         c, who, mode);
                break;
        case EXEC_NOEXEC_MOUNT:
                snprintf(buf, size, "%s lies on a file system mounted noexec", c);
                break;
        case EXEC_BAD_FORMAT:
                snprintf(buf, size, "%s is neither an ELF executable nor a #! script", c);
                break;
        case EXEC_FOREIGN_ELF:
                snprintf(buf, size, "%s is an ELF file for another machine", c);
                break;
        case EXEC_BAD_INTERPRETER:
                snprintf(buf, size, "the #! line of %s names no interpreter the kernel takes", c);
                break;
        case EXEC_INTERPRETER: {
                ExecFinding sub = *f;
                char clause[EXEC_PATH_MAX + 256];

                sub.problem = f->interpreter_problem;
                exec_describe(&sub, id, clause, sizeof(clause));
                snprintf(buf, size, "its interpreter %s cannot run: %s", f->interpreter, clause);
                break;
        }
        case EXEC_DENIED:
                snprintf(buf, size, "the kernel refuses %s to %s although its mode allows it (%s): "
                         "an ACL or a security module", c, who, mode);
                break;
        }
}

static void finding_set(ExecFinding *f, ExecProblem problem, int error, const char *component,
                        const struct stat *st) {
        f->problem = problem;
        f->error = error;
        snprintf(f->component, sizeof(f->component), "%s", component);
        if (st) {
                f->mode = st->st_mode;
                f->owner = st->st_uid;
                f->group = st->st_gid;
        }
}

/* Each directory above 'path' exists, is a directory and (with 'modes') is searchable.
 * 1 when something stops the walk (in *f), 0 when nothing does. */
static int walk_directories(const char *path, const ExecIdentity *id, bool modes, ExecFinding *f) {
        char prefix[EXEC_PATH_MAX];
        size_t len = strlen(path);

        for (size_t i = 0; i < len; i++) {
                struct stat st;

                if (path[i] != '/' || (i > 0 && path[i - 1] == '/'))
                        continue;
                memcpy(prefix, path, MAX(i, (size_t) 1));
                prefix[MAX(i, (size_t) 1)] = '\0';
                if (stat(prefix, &st) < 0) {
                        finding_set(f, errno == ENOTDIR ? EXEC_NOT_DIRECTORY : EXEC_MISSING, errno,
                                    prefix, NULL);
                        return 1;
                }
                if (!S_ISDIR(st.st_mode)) {
                        finding_set(f, EXEC_NOT_DIRECTORY, ENOTDIR, prefix, &st);
                        return 1;
                }
                if (modes && !exec_mode_grants(st.st_mode, st.st_uid, st.st_gid, id, 1)) {
                        finding_set(f, EXEC_NOT_SEARCHABLE, EACCES, prefix, &st);
                        return 1;
                }
        }
        return 0;
}

static int read_format(const char *path, char *interp, size_t interp_size, ExecFormat *ret) {
        _cleanup_close_ int fd = -EBADF;
        uint8_t buf[4096];
        ssize_t n;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        n = read(fd, buf, sizeof(buf));
        if (n < 0)
                return negative_errno();
        *ret = exec_parse_header(buf, (size_t) n, interp, interp_size);
        return 0;
}

/* The build (or an interpreter) itself; with 'modes' its permission bits as well. */
static int diagnose_file(const char *path, const ExecIdentity *id, bool modes, bool follow,
                         ExecFinding *f) {
        struct statvfs sv;
        struct stat st;
        ExecFormat format;
        int r;

        if (path[0] != '/' || strlen(path) >= EXEC_PATH_MAX)
                return -EINVAL;
        if (walk_directories(path, id, modes, f))
                return 0;
        if (stat(path, &st) < 0) {
                finding_set(f, errno == ENOTDIR ? EXEC_NOT_DIRECTORY : EXEC_MISSING, errno, path, NULL);
                return 0;
        }
        if (!S_ISREG(st.st_mode)) {
                finding_set(f, EXEC_NOT_REGULAR, EACCES, path, &st);
                return 0;
        }
        if (statvfs(path, &sv) == 0 && (sv.f_flag & ST_NOEXEC)) {
                finding_set(f, EXEC_NOEXEC_MOUNT, EACCES, path, &st);
                return 0;
        }
        if (modes && !exec_mode_grants(st.st_mode, st.st_uid, st.st_gid, id, 1)) {
                finding_set(f, EXEC_NOT_EXECUTABLE, EACCES, path, &st);
                return 0;
        }
        r = read_format(path, f->interpreter, sizeof(f->interpreter), &format);
        if (r < 0)
                return r;
        if (format == EXEC_FORMAT_UNKNOWN || format == EXEC_FORMAT_ELF_FOREIGN ||
            format == EXEC_FORMAT_SCRIPT_BAD) {
                finding_set(f, format == EXEC_FORMAT_UNKNOWN ? EXEC_BAD_FORMAT :
                               format == EXEC_FORMAT_ELF_FOREIGN ? EXEC_FOREIGN_ELF :
                               EXEC_BAD_INTERPRETER, ENOEXEC, path, &st);
                return 0;
        }
        if (format == EXEC_FORMAT_SCRIPT && modes &&
            !exec_mode_grants(st.st_mode, st.st_uid, st.st_gid, id, 4)) {
                finding_set(f, EXEC_NOT_READABLE, EACCES, path, &st);
                return 0;
        }
        /* A relative interpreter is looked up from the slot's home: not judged here. */
        if (follow && f->interpreter[0] == '/') {
                ExecFinding sub = {};
                char interp[sizeof(f->interpreter)];

                memcpy(interp, f->interpreter, sizeof(interp));
                r = diagnose_file(interp, id, modes, false, &sub);
                if (r < 0 || sub.problem == EXEC_OK)
                        return r < 0 && r != -EINVAL ? r : 0;
                *f = sub;
                memcpy(f->interpreter, interp, sizeof(interp));
                f->interpreter_problem = sub.problem;
                f->problem = EXEC_INTERPRETER;
        }
        return 0;
}

int exec_diagnose(const char *path, const ExecIdentity *id, ExecFinding *ret) {
        *ret = (ExecFinding){};
        return diagnose_file(path, id, true, true, ret);
}

/* In the child: the slot's identity (confine.c's order), and no capability even as uid 0. */
static int take_identity(const ExecIdentity *id) {
        struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {};

        if (setgroups(1, &id->gid) < 0 || setresgid(id->gid, id->gid, id->gid) < 0 ||
            setresuid(id->uid, id->uid, id->uid) < 0 || syscall(SYS_capset, &head, none) < 0)
                return negative_errno();
        return 0;
}

/* In the child: the first prefix of 'path' (a directory, or the file) that access(X_OK)
 * refuses: its length and errno, or 0. */
static void access_walk(const char *path, size_t *ret_len, int *ret_error) {
        char prefix[EXEC_PATH_MAX];
        size_t len = strlen(path);

        *ret_len = 0;
        *ret_error = 0;
        for (size_t i = 0; i <= len; i++) {
                size_t n = i == len ? len : MAX(i, (size_t) 1);

                if (i < len && (path[i] != '/' || (i > 0 && path[i - 1] == '/')))
                        continue;
                memcpy(prefix, path, n);
                prefix[n] = '\0';
                if (faccessat(AT_FDCWD, prefix, X_OK, 0) < 0) {
                        *ret_len = n;
                        *ret_error = errno;
                        return;
                }
        }
}

typedef struct AccessReport {
        int identity_error;   /* the child could not take the identity */
        int error;            /* what access() said of the first prefix it refused */
        size_t len;           /* that prefix's length */
        bool interpreter;     /* the prefix is the interpreter's */
} AccessReport;

static int access_as(const char *path, const char *interp, const ExecIdentity *id,
                     AccessReport *ret) {
        _cleanup_close_ int rfd = -EBADF, wfd = -EBADF;
        int fds[2], status;
        pid_t pid;
        ssize_t n;

        if (pipe2(fds, O_CLOEXEC) < 0)
                return negative_errno();
        rfd = fds[0], wfd = fds[1];
        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                AccessReport rep = {};

                rep.identity_error = -take_identity(id);
                if (!rep.identity_error) {
                        access_walk(path, &rep.len, &rep.error);
                        if (!rep.error && interp && interp[0] == '/') {
                                access_walk(interp, &rep.len, &rep.error);
                                rep.interpreter = rep.error != 0;
                        }
                }
                _exit(write(wfd, &rep, sizeof(rep)) == sizeof(rep) ? 0 : 1);
        }
        wfd = safe_close(wfd);
        n = read(rfd, ret, sizeof(*ret));
        (void) waitpid(pid, &status, 0);
        return n == sizeof(*ret) ? 0 : -EIO;
}

/* The kernel refused a prefix that the modes allow: say so, with what the modes are. */
static void finding_denied(ExecFinding *f, const char *path, const AccessReport *rep) {
        char prefix[EXEC_PATH_MAX];
        struct stat st;

        memcpy(prefix, path, rep->len);
        prefix[rep->len] = '\0';
        finding_set(f, EXEC_DENIED, rep->error, prefix, stat(prefix, &st) == 0 ? &st : NULL);
}

int exec_check(const char *path, const ExecIdentity *id, ExecFinding *ret, bool *ret_as_user) {
        ExecFinding modes = {}, kernel = {};
        AccessReport rep;
        int r;

        r = diagnose_file(path, id, true, true, &modes);
        if (r < 0)
                return r;
        /* The interpreter as read by root, for the child to walk too. */
        r = diagnose_file(path, id, false, false, &kernel);
        if (r < 0)
                return r;
        r = access_as(path, kernel.interpreter, id, &rep);
        if (r < 0)
                return r;
        *ret_as_user = rep.identity_error == 0;
        if (!*ret_as_user || (rep.error && modes.problem != EXEC_OK)) {
                /* Modes alone, or the kernel agrees that something is wrong: the modes say
                 * what. */
                *ret = modes;
                return 0;
        }
        if (rep.error) {
                *ret = (ExecFinding){};
                if (rep.interpreter) {
                        finding_denied(ret, kernel.interpreter, &rep);
                        memcpy(ret->interpreter, kernel.interpreter, sizeof(ret->interpreter));
                        ret->interpreter_problem = EXEC_DENIED;
                        ret->problem = EXEC_INTERPRETER;
                } else
                        finding_denied(ret, path, &rep);
                return 0;
        }
        /* The kernel lets the identity through (an ACL may grant what the modes do not):
         * what is left is what no permission changes. */
        *ret = (ExecFinding){};
        return diagnose_file(path, id, false, true, ret);
}
