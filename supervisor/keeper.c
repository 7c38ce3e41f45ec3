/* SPDX-License-Identifier: MIT */
/* slotd-keeper: PID 1 of a slot's PID namespace, one per running slot (see spawn.h).
 *
 * slotd's spawner execs this after it has forked the game server, so that what stays
 * resident per slot is this program and not a copy of slotd. It is freestanding (no libc, no
 * heap, no writable globals): the text is shared by every keeper on the machine, and a
 * keeper's own memory is its stack page, which is what makes the per-slot cost a few KiB.
 *
 *   slotd-keeper SERVER-PID
 *
 * with every signal blocked (the spawner blocks them before the exec, so none is lost
 * before the handlers below exist), the status file as fd 3 and the slot's notify socket as
 * fd 4 (held only, never read). It forwards every signal it gets to SERVER-PID, reaps
 * whatever dies in the namespace, and when SERVER-PID ends writes "exited CODE\n" or
 * "killed SIGNAL\n" at the start of fd 3 and exits 0: the namespace, and anything the
 * server left in it, ends with it. Anything but one decimal PID as its argument: exit 2. */

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "slotd-keeper: system calls are written for x86_64 and aarch64 only"
#endif

#define KEEPER_STATUS_FD 3

#if defined(__x86_64__)
enum { NR_rt_sigaction = 13, NR_rt_sigprocmask = 14, NR_rt_sigreturn = 15, NR_pwrite64 = 18,
       NR_wait4 = 61, NR_kill = 62, NR_rt_sigtimedwait = 128, NR_exit_group = 231 };

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
        "        hlt\n");
#define SA_RESTORER_FLAG 0x04000000UL
#else
enum { NR_rt_sigaction = 134, NR_rt_sigprocmask = 135, NR_rt_sigreturn = 139, NR_pwrite64 = 68,
       NR_wait4 = 260, NR_kill = 129, NR_rt_sigtimedwait = 137, NR_exit_group = 94 };

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
        "        brk #0\n");
#define SA_RESTORER_FLAG 0x04000000UL
#endif

enum { SIG_SETMASK_HOW = 2, SIGKILL_NR = 9, SIGCHLD_NR = 17, SIGSTOP_NR = 19, NSIG_NR = 64,
       WNOHANG_FLAG = 1, SIGSET_SIZE = 8 };

/* The kernel's struct sigaction (x86_64 and aarch64 alike). */
struct ksigaction {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        unsigned long mask;
};

void keeper_restorer(void);
_Noreturn void keeper_start(long *sp);

/* The handlers never run (every signal stays blocked and is taken by rt_sigtimedwait), but
 * a namespace's init gets a signal from outside only if it has a handler for it. */
static void keeper_noop(int sig) {
        (void) sig;
}

_Noreturn static void keeper_exit(int code) {
        for (;;)
                (void) sys4(NR_exit_group, code, 0, 0, 0);
}

static void keeper_write_status(int wstatus) {
        char buf[24], digits[4];
        const char *word = (wstatus & 0x7f) == 0 ? "exited " : "killed ";
        unsigned v = (wstatus & 0x7f) == 0 ? (unsigned) (wstatus >> 8) & 0xff : (unsigned) wstatus & 0x7f;
        int n = 0, d = 0;

        for (const char *w = word; *w; w++)
                buf[n++] = *w;
        do {
                digits[d++] = (char) ('0' + v % 10);
                v /= 10;
        } while (v);
        while (d)
                buf[n++] = digits[--d];
        buf[n++] = '\n';
        (void) sys4(NR_pwrite64, KEEPER_STATUS_FD, (long) buf, n, 0);
}

/* Reaps everything that has died; ends the keeper when the server is among it. */
static void keeper_reap(long server) {
        for (;;) {
                int wstatus = 0;
                long w = sys4(NR_wait4, -1, (long) &wstatus, WNOHANG_FLAG, 0);

                if (w <= 0)
                        return;
                if (w == server) {
                        keeper_write_status(wstatus);
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

        (void) sys4(NR_rt_sigprocmask, SIG_SETMASK_HOW, (long) &all, 0, SIGSET_SIZE);
        if (argc != 2 || !argv[1][0])
                keeper_exit(2);
        for (const char *c = argv[1]; *c; c++) {
                if (*c < '0' || *c > '9' || server > 4194304)
                        keeper_exit(2);
                server = server * 10 + (*c - '0');
        }
        if (server <= 1)
                keeper_exit(2);
        for (int sig = 1; sig <= NSIG_NR; sig++)
                if (sig != SIGKILL_NR && sig != SIGSTOP_NR)
                        (void) sys4(NR_rt_sigaction, sig, (long) &sa, 0, SIGSET_SIZE);

        /* The server may have ended before this program ran: its SIGCHLD is pending then,
         * but reap first anyway. */
        keeper_reap(server);
        for (;;) {
                unsigned char info[128];
                long sig = sys4(NR_rt_sigtimedwait, (long) &all, (long) info, 0, SIGSET_SIZE);

                if (sig <= 0)
                        continue;
                if (sig == SIGCHLD_NR)
                        keeper_reap(server);
                else
                        (void) sys4(NR_kill, server, sig, 0, 0);
        }
}
