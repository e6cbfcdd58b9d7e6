/* once-csend HOST PORT ADDRESS COUNT BODY WINDOW
 * Sends COUNT unsettled messages (one data section of BODY bytes whose first 8 carry the
 * send time), at most WINDOW unanswered at a time (0: as many as the credit allows), and
 * prints one JSON line: counts, first send and last answer times, send->accepted latency. */
#include "common.h"

static const char *address;
static long count, body, window;
static long sent, accepted, other;
static uint64_t *sent_at, *lat, t_first, t_last;
static char *msg;
static size_t head;
static pn_link_t *sender;

static void send_some(void) {
    while (sent < count && pn_link_credit(sender) > 0 && (window == 0 || sent - accepted - other < window)) {
        uint64_t tag = (uint64_t)sent;
        char tagb[8];
        put_be64(tagb, tag);
        pn_delivery_t *d = pn_delivery(sender, pn_dtag(tagb, 8));
        uint64_t t = now_ns();
        if (!t_first) t_first = t;
        sent_at[sent] = t;
        put_be64(msg + head, t);
        pn_link_send(sender, msg, head + body);
        pn_link_advance(sender);
        (void)d;
        sent++;
    }
}

static int handle(pn_proactor_t *p, pn_event_t *e) {
    (void)p;
    switch (pn_event_type(e)) {
    case PN_CONNECTION_INIT: {
        pn_connection_t *c = pn_event_connection(e);
        pn_connection_set_container(c, "once-csend");
        pn_connection_open(c);
        pn_session_t *s = pn_session(c);
        pn_session_open(s);
        sender = pn_sender(s, "once-csend");
        pn_link_set_snd_settle_mode(sender, PN_SND_UNSETTLED);
        pn_terminus_set_address(pn_link_target(sender), address);
        pn_link_open(sender);
        break;
    }
    case PN_LINK_FLOW:
        send_some();
        break;
    case PN_DELIVERY: {
        pn_delivery_t *d = pn_event_delivery(e);
        if (!pn_delivery_updated(d) && !pn_delivery_remote_state(d)) break;
        uint64_t state = pn_delivery_remote_state(d);
        if (state == 0) break;
        pn_delivery_tag_t tag = pn_delivery_tag(d);
        uint64_t i = get_be64(tag.start);
        uint64_t t = now_ns();
        if (state == PN_ACCEPTED) lat[accepted++] = t - sent_at[i];
        else other++;
        t_last = t;
        pn_delivery_settle(d);
        if (accepted + other == count) pn_connection_close(pn_event_connection(e));
        else send_some();
        break;
    }
    case PN_TRANSPORT_CLOSED:
        if (accepted + other < count) fail_on_condition(e);
        return 0;
    case PN_CONNECTION_REMOTE_CLOSE:
        fail_on_condition(e);
        pn_connection_close(pn_event_connection(e));
        break;
    case PN_LINK_REMOTE_CLOSE:
        fail_on_condition(e);
        pn_connection_close(pn_event_connection(e));
        break;
    case PN_PROACTOR_INACTIVE:
        return 0;
    default:
        break;
    }
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: once-csend HOST PORT ADDRESS COUNT BODY WINDOW\n");
        return 2;
    }
    address = argv[3];
    count = atol(argv[4]);
    body = atol(argv[5]);
    window = atol(argv[6]);
    if (body < 8) body = 8;
    sent_at = calloc((size_t)count, sizeof *sent_at);
    lat = calloc((size_t)count, sizeof *lat);
    msg = malloc((size_t)body + 16);
    /* a described data section: 0x00 0x53 0x75, then vbin8 or vbin32 */
    msg[0] = 0x00; msg[1] = 0x53; msg[2] = 0x75;
    if (body < 256) { msg[3] = (char)0xa0; msg[4] = (char)body; head = 5; }
    else { msg[3] = (char)0xb0; msg[4] = (char)(body >> 24); msg[5] = (char)(body >> 16);
           msg[6] = (char)(body >> 8); msg[7] = (char)body; head = 8; }
    memset(msg + head, 'x', (size_t)body);
    pn_proactor_t *p = run_client(argv[1], argv[2], handle);
    double p50, p99;
    percentiles(lat, (size_t)accepted, &p50, &p99);
    printf("{\"sent\": %ld, \"accepted\": %ld, \"other\": %ld, \"first_ns\": %llu, \"last_ns\": %llu, "
           "\"p50_us\": %.1f, \"p99_us\": %.1f}\n", sent, accepted, other, (unsigned long long)t_first,
           (unsigned long long)t_last, p50, p99);
    pn_proactor_free(p);
    return accepted + other == count ? 0 : 1;
}
