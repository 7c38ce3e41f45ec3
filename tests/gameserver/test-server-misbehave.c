/* SPDX-License-Identifier: MIT */
/*
 * Misbehaviour on request, so that each of the supervisor's checks can be
 * driven from a test: memory that grows, CPU burners, stray children,
 * crashes and chosen exit codes.
 */

#include "test-server.h"

static atomic_uint burn_generation;

/* ---- memory ---- */

/* bytes is a multiple of the page size. */
static int memory_touch(struct server *s, uint64_t bytes)
{
        size_t page = (size_t) sysconf(_SC_PAGESIZE);

        while (bytes > 0) {
                struct memory_region *region = s->n_regions ? &s->regions[s->n_regions - 1] : NULL;
                size_t chunk;

                if (!region || region->used == region->size) {
                        size_t size = bytes > MEMORY_REGION_BYTES ? bytes : MEMORY_REGION_BYTES;
                        struct memory_region *regions;
                        void *base;

                        regions = realloc(s->regions, (s->n_regions + 1) * sizeof(*regions));
                        if (!regions)
                                return -ENOMEM;
                        s->regions = regions;
                        base = mmap(NULL, size, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                        if (base == MAP_FAILED)
                                return -errno;
                        /* A huge page would charge 2 MiB for a 4 KiB touch. */
                        (void) madvise(base, size, MADV_NOHUGEPAGE);
                        region = &s->regions[s->n_regions++];
                        *region = (struct memory_region) { .base = base, .size = size };
                }
                chunk = region->size - region->used;
                if (chunk > bytes)
                        chunk = bytes;
                for (size_t off = 0; off < chunk; off += page)
                        region->base[region->used + off] = 1;
                region->used += chunk;
                s->memory_bytes += chunk;
                bytes -= chunk;
        }
        return 0;
}

void memory_free(struct server *s)
{
        for (size_t i = 0; i < s->n_regions; i++)
                (void) munmap(s->regions[i].base, s->regions[i].size);
        free(s->regions);
        s->regions = NULL;
        s->n_regions = 0;
        s->memory_bytes = 0;
        s->memory_pending = 0;
}

void memory_step(struct server *s, usec_t now)
{
        uint64_t step;
        int r;

        /* now may predate leak_last when the rate was set during this loop turn. */
        if (s->leak_rate > 0 && now > s->leak_last) {
                usec_t elapsed = now - s->leak_last;
                uint64_t amount;

                /* Capped so rate × elapsed stays inside 64 bits after a long stall. */
                if (elapsed > USEC_PER_SEC)
                        elapsed = USEC_PER_SEC;
                amount = s->leak_rate * elapsed + s->leak_carry;
                s->memory_pending += amount / USEC_PER_SEC;
                s->leak_carry = amount % USEC_PER_SEC;
                s->leak_last = now;
        }
        /* Whole pages only: a leak's remainder waits for the next turn rather than rounding up. */
        step = s->memory_pending < MEMORY_STEP_BYTES ? s->memory_pending : MEMORY_STEP_BYTES;
        step -= step % (uint64_t) sysconf(_SC_PAGESIZE);
        if (step == 0)
                return;
        r = memory_touch(s, step);
        if (r < 0) {
                if (!s->memory_error_shown)
                        log_line("grow-memory: allocation failed at %" PRIu64 " bytes: %s",
                                 s->memory_bytes, strerror(-r));
                s->memory_error_shown = true;
                s->memory_pending = 0;
                return;
        }
        s->memory_pending -= step;
        s->counters_dirty = true;
        if (s->memory_pending == 0 && s->leak_rate == 0) {
                log_line("memory now %" PRIu64 " bytes", s->memory_bytes);
                s->state_dirty = true;
        }
}

/* ---- CPU burners: the only threads, and the only busy loops ---- */

struct burner_args {
        unsigned generation;
        usec_t busy_usec;
};

/*
 * Busy time is counted on the thread's own CPU clock, not the wall clock:
 * on a loaded host a wall-clock duty cycle would be preempted and burn less
 * than asked, and the supervisor measures CPU time.
 */
static void *burner_main(void *userdata)
{
        struct burner_args a = *(struct burner_args *) userdata;
        usec_t period_end = now_usec(CLOCK_MONOTONIC) + BURN_PERIOD_USEC;

        free(userdata);
        while (atomic_load_explicit(&burn_generation, memory_order_relaxed) == a.generation) {
                usec_t cpu_start = now_usec(CLOCK_THREAD_CPUTIME_ID);
                usec_t now = now_usec(CLOCK_MONOTONIC), next_cpu_check = now + a.busy_usec;

                /*
                 * The CPU clock is a real system call, so it is read only once
                 * the wall clock says the target could have been reached.
                 */
                while (now < period_end) {
                        if (atomic_load_explicit(&burn_generation, memory_order_relaxed) !=
                            a.generation)
                                return NULL;
                        now = now_usec(CLOCK_MONOTONIC);
                        if (now < next_cpu_check)
                                continue;
                        if (now_usec(CLOCK_THREAD_CPUTIME_ID) - cpu_start >= a.busy_usec)
                                break;
                        next_cpu_check = now + 200;
                }

                if (now < period_end) {
                        struct timespec ts = {
                                .tv_sec = (time_t) (period_end / USEC_PER_SEC),
                                .tv_nsec = (long) (period_end % USEC_PER_SEC) * 1000,
                        };

                        (void) clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
                }
                period_end += BURN_PERIOD_USEC;
                /* After a stall (throttled by cpu.max) start afresh instead of catching up. */
                now = now_usec(CLOCK_MONOTONIC);
                if (now > period_end)
                        period_end = now + BURN_PERIOD_USEC;
        }
        return NULL;
}

static void burn_stop(struct server *s)
{
        atomic_fetch_add(&burn_generation, 1);
        for (size_t i = 0; i < s->n_burners; i++)
                (void) pthread_join(s->burners[i], NULL);
        free(s->burners);
        s->burners = NULL;
        s->n_burners = 0;
        s->burn_cores = 0;
}

/* The load is spread evenly: 1.5 cores is two threads at 75 %, not one full and one half. */
int burn_start(struct server *s, double cores)
{
        sigset_t all, saved;
        size_t n;
        int r = 0;

        burn_stop(s);
        if (cores <= 0.0)
                return 0;
        n = (size_t) cores;
        if ((double) n < cores)
                n++;
        s->burners = calloc(n, sizeof(pthread_t));
        if (!s->burners)
                return -ENOMEM;

        /* Signals belong to the main thread's signalfd, never to a burner. */
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &saved);
        for (size_t i = 0; i < n; i++) {
                struct burner_args *a = malloc(sizeof(*a));

                if (!a) {
                        r = -ENOMEM;
                        break;
                }
                *a = (struct burner_args) {
                        .generation = atomic_load(&burn_generation),
                        .busy_usec = (usec_t) (cores / (double) n * (double) BURN_PERIOD_USEC),
                };
                r = -pthread_create(&s->burners[i], NULL, burner_main, a);
                if (r < 0) {
                        free(a);
                        break;
                }
                s->n_burners++;
        }
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        s->burn_cores = cores;
        return r;
}

/* ---- children, crashes, exits ---- */

static void close_all_from(int lowfd)
{
        long max;

        if (syscall(SYS_close_range, (unsigned) lowfd, ~0U, 0) == 0)
                return;
        max = sysconf(_SC_OPEN_MAX);
        if (max < 0 || max > 65536)
                max = 65536;
        for (int fd = lowfd; fd < max; fd++)
                (void) close(fd);
}

int child_spawn(struct server *s)
{
        sigset_t none;
        pid_t pid;

        if (s->n_children >= CHILDREN_MAX)
                return -EMFILE;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid > 0) {
                s->children[s->n_children++] = pid;
                return 0;
        }

        /*
         * The child only sleeps: it exists so the supervisor has to find and
         * kill the whole cgroup, not just the main process.  It must not hold
         * the query port, or a restarted server could not bind it.
         */
        (void) signal(SIGTERM, s->ignore_term ? SIG_IGN : SIG_DFL);
        (void) signal(SIGINT, SIG_DFL);
        (void) signal(SIGHUP, SIG_DFL);
        (void) signal(SIGCHLD, SIG_DFL);
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        close_all_from(3);
        (void) prctl(PR_SET_NAME, "slotd-test-chld", 0, 0, 0);
        for (;;)
                pause();
}

void children_reap(struct server *s)
{
        for (;;) {
                int status;
                pid_t pid = waitpid(-1, &status, WNOHANG);

                if (pid <= 0)
                        return;
                for (size_t i = 0; i < s->n_children; i++) {
                        if (s->children[i] != pid)
                                continue;
                        s->children[i] = s->children[--s->n_children];
                        break;
                }
                if (WIFSIGNALED(status))
                        log_line("child %d killed by SIG%s", (int) pid,
                                 signal_name(WTERMSIG(status)));
                else
                        log_line("child %d exited with %d", (int) pid, WEXITSTATUS(status));
                s->state_dirty = true;
        }
}

void __attribute__((noreturn)) die_by_signal(int sig)
{
        struct sigaction sa = { .sa_handler = SIG_DFL };
        sigset_t set;

        log_line("crashing with SIG%s", signal_name(sig));
        fflush(stdout);
        if (sig == SIGABRT)
                abort();
        (void) sigaction(sig, &sa, NULL);
        sigemptyset(&set);
        sigaddset(&set, sig);
        (void) pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        (void) raise(sig);
        /* A signal whose default action is not fatal (SIGCHLD, SIGCONT...) still has to crash. */
        log_line("SIG%s did not kill, using SIGKILL", signal_name(sig));
        fflush(stdout);
        (void) kill(getpid(), SIGKILL);
        _exit(128 + sig);
}

void __attribute__((noreturn)) exit_with(int code, const char *why)
{
        log_line("%s, exiting with code %d", why, code);
        fflush(stdout);
        exit(code);
}
