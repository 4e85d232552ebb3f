import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Java producer and consumer against odradek, one case per "codec:acks" argument. For each case
 * it creates a 3-partition topic with the AdminClient, produces COUNT records (keys, headers,
 * explicit timestamps base + 10 i, partition i % 3; acks=all keeps the client's idempotent
 * default, 0 and 1 turn idempotence off), then reads back with a consumer that has no group:
 * everything from the beginning, from offset 7 (assign + seek), from a timestamp
 * (offsetsForTimes) and from the end (only new records). ListOffsets goes through
 * Admin.listOffsets. Bytes are printed as hex ("-" for null); the Python test checks the lines:
 *
 *   SENT <case> <partition> <offset>
 *   REC|SEEK|NEW <case> <partition> <offset> <timestamp> <type> <key> <value> <headers>
 *   LIST <case> <spec> <partition> <offset> <timestamp>
 *   OFT <case> <partition> <offset|null> <timestamp|null>
 *   END <case> <partition> <position>
 *   DONE <case>
 *
 * Usage: ProduceConsume <bootstrap> <topic prefix> <base timestamp> <count> <case>...
 */
public class ProduceConsume {
    static final int PARTITIONS = 3;
    static final long WAIT_S = 30;
    static final HexFormat HEX = HexFormat.of();

    static String hex(byte[] b) {
        return b == null ? "-" : (b.length == 0 ? "=" : HEX.formatHex(b));
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Record i of a case: the same formula as the Python test's expected records. */
    static ProducerRecord<byte[], byte[]> record(String topic, String tag, long baseTs, int i) {
        byte[] key = i == 0 ? null : utf8("key-" + i);
        byte[] value = i == 1 ? null : i == 2 ? new byte[0]
            : utf8((tag + "-value-" + i + "-").repeat(1 + i % 7));
        RecordHeaders headers = new RecordHeaders();
        if (i % 5 != 0) {
            headers.add("idx", utf8(Integer.toString(i)));
            headers.add("tag", utf8(tag));
        }
        return new ProducerRecord<>(topic, i % PARTITIONS, baseTs + 10L * i, key, value, headers);
    }

    static String line(String kind, String tag, ConsumerRecord<byte[], byte[]> r) {
        StringBuilder hs = new StringBuilder();
        for (Header h : r.headers()) {
            if (hs.length() > 0) {
                hs.append(',');
            }
            hs.append(h.key()).append('=').append(hex(h.value()));
        }
        return String.join(" ", kind, tag, Integer.toString(r.partition()),
            Long.toString(r.offset()), Long.toString(r.timestamp()), r.timestampType().name,
            hex(r.key()), hex(r.value()), hs.length() == 0 ? "-" : hs.toString());
    }

    static List<ConsumerRecord<byte[], byte[]>> pollN(KafkaConsumer<byte[], byte[]> consumer,
                                                      int n) {
        List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (got.size() < n) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("only " + got.size() + " of " + n + " records");
            }
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                got.add(r);
            }
        }
        return got;
    }

    static void runCase(String bootstrap, Admin admin, String prefix, long baseTs, int count,
                        String spec) throws Exception {
        String codec = spec.split(":")[0];
        String acks = spec.split(":")[1];
        String tag = codec + "-" + acks;
        String topic = prefix + "-" + tag;
        admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1)))
            .all().get(WAIT_S, TimeUnit.SECONDS);
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        // Every partition answers ListOffsets (the admin client retries NOT_LEADER_OR_FOLLOWER)
        // before the first write: Kafka's metadata may name the new leader a moment before that
        // broker has created the partition, and an acks=0 record sent then is dropped.
        Map<TopicPartition, OffsetSpec> ready = new HashMap<>();
        for (TopicPartition tp : tps) {
            ready.put(tp, OffsetSpec.latest());
        }
        admin.listOffsets(ready).all().get(WAIT_S, TimeUnit.SECONDS);

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        if (!acks.equals("all")) {
            pp.put(ProducerConfig.ACKS_CONFIG, acks);
            pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        }

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
            ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");

        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp);
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(record(topic, tag, baseTs, i)));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                RecordMetadata md = f.get(WAIT_S, TimeUnit.SECONDS);
                System.out.println("SENT " + tag + " " + md.partition() + " " + md.offset());
            }

            if (acks.equals("0")) {
                // acks=0: the send completes before the broker appends; wait (bounded) until
                // every record is in the log before reading offsets, on either broker
                long until = System.currentTimeMillis() + WAIT_S * 1000L;
                while (System.currentTimeMillis() < until) {
                    Map<TopicPartition, OffsetSpec> ends = new HashMap<>();
                    for (TopicPartition tp : tps) {
                        ends.put(tp, OffsetSpec.latest());
                    }
                    long total = 0;
                    for (ListOffsetsResultInfo info : admin.listOffsets(ends).all()
                            .get(WAIT_S, TimeUnit.SECONDS).values()) {
                        total += info.offset();
                    }
                    if (total >= count) {
                        break;
                    }
                    Thread.sleep(50);
                }
            }
            Map<String, OffsetSpec> specs = Map.of(
                "earliest", OffsetSpec.earliest(),
                "latest", OffsetSpec.latest(),
                "maxts", OffsetSpec.maxTimestamp(),
                "ts305", OffsetSpec.forTimestamp(baseTs + 305),
                "past", OffsetSpec.forTimestamp(baseTs + 10L * count + 1000));
            for (Map.Entry<String, OffsetSpec> e : specs.entrySet()) {
                Map<TopicPartition, OffsetSpec> request = new HashMap<>();
                for (TopicPartition tp : tps) {
                    request.put(tp, e.getValue());
                }
                Map<TopicPartition, ListOffsetsResultInfo> res = admin.listOffsets(request)
                    .all().get(WAIT_S, TimeUnit.SECONDS);
                for (TopicPartition tp : tps) {
                    ListOffsetsResultInfo info = res.get(tp);
                    System.out.println("LIST " + tag + " " + e.getKey() + " " + tp.partition()
                        + " " + info.offset() + " " + info.timestamp());
                }
            }

            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            for (ConsumerRecord<byte[], byte[]> r : pollN(consumer, count)) {
                System.out.println(line("REC", tag, r));
            }

            TopicPartition one = tps.get(1);
            consumer.assign(List.of(one));
            consumer.seek(one, 7);
            long inOne = (count - 1 - 1) / PARTITIONS + 1;  // records i = 1, 4, 7, ...
            for (ConsumerRecord<byte[], byte[]> r : pollN(consumer, (int) inOne - 7)) {
                System.out.println(line("SEEK", tag, r));
            }

            Map<TopicPartition, Long> when = new HashMap<>();
            for (TopicPartition tp : tps) {
                when.put(tp, baseTs + 305);
            }
            when.put(tps.get(2), baseTs + 10L * count + 1000);  // past the last record
            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(when,
                Duration.ofSeconds(WAIT_S));
            for (TopicPartition tp : tps) {
                OffsetAndTimestamp ot = found.get(tp);
                System.out.println("OFT " + tag + " " + tp.partition() + " "
                    + (ot == null ? "null null" : ot.offset() + " " + ot.timestamp()));
            }

            consumer.assign(tps);
            consumer.seekToEnd(tps);
            for (TopicPartition tp : tps) {
                System.out.println("END " + tag + " " + tp.partition() + " "
                    + consumer.position(tp, Duration.ofSeconds(WAIT_S)));
            }
            List<Future<RecordMetadata>> fresh = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) {
                fresh.add(producer.send(new ProducerRecord<>(topic, p, baseTs + 100_000L + p,
                    utf8("new-" + p), utf8("new-value-" + p))));
            }
            producer.flush();
            for (Future<RecordMetadata> f : fresh) {
                f.get(WAIT_S, TimeUnit.SECONDS);
            }
            for (ConsumerRecord<byte[], byte[]> r : pollN(consumer, PARTITIONS)) {
                System.out.println(line("NEW", tag, r));
            }
            if (!consumer.poll(Duration.ofMillis(100)).isEmpty()) {
                throw new IllegalStateException("more records than were produced");
            }
        }
        System.out.println("DONE " + tag);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        long baseTs = Long.parseLong(args[2]);
        int count = Integer.parseInt(args[3]);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        int failed = 0;
        try (Admin admin = Admin.create(ap)) {
            for (int a = 4; a < args.length; a++) {
                try {
                    runCase(bootstrap, admin, prefix, baseTs, count, args[a]);
                } catch (Exception e) {
                    // report and go on: one broken case should not hide the others
                    failed++;
                    System.out.println("FAIL " + args[a].replace(':', '-') + " " + e);
                    e.printStackTrace();
                }
            }
        }
        System.exit(failed == 0 ? 0 : 1);
    }
}
