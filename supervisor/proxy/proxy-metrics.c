/* SPDX-License-Identifier: MIT */
/* Scrapes of metrics.listen (SPEC §14), which the unprivileged local proxy serves: slotd
 * makes the text and hands it over the proxy's channel in parts (ipc.h). slotd parses only
 * the scrape's id; the HTTP request stays in the proxy. */
#include "ipc.h"
#include "log.h"
#include "manager-metrics.h"
#include "manager.h"
#include "proxy-internal.h"

/* As many whole lines as fit in max bytes; a longer line (none is) is cut where a UTF-8
 * character starts, so that every part is a valid JSON string. */
static size_t part_size(const char *text, size_t size, size_t max) {
        size_t n;

        if (size <= max)
                return size;
        for (n = max; n > 0; n--)
                if (text[n - 1] == '\n')
                        return n;
        for (n = max; n > 1 && ((unsigned char) text[n] & 0xC0) == 0x80; n--)
                ;
        return n;
}

static void send_metrics_error(Proxy *p, json_int_t id, const char *message) {
        _cleanup_(json_decrefp) json_t *msg = json_pack("{s:s, s:I, s:s}", "type", "metrics", "id",
                                                        id, "error", message);

        if (msg)
                (void) proxy_send(p, msg);
}

void proxy_handle_metrics(Proxy *p, json_t *msg) {
        json_int_t id = json_integer_value(json_object_get(msg, "id"));
        _cleanup_free_ char *text = NULL;
        size_t size, offset = 0;
        int r;

        if (id <= 0)
                return;
        r = manager_metrics_format(proxy_manager(p), &text, &size);
        if (r < 0) {
                log_warning_errno(r, "Failed to write the metrics for metrics.listen: %m");
                return send_metrics_error(p, id, "slotd could not write its metrics");
        }
        do {
                size_t n = part_size(text + offset, size - offset, IPC_METRICS_PART);
                _cleanup_(json_decrefp) json_t *part = json_pack(
                        "{s:s, s:I, s:s%, s:b}", "type", "metrics", "id", id, "text",
                        text + offset, n, "more", offset + n < size);

                if (!part)
                        return send_metrics_error(p, id, "slotd could not send its metrics");
                /* A full channel drops the rest (logged): the proxy's wait for it ends in 503. */
                if (proxy_send(p, part) < 0)
                        return;
                offset += n;
        } while (offset < size);
}
