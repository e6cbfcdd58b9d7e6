/* once-crecv HOST PORT ADDRESS LINKNAME CREDIT MAX [shared]
 * Receives and accepts (settled) every message, re-granting credit in halves; prints
 * "attached" when the router answered the attach, and on SIGTERM (or after MAX messages)
 * one JSON line: count, first and last arrival times, end-to-end latency from the send
 * time in the body. "shared" adds the capabilities that make LINKNAME's prefix a group. */
#include "common.h"
#include <signal.h>

static const char *address, *link_name;
static long credit, max_msgs;
static int shared;
static long received;
static uint64_t *lat, t_first, t_last;
static char *buf;
static size_t buf_size = 1 << 20;
static volatile sig_atomic_t stop;
static pn_connection_t *conn;
static int closing;

static void on_term(int sig) { (void)sig; stop = 1; }

/* the send time: the first 8 bytes of the data section's payload */
static uint64_t sent_time(const char *m, size_t n) {
    for (size_t i = 0; i + 12 <= n; i++) {
        if (m[i] == 0x00 && m[i + 1] == 0x53 && m[i + 2] == 0x75) {
            if ((uint8_t)m[i + 3] == 0xa0) return get_be64(m + i + 5);
            if ((uint8_t)m[i + 3] == 0xb0 && i + 16 <= n) return get_be64(m + i + 8);
        }
    }
    return 0;
}

static void finish(void) {
    if (closing || !conn) return;
    closing = 1;
    pn_connection_close(conn);
}

static int handle(pn_proactor_t *p, pn_event_t *e) {
    switch (pn_event_type(e)) {
    case PN_CONNECTION_INIT: {
        conn = pn_event_connection(e);
        pn_connection_set_container(conn, link_name);
        pn_connection_open(conn);
        pn_session_t *s = pn_session(conn);
        pn_session_open(s);
        pn_link_t *r = pn_receiver(s, link_name);
        pn_link_set_rcv_settle_mode(r, PN_RCV_FIRST);
        pn_terminus_t *src = pn_link_source(r);
        pn_terminus_set_address(src, address);
        if (shared) {
            pn_data_t *caps = pn_terminus_capabilities(src);
            pn_data_put_array(caps, false, PN_SYMBOL);
            pn_data_enter(caps);
            pn_data_put_symbol(caps, pn_bytes(6, "shared"));
            pn_data_put_symbol(caps, pn_bytes(6, "global"));
            pn_data_exit(caps);
        }
        pn_link_open(r);
        pn_link_flow(r, (int)credit);
        pn_proactor_set_timeout(p, 50);
        break;
    }
    case PN_LINK_REMOTE_OPEN:
        printf("attached\n");
        fflush(stdout);
        break;
    case PN_DELIVERY: {
        pn_delivery_t *d = pn_event_delivery(e);
        pn_link_t *l = pn_delivery_link(d);
        if (!pn_delivery_readable(d) || pn_delivery_partial(d)) break;
        size_t n = pn_delivery_pending(d);
        if (n > buf_size) { buf_size = n; buf = realloc(buf, buf_size); }
        ssize_t got = pn_link_recv(l, buf, n);
        uint64_t t = now_ns();
        if (!t_first) t_first = t;
        t_last = t;
        uint64_t s = got > 0 ? sent_time(buf, (size_t)got) : 0;
        if (received < max_msgs) lat[received] = s ? t - s : 0;
        received++;
        pn_delivery_update(d, PN_ACCEPTED);
        pn_delivery_settle(d); /* (settling the current delivery advances the link) */
        int c = pn_link_credit(l);
        if (c < credit / 2) pn_link_flow(l, (int)(credit - c));
        if (received == max_msgs && !shared) finish();
        break;
    }
    case PN_PROACTOR_TIMEOUT:
        /* (not finish() here: a connection is changed only in its own batch, else the close
         * is never written; a wake brings that batch) */
        if (stop) { if (conn) pn_connection_wake(conn); }
        else if (!closing) pn_proactor_set_timeout(p, 50);
        break;
    case PN_CONNECTION_WAKE:
        if (stop) finish();
        break;
    case PN_TRANSPORT_CLOSED:
        return 0;
    case PN_CONNECTION_REMOTE_CLOSE:
    case PN_LINK_REMOTE_CLOSE:
        fail_on_condition(e);
        finish();
        break;
    case PN_PROACTOR_INACTIVE:
        return 0;
    default:
        break;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: once-crecv HOST PORT ADDRESS LINKNAME CREDIT MAX [shared]\n");
        return 2;
    }
    address = argv[3];
    link_name = argv[4];
    credit = atol(argv[5]);
    max_msgs = atol(argv[6]);
    shared = argc > 7 && strcmp(argv[7], "shared") == 0;
    lat = calloc((size_t)max_msgs + 1, sizeof *lat);
    buf = malloc(buf_size);
    signal(SIGTERM, on_term);
    pn_proactor_t *p = run_client(argv[1], argv[2], handle);
    size_t n = (size_t)(received < max_msgs ? received : max_msgs);
    double p50, p99;
    percentiles(lat, n, &p50, &p99);
    printf("{\"received\": %ld, \"first_ns\": %llu, \"last_ns\": %llu, \"p50_us\": %.1f, \"p99_us\": %.1f}\n",
           received, (unsigned long long)t_first, (unsigned long long)t_last, p50, p99);
    pn_proactor_free(p);
    return 0;
}
