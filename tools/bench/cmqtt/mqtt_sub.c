/* once-mqtt-sub HOST PORT TOPIC MESSAGES QOS
 * Subscribes at QOS, prints "attached" at the SUBACK, counts MESSAGES messages (the send
 * time read from the body: end-to-end latency), then prints one JSON line. */
#include "mqtt_common.h"

static const char *topic;
static long total, received;
static int qos;
static uint64_t *lat;

static void on_connect(struct mosquitto *m, void *u, int rc) {
    (void)u;
    if (rc) { fprintf(stderr, "connect refused: %d\n", rc); exit(1); }
    mosquitto_subscribe(m, NULL, topic, qos);
}

static void on_subscribe(struct mosquitto *m, void *u, int mid, int n, const int *granted) {
    (void)m; (void)u; (void)mid; (void)n; (void)granted;
    printf("attached\n");
    fflush(stdout);
}

static void on_message(struct mosquitto *m, void *u, const struct mosquitto_message *msg) {
    (void)u;
    uint64_t t = now_ns(), sent = 0;
    if (msg->payloadlen >= 8) memcpy(&sent, msg->payload, sizeof sent);
    if (received < total) lat[received] = t - sent;
    if (++received == total) mosquitto_disconnect(m);
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: once-mqtt-sub HOST PORT TOPIC MESSAGES QOS\n"); return 2; }
    topic = argv[3]; total = atol(argv[4]); qos = atoi(argv[5]);
    lat = calloc(total, sizeof *lat);
    mosquitto_lib_init();
    struct mosquitto *m = mosquitto_new("once-bench-sub", true, NULL);
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_connect_callback_set(m, on_connect);
    mosquitto_subscribe_callback_set(m, on_subscribe);
    mosquitto_message_callback_set(m, on_message);
    if (mosquitto_connect(m, argv[1], atoi(argv[2]), 60) != MOSQ_ERR_SUCCESS) { fprintf(stderr, "no connection\n"); return 1; }
    mosquitto_loop_forever(m, -1, 1);
    double p50, p99;
    percentiles(lat, received < total ? received : total, &p50, &p99);
    printf("{\"received\": %ld, \"p50_us\": %.1f, \"p99_us\": %.1f}\n", received, p50, p99);
    return 0;
}
