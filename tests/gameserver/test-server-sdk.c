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
 * never pushes.  server.json itself is read as strictly as the Go SDK reads
 * it (test-server-sdk-config.c): what stops an SDK server stops this one.
 */

#include "test-server-sdk.h"

#define SDK_DEFAULT_PROXY "http://localhost:8086"

/* server.json's keys that are not build-configuration variables. */
static const char *const config_keys[] = {
        "serverID", "allocatedUUID", "machineID", "fleetID", "ip", "ipv6", "port",
        "queryPort", "queryType", "serverLogDir", "serverFilesDir", "localProxyUrl", "regionID",
        "regionName",
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

static void sdk_fill(struct sdk *sdk, const struct server *s, int64_t server_id)
{
        snprintf(sdk->server_id, sizeof(sdk->server_id), "%" PRId64, server_id);
        snprintf(sdk->channel, sizeof(sdk->channel), "server#%" PRId64, server_id);
        snprintf(sdk->payload_path, sizeof(sdk->payload_path), "%s/%s", s->home,
                 SDK_PAYLOAD_NAME);
        sdk->hold_usec = s->sdk.hold_sec * USEC_PER_SEC;
        sdk->session_usec = s->sdk.session_sec * USEC_PER_SEC;
        sdk->recovering_client = s->sdk.recovering_client;
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

/* What ends an SDK server's Start(): the game logs the error and exits 1 (2 on a panic)
 * before it has done anything else. */
static void __attribute__((noreturn, format(printf, 2, 3)))
sdk_start_failed(int code, const char *fmt, ...)
{
        char error[PATH_MAX + 1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(error, sizeof(error), fmt, ap);
        va_end(ap);
        log_line("sdk: %s", error);
        exit_with(code, "sdk: unable to start, as Unity's Go SDK v0.5.4");
}

/* server.json as the Go SDK's Start() takes it, or the end of the process. */
static json_t *sdk_config_load(const struct server *s)
{
        char error[1024];
        json_t *doc = NULL;
        size_t len;
        char *buf;
        int r;

        r = read_file(s->json_path, JSON_MAX_BYTES, &buf, &len);
        if (r < 0)
                sdk_start_failed(1, "error opening file: open %s: %s", s->json_path,
                                 strerror(-r));
        r = sdk_config_decode(buf, len, &doc, error, sizeof(error));
        free(buf);
        /* "server.json: machineID: error decoding json: json: invalid number literal, ..." */
        if (r == -EFAULT)
                sdk_start_failed(2, "%s", error);
        if (r < 0)
                sdk_start_failed(1, "server.json: %s", error);
        return doc;
}

/* Start()'s other refusals, in its order: the query protocol, then serverID (ParseInt). */
static void sdk_config_apply(struct server *s, json_t *doc, int64_t *ret_server_id)
{
        const char *id = sdk_config_field(doc, "serverID");
        enum sdk_query_type type;
        char error[512];

        if (sdk_config_query_type(sdk_config_field(doc, "queryType"), &type) < 0)
                sdk_start_failed(1, "server.json: queryType: supplied query type is not "
                                 "supported");
        s->query_protocol = type == SDK_QUERY_A2S ? QUERY_PROTOCOL_A2S : QUERY_PROTOCOL_SQP;
        /* The SDK's A2S responder always asks for the challenge round (proto/a2s/a2s.go). */
        s->a2s_challenge = true;
        if (sdk_config_server_id(id ? id : "", ret_server_id, error, sizeof(error)) < 0)
                sdk_start_failed(1, "server.json: serverID: %s", error);
}

/* Reads server.json on the main thread, before the options' commands run. */
int sdk_init(struct server *s)
{
        const char *url;
        int64_t server_id;
        struct sdk *sdk;
        json_t *doc;

        doc = sdk_config_load(s);
        sdk_config_apply(s, doc, &server_id);
        sdk = calloc(1, sizeof(*sdk));
        if (!sdk) {
                json_decref(doc);
                return -ENOMEM;
        }
        url = sdk_config_field(doc, "localProxyUrl");
        if (!url || *url == '\0')
                url = SDK_DEFAULT_PROXY;
        if (sdk_proxy_parse(url, &sdk->proxy) < 0) {
                log_line("sdk: cannot use localProxyUrl \"%s\"", url);
                json_decref(doc);
                free(sdk);
                return -EINVAL;
        }
        config_extras(s, doc);
        json_decref(doc);
        sdk_fill(sdk, s, server_id);
        log_line("sdk: serverID=%s localProxyUrl=%s channel=%s", sdk->server_id,
                 sdk->proxy.base, sdk->channel);
        s->sdk_client = sdk;
        s->sdk_status = sdk->st;
        return 0;
}

/*
 * Main thread: server.json changed.  The Go SDK decodes it again (config_watcher.go) and,
 * when that fails, pushes "error parsing new configuration" to the game and keeps the
 * configuration it had; an empty file (io.EOF: a rewrite under way) it passes over in
 * silence, and a null one panics it.  False keeps the double's previous values too.
 */
bool sdk_config_reread(struct server *s, const char *buf, size_t len, bool report)
{
        char error[1024];
        json_t *doc;
        int r;

        if (!s->sdk_client)
                return true;
        r = sdk_config_decode(buf, len, &doc, error, sizeof(error));
        if (r == 0) {
                json_decref(doc);
                return true;
        }
        if (r == -EFAULT) {
                log_line("sdk: server.json: error parsing new configuration: %s", error);
                exit_with(2, "sdk: the configuration watcher panicked, as Unity's Go SDK v0.5.4");
        }
        if (report && r != -ENODATA)
                log_line("sdk: server.json: error parsing new configuration: %s; keeping the "
                         "previous configuration, as Unity's Go SDK v0.5.4", error);
        return false;
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
