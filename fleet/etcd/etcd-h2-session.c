/* SPDX-License-Identifier: MIT */
/* nghttp2's session of an etcd endpoint's connection (etcd-h2-internal.h): its settings and
 * its callbacks, which only record what etcd sent on a call's stream. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-answer.h"
#include "etcd-grpc.h"
#include "etcd-h2-internal.h"

/* ---- nghttp2's callbacks: they only record; the calls end through h->done ---- */

static EtcdH2Call *stream_call(nghttp2_session *session, int32_t stream) {
        return nghttp2_session_get_stream_user_data(session, stream);
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data) {
        EtcdH2Call *c = stream_call(session, frame->hd.stream_id);
        char **field = NULL;

        if (!c || c->done)
                return 0;
        if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
                char buf[8] = {};
                memcpy(buf, value, MIN(valuelen, sizeof(buf) - 1));
                c->answer.http_status = strtol(buf, NULL, 10);
                return 0;
        }
        if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0)
                field = &c->grpc_status;
        else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0)
                field = &c->grpc_message;
        if (!field)
                return 0;
        free(*field);
        *field = strndup((const char *) value, valuelen);
        return *field ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

static int on_data(nghttp2_session *session, uint8_t flags, int32_t stream, const uint8_t *data,
                   size_t len, void *user_data) {
        EtcdH2Call *c = stream_call(session, stream);

        if (!c || c->done)
                return 0;
        if (c->on_stream && c->data_start > 0) {
                /* what was taken goes: the buffer holds what is not taken yet */
                memmove(c->data, c->data + c->data_start, c->data_size - c->data_start);
                c->data_size -= c->data_start;
                c->data_start = 0;
        }
        /* a message of ETCD_ANSWER_MAX bytes (etcd_grpc_frame_next's limit) with its prefix */
        if (len > ETCD_ANSWER_MAX + ETCD_GRPC_PREFIX - c->data_size) {
                (void) nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream,
                                                 NGHTTP2_CANCEL);
                h2_call_fail(c, -EBADMSG, "an answer over %u bytes", ETCD_ANSWER_MAX);
                return 0;
        }
        if (c->data_size + len > c->data_allocated) {
                size_t m = MAX(c->data_allocated * 2, c->data_size + len);
                uint8_t *d = realloc(c->data, m);
                if (!d) {
                        (void) nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream,
                                                         NGHTTP2_CANCEL);
                        h2_call_fail(c, -ENOMEM, "out of memory");
                        return 0;
                }
                c->data = d;
                c->data_allocated = m;
        }
        memcpy(c->data + c->data_size, data, len);
        c->data_size += len;
        if (c->on_stream && !c->in_pending) {
                EtcdH2 *h = user_data;
                c->in_pending = true;
                LIST_PREPEND(pending, h->pending, c);
                (void) sd_event_source_set_enabled(h->dispatch, SD_EVENT_ONESHOT);
        }
        return 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame,
                         void *user_data) {
        EtcdH2 *h = user_data;
        EtcdH2Call *c;

        if (frame->hd.type != NGHTTP2_HEADERS)
                return 0;
        c = stream_call(session, frame->hd.stream_id);
        if (c && !c->queued) {
                c->queued = true;
                c->queued_at = h->queued; /* the start of the bytes mem_send is making */
        }
        return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream, uint32_t error_code,
                           void *user_data) {
        EtcdH2Call *c = stream_call(session, stream);

        if (!c || c->done)
                return 0;
        if (error_code == NGHTTP2_REFUSED_STREAM) {
                /* refused unprocessed (or above a GOAWAY's last stream): never applied */
                c->refused = true;
                h2_call_fail(c, -ECONNREFUSED, "etcd refused the stream unprocessed");
        } else if (error_code != NGHTTP2_NO_ERROR)
                h2_call_fail(c, -ECONNRESET, "etcd reset the stream (HTTP/2 error %" PRIu32 ")",
                          error_code);
        else
                h2_call_end(c);
        return 0;
}

int h2_session_new(EtcdH2 *h) {
        nghttp2_session_callbacks *cbs;
        nghttp2_settings_entry settings[] = {
                { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
                { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2_WINDOW },
        };
        int r;

        if (nghttp2_session_callbacks_new(&cbs) != 0)
                return -ENOMEM;
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
        nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
        r = nghttp2_session_client_new(&h->session, cbs, h);
        nghttp2_session_callbacks_del(cbs);
        if (r != 0)
                return -ENOMEM;
        if (nghttp2_submit_settings(h->session, NGHTTP2_FLAG_NONE, settings,
                                    ELEMENTSOF(settings)) != 0 ||
            nghttp2_session_set_local_window_size(h->session, NGHTTP2_FLAG_NONE, 0, H2_WINDOW) !=
                    0)
                return -ENOMEM;
        return 0;
}
