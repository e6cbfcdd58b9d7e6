/* Shared by the MQTT load clients of `once bench mqtt`: clock, percentiles.
 *
 * Written by hand: the bench needs one publisher that keeps a fixed window of QoS 1 or 2
 * messages in flight and measures send -> PUBACK/PUBCOMP, and a subscriber that reads the
 * send time from the body (end-to-end latency); mosquitto_pub/sub do neither. libmosquitto
 * (Debian's libmosquitto-dev) does the protocol, MQTT 3.1.1. */
#ifndef ONCE_MQTT_COMMON_H
#define ONCE_MQTT_COMMON_H

#include <mosquitto.h>
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

#endif
