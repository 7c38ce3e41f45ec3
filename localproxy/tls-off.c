/* SPDX-License-Identifier: MIT */
/* The proxy serves plain HTTP on loopback and never starts a libmicrohttpd daemon with
 * MHD_USE_TLS, but Debian's libmicrohttpd links gnutls and its constructor (MHD_init) calls
 * gnutls_global_init(): about 0.6 MiB of gnutls's pages and 0.1 MiB of heap touched for
 * nothing, the largest share of the proxy's memory (docs/performance.md, Base memory with
 * the local proxy).
 *
 * These two definitions in the executable come before gnutls's in the dynamic linker's
 * search, so that libmicrohttpd's calls land here; slotd starts the proxy with
 * GNUTLS_NO_IMPLICIT_INIT=1, which stops gnutls's own constructor. Nothing else in the
 * proxy calls gnutls. Should the proxy ever ask libmicrohttpd for TLS, gnutls would be
 * uninitialised and MHD_start_daemon with MHD_USE_TLS returns NULL (tried with Debian 12's
 * libmicrohttpd 0.9.75 and gnutls 3.7.9): loudly, never a plaintext fallback. */
int gnutls_global_init(void);
void gnutls_global_deinit(void);

int gnutls_global_init(void) {
        return 0;
}

void gnutls_global_deinit(void) {
}
