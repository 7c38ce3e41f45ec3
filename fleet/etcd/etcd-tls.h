/* SPDX-License-Identifier: MIT */
#pragma once

/* TLS for an etcd endpoint's HTTP/2 connection (etcd-h2.c), on gnutls: the credentials of
 * EtcdConfig's ca_file, cert_file and key_file (SPEC §13: fleet.etcd_ca, etcd_cert, etcd_key;
 * no CA: the system's trust store), and a client session on a connected non-blocking socket
 * that verifies etcd's certificate against them and the endpoint's host (a name, or an
 * address among the certificate's IP SANs) and offers ALPN "h2" only. The handshake and the
 * records are driven by the caller from sd-event (etcd-h2.c): every call here returns at once,
 * GNUTLS_E_AGAIN when the socket has no bytes or no room (gnutls_record_get_direction() says
 * which). */

#include <gnutls/gnutls.h>
#include <sys/types.h>

/* Loads the credentials: 0, or a negative errno with *ret_error (to free) naming the file and
 * gnutls' reason. */
int etcd_tls_credentials_new(gnutls_certificate_credentials_t *ret, const char *ca_file,
                             const char *cert_file, const char *key_file, char **ret_error);

/* A client session on fd for host (the URL's, without brackets): 0 or -ENOMEM. */
int etcd_tls_session_new(gnutls_session_t *ret, gnutls_certificate_credentials_t creds, int fd,
                         const char *host);

/* One step of the handshake: 1 done (etcd's certificate verified, "h2" agreed), 0 not yet
 * (wait for the socket as gnutls_record_get_direction() says), or -EIO with *ret_error (to
 * free) saying why in words: the certificate's verification ("The certificate is NOT
 * trusted. The certificate issuer is unknown."), an alert of etcd, no "h2". */
int etcd_tls_handshake(gnutls_session_t s, char **ret_error);

/* A record's write (the same bytes again after -EAGAIN, as gnutls wants) and read, as send()
 * and read() but with negative errnos: how many bytes, 0 at the end (read: etcd closed the
 * connection, with or without TLS's close_notify), -EAGAIN, or -EIO with *ret_error (to free;
 * gnutls' words, the alert's name for an alert). */
ssize_t etcd_tls_send(gnutls_session_t s, const void *data, size_t size, char **ret_error);
ssize_t etcd_tls_recv(gnutls_session_t s, void *buf, size_t size, char **ret_error);

/* gnutls' error code of a record's read or write in words, with the alert's name for an
 * alert etcd sent (as its refusal of our certificate comes, after the handshake); free it. */
char *etcd_tls_error(gnutls_session_t s, int code);
