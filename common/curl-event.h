/* SPDX-License-Identifier: MIT */
#pragma once

/* A libcurl multi handle driven by one sd-event loop (curl's multi_socket interface): an I/O
 * source per socket curl uses (CURLMOPT_SOCKETFUNCTION), one timer for the timeout curl asks
 * for (CURLMOPT_TIMERFUNCTION). After curl acted on a socket or on its timer, process runs:
 * the owner collects the transfers curl finished there (curl_multi_info_read). The fleet
 * benchmark's load client's (tests/bench/fleet-load.c; the etcd client used it for etcd's
 * JSON gateway before it spoke gRPC only). */

#include <curl/curl.h>
#include <systemd/sd-event.h>

typedef struct CurlEvent CurlEvent;

/* process may free its owner, and the CurlEvent with it: nothing of it is used after. */
typedef void (*curl_event_process_t)(void *userdata);

/* Sets multi's socket and timer functions; description names the sources. */
int curl_event_new(CurlEvent **ret, sd_event *event, CURLM *multi, const char *description,
                   curl_event_process_t process, void *userdata);
/* After curl_multi_cleanup(multi), which removes its sockets through the CurlEvent. */
CurlEvent *curl_event_free(CurlEvent *c);
