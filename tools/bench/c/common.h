/* Shared by the C load clients of `once bench --clients c`: clock, message layout, results.
 *
 * Written by hand (not quiver's arrow) because the bench needs what arrow does not give:
 * end-to-end latency read from the body, consumer-group link names and capabilities, and
 * a receiver that runs until the bench says stop. Proton-C does the protocol. */
#ifndef ONCE_CBENCH_COMMON_H
#define ONCE_CBENCH_COMMON_H

#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/proactor.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/codec.h>
#include <proton/condition.h>
#include <proton/event.h>
#include <proton/listener.h>
#include <proton/ssl.h>
#include <proton/transport.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* one clock for every process on the host */
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void put_be64(char *p, uint64_t v) {
    for (int i = 7; i >= 0; i--) { p[i] = (char)(v & 0xff); v >>= 8; }
}

static inline uint64_t get_be64(const char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | (uint8_t)p[i];
    return v;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* p50 and p99 in microseconds of the first n samples (sorted in place). */
static void percentiles(uint64_t *v, size_t n, double *p50, double *p99) {
    if (n == 0) { *p50 = *p99 = 0; return; }
    qsort(v, n, sizeof *v, cmp_u64);
    *p50 = v[n / 2] / 1000.0;
    *p99 = v[(size_t)(n * 0.99)] / 1000.0;
}

static int fail_on_condition(pn_event_t *e) {
    pn_condition_t *c = pn_event_condition(e);
    if (c && pn_condition_is_set(c)) {
        fprintf(stderr, "%s: %s\n", pn_condition_get_name(c), pn_condition_get_description(c));
        return 1;
    }
    return 0;
}

/* Connect to HOST:PORT and hand every event to `handle` until it returns 0. Over TLS when
 * ONCE_BENCH_CA names the CA to check the router's certificate against (`--tls`). */
typedef int (*handler_t)(pn_proactor_t *, pn_event_t *);

static pn_proactor_t *run_client(const char *host, const char *port, handler_t handle) {
    char addr[256];
    pn_proactor_addr(addr, sizeof addr, host, port);
    pn_proactor_t *p = pn_proactor();
    pn_transport_t *t = NULL;
    const char *ca = getenv("ONCE_BENCH_CA");
    if (ca && *ca) {
        t = pn_transport();
        pn_ssl_domain_t *d = pn_ssl_domain(PN_SSL_MODE_CLIENT);
        if (!d || pn_ssl_domain_set_trusted_ca_db(d, ca) ||
            pn_ssl_domain_set_peer_authentication(d, PN_SSL_VERIFY_PEER_NAME, NULL)) {
            fprintf(stderr, "TLS: cannot use the CA %s\n", ca);
            exit(2);
        }
        pn_ssl_t *s = pn_ssl(t);
        pn_ssl_init(s, d, NULL);
        pn_ssl_set_peer_hostname(s, host);
        pn_ssl_domain_free(d);
    }
    pn_proactor_connect2(p, NULL, t, addr);
    int more = 1;
    while (more) {
        pn_event_batch_t *b = pn_proactor_wait(p);
        pn_event_t *e;
        while (more && (e = pn_event_batch_next(b))) more = handle(p, e);
        pn_proactor_done(p, b);
    }
    return p;
}

#endif
