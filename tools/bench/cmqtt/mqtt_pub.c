/* once-mqtt-pub HOST PORT TOPIC MESSAGES QOS WINDOW BODY
 * Publishes MESSAGES messages of BODY bytes (the first 8: the send time) at QOS, keeping
 * WINDOW unacknowledged; prints one JSON line: acknowledged, first/last ns, p50/p99 of
 * send -> PUBACK (QoS 1) or PUBCOMP (QoS 2). */
#include "mqtt_common.h"

static const char *topic;
static long total, sent, acked;
static int qos, window, body;
static uint64_t first_ns, last_ns, *lat, *sent_at;
static char *payload;

static void send_one(struct mosquitto *m) {
    int mid;
    uint64_t t = now_ns();
    memcpy(payload, &t, sizeof t);
    if (mosquitto_publish(m, &mid, topic, body, payload, qos, false) != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "publish failed\n");
        exit(1);
    }
    sent_at[mid & 0xffff] = t;
    if (sent == 0) first_ns = t;
    sent++;
}

static void on_connect(struct mosquitto *m, void *u, int rc) {
    (void)u;
    if (rc) { fprintf(stderr, "connect refused: %d\n", rc); exit(1); }
    while (sent < total && sent - acked < window) send_one(m);
}

static void on_publish(struct mosquitto *m, void *u, int mid) {
    (void)u;
    uint64_t t = now_ns();
    lat[acked++] = t - sent_at[mid & 0xffff];
    last_ns = t;
    if (acked == total) { mosquitto_disconnect(m); return; }
    while (sent < total && sent - acked < window) send_one(m);
}

int main(int argc, char **argv) {
    if (argc != 8) { fprintf(stderr, "usage: once-mqtt-pub HOST PORT TOPIC MESSAGES QOS WINDOW BODY\n"); return 2; }
    topic = argv[3]; total = atol(argv[4]); qos = atoi(argv[5]); window = atoi(argv[6]); body = atoi(argv[7]);
    if (body < 8) body = 8;
    payload = calloc(1, body); lat = calloc(total, sizeof *lat); sent_at = calloc(65536, sizeof *sent_at);
    mosquitto_lib_init();
    struct mosquitto *m = mosquitto_new("once-bench-pub", true, NULL);
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1); /* (a load client: no Nagle delay of its own) */
    mosquitto_max_inflight_messages_set(m, window);
    mosquitto_connect_callback_set(m, on_connect);
    mosquitto_publish_callback_set(m, on_publish);
    if (mosquitto_connect(m, argv[1], atoi(argv[2]), 60) != MOSQ_ERR_SUCCESS) { fprintf(stderr, "no connection\n"); return 1; }
    mosquitto_loop_forever(m, -1, 1);
    double p50, p99;
    percentiles(lat, acked, &p50, &p99);
    printf("{\"acked\": %ld, \"first_ns\": %llu, \"last_ns\": %llu, \"p50_us\": %.1f, \"p99_us\": %.1f}\n", acked,
           (unsigned long long)first_ns, (unsigned long long)last_ns, p50, p99);
    return acked == total ? 0 : 1;
}
