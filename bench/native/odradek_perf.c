/*
 * odradek_perf: a native Kafka producer / consumer for bench/ (issue 17), written against
 * librdkafka's C API so that the numbers measure the broker rather than a Python client.
 *
 *   odradek_perf produce --bootstrap H:P --topic T --size N --count N [--partitions P]
 *                        [--rate BYTES_PER_S] [--acks all|1|0] [--linger-ms N]
 *                        [--batch-size N] [--timeout S] [-X key=value ...]
 *   odradek_perf consume --bootstrap H:P --topic T --count N [--partitions P]
 *                        [--timeout S] [-X key=value ...]
 *
 * Produce sends `count` values of `size` bytes round-robin over partitions 0..P-1 (explicit
 * partition, no key), at full speed or at an offered load of `rate` bytes/s (message i leaves
 * at start + i*size/rate; the loop polls while it is early). Latency is the time from
 * rd_kafka_produce() to the message's delivery report (its send time travels as the message's
 * opaque). Consume reads partitions 0..P-1 from the beginning with the legacy queue consumer
 * (no group, no coordinator) until `count` records arrived; its rate runs from the first batch
 * received to the last record, and the wait before that first batch is reported apart.
 *
 * The result is one JSON object on stdout; errors go to stderr. Exit status 0 when every record
 * was delivered / read, 1 when not, 2 on bad usage or a client that could not start.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#define MAX_EXTRA 64
#define CONSUME_BATCH 10000
#define MAX_ERRORS_SHOWN 5

static volatile sig_atomic_t stop_requested = 0;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct opts {
    const char *mode;
    const char *bootstrap;
    const char *topic;
    long size;
    long long count;
    int partitions;
    double rate; /* bytes/s, 0: full speed */
    const char *acks;
    int linger_ms;
    long batch_size;
    double timeout_s;
    const char *extra[MAX_EXTRA];
    int n_extra;
};

static void usage(void) {
    fprintf(stderr,
            "usage: odradek_perf produce|consume --bootstrap H:P --topic T --count N\n"
            "       [--size N] [--partitions P] [--rate BYTES_PER_S] [--acks all|1|0]\n"
            "       [--linger-ms N] [--batch-size N] [--timeout S] [-X key=value ...]\n");
}

static int parse(int argc, char **argv, struct opts *o) {
    memset(o, 0, sizeof(*o));
    o->size = 100;
    o->partitions = 1;
    o->acks = "all";
    o->linger_ms = 5;
    o->batch_size = 1000000;
    o->timeout_s = 900.0;
    if (argc < 2)
        return -1;
    o->mode = argv[1];
    if (strcmp(o->mode, "produce") != 0 && strcmp(o->mode, "consume") != 0)
        return -1;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            return -1;
        const char *v = argv[++i];
        if (!strcmp(a, "--bootstrap"))
            o->bootstrap = v;
        else if (!strcmp(a, "--topic"))
            o->topic = v;
        else if (!strcmp(a, "--size"))
            o->size = atol(v);
        else if (!strcmp(a, "--count"))
            o->count = atoll(v);
        else if (!strcmp(a, "--partitions"))
            o->partitions = atoi(v);
        else if (!strcmp(a, "--rate"))
            o->rate = atof(v);
        else if (!strcmp(a, "--acks"))
            o->acks = v;
        else if (!strcmp(a, "--linger-ms"))
            o->linger_ms = atoi(v);
        else if (!strcmp(a, "--batch-size"))
            o->batch_size = atol(v);
        else if (!strcmp(a, "--timeout"))
            o->timeout_s = atof(v);
        else if (!strcmp(a, "-X")) {
            if (o->n_extra >= MAX_EXTRA || !strchr(v, '='))
                return -1;
            o->extra[o->n_extra++] = v;
        } else
            return -1;
    }
    if (!o->bootstrap || !o->topic || o->count <= 0 || o->size <= 0 || o->partitions <= 0 ||
        o->rate < 0 || o->timeout_s <= 0)
        return -1;
    return 0;
}

static int set(rd_kafka_conf_t *conf, const char *key, const char *value) {
    char err[512];
    if (rd_kafka_conf_set(conf, key, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "odradek_perf: %s=%s: %s\n", key, value, err);
        return -1;
    }
    return 0;
}

static int set_extra(rd_kafka_conf_t *conf, const struct opts *o) {
    for (int i = 0; i < o->n_extra; i++) {
        char buf[1024];
        snprintf(buf, sizeof(buf), "%s", o->extra[i]);
        char *eq = strchr(buf, '=');
        *eq = '\0';
        if (set(conf, buf, eq + 1))
            return -1;
    }
    return 0;
}

static long client_errors = 0;

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque) {
    (void)rk;
    (void)opaque;
    if (++client_errors <= MAX_ERRORS_SHOWN)
        fprintf(stderr, "odradek_perf: %s: %s\n", rd_kafka_err2str((rd_kafka_resp_err_t)err),
                reason);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* nearest-rank percentile of sorted microseconds, in ms */
static double pct_ms(const uint32_t *sorted, long long n, double q) {
    if (n <= 0)
        return -1.0;
    long long rank = (long long)(q / 100.0 * (double)n + 0.5);
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return sorted[rank - 1] / 1000.0;
}

/* --- produce ------------------------------------------------------------------------------ */

struct produce_state {
    uint32_t *latency_us;
    long long delivered;
    long long failed;
    int64_t last_dr_ns;
};

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    struct produce_state *st = opaque;
    int64_t now = now_ns();
    st->last_dr_ns = now;
    if (m->err) {
        if (++st->failed <= MAX_ERRORS_SHOWN)
            fprintf(stderr, "odradek_perf: delivery failed: %s\n", rd_kafka_err2str(m->err));
        return;
    }
    int64_t sent = (int64_t)(intptr_t)m->_private;
    int64_t us = (now - sent) / 1000;
    st->latency_us[st->delivered++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static int run_produce(const struct opts *o) {
    char errstr[512], buf[64];
    struct produce_state st = {0};
    st.latency_us = malloc(sizeof(uint32_t) * (size_t)o->count);
    char *payload = malloc((size_t)o->size);
    if (!st.latency_us || !payload) {
        fprintf(stderr, "odradek_perf: out of memory\n");
        return 2;
    }
    /* 64 symbols, compressible but not trivially (as bench.workloads.payloads) */
    static const char alphabet[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;";
    uint32_t seed = 7;
    for (long i = 0; i < o->size; i++) {
        seed = seed * 1103515245u + 12345u;
        payload[i] = alphabet[(seed >> 16) % 64];
    }

    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    snprintf(buf, sizeof(buf), "%d", o->linger_ms);
    if (set(conf, "bootstrap.servers", o->bootstrap) ||
        set(conf, "client.id", "odradek-perf-producer") || set(conf, "acks", o->acks) ||
        set(conf, "linger.ms", buf) || set(conf, "batch.num.messages", "1000000") ||
        set(conf, "queue.buffering.max.messages", "2000000") ||
        set(conf, "queue.buffering.max.kbytes", "2097152") ||
        set(conf, "message.max.bytes", "8388608") || set(conf, "enable.idempotence", "false") ||
        set(conf, "socket.nagle.disable", "true"))
        return 2;
    snprintf(buf, sizeof(buf), "%ld", o->batch_size);
    if (set(conf, "batch.size", buf) || set_extra(conf, o))
        return 2;
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_error_cb(conf, on_error);
    rd_kafka_conf_set_opaque(conf, &st);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "odradek_perf: %s\n", errstr);
        return 2;
    }
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);

    int64_t started = now_ns();
    int64_t deadline = started + (int64_t)(o->timeout_s * 1e9);
    double ns_per_msg = o->rate > 0 ? 1e9 * (double)o->size / o->rate : 0.0;
    long long sent = 0;
    int timed_out = 0;
    while (sent < o->count && !stop_requested) {
        int64_t now = now_ns();
        if (now > deadline) {
            timed_out = 1;
            break;
        }
        if (ns_per_msg > 0) {
            /* early: serve delivery reports, then sleep until this message is due (no spinning:
             * the client must not take the broker's CPU on a small machine) */
            int64_t due = started + (int64_t)(ns_per_msg * (double)sent);
            if (now < due) {
                rd_kafka_poll(rk, 0);
                int64_t wait = due - now_ns();
                if (wait > 0) {
                    if (wait > 10000000)
                        wait = 10000000;
                    struct timespec ts = {0, (long)wait};
                    nanosleep(&ts, NULL);
                }
                continue;
            }
        }
        int32_t partition = (int32_t)(sent % o->partitions);
        if (rd_kafka_produce(rkt, partition, 0, payload, (size_t)o->size, NULL, 0,
                             (void *)(intptr_t)now) == -1) {
            rd_kafka_resp_err_t err = rd_kafka_last_error();
            if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
                rd_kafka_poll(rk, 10);
                continue;
            }
            fprintf(stderr, "odradek_perf: produce: %s\n", rd_kafka_err2str(err));
            break;
        }
        sent++;
        if ((sent & 1023) == 0)
            rd_kafka_poll(rk, 0);
    }
    while (rd_kafka_outq_len(rk) > 0 && !stop_requested) {
        if (now_ns() > deadline) {
            timed_out = 1;
            break;
        }
        rd_kafka_poll(rk, 100);
    }
    int64_t ended = st.last_dr_ns > started ? st.last_dr_ns : now_ns();
    qsort(st.latency_us, (size_t)st.delivered, sizeof(uint32_t), cmp_u32);
    double elapsed = (double)(ended - started) / 1e9;
    printf("{\"mode\": \"produce\", \"records\": %lld, \"sent\": %lld, \"value_bytes\": %lld, "
           "\"elapsed_s\": %.6f, \"errors\": %lld, \"client_errors\": %ld, \"timed_out\": %s, "
           "\"rate\": %.1f, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"p999_ms\": %.3f, "
           "\"max_ms\": %.3f, \"librdkafka\": \"%s\"}\n",
           st.delivered, sent, st.delivered * (long long)o->size, elapsed, st.failed,
           client_errors, timed_out ? "true" : "false", o->rate,
           pct_ms(st.latency_us, st.delivered, 50), pct_ms(st.latency_us, st.delivered, 99),
           pct_ms(st.latency_us, st.delivered, 99.9), pct_ms(st.latency_us, st.delivered, 100),
           rd_kafka_version_str());
    fflush(stdout);
    rd_kafka_flush(rk, 1000);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    free(payload);
    free(st.latency_us);
    return st.delivered == o->count && st.failed == 0 ? 0 : 1;
}

/* --- consume ------------------------------------------------------------------------------ */

static int run_consume(const struct opts *o) {
    char errstr[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (set(conf, "bootstrap.servers", o->bootstrap) ||
        set(conf, "client.id", "odradek-perf-consumer") ||
        set(conf, "fetch.max.bytes", "67108864") ||
        set(conf, "fetch.message.max.bytes", "33554432") ||
        set(conf, "receive.message.max.bytes", "134217728") ||
        set(conf, "queued.min.messages", "1000000") ||
        set(conf, "queued.max.messages.kbytes", "1048576") ||
        set(conf, "fetch.wait.max.ms", "100") || set(conf, "enable.partition.eof", "false") ||
        set(conf, "socket.nagle.disable", "true") || set_extra(conf, o))
        return 2;
    rd_kafka_conf_set_error_cb(conf, on_error);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "odradek_perf: %s\n", errstr);
        return 2;
    }
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_message_t **batch = malloc(sizeof(*batch) * CONSUME_BATCH);
    if (!batch) {
        fprintf(stderr, "odradek_perf: out of memory\n");
        return 2;
    }
    int64_t started = now_ns();
    for (int p = 0; p < o->partitions; p++) {
        if (rd_kafka_consume_start_queue(rkt, p, RD_KAFKA_OFFSET_BEGINNING, q) == -1) {
            fprintf(stderr, "odradek_perf: consume start %d: %s\n", p,
                    rd_kafka_err2str(rd_kafka_last_error()));
            return 2;
        }
    }
    int64_t deadline = started + (int64_t)(o->timeout_s * 1e9);
    long long got = 0, nbytes = 0, failed = 0, first_got = 0, first_bytes = 0;
    int64_t first_at = 0, last_at = started;
    int timed_out = 0;
    while (got < o->count && !stop_requested) {
        ssize_t n = rd_kafka_consume_batch_queue(q, 200, batch, CONSUME_BATCH);
        int64_t now = now_ns();
        for (ssize_t i = 0; i < n; i++) {
            rd_kafka_message_t *m = batch[i];
            if (m->err) {
                if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && ++failed <= MAX_ERRORS_SHOWN)
                    fprintf(stderr, "odradek_perf: consume: %s\n", rd_kafka_err2str(m->err));
            } else {
                got++;
                nbytes += (long long)m->len;
            }
            rd_kafka_message_destroy(m);
        }
        if (n > 0) {
            last_at = now_ns();
            if (!first_at) {
                first_at = now;
                first_got = got;
                first_bytes = nbytes;
            }
        }
        if (now > deadline) {
            timed_out = 1;
            break;
        }
    }
    double elapsed, first_s = first_at ? (double)(first_at - started) / 1e9 : -1.0;
    long long m_records, m_bytes;
    if (!first_at || got == first_got) { /* nothing, or all in one batch: time from start */
        elapsed = (double)(last_at - started) / 1e9;
        m_records = got;
        m_bytes = nbytes;
    } else {
        elapsed = (double)(last_at - first_at) / 1e9;
        m_records = got - first_got;
        m_bytes = nbytes - first_bytes;
    }
    printf("{\"mode\": \"consume\", \"records\": %lld, \"value_bytes\": %lld, \"elapsed_s\": %.6f, "
           "\"measured_records\": %lld, \"measured_bytes\": %lld, \"first_record_s\": %.6f, "
           "\"errors\": %lld, \"client_errors\": %ld, \"timed_out\": %s, \"librdkafka\": \"%s\"}\n",
           got, nbytes, elapsed, m_records, m_bytes, first_s, failed, client_errors,
           timed_out ? "true" : "false", rd_kafka_version_str());
    fflush(stdout);
    for (int p = 0; p < o->partitions; p++)
        rd_kafka_consume_stop(rkt, p);
    free(batch);
    rd_kafka_queue_destroy(q);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return got >= o->count && failed == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    struct opts o;
    if (parse(argc, argv, &o)) {
        usage();
        return 2;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    return strcmp(o.mode, "produce") == 0 ? run_produce(&o) : run_consume(&o);
}
