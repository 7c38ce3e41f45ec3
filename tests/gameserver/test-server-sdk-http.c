/* SPDX-License-Identifier: MIT */
/*
 * The local proxy's HTTP API as the Multiplay SDKs call it: GET /token, POST
 * /v1/servers/<id>/hold, PATCH /v1/servers/<id>/allocations/<allocation>
 * and GET /payload/<allocation>.  Blocking libcurl calls on the SDK thread;
 * each logs one line, which is what the tests read.
 */

#include "test-server-sdk.h"

struct http_reply {
        long status;                    /* 0: no HTTP answer, see error */
        char *body;                     /* NUL-terminated, NULL when empty */
        size_t len;
        char error[CURL_ERROR_SIZE];
};

/* A URL without a scheme is taken as http, as the Go SDK only strips "http://" from it. */
int sdk_proxy_parse(const char *url, struct sdk_proxy *ret)
{
        struct sdk_proxy p = { .port = 80 };
        const char *authority = url, *slash, *colon;
        size_t n;

        if (strncasecmp(url, "http://", 7) == 0)
                authority += 7;
        else if (strstr(url, "://"))
                return -EPROTONOSUPPORT;
        n = strcspn(authority, "/");
        slash = authority + n;
        if (n == 0 || n >= sizeof(p.host_header) || strlen(slash) >= sizeof(p.ws_path) - 32)
                return -EINVAL;
        memcpy(p.host_header, authority, n);
        p.host_header[n] = '\0';
        if (p.host_header[0] == '[') {
                const char *close = strchr(p.host_header, ']');

                if (!close)
                        return -EINVAL;
                snprintf(p.host, sizeof(p.host), "%.*s", (int) (close - p.host_header - 1),
                         p.host_header + 1);
                colon = close[1] == ':' ? close + 1 : NULL;
        } else {
                colon = strchr(p.host_header, ':');
                snprintf(p.host, sizeof(p.host), "%.*s",
                         (int) (colon ? colon - p.host_header : (ptrdiff_t) n), p.host_header);
        }
        if (colon) {
                uint64_t port;

                if (parse_uint(colon + 1, UINT16_MAX, &port) < 0 || port == 0)
                        return -EINVAL;
                p.port = (int) port;
        }
        n = strlen(slash);
        while (n > 0 && slash[n - 1] == '/')
                n--;
        if (snprintf(p.base, sizeof(p.base), "http://%s%.*s", p.host_header, (int) n,
                     slash) >= (int) sizeof(p.base))
                return -EINVAL;
        snprintf(p.ws_path, sizeof(p.ws_path), "%.*s/v1/connection/websocket", (int) n, slash);
        *ret = p;
        return 0;
}

int sdk_http_init(struct sdk *sdk)
{
        sdk->curl = curl_easy_init();
        return sdk->curl ? 0 : -ENOMEM;
}

static size_t http_collect(char *data, size_t size, size_t nmemb, void *userdata)
{
        struct http_reply *reply = userdata;
        size_t add = size * nmemb;
        char *body;

        if (reply->len + add > SDK_HTTP_BODY_MAX)
                return 0;
        body = realloc(reply->body, reply->len + add + 1);
        if (!body)
                return 0;
        memcpy(body + reply->len, data, add);
        reply->len += add;
        body[reply->len] = '\0';
        reply->body = body;
        return add;
}

static void http_options(CURL *curl, const char *method, const char *body)
{
        (void) curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        /* The proxy is on this machine: an http_proxy in the slot's environment is not for it. */
        (void) curl_easy_setopt(curl, CURLOPT_PROXY, "");
        (void) curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http");
        (void) curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
        /* The Go SDK gives each call 10 s; the tests would rather hear of a hang sooner. */
        (void) curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 5000L);
        (void) curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, http_collect);
        if (strcmp(method, "GET") != 0)
                (void) curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
        if (body)
                (void) curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
}

static int http_request(struct sdk *sdk, const char *method, const char *path, const char *body,
                        struct http_reply *ret)
{
        struct curl_slist *headers = NULL;
        char url[sizeof(sdk->proxy.base) + 3 * SDK_ID_MAX + 64];
        CURLcode rc;

        *ret = (struct http_reply) {};
        snprintf(url, sizeof(url), "%s%s", sdk->proxy.base, path);
        curl_easy_reset(sdk->curl);
        http_options(sdk->curl, method, body);
        if (body)
                headers = curl_slist_append(headers, "Content-Type: application/json");
        (void) curl_easy_setopt(sdk->curl, CURLOPT_HTTPHEADER, headers);
        (void) curl_easy_setopt(sdk->curl, CURLOPT_URL, url);
        (void) curl_easy_setopt(sdk->curl, CURLOPT_WRITEDATA, ret);
        (void) curl_easy_setopt(sdk->curl, CURLOPT_ERRORBUFFER, ret->error);
        rc = curl_easy_perform(sdk->curl);
        curl_slist_free_all(headers);
        if (rc != CURLE_OK) {
                if (ret->error[0] == '\0')
                        copy_string(ret->error, sizeof(ret->error), curl_easy_strerror(rc));
                free(ret->body);
                ret->body = NULL;
                return -EIO;
        }
        (void) curl_easy_getinfo(sdk->curl, CURLINFO_RESPONSE_CODE, &ret->status);
        return 0;
}

/* The body, shortened to one log line's worth. */
static const char *body_excerpt(const struct http_reply *reply, char *buf, size_t size)
{
        copy_string(buf, size, reply->body ? reply->body : "");
        for (char *p = buf; *p; p++)
                if ((unsigned char) *p < 0x20)
                        *p = ' ';
        return buf;
}

int sdk_http_token(struct sdk *sdk)
{
        struct http_reply reply;
        json_t *doc, *token, *error;
        char excerpt[128];
        int r;

        r = http_request(sdk, "GET", "/token", NULL, &reply);
        if (r < 0) {
                log_line("sdk: token failed: %s", reply.error);
                return r;
        }
        doc = json_loadb(reply.body ? reply.body : "", reply.len, 0, NULL);
        token = json_object_get(doc, "token");
        error = json_object_get(doc, "error");
        if (reply.status != 200 || !json_is_string(token) ||
            (json_is_string(error) && json_string_length(error) > 0)) {
                log_line("sdk: token %ld %s", reply.status, body_excerpt(&reply, excerpt,
                                                                          sizeof(excerpt)));
                r = -EPROTO;
        } else if (json_string_length(token) >= sizeof(sdk->token)) {
                log_line("sdk: token %ld, too long", reply.status);
                r = -E2BIG;
        } else {
                copy_string(sdk->token, sizeof(sdk->token), json_string_value(token));
                log_line("sdk: token %ld", reply.status);
        }
        json_decref(doc);
        free(reply.body);
        return r;
}

/* Returns the HTTP status, or a negative errno when there was no answer. */
int sdk_http_hold(struct sdk *sdk)
{
        char path[VALUE_MAX + 32], body[64], excerpt[128];
        struct http_reply reply;
        json_t *doc;
        int r;

        snprintf(path, sizeof(path), "/v1/servers/%s/hold", sdk->server_id);
        snprintf(body, sizeof(body), "{\"timeout\":\"%" PRIu64 "s\"}",
                 (uint64_t) (sdk->hold_usec / USEC_PER_SEC));
        r = http_request(sdk, "POST", path, body, &reply);
        if (r < 0) {
                log_line("sdk: hold failed: %s", reply.error);
                return r;
        }
        doc = json_loadb(reply.body ? reply.body : "", reply.len, 0, NULL);
        if (reply.status == 200 && json_is_object(doc)) {
                char *expires = json_dumps(json_object_get(doc, "expiresAt"), JSON_ENCODE_ANY);

                log_line("sdk: hold %ld held=%s expiresAt=%s", reply.status,
                         json_is_true(json_object_get(doc, "held")) ? "true" : "false",
                         expires ? expires : "none");
                free(expires);
        } else
                log_line("sdk: hold %ld %s", reply.status,
                         body_excerpt(&reply, excerpt, sizeof(excerpt)));
        json_decref(doc);
        free(reply.body);
        return (int) reply.status;
}

/* Returns the HTTP status (204 expected), or a negative errno when there was no answer. */
int sdk_http_ready(struct sdk *sdk, const char *allocation_id, bool ready)
{
        char path[VALUE_MAX + 3 * SDK_ID_MAX + 32], excerpt[128];
        const char *what = ready ? "ready" : "unready";
        struct http_reply reply;
        char *escaped;
        int r;

        escaped = curl_easy_escape(sdk->curl, allocation_id, 0);
        if (!escaped)
                return -ENOMEM;
        snprintf(path, sizeof(path), "/v1/servers/%s/allocations/%s", sdk->server_id, escaped);
        curl_free(escaped);
        r = http_request(sdk, "PATCH", path, ready ? "{\"ready\":true}" : "{\"ready\":false}",
                         &reply);
        if (r < 0) {
                log_line("sdk: %s failed: %s", what, reply.error);
                return r;
        }
        if (reply.status == 204)
                log_line("sdk: %s %ld", what, reply.status);
        else
                log_line("sdk: %s %ld %s", what, reply.status,
                         body_excerpt(&reply, excerpt, sizeof(excerpt)));
        free(reply.body);
        return (int) reply.status;
}

/* Replaced whole (temporary file, then rename), so a test never reads half a payload. */
static int payload_write(const char *path, const char *data, size_t len)
{
        char tmp[PATH_MAX + 64];
        int fd, r;

        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        r = write_all(fd, data, len);
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        return r;
}

/* 200: the payload goes to $HOME/sdk-payload; 404 (there is none): an empty file. */
int sdk_http_payload(struct sdk *sdk, const char *allocation_id)
{
        char path[3 * SDK_ID_MAX + 16];
        struct http_reply reply;
        char *escaped;
        int r;

        escaped = curl_easy_escape(sdk->curl, allocation_id, 0);
        if (!escaped)
                return -ENOMEM;
        snprintf(path, sizeof(path), "/payload/%s", escaped);
        curl_free(escaped);
        r = http_request(sdk, "GET", path, NULL, &reply);
        if (r < 0) {
                log_line("sdk: payload failed: %s", reply.error);
                return r;
        }
        log_line("sdk: payload %ld %zu bytes", reply.status, reply.len);
        if (reply.status == 200 || reply.status == 404) {
                r = payload_write(sdk->payload_path, reply.status == 200 ? reply.body : "",
                                  reply.status == 200 ? reply.len : 0);
                if (r < 0)
                        log_line("sdk: cannot write %s: %s", sdk->payload_path, strerror(-r));
        }
        free(reply.body);
        return (int) reply.status;
}
