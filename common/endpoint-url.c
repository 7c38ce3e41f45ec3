/* SPDX-License-Identifier: MIT */
/* etcd client URLs (endpoint-url.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "endpoint-url.h"

static bool hostname_is_valid(const char *s, size_t n) {
        static const char chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-";

        if (n == 0 || n > 253 || s[0] == '.' || s[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!memchr(chars, s[i], sizeof(chars) - 1))
                        return false;
        return true;
}

/* 1 to 65535, digits only, the whole rest of the string. */
static int port_parse(const char *s, uint16_t *ret) {
        unsigned v = 0;
        size_t n = 0;

        for (; s[n] >= '0' && s[n] <= '9'; n++) {
                v = v * 10 + (unsigned) (s[n] - '0');
                if (v > UINT16_MAX)
                        return -EINVAL;
        }
        if (n == 0 || s[n] != '\0' || v == 0)
                return -EINVAL;
        *ret = (uint16_t) v;
        return 0;
}

int endpoint_url_parse(const char *s, EndpointURL *ret) {
        EndpointURL u = {};
        const char *host, *colon;
        struct in6_addr a6;
        size_t n;

        if (!s)
                return -EINVAL;
        if (strncmp(s, "http://", 7) == 0)
                host = s + 7;
        else if (strncmp(s, "https://", 8) == 0) {
                host = s + 8;
                u.tls = true;
        } else
                return -EINVAL;

        if (host[0] == '[') {
                const char *end = strchr(host, ']');

                if (!end || end[1] != ':')
                        return -EINVAL;
                n = (size_t) (end - host - 1);
                if (n == 0 || n >= INET6_ADDRSTRLEN)
                        return -EINVAL;
                memcpy(u.host, host + 1, n);
                if (inet_pton(AF_INET6, u.host, &a6) != 1)
                        return -EINVAL;
                colon = end + 1;
        } else {
                colon = strchr(host, ':');
                if (!colon || !hostname_is_valid(host, (size_t) (colon - host)))
                        return -EINVAL;
                memcpy(u.host, host, (size_t) (colon - host));
        }
        if (port_parse(colon + 1, &u.port) < 0)
                return -EINVAL;
        *ret = u;
        return 0;
}

int endpoint_url_sockaddr(const EndpointURL *u, struct sockaddr_storage *ret, socklen_t *ret_len) {
        struct sockaddr_storage sa = {};
        struct sockaddr_in *in = (struct sockaddr_in *) &sa;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &sa;

        if (inet_pton(AF_INET, u->host, &in->sin_addr) == 1) {
                in->sin_family = AF_INET;
                in->sin_port = htons(u->port);
                *ret_len = sizeof(*in);
        } else if (inet_pton(AF_INET6, u->host, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons(u->port);
                *ret_len = sizeof(*in6);
        } else
                return -EINVAL;
        *ret = sa;
        return 0;
}

int endpoint_url_authority(const EndpointURL *u, char *buf, size_t size) {
        int n = snprintf(buf, size, strchr(u->host, ':') ? "[%s]:%u" : "%s:%u", u->host,
                         (unsigned) u->port);

        return n < 0 || (size_t) n >= size ? -ENOBUFS : 0;
}
