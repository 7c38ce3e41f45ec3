/* SPDX-License-Identifier: MIT */
/* slotd-keeper: PID 1 of a slot's PID namespace, one per running slot (see spawn.h).
 *
 * slotd's spawner execs this after it has forked the game server, so that what stays
 * resident per slot is this program and not a copy of slotd. It is freestanding (no libc, no
 * heap, no writable globals): the text is shared by every keeper on the machine, and a
 * keeper's own memory is its stack page, which is what makes the per-slot cost a few KiB.
 *
 *   slotd-keeper SERVER-PID MAX-SIZE KEEP [BUILD [ARG...]]
 *
 * with every signal blocked (the spawner blocks them before the exec, so none is lost
 * before the handlers below exist), the status file as fd 3 and the slot's notify socket as
 * fd 4 (held only, never read). It forwards every signal it gets to SERVER-PID, reaps
 * whatever dies in the namespace, and when SERVER-PID ends writes "exited CODE\n" or
 * "killed SIGNAL\n" at the start of fd 3 and exits 0: the namespace, and anything the
 * server left in it, ends with it. A bad SERVER-PID, MAX-SIZE or KEEP: exit 2.
 *
 * Output. The servers' stdout and stderr are a pipe whose read end (non-blocking) is fd 7;
 * fd 8 is the slot's logs directory and fd 9 its server.log (not O_APPEND: splice() refuses
 * that), written at its end. The keeper waits in ppoll() on the pipe and on a signalfd of
 * every signal (they all stay blocked: none is lost), and moves what the pipe holds into
 * server.log with splice(). At MAX-SIZE bytes (logs.max_size; 0: never) it renames
 * server.log.(KEEP-1) to server.log.KEEP ... server.log to server.log.1 in fd 8 and opens a
 * new server.log. What the log refuses (ENOSPC, EIO, no server.log) is read and dropped, and
 * the keeper's total of dropped bytes with the last errno, "lost BYTES ERRNO", padded to 32
 * bytes, is written at offset 128 of fd 3 for slotd to log and count. A full pipe blocks the
 * servers' writes: they are slowed, never dropped. Before writing the exit status the keeper
 * empties the pipe, so that the server's last lines come first. slotd holds the pipe's read
 * end too (taken back from fd 7 of a keeper it adopts) and empties it into server.log itself
 * when a keeper is killed before it could (slot-output.c).
 *
 * Restarts. With BUILD and its arguments (and the server's environment as its own), fd 5 is
 * a non-blocking eventfd through which slotd hands it one restart at a time, and fds 0-2 are the
 * server's stdin, stdout and stderr (the log pipe's write end: the keeper never sees it end). When the server ends, nothing else is left in the
 * namespace, and a restart is there to take (a read of fd 5 succeeds), it starts BUILD again
 * at once, as its own child, with its own identity, limits and seccomp filter (spawn.c gives
 * the keeper the server's), having written "restart N exited CODE" (or "killed SIGNAL") at
 * offset 32 of fd 3 just before ("failed N ..." after it, should the fork fail: then it
 * ends as without a restart), and goes on. slotd arms a restart only when its crash policy would restart the
 * server anyway and takes it back (a read of its own) before anything that changes that, such
 * as an allocation: whoever reads first wins, so a server that ends after slotd took it back
 * is never restarted here, and so is one the keeper was sent SIGTERM for (by anyone: at
 * shutdown systemd stops the slots' scope with no slotd left to take a restart back): after a
 * SIGTERM the keeper restarts nothing. Starting the next server needs no round trip through slotd, which
 * is what makes a restart as fast as a fork and an exec (docs/performance.md). Offset 64 of
 * fd 3 is slotd's own (its READY=1 mark, spawn.h): the keeper never writes there. Offset 96
 * holds "exec ERRNO" from a server whose exec failed; a server that exits 203 (SPAWN_EXIT_SETUP:
 * it never ran) is not restarted here, but left to slotd's judgement. */

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "slotd-keeper: system calls are written for x86_64 and aarch64 only"
#endif

#define KEEPER_STATUS_FD 3
#define KEEPER_TOKEN_FD 5
#define KEEPER_RESTART_OFFSET 32
#define KEEPER_EXEC_OFFSET 96
#define KEEPER_LOG_LOST_OFFSET 128
#define KEEPER_PIPE_FD 7
#define KEEPER_LOGS_DIR_FD 8
#define KEEPER_LOG_FD 9
#define KEEPER_EXIT_SETUP 203 /* SPAWN_EXIT_SETUP: the build could not be exec'd */

#if defined(__x86_64__)
enum { NR_read = 0, NR_write = 1, NR_rt_sigaction = 13, NR_rt_sigprocmask = 14,
       NR_rt_sigreturn = 15, NR_pwrite64 = 18, NR_execve = 59, NR_wait4 = 61, NR_kill = 62,
       NR_fcntl = 72, NR_rt_sigtimedwait = 128, NR_personality = 135, NR_prctl = 157,
       NR_exit_group = 231, NR_close = 3, NR_lseek = 8, NR_openat = 257, NR_ppoll = 271,
       NR_splice = 275, NR_signalfd4 = 289, NR_renameat2 = 316, NR_fstat = 5 };
#define O_NOFOLLOW_FLAG 0400000L
/* struct stat: st_nlink (8 bytes) at 16, st_mode at 24 */
#define STAT_NLINK(st) (*(unsigned long *) ((st) + 16))
#define STAT_MODE(st) (*(unsigned *) ((st) + 24))

static long sys6(long n, long a, long b, long c, long d, long e, long f) {
        register long r10 __asm__("r10") = d;
        register long r8 __asm__("r8") = e;
        register long r9 __asm__("r9") = f;
        long ret;

        __asm__ volatile("syscall"
                         : "=a"(ret)
                         : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                         : "rcx", "r11", "memory");
        return ret;
}

static long sys4(long n, long a, long b, long c, long d) {
        register long r10 __asm__("r10") = d;
        long ret;

        __asm__ volatile("syscall"
                         : "=a"(ret)
                         : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                         : "rcx", "r11", "memory");
        return ret;
}

__asm__(".text\n"
        ".global _start\n"
        "_start:\n"
        "        xor %ebp, %ebp\n"
        "        mov %rsp, %rdi\n"
        "        and $-16, %rsp\n"
        "        call keeper_start\n"
        "        hlt\n"
        "keeper_restorer:\n"
        "        mov $15, %eax\n"
        "        syscall\n"
        "        hlt\n"
        /* keeper_clone(flags, stack_top, fn, arg): clone(2) onto stack_top, where the child
         * calls fn(arg) and exits with its result. fn and arg wait on the child's stack. */
        "keeper_clone:\n"
        "        sub $16, %rsi\n"
        "        mov %rdx, (%rsi)\n"
        "        mov %rcx, 8(%rsi)\n"
        "        xor %edx, %edx\n"
        "        xor %r10d, %r10d\n"
        "        xor %r8d, %r8d\n"
        "        mov $56, %eax\n"
        "        syscall\n"
        "        test %rax, %rax\n"
        "        jz 1f\n"
        "        ret\n"
        "1:      xor %ebp, %ebp\n"
        "        pop %rax\n"
        "        pop %rdi\n"
        "        call *%rax\n"
        "        mov %eax, %edi\n"
        "        mov $60, %eax\n"
        "        syscall\n"
        "        hlt\n");
#define SA_RESTORER_FLAG 0x04000000UL
#else
enum { NR_read = 63, NR_write = 64, NR_rt_sigaction = 134, NR_rt_sigprocmask = 135,
       NR_rt_sigreturn = 139, NR_pwrite64 = 68, NR_execve = 221, NR_wait4 = 260, NR_kill = 129,
       NR_fcntl = 25, NR_rt_sigtimedwait = 137, NR_personality = 92, NR_prctl = 167,
       NR_exit_group = 94, NR_close = 57, NR_lseek = 62, NR_openat = 56, NR_ppoll = 73,
       NR_splice = 76, NR_signalfd4 = 74, NR_renameat2 = 276, NR_fstat = 80 };
#define O_NOFOLLOW_FLAG 0100000L
/* struct stat (asm-generic): st_mode at 16, st_nlink (4 bytes) at 20 */
#define STAT_NLINK(st) (*(unsigned *) ((st) + 20))
#define STAT_MODE(st) (*(unsigned *) ((st) + 16))

static long sys6(long n, long a, long b, long c, long d, long e, long f) {
        register long x8 __asm__("x8") = n;
        register long x0 __asm__("x0") = a;
        register long x1 __asm__("x1") = b;
        register long x2 __asm__("x2") = c;
        register long x3 __asm__("x3") = d;
        register long x4 __asm__("x4") = e;
        register long x5 __asm__("x5") = f;

        __asm__ volatile("svc 0"
                         : "+r"(x0)
                         : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                         : "memory");
        return x0;
}

static long sys4(long n, long a, long b, long c, long d) {
        register long x8 __asm__("x8") = n;
        register long x0 __asm__("x0") = a;
        register long x1 __asm__("x1") = b;
        register long x2 __asm__("x2") = c;
        register long x3 __asm__("x3") = d;

        __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
        return x0;
}

__asm__(".text\n"
        ".global _start\n"
        "_start:\n"
        "        mov x0, sp\n"
        "        bl keeper_start\n"
        "        brk #0\n"
        "keeper_restorer:\n"
        "        mov x8, #139\n"
        "        svc 0\n"
        "        brk #0\n"
        "keeper_clone:\n"
        "        stp x2, x3, [x1, #-16]!\n"
        "        mov x2, xzr\n"
        "        mov x3, xzr\n"
        "        mov x4, xzr\n"
        "        mov x8, #220\n"
        "        svc 0\n"
        "        cbz x0, 1f\n"
        "        ret\n"
        "1:      ldp x2, x0, [sp], #16\n"
        "        blr x2\n"
        "        mov x8, #93\n"
        "        svc 0\n"
        "        brk #0\n");
#define SA_RESTORER_FLAG 0x04000000UL
#endif

enum { SIG_SETMASK_HOW = 2, SIGKILL_NR = 9, SIGTERM_NR = 15, SIGCHLD_NR = 17, SIGSTOP_NR = 19, NSIG_NR = 64,
       WNOHANG_FLAG = 1, WALL_FLAG = 0x40000000, SIGSET_SIZE = 8, ECHILD_NR = 10,
       F_SETFD_CMD = 2, FD_CLOEXEC_FLAG = 1, PR_SET_DUMPABLE_OPT = 4, EAGAIN_NR = 11,
       POLLIN_EV = 1, POLLNVAL_EV = 0x20, SEEK_END_WHENCE = 2, SPLICE_FLAGS = 1 | 2 /* MOVE, NONBLOCK */ };
#define OPEN_LOG_FLAGS (01L /* O_WRONLY */ | 0100L /* O_CREAT */ | 0400L /* O_NOCTTY */ | \
                        04000L /* O_NONBLOCK: a FIFO must not hold the keeper */ | \
                        02000000L /* O_CLOEXEC */ | O_NOFOLLOW_FLAG)
#define EPERM_NR 1
#define S_IFMT_BITS 0170000U
#define S_IFREG_BITS 0100000U
#define SFD_FLAGS (02000000L /* SFD_CLOEXEC */ | 04000L /* SFD_NONBLOCK */)
#define SPLICE_MAX (1L << 20)
#define CLONE_VM_FLAG 0x100UL
#define CLONE_VFORK_FLAG 0x4000UL

/* The kernel's struct sigaction (x86_64 and aarch64 alike). */
struct ksigaction {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        unsigned long mask;
};

void keeper_restorer(void);
long keeper_clone(unsigned long flags, void *stack_top, int (*fn)(void *), void *arg);
_Noreturn void keeper_start(long *sp);

struct kpollfd {
        int fd;
        short events, revents;
};

typedef struct Keeper {
        long server;
        unsigned long restarts;
        char **build_argv;        /* NULL: no restarts */
        char **envp;
        unsigned long no_signals;
        int sigfd;                /* a signalfd of every signal, or -1: rt_sigtimedwait() */
        int pipe;                 /* the servers' output, non-blocking; -1 once it has no writer */
        int log;                  /* logs/server.log, or -1 until it can be opened again */
        unsigned keep;            /* logs.keep */
        long max;                 /* logs.max_size; 0: never rotated */
        long size;                /* of the current server.log */
        long open_error;          /* why server.log could not be opened */
        unsigned long lost;       /* bytes of output dropped, in all */
        /* The stack of the next server (keeper_clone()), and the keeper's scratch buffer when
         * output has to be dropped: never both at once (the keeper sleeps through the
         * clone until the child's exec). */
        _Alignas(16) char child_stack[512];
} Keeper;

/* The handlers never run (every signal stays blocked and is taken by rt_sigtimedwait), but
 * a namespace's init gets a signal from outside only if it has a handler for it. */
static void keeper_noop(int sig) {
        (void) sig;
}

_Noreturn static void keeper_exit(int code) {
        for (;;)
                (void) sys4(NR_exit_group, code, 0, 0, 0);
}

static int keeper_put_number(char *buf, int n, unsigned long v) {
        char digits[24];
        int d = 0;

        do {
                digits[d++] = (char) ('0' + v % 10);
                v /= 10;
        } while (v);
        while (d)
                buf[n++] = digits[--d];
        return n;
}

/* "exited CODE", "killed SIGNAL" or "dumped SIGNAL" after 'prefix' and 'number', at 'offset' of the status
 * file; a restart record is padded to its fixed 32 bytes, so that a shorter one leaves
 * nothing of the one before. */
static void keeper_write_status(int wstatus, const char *prefix, unsigned long number, long offset) {
        char buf[64];
        /* "dumped": killed by a signal that left a core (WCOREDUMP), as long as "killed". */
        const char *word = (wstatus & 0x7f) == 0 ? "exited " : (wstatus & 0x80) ? "dumped " : "killed ";
        unsigned v = (wstatus & 0x7f) == 0 ? (unsigned) (wstatus >> 8) & 0xff : (unsigned) wstatus & 0x7f;
        int n = 0;

        if (prefix) {
                for (const char *w = prefix; *w; w++)
                        buf[n++] = *w;
                n = keeper_put_number(buf, n, number);
                buf[n++] = ' ';
        }
        for (const char *w = word; *w; w++)
                buf[n++] = *w;
        n = keeper_put_number(buf, n, v);
        if (prefix)
                while (n < KEEPER_RESTART_OFFSET - 1)
                        buf[n++] = ' ';
        buf[n++] = '\n';
        (void) sys4(NR_pwrite64, KEEPER_STATUS_FD, (long) buf, n, offset);
}

/* "lost BYTES ERRNO" at KEEPER_LOG_LOST_OFFSET of the status file, padded to 32 bytes. */
static void keeper_write_lost(unsigned long bytes, long error) {
        char buf[32];
        int n = 5;

        buf[0] = 'l', buf[1] = 'o', buf[2] = 's', buf[3] = 't', buf[4] = ' ';
        n = keeper_put_number(buf, n, bytes);
        buf[n++] = ' ';
        n = keeper_put_number(buf, n, (unsigned long) error);
        while (n < 31)
                buf[n++] = ' ';
        buf[n++] = '\n';
        (void) sys4(NR_pwrite64, KEEPER_STATUS_FD, (long) buf, n, KEEPER_LOG_LOST_OFFSET);
}

/* "server.log" or "server.log.N" (N < 100). */
static void keeper_log_name(char buf[static 16], unsigned i) {
        static const char base[] = "server.log";
        int n = 0;

        for (const char *c = base; *c; c++)
                buf[n++] = *c;
        if (i > 0) {
                buf[n++] = '.';
                n = keeper_put_number(buf, n, i);
        }
        buf[n] = 0;
}

/* A new logs/server.log (or the one there), written at its end. 1 if open. Like slotd's
 * (slot-process.c), only a regular file with one link: the logs directory is the server's,
 * and the keeper may be root (one that does not restart runs unconfined). */
static int keeper_open_log(Keeper *k) {
        _Alignas(8) unsigned char st[144]; /* struct stat: 144 bytes on x86_64, 128 on aarch64 */
        char name[16];
        long fd, end;

        keeper_log_name(name, 0);
        fd = sys6(NR_openat, KEEPER_LOGS_DIR_FD, (long) name, OPEN_LOG_FLAGS, 0640, 0, 0);
        if (fd < 0) {
                k->open_error = -fd;
                return 0;
        }
        if (sys4(NR_fstat, fd, (long) st, 0, 0) < 0 ||
            (STAT_MODE(st) & S_IFMT_BITS) != S_IFREG_BITS || STAT_NLINK(st) != 1) {
                (void) sys4(NR_close, fd, 0, 0, 0);
                k->open_error = EPERM_NR;
                return 0;
        }
        end = sys4(NR_lseek, fd, 0, SEEK_END_WHENCE, 0);
        k->log = (int) fd;
        k->size = end > 0 ? end : 0;
        return 1;
}

/* server.log.(keep-1) → server.log.keep ... server.log → server.log.1, then a new server.log:
 * svlogd's and s6-log's way, in the logs directory, with renames only. */
static void keeper_rotate(Keeper *k) {
        char from[16], to[16];

        for (unsigned i = k->keep; i >= 1; i--) {
                keeper_log_name(from, i - 1);
                keeper_log_name(to, i);
                (void) sys6(NR_renameat2, KEEPER_LOGS_DIR_FD, (long) from, KEEPER_LOGS_DIR_FD,
                            (long) to, 0, 0);
        }
        (void) sys4(NR_close, k->log, 0, 0, 0);
        k->log = -1;
        (void) keeper_open_log(k);
}

/* The log cannot take what the pipe holds ('error': ENOSPC, EIO...): it is read and dropped,
 * one pipe's worth at most, and counted in the status file for slotd. */
static void keeper_drop(Keeper *k, long error) {
        unsigned long n = 0;
        long r = 0;

        for (int i = 0; i < 1024; i++) {
                r = sys4(NR_read, k->pipe, (long) k->child_stack, sizeof(k->child_stack), 0);
                if (r <= 0)
                        break;
                n += (unsigned long) r;
        }
        if (r == 0) {
                (void) sys4(NR_close, k->pipe, 0, 0, 0);
                k->pipe = -1;
        }
        if (n > 0) {
                k->lost += n;
                keeper_write_lost(k->lost, error);
        }
}

/* Moves what the servers wrote into server.log with splice() (no copy through the keeper),
 * rotating at logs.max_size, until the pipe is empty; a few rounds at most, so that a server
 * writing without a pause cannot keep signals waiting. The pipe's writers block while it is
 * full: a chatty server is slowed down, not dropped. */
static void keeper_pump(Keeper *k) {
        for (int i = 0; i < 16 && k->pipe >= 0; i++) {
                long len = SPLICE_MAX, n;

                if (k->log < 0 && !keeper_open_log(k)) {
                        keeper_drop(k, k->open_error);
                        return;
                }
                /* Up to max_size; past it only when the rotation failed (renames refused):
                 * the file then grows rather than output being dropped. */
                if (k->max > k->size && k->max - k->size < len)
                        len = k->max - k->size;
                n = sys6(NR_splice, k->pipe, 0, k->log, 0, len, SPLICE_FLAGS);
                if (n == -EAGAIN_NR)
                        return;
                if (n == 0) { /* no writer left (a keeper without restarts holds none) */
                        (void) sys4(NR_close, k->pipe, 0, 0, 0);
                        k->pipe = -1;
                        return;
                }
                if (n < 0) {
                        keeper_drop(k, -n);
                        return;
                }
                k->size += n;
                if (k->max > 0 && k->size >= k->max)
                        keeper_rotate(k);
        }
}

/* The next server, on the keeper's small stack, sharing its memory until the exec. A failed
 * exec leaves "exec ERRNO" at KEEPER_EXEC_OFFSET of the status file (spawn.h), the one
 * descriptor of the keeper's it still holds (close-on-exec), and its exit code tells the
 * keeper to leave the judgement to slotd (keeper_restart()). */
static int keeper_server_child(void *arg) {
        static const char msg[] = "slotd-keeper: cannot exec the build, error ";
        const Keeper *k = arg;
        char buf[sizeof(msg) + 24];
        long r;
        int n = 0;

        (void) sys4(NR_rt_sigprocmask, SIG_SETMASK_HOW, (long) &k->no_signals, 0, SIGSET_SIZE);
        r = sys4(NR_execve, (long) k->build_argv[0], (long) k->build_argv, (long) k->envp, 0);
        n = keeper_put_number(buf, 5, (unsigned long) -r);
        buf[0] = 'e', buf[1] = 'x', buf[2] = 'e', buf[3] = 'c', buf[4] = ' ';
        buf[n++] = '\n';
        (void) sys4(NR_pwrite64, KEEPER_STATUS_FD, (long) buf, n, KEEPER_EXEC_OFFSET);
        n = 0;
        for (const char *m = msg; *m; m++)
                buf[n++] = *m;
        n = keeper_put_number(buf, n, (unsigned long) -r);
        buf[n++] = '\n';
        (void) sys4(NR_write, 2, (long) buf, n, 0);
        return KEEPER_EXIT_SETUP;
}

/* The server ended with 'wstatus': starts the next one if slotd armed a restart and the
 * namespace is empty (orphans left behind end with the namespace instead). 1 if it did. */
static int keeper_restart(Keeper *k, int wstatus) {
        unsigned long long token;
        long pid, w;

        /* A server that never got as far as its exec (SPAWN_EXIT_SETUP) will not get there
         * by trying again at once: slotd decides (SPEC §6, cause exec). */
        if (!k->build_argv || wstatus == KEEPER_EXIT_SETUP << 8)
                return 0;
        /* Whatever is left in the namespace has an ancestor among the keeper's children (an
         * orphan's parent is the keeper): no child, nothing left. Dead ones are reaped. */
        while ((w = sys4(NR_wait4, -1, 0, WNOHANG_FLAG | WALL_FLAG, 0)) > 0)
                ;
        if (w != -ECHILD_NR ||
            sys4(NR_read, KEEPER_TOKEN_FD, (long) &token, sizeof(token), 0) != sizeof(token))
                return 0;
        /* The record comes first: slotd learns of the restart before anything the next
         * server sends it (its READY=1, say) can arrive. */
        k->restarts++;
        keeper_write_status(wstatus, "restart ", k->restarts, KEEPER_RESTART_OFFSET);
        pid = keeper_clone(CLONE_VM_FLAG | CLONE_VFORK_FLAG | SIGCHLD_NR,
                           k->child_stack + sizeof(k->child_stack), keeper_server_child, k);
        if (pid <= 0) {
                keeper_write_status(wstatus, "failed ", k->restarts, KEEPER_RESTART_OFFSET);
                return 0;
        }
        k->server = pid;
        return 1;
}

/* Reaps everything that has died; ends the keeper when the server is among it and is not
 * restarted. */
static void keeper_reap(Keeper *k) {
        for (;;) {
                int wstatus = 0;
                long w = sys4(NR_wait4, -1, (long) &wstatus, WNOHANG_FLAG, 0);

                if (w <= 0)
                        return;
                if (w == k->server && !keeper_restart(k, wstatus)) {
                        /* The server's last lines are in the log before slotd hears of
                         * its end. */
                        keeper_pump(k);
                        keeper_write_status(wstatus, 0, 0, 0);
                        keeper_exit(0);
                }
        }
}

/* A decimal argument no larger than 'max', or -1. */
static long keeper_parse_number(const char *c, long max) {
        long v = 0;

        if (!c[0])
                return -1;
        for (; *c; c++) {
                if (*c < '0' || *c > '9' || v > max / 10)
                        return -1;
                v = v * 10 + (*c - '0');
        }
        return v <= max ? v : -1;
}

/* Every signal that is pending: SIGCHLD reaps, the others go to the server (a SIGTERM ends
 * the keeper's restarts first). */
static void keeper_take_signals(Keeper *k) {
        unsigned long all = ~0UL;
        long zero[2] = { 0, 0 };

        for (;;) {
                unsigned char info[128]; /* struct signalfd_siginfo, or a siginfo_t */
                long sig;

                if (k->sigfd >= 0)
                        sig = sys4(NR_read, k->sigfd, (long) info, sizeof(info), 0) == sizeof(info)
                                      ? (long) *(unsigned *) info : -1;
                else
                        sig = sys4(NR_rt_sigtimedwait, (long) &all, (long) info, (long) zero,
                                   SIGSET_SIZE);
                if (sig <= 0)
                        return;
                if (sig == SIGCHLD_NR) {
                        keeper_reap(k);
                        continue;
                }
                /* A SIGTERM (systemd stopping slotd-slots.scope at shutdown, an operator's
                 * kill) ends the server for good: no restart here, even one armed. slotd
                 * takes its token back before it signals anyway; without slotd, a server
                 * started now would be signalled by no one, and the scope's stop would wait
                 * for its timeout. */
                if (sig == SIGTERM_NR)
                        k->build_argv = 0;
                (void) sys4(NR_kill, k->server, sig, 0, 0);
        }
}

_Noreturn void keeper_start(long *sp) {
        long argc = sp[0], server, max, keep;
        char **argv = (char **) (sp + 1);
        unsigned long all = ~0UL;
        struct ksigaction sa = {
                .handler = keeper_noop,
                .flags = SA_RESTORER_FLAG,
                .restorer = keeper_restorer,
                .mask = ~0UL,
        };
        Keeper k; /* not zeroed as a whole: the child's stack is touched only when used */

        (void) sys4(NR_rt_sigprocmask, SIG_SETMASK_HOW, (long) &all, 0, SIGSET_SIZE);
        if (argc < 4)
                keeper_exit(2);
        server = keeper_parse_number(argv[1], 4194304);
        max = keeper_parse_number(argv[2], 1L << 50);
        keep = keeper_parse_number(argv[3], 99);
        if (server <= 1 || max < 0 || keep < 1)
                keeper_exit(2);
        k.server = server;
        k.restarts = 0;
        k.build_argv = k.envp = 0;
        k.no_signals = 0;
        k.pipe = KEEPER_PIPE_FD;
        k.log = KEEPER_LOG_FD;
        k.max = max;
        k.keep = (unsigned) keep;
        k.lost = 0;
        k.open_error = 0;
        k.size = sys4(NR_lseek, KEEPER_LOG_FD, 0, SEEK_END_WHENCE, 0);
        if (k.size < 0) {
                k.open_error = -k.size;
                k.log = -1;
                k.size = 0;
        }
        /* The server may run as the keeper's uid: it must not be able to ptrace the keeper. */
        (void) sys4(NR_prctl, PR_SET_DUMPABLE_OPT, 0, 0, 0);
        if (argc >= 5) {
                k.build_argv = argv + 4;
                k.envp = argv + argc + 1;
                /* The keeper itself runs without address randomisation (spawn.c); the servers
                 * it starts must not inherit that. Its own descriptors stay its own. */
                (void) sys4(NR_personality, 0, 0, 0, 0);
                for (int fd = KEEPER_STATUS_FD; fd <= KEEPER_LOG_FD; fd++)
                        (void) sys4(NR_fcntl, fd, F_SETFD_CMD, FD_CLOEXEC_FLAG, 0);
        }
        for (int sig = 1; sig <= NSIG_NR; sig++)
                if (sig != SIGKILL_NR && sig != SIGSTOP_NR)
                        (void) sys4(NR_rt_sigaction, sig, (long) &sa, 0, SIGSET_SIZE);
        /* Signals stay blocked: the signalfd reports them beside the pipe, none is lost. */
        k.sigfd = (int) sys4(NR_signalfd4, -1, (long) &all, SIGSET_SIZE, SFD_FLAGS);

        /* The server may have ended before this program ran: its SIGCHLD is pending then,
         * but reap first anyway. */
        keeper_reap(&k);
        for (;;) {
                struct kpollfd fds[2] = { { k.sigfd, POLLIN_EV, 0 }, { k.pipe, POLLIN_EV, 0 } };
                /* Without a signalfd (none could be made) signals are looked for every 50 ms. */
                long poll_ms[2] = { 0, 50000000 };

                if (sys6(NR_ppoll, (long) fds, 2, k.sigfd >= 0 ? 0 : (long) poll_ms, 0,
                         SIGSET_SIZE, 0) < 0)
                        continue;
                if (fds[1].revents & POLLNVAL_EV)
                        k.pipe = -1;
                else if (fds[1].revents)
                        keeper_pump(&k);
                keeper_take_signals(&k);
        }
}
