/* SPDX-License-Identifier: MIT */
/*
 * --sdk: the server behaves like one built on a Unity Multiplay SDK (the Go
 * SDK and its centrifuge-go 0.8 client, the C# SDK): it reads server.json,
 * talks to the local proxy at localProxyUrl, and on an allocation tells the
 * proxy it is ready and fetches the allocation's payload.  It never speaks
 * sd_notify: readiness is what the proxy was told.
 *
 * This file is the SDK's bridge to the main thread (sdk_init, sdk_start,
 * sdk_handle, sdk_ready_request) and what the SDK thread does on Multiplay's
 * events.  Allocations come only from the WebSocket, as with the C# SDK; the
 * Go SDK also takes them from server.json, which would hide a proxy that
 * never pushes.
 */

#include "test-server-sdk.h"

#define SDK_DEFAULT_PROXY "http://localhost:8086"

/* server.json's keys that are not build-configuration variables. */
static const char *const config_keys[] = {
        "serverID", "allocatedUUID", "machineID", "fleetID", "ip", "ipv6", "port",
        "queryPort", "queryType", "serverLogDir", "localProxyUrl", "regionID", "regionName",
        NULL,
};

static bool config_key_known(const char *key)
{
        for (size_t i = 0; config_keys[i]; i++)
                if (strcmp(key, config_keys[i]) == 0)
                        return true;
        return false;
}

static void json_value_text(json_t *v, char *buf, size_t size)
{
        if (json_is_string(v))
                copy_string(buf, size, json_string_value(v));
        else if (json_is_integer(v))
                snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        else
                copy_string(buf, size, "");
}

/*
 * Build-configuration variables arrive as extra keys, strings by Multiplay's
 * rules.  A game takes its own from them: here maxPlayers and map set the
 * query answers, before the options, which still win.
 */
static void config_extras(struct server *s, json_t *doc)
{
        char line[512] = "", value[VALUE_MAX];
        size_t off = 0;
        const char *key;
        uint64_t n;
        json_t *v;

        json_object_foreach(doc, key, v) {
                if (config_key_known(key))
                        continue;
                json_value_text(v, value, sizeof(value));
                if (off < sizeof(line))
                        off += (size_t) snprintf(line + off, sizeof(line) - off, " %s=%s", key,
                                                 value);
                if (strcmp(key, "maxPlayers") == 0 && parse_uint(value, UINT16_MAX, &n) == 0)
                        s->max_players = (unsigned) n;
                else if (strcmp(key, "map") == 0 && value[0] != '\0')
                        copy_string(s->map, sizeof(s->map), value);
        }
        if (line[0] != '\0')
                log_line("sdk: build configuration:%s", line);
}

/* The Go SDK takes serverID as a number, and fails to start without one. */
static bool server_id_valid(const char *id)
{
        if (*id == '\0')
                return false;
        for (const char *p = id; *p; p++)
                if (!isdigit((unsigned char) *p))
                        return false;
        return true;
}

static void sdk_fill(struct sdk *sdk, const struct server *s)
{
        copy_string(sdk->server_id, sizeof(sdk->server_id), s->server_id);
        snprintf(sdk->channel, sizeof(sdk->channel), "server#%s", s->server_id);
        snprintf(sdk->payload_path, sizeof(sdk->payload_path), "%s/%s", s->home,
                 SDK_PAYLOAD_NAME);
        sdk->hold_usec = s->sdk.hold_sec * USEC_PER_SEC;
        sdk->session_usec = s->sdk.session_sec * USEC_PER_SEC;
        sdk->ready_request = -1;
        sdk->wake_fd = -1;
        copy_string(sdk->st.phase, sizeof(sdk->st.phase), "starting");
        copy_string(sdk->st.proxy, sizeof(sdk->st.proxy), sdk->proxy.base);
        sdk->published = sdk->st;
        (void) pthread_mutex_init(&sdk->lock, NULL);
}

/* This is the SDK binary already (test-server-sdk-none.c is the plain one's). */
void sdk_reexec(char **argv)
{
}

/* Reads server.json on the main thread, before the options' commands run. */
int sdk_init(struct server *s)
{
        const char *url = SDK_DEFAULT_PROXY;
        json_error_t error;
        struct sdk *sdk;
        json_t *doc, *v;
        int r = -EINVAL;

        sdk = calloc(1, sizeof(*sdk));
        if (!sdk)
                return -ENOMEM;
        doc = json_load_file(s->json_path, 0, &error);
        if (!doc)
                log_line("sdk: cannot read %s: %s", s->json_path, error.text);
        v = json_object_get(doc, "localProxyUrl");
        if (json_is_string(v) && json_string_length(v) > 0)
                url = json_string_value(v);
        if (sdk_proxy_parse(url, &sdk->proxy) < 0)
                log_line("sdk: cannot use localProxyUrl \"%s\"", url);
        else if (!server_id_valid(s->server_id))
                log_line("sdk: serverID \"%s\" is not a number", s->server_id);
        else {
                config_extras(s, doc);
                sdk_fill(sdk, s);
                log_line("sdk: serverID=%s localProxyUrl=%s channel=%s", sdk->server_id,
                         sdk->proxy.base, sdk->channel);
                s->sdk_client = sdk;
                s->sdk_status = sdk->st;
                r = 0;
        }
        json_decref(doc);
        if (r < 0)
                free(sdk);
        return r;
}

static void *sdk_thread_main(void *userdata)
{
        struct sdk *sdk = userdata;

        sdk_ws_begin(sdk);
        while (lws_service(sdk->context, 0) >= 0)
                ;
        log_line("sdk: the WebSocket service loop ended");
        return NULL;
}

int sdk_start(struct server *s)
{
        struct sdk *sdk = s->sdk_client;
        sigset_t all, saved;
        int fds[2], r;

        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
                log_line("sdk: cannot make a pipe: %s", strerror(errno));
                return -errno;
        }
        s->sdk_fd = fds[0];
        sdk->wake_fd = fds[1];
        /* Before any thread: curl_global_init() is not thread-safe. */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || sdk_http_init(sdk) < 0 ||
            sdk_ws_context(sdk) < 0) {
                log_line("sdk: cannot set up libcurl and libwebsockets");
                return -ENOMEM;
        }
        /* Signals belong to the main thread's signalfd, never to the SDK thread. */
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &saved);
        r = -pthread_create(&sdk->thread, NULL, sdk_thread_main, sdk);
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (r < 0)
                log_line("sdk: cannot start the SDK thread: %s", strerror(-r));
        return r;
}

/* Main thread: the SDK thread said something. */
void sdk_handle(struct server *s)
{
        struct sdk *sdk = s->sdk_client;
        struct sdk_status st;
        char buf[64];

        if (read(s->sdk_fd, buf, sizeof(buf)) <= 0)
                return;
        while (read(s->sdk_fd, buf, sizeof(buf)) > 0)
                ;
        pthread_mutex_lock(&sdk->lock);
        st = sdk->published;
        pthread_mutex_unlock(&sdk->lock);
        s->sdk_status = st;
        s->state_dirty = true;
        if (st.ready != s->ready)
                ready_set(s, st.ready);
        if (st.session_over)
                exit_with(0, "sdk: session over");
}

/* Main thread: the control file's "ready 0|1", carried out by the SDK thread. */
int sdk_ready_request(struct server *s, bool ready)
{
        struct sdk *sdk = s->sdk_client;

        if (!sdk || !sdk->context)
                return -ENOTCONN;
        pthread_mutex_lock(&sdk->lock);
        sdk->ready_request = ready;
        pthread_mutex_unlock(&sdk->lock);
        lws_cancel_service(sdk->context);
        return 0;
}

/* SDK thread: publish st and wake the main loop.  A full pipe already means "look". */
void sdk_report(struct sdk *sdk)
{
        pthread_mutex_lock(&sdk->lock);
        sdk->published = sdk->st;
        pthread_mutex_unlock(&sdk->lock);
        if (write(sdk->wake_fd, "", 1) < 0 && errno != EAGAIN)
                log_line("sdk: cannot wake the main loop: %s", strerror(errno));
}

/* SDK thread, on lws_cancel_service(). */
void sdk_requests_run(struct sdk *sdk)
{
        int request, r;

        pthread_mutex_lock(&sdk->lock);
        request = sdk->ready_request;
        sdk->ready_request = -1;
        pthread_mutex_unlock(&sdk->lock);
        if (request < 0)
                return;
        if (sdk->st.allocation[0] == '\0') {
                log_line("sdk: ready %d: not allocated, ignoring", request);
                return;
        }
        r = sdk_http_ready(sdk, sdk->st.allocation, request);
        if (r == 204) {
                sdk->st.ready = request;
                sdk_report(sdk);
        }
}

static bool allocation_handled(struct sdk *sdk, const char *id)
{
        for (size_t i = 0; i < sdk->n_handled; i++)
                if (strcmp(sdk->handled[i], id) == 0)
                        return true;
        return false;
}

static void allocation_remember(struct sdk *sdk, const char *id)
{
        size_t i = sdk->n_handled < SDK_HANDLED_MAX ? sdk->n_handled++ :
                                                      sdk->st.allocations % SDK_HANDLED_MAX;

        copy_string(sdk->handled[i], sizeof(sdk->handled[i]), id);
}

/* --sdk-session ran out: the session ends as an SDK server ends it, then the server exits. */
static void session_cb(lws_sorted_usec_list_t *sul)
{
        struct sdk *sdk = lws_container_of(sul, struct sdk, sul_session);

        if (sdk->st.allocation[0] != '\0')
                (void) sdk_http_ready(sdk, sdk->st.allocation, false);
        sdk->st.ready = false;
        sdk->st.session_over = true;
        sdk_report(sdk);
}

static void allocate(struct sdk *sdk, const char *id)
{
        int r;

        if (id[0] == '\0') {
                log_line("sdk: AllocateEventType without an AllocationID, ignored");
                return;
        }
        /* A recovered publication or a proxy's second push must not allocate twice. */
        if (allocation_handled(sdk, id)) {
                log_line("sdk: allocation %s already handled", id);
                return;
        }
        allocation_remember(sdk, id);
        copy_string(sdk->st.allocation, sizeof(sdk->st.allocation), id);
        sdk->st.allocations++;
        log_line("sdk: allocated %s", id);
        if (sdk->session_usec > 0)
                lws_sul_schedule(sdk->context, 0, &sdk->sul_session, session_cb,
                                 (lws_usec_t) sdk->session_usec);
        r = sdk_http_ready(sdk, id, true);
        sdk->st.ready = r == 204;
        sdk_report(sdk);
        r = sdk_http_payload(sdk, id);
        sdk->st.payload_status = r > 0 ? r : 0;
        sdk_report(sdk);
}

/* The allocation is gone at the proxy, so there is nothing to unready there. */
static void deallocate(struct sdk *sdk, const char *id)
{
        if (id[0] != '\0' && sdk->st.allocation[0] != '\0' &&
            strcmp(id, sdk->st.allocation) != 0) {
                log_line("sdk: deallocated %s, not the current allocation %s", id,
                         sdk->st.allocation);
                return;
        }
        log_line("sdk: deallocated %s", id);
        sdk->st.allocation[0] = '\0';
        sdk->st.ready = false;
        lws_sul_cancel(&sdk->sul_session);
        sdk_report(sdk);
}

void sdk_event(struct sdk *sdk, const struct multiplay_event *ev)
{
        if (ev->server_id[0] != '\0' && strcmp(ev->server_id, sdk->server_id) != 0)
                log_line("sdk: %s for server %s ignored", ev->type, ev->server_id);
        else if (strcmp(ev->type, "AllocateEventType") == 0)
                allocate(sdk, ev->allocation_id);
        else if (strcmp(ev->type, "DeallocateEventType") == 0)
                deallocate(sdk, ev->allocation_id);
        else
                log_line("sdk: %s ignored", ev->type);
}
