/* SPDX-License-Identifier: MIT */
/* slotd-keeper: PID 1 of a slot's PID namespace, one per running slot (see spawn.h).
 *
 * slotd's spawner execs this after it has forked the game server, so that what stays
 * resident per slot is this program and not a copy of slotd. It is freestanding (no libc, no
 * heap, no writable globals): the text is shared by every keeper on the machine, and a
 * keeper's own memory is its stack page, which is what makes the per-slot cost a few KiB.
 *
 *   slotd-keeper SERVER-PID [BUILD [ARG...]]
 *
 * with every signal blocked (the spawner blocks them before the exec, so none is lost
 * before the handlers below exist), the status file as fd 3 and the slot's notify socket as
 * fd 4 (held only, never read). It forwards every signal it gets to SERVER-PID, reaps
 * whatever dies in the namespace, and when SERVER-PID ends writes "exited CODE\n" or
 * "killed SIGNAL\n" at the start of fd 3 and exits 0: the namespace, and anything the
 * server left in it, ends with it. A bad SERVER-PID: exit 2.
 *
 * Restarts. With BUILD and its arguments (and the server's environment as its own), fd 5 is
 * a non-blocking eventfd through which slotd hands it one restart at a time, and fds 0-2 are the
 * server's stdin, stdout and stderr. When the server ends, nothing else is left in the
 * namespace, and a restart is there to take (a read of fd 5 succeeds), it starts BUILD again
 * at once, as its own child, with its own identity, limits and seccomp filter (spawn.c gives
 * the keeper the server's), having written "restart N exited CODE" (or "killed SIGNAL") at
 * offset 32 of fd 3 just before ("failed N ..." after it, should the fork fail: then it
 * ends as without a restart), and goes on. slotd arms a restart only when its crash policy would restart the
 * server anyway and takes it back (a read of its own) before anything that changes that, such
 * as an allocation: whoever reads first wins, so a server that ends after slotd took it back
 * is never restarted here. Starting the next server needs no round trip through slotd, which
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
#define KEEPER_EXIT_SETUP 203 /* SPAWN_EXIT_SETUP: the build could not be exec'd */

#if defined(__x86_64__)
enum { NR_read = 0, NR_write = 1, NR_rt_sigaction = 13, NR_rt_sigprocmask = 14,
       NR_rt_sigreturn = 15, NR_pwrite64 = 18, NR_execve = 59, NR_wait4 = 61, NR_kill = 62,
       NR_fcntl = 72, NR_rt_sigtimedwait = 128, NR_personality = 135, NR_prctl = 157,
       NR_exit_group = 231 };

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
       NR_exit_group = 94 };

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

enum { SIG_SETMASK_HOW = 2, SIGKILL_NR = 9, SIGCHLD_NR = 17, SIGSTOP_NR = 19, NSIG_NR = 64,
       WNOHANG_FLAG = 1, WALL_FLAG = 0x40000000, SIGSET_SIZE = 8, ECHILD_NR = 10,
       F_SETFD_CMD = 2, FD_CLOEXEC_FLAG = 1, PR_SET_DUMPABLE_OPT = 4 };
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

typedef struct Keeper {
        long server;
        unsigned long restarts;
        char **build_argv;        /* NULL: no restarts */
        char **envp;
        unsigned long no_signals;
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
                        keeper_write_status(wstatus, 0, 0, 0);
                        keeper_exit(0);
                }
        }
}

_Noreturn void keeper_start(long *sp) {
        long argc = sp[0], server = 0;
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
        if (argc < 2 || !argv[1][0])
                keeper_exit(2);
        for (const char *c = argv[1]; *c; c++) {
                if (*c < '0' || *c > '9' || server > 4194304)
                        keeper_exit(2);
                server = server * 10 + (*c - '0');
        }
        if (server <= 1)
                keeper_exit(2);
        k.server = server;
        k.restarts = 0;
        k.build_argv = k.envp = 0;
        k.no_signals = 0;
        /* The server may run as the keeper's uid: it must not be able to ptrace the keeper. */
        (void) sys4(NR_prctl, PR_SET_DUMPABLE_OPT, 0, 0, 0);
        if (argc >= 3) {
                k.build_argv = argv + 2;
                k.envp = argv + argc + 1;
                /* The keeper itself runs without address randomisation (spawn.c); the servers
                 * it starts must not inherit that. Its own descriptors stay its own. */
                (void) sys4(NR_personality, 0, 0, 0, 0);
                for (int fd = KEEPER_STATUS_FD; fd <= KEEPER_TOKEN_FD; fd++)
                        (void) sys4(NR_fcntl, fd, F_SETFD_CMD, FD_CLOEXEC_FLAG, 0);
        }
        for (int sig = 1; sig <= NSIG_NR; sig++)
                if (sig != SIGKILL_NR && sig != SIGSTOP_NR)
                        (void) sys4(NR_rt_sigaction, sig, (long) &sa, 0, SIGSET_SIZE);

        /* The server may have ended before this program ran: its SIGCHLD is pending then,
         * but reap first anyway. */
        keeper_reap(&k);
        for (;;) {
                unsigned char info[128];
                long sig = sys4(NR_rt_sigtimedwait, (long) &all, (long) info, 0, SIGSET_SIZE);

                if (sig <= 0)
                        continue;
                if (sig == SIGCHLD_NR)
                        keeper_reap(&k);
                else
                        (void) sys4(NR_kill, k.server, sig, 0, 0);
        }
}
