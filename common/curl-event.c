/* SPDX-License-Identifier: MIT */
/* libcurl's multi_socket interface on sd-event (curl-event.h). */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "curl-event.h"
#include "macro.h"
#include "time-util.h"

struct CurlEvent {
        sd_event *event;
        CURLM *multi;
        sd_event_source *timer;
        const char *description;
        curl_event_process_t process;
        void *userdata;
};

static int on_curl_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        CurlEvent *c = userdata;
        int flags = 0, running;

        if (revents & EPOLLIN)
                flags |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                flags |= CURL_CSELECT_OUT;
        if (revents & (EPOLLERR | EPOLLHUP))
                flags |= CURL_CSELECT_ERR;
        (void) curl_multi_socket_action(c->multi, fd, flags, &running);
        c->process(c->userdata); /* last: it may free c */
        return 0;
}

static int on_curl_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        CurlEvent *c = userdata;
        int running;

        (void) curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        c->process(c->userdata);
        return 0;
}

/* CURLMOPT_SOCKETFUNCTION: one sd-event I/O source per socket curl uses. */
static int curl_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
        CurlEvent *c = userp;
        sd_event_source *s = socketp;
        uint32_t events = (what & CURL_POLL_IN ? EPOLLIN : 0) |
                          (what & CURL_POLL_OUT ? EPOLLOUT : 0);

        if (what == CURL_POLL_REMOVE) {
                if (s) {
                        (void) curl_multi_assign(c->multi, fd, NULL);
                        sd_event_source_disable_unref(s);
                }
                return 0;
        }
        if (s)
                return sd_event_source_set_io_events(s, events) < 0 ||
                                       sd_event_source_set_enabled(s, SD_EVENT_ON) < 0
                               ? -1
                               : 0;
        if (sd_event_add_io(c->event, &s, fd, events, on_curl_io, c) < 0)
                return -1;
        (void) sd_event_source_set_description(s, c->description);
        if (curl_multi_assign(c->multi, fd, s) != CURLM_OK) {
                sd_event_source_disable_unref(s);
                return -1;
        }
        return 0;
}

/* CURLMOPT_TIMERFUNCTION: the one timer curl asks for, as an sd-event timer. */
static int curl_timer_cb(CURLM *multi, long timeout_ms, void *userp) {
        CurlEvent *c = userp;

        if (timeout_ms < 0)
                return sd_event_source_set_enabled(c->timer, SD_EVENT_OFF) < 0 ? -1 : 0;
        if (sd_event_source_set_time(c->timer, now_usec(CLOCK_MONOTONIC) +
                                                       (usec_t) timeout_ms * USEC_PER_MSEC) < 0 ||
            sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT) < 0)
                return -1;
        return 0;
}

int curl_event_new(CurlEvent **ret, sd_event *event, CURLM *multi, const char *description,
                   curl_event_process_t process, void *userdata) {
        CurlEvent *c = new0(CurlEvent, 1);
        int r;

        if (!c)
                return -ENOMEM;
        *c = (CurlEvent) { .event = sd_event_ref(event), .multi = multi,
                           .description = description, .process = process,
                           .userdata = userdata };
        r = sd_event_add_time(event, &c->timer, CLOCK_MONOTONIC, 0, 1, on_curl_timer, c);
        if (r >= 0) {
                (void) sd_event_source_set_description(c->timer, description);
                r = sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);
        }
        if (r >= 0 &&
            (curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, curl_socket_cb) != CURLM_OK ||
             curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK ||
             curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, curl_timer_cb) != CURLM_OK ||
             curl_multi_setopt(multi, CURLMOPT_TIMERDATA, c) != CURLM_OK))
                r = -ENOMEM;
        if (r < 0) {
                (void) curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, NULL);
                (void) curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, NULL);
                curl_event_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

CurlEvent *curl_event_free(CurlEvent *c) {
        if (!c)
                return NULL;
        sd_event_source_disable_unref(c->timer);
        sd_event_unref(c->event);
        free(c);
        return NULL;
}
