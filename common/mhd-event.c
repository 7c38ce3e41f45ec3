/* SPDX-License-Identifier: MIT */
#include <sys/epoll.h>

#include "macro.h"
#include "mhd-event.h"
#include "time-util.h"

/* microhttpd's timeouts are whole milliseconds; an hour bounds a wake-up nobody asked for. */
#define MHD_TIMEOUT_CAP_MS 3600000ULL
/* sd-event's default of 250 ms would be added to every timeout microhttpd asks for. */
#define MHD_TIMER_ACCURACY_USEC USEC_PER_MSEC

typedef struct MhdDaemon {
        MhdEvent *owner;
        struct MHD_Daemon *mhd;
        sd_event_source *source;
} MhdDaemon;

struct MhdEvent {
        sd_event *event;
        sd_event_source *timer;
        sd_event_source *kick;
        MhdDaemon daemons[MHD_EVENT_DAEMONS_MAX];
        size_t n_daemons;
};

static void rearm_timer(MhdEvent *m) {
        MHD_UNSIGNED_LONG_LONG ms, min = MHD_TIMEOUT_CAP_MS;
        bool any = false;

        for (size_t i = 0; i < m->n_daemons; i++)
                if (MHD_get_timeout(m->daemons[i].mhd, &ms) == MHD_YES) {
                        min = MIN(min, ms);
                        any = true;
                }
        if (!any) {
                (void) sd_event_source_set_enabled(m->timer, SD_EVENT_OFF);
                return;
        }
        if (min == 0) {
                mhd_event_kick(m);
                return;
        }
        (void) sd_event_source_set_time_relative(m->timer, (uint64_t) min * USEC_PER_MSEC);
        (void) sd_event_source_set_enabled(m->timer, SD_EVENT_ONESHOT);
}

static void run_all(MhdEvent *m) {
        for (size_t i = 0; i < m->n_daemons; i++)
                (void) MHD_run(m->daemons[i].mhd);
        rearm_timer(m);
}

static int on_daemon_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        MhdDaemon *d = userdata;

        (void) MHD_run(d->mhd);
        rearm_timer(d->owner);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        run_all(userdata);
        return 0;
}

static int on_kick(sd_event_source *s, void *userdata) {
        run_all(userdata);
        return 0;
}

void mhd_event_kick(MhdEvent *m) {
        (void) sd_event_source_set_enabled(m->kick, SD_EVENT_ONESHOT);
}

int mhd_event_new(sd_event *event, MhdEvent **ret) {
        MhdEvent *m = new0(MhdEvent, 1);
        int r;

        if (!m)
                return -ENOMEM;
        m->event = sd_event_ref(event);
        r = sd_event_add_time(event, &m->timer, CLOCK_MONOTONIC, USEC_INFINITY,
                              MHD_TIMER_ACCURACY_USEC, on_timer, m);
        if (r >= 0)
                r = sd_event_add_defer(event, &m->kick, on_kick, m);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->kick, SD_EVENT_OFF);
        if (r < 0) {
                mhd_event_free(m);
                return r;
        }
        *ret = m;
        return 0;
}

MhdEvent *mhd_event_free(MhdEvent *m) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n_daemons; i++)
                sd_event_source_disable_unref(m->daemons[i].source);
        sd_event_source_disable_unref(m->timer);
        sd_event_source_disable_unref(m->kick);
        sd_event_unref(m->event);
        return mfree(m);
}

int mhd_event_add_daemon(MhdEvent *m, struct MHD_Daemon *d) {
        const union MHD_DaemonInfo *info;
        MhdDaemon *md;
        int r;

        if (m->n_daemons >= MHD_EVENT_DAEMONS_MAX)
                return -E2BIG;
        info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info)
                return -EINVAL;
        md = &m->daemons[m->n_daemons];
        *md = (MhdDaemon){ .owner = m, .mhd = d };
        r = sd_event_add_io(m->event, &md->source, info->epoll_fd, EPOLLIN, on_daemon_io, md);
        if (r < 0)
                return r;
        m->n_daemons++;
        rearm_timer(m);
        return 0;
}

void mhd_event_remove_daemon(MhdEvent *m, struct MHD_Daemon *d) {
        for (size_t i = 0; m && i < m->n_daemons; i++) {
                if (m->daemons[i].mhd != d)
                        continue;
                sd_event_source_disable_unref(m->daemons[i].source);
                /* The later ones move down: their sources' userdata follows them. */
                for (size_t j = i; j + 1 < m->n_daemons; j++) {
                        m->daemons[j] = m->daemons[j + 1];
                        (void) sd_event_source_set_userdata(m->daemons[j].source, &m->daemons[j]);
                }
                m->n_daemons--;
                rearm_timer(m);
                return;
        }
}
