import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * What Spark's stock Kafka connector (spark-sql-kafka-0-10, Spark 4.0, kafka-clients 3.9) asks
 * of a broker, done with kafka-clients alone so CI exercises it without the Spark jars:
 *
 * <ul>
 *   <li>sink (KafkaDataWriter): one idempotent producer (the 3.x default: acks=all,
 *       enable.idempotence=true) sending byte[] records with keys, headers and a null timestamp,
 *       some to an explicit partition and some through the default partitioner, then flush();
 *   <li>driver (KafkaOffsetReaderAdmin): describeCluster, listTopics, describeTopics for the
 *       partitions, and listOffsets earliest / latest / by timestamp under both isolation levels,
 *       again after more records arrive (the next micro-batch);
 *   <li>executors (KafkaDataConsumer): one consumer per (group, partition), never joining a
 *       group: assign one partition, seek, poll, read position() after the poll, and
 *       seekToBeginning / seekToEnd + position for the available range; once with no group.id
 *       and read_uncommitted, once with Spark's "spark-kafka-source-UUID-executor" group.id,
 *       auto.offset.reset=none and read_committed.
 * </ul>
 *
 * Every record sent must come back with its partition, offset, key, value, headers and the
 * timestamp the broker acknowledged. Prints one "OK <check> ..." line per check, then "DONE";
 * on the first failed check prints "FAIL <what>" and exits 1.
 *
 * <p>With "transactions" instead of a partition count it checks what Spark's read_committed
 * source needs from a transactional topic (one partition, n transactions of 5 records, even ones
 * committed and odd ones aborted): listOffsets latest under read_committed is the last stable
 * offset (it stops before an open transaction), and the executors' seek / poll / position()
 * loop steps over aborted records and transaction markers to the end of the range, returning
 * exactly the committed records (read_committed) or all data records (read_uncommitted).
 *
 * <p>"dataloss" and "markers" check what Spark's failOnDataLoss handling and
 * startingOffsetsByTimestamp need after DeleteRecords and over transaction markers (see
 * runDataLoss and runTimestampOverMarkers).
 *
 * Usage: SparkAccessPattern <bootstrap> <topic> <partitions> <records per batch>
 *        SparkAccessPattern <bootstrap> <topic> transactions <transactions>
 *        SparkAccessPattern <bootstrap> <topic> dataloss seek|timestamp
 *        SparkAccessPattern <bootstrap> <topic> markers
 */
public final class SparkAccessPattern {
    private static final long WAIT_S = 30;
    private static final Duration POLL = Duration.ofMillis(500);
    private static final long READ_DEADLINE_MS = 30_000;

    private SparkAccessPattern() {}

    /** One record as the producer sent it and the broker acknowledged it. */
    private record Sent(
            int partition, long offset, long timestamp, byte[] key, byte[] value, String header) {}

    private static final class CheckFailed extends RuntimeException {
        CheckFailed(String message) {
            super(message);
        }
    }

    /**
     * Client properties every client starts from: empty, or those of the properties file named
     * by the ODRADEK_CLIENT_PROPERTIES environment variable (security.protocol, sasl.*, ssl.*),
     * as Spark passes kafka.* options through to every client it makes.
     */
    private static Properties baseProps() {
        Properties props = new Properties();
        String path = System.getenv("ODRADEK_CLIENT_PROPERTIES");
        if (path != null && !path.isEmpty()) {
            try (java.io.Reader in = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(path))) {
                props.load(in);
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
            props.remove("bootstrap.servers");
        }
        return props;
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new CheckFailed(what);
        }
    }

    private static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static String str(byte[] b) {
        return b == null ? "null" : new String(b, StandardCharsets.UTF_8);
    }

    private static <T> T get(Future<T> future) throws InterruptedException, ExecutionException {
        try {
            return future.get(WAIT_S, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            throw new CheckFailed("no answer within " + WAIT_S + " s");
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3 || args.length > 4
                || (args.length == 3 && !args[2].equals("markers"))) {
            System.err.println("usage: SparkAccessPattern <bootstrap> <topic> <partitions> <n>\n"
                    + "       SparkAccessPattern <bootstrap> <topic> transactions <n>\n"
                    + "       SparkAccessPattern <bootstrap> <topic> dataloss seek|timestamp\n"
                    + "       SparkAccessPattern <bootstrap> <topic> markers");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        try {
            if (args[2].equals("transactions")) {
                runTransactions(bootstrap, topic, Integer.parseInt(args[3]));
            } else if (args[2].equals("dataloss")) {
                runDataLoss(bootstrap, topic, args[3].equals("timestamp"));
            } else if (args[2].equals("markers")) {
                runTimestampOverMarkers(bootstrap, topic);
            } else {
                run(bootstrap, topic, Integer.parseInt(args[2]), Integer.parseInt(args[3]));
            }
        } catch (CheckFailed e) {
            System.out.println("FAIL " + e.getMessage());
            System.out.flush();
            System.exit(1);
        }
        System.out.println("DONE");
    }

    private static void run(String bootstrap, String topic, int partitions, int perBatch)
            throws Exception {
        Properties adminProps = baseProps();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        adminProps.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(adminProps)) {
            get(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all());
            System.out.println("OK createTopic " + topic + " " + partitions);

            List<TopicPartition> tps = describe(admin, topic, partitions);
            List<Sent> sent = new ArrayList<>(produce(bootstrap, topic, partitions, 0, perBatch));

            // First micro-batch: the driver plans offset ranges, the executors read them.
            Map<TopicPartition, Long> latest = checkOffsets(admin, tps, sent, "batch1");
            readRanges(bootstrap, tps, sent, zeros(tps), latest, false, "batch1");
            readRanges(bootstrap, tps, sent, zeros(tps), latest, true, "batch1");
            checkAvailableRange(bootstrap, tps, latest);
            checkByTimestamp(bootstrap, admin, tps, sent);

            // Second micro-batch: more records arrive; latest moves, only the new range is read.
            sent.addAll(produce(bootstrap, topic, partitions, perBatch, perBatch));
            Map<TopicPartition, Long> latest2 = checkOffsets(admin, tps, sent, "batch2");
            readRanges(bootstrap, tps, sent, latest, latest2, true, "batch2");
            readRanges(bootstrap, tps, sent, zeros(tps), latest2, false, "all");
        }
    }

    private static Admin admin(String bootstrap) {
        Properties props = baseProps();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(props);
    }

    private static Properties producerProps(String bootstrap) {
        Properties props = baseProps();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(
                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return props;
    }

    /**
     * What Spark's failOnDataLoss logic relies on, once records were deleted (retention,
     * DeleteRecords): one partition written as two batches, offsets 0-4 and 5-14, then deleted
     * before offset 10, inside the second batch. listOffsets earliest and seekToBeginning give
     * 10, and an executor seeking outside [10, 15) with auto.offset.reset=none gets
     * OffsetOutOfRangeException from poll. With `timestamp`, also what startingOffsetsByTimestamp
     * asks then: listOffsets for a timestamp before every record must give the log start, 10.
     */
    private static void runDataLoss(String bootstrap, String topic, boolean byTimestamp)
            throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        long start = 10;
        long end = 15;
        try (Admin admin = admin(bootstrap);
                KafkaProducer<byte[], byte[]> producer =
                        new KafkaProducer<>(producerProps(bootstrap))) {
            get(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all());
            for (int[] batch : new int[][] {{0, 5}, {5, 15}}) {
                List<Future<RecordMetadata>> futures = new ArrayList<>();
                for (int i = batch[0]; i < batch[1]; i++) {
                    futures.add(producer.send(new ProducerRecord<>(topic, 0, null, utf8("v" + i))));
                }
                producer.flush();
                for (Future<RecordMetadata> f : futures) {
                    get(f);
                }
            }
            get(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(start))).all());
            for (IsolationLevel level : IsolationLevel.values()) {
                long earliest = listOffsets(admin, List.of(tp), OffsetSpec.earliest(), level)
                                        .get(tp)
                                        .offset();
                check(earliest == start,
                        "after deleteRecords: earliest " + level + " " + earliest + ", want "
                                + start);
            }
            System.out.println("OK dataLoss earliest=" + start);
            if (byTimestamp) {
                for (IsolationLevel level : IsolationLevel.values()) {
                    long early = listOffsets(admin, List.of(tp), OffsetSpec.forTimestamp(0), level)
                                         .get(tp)
                                         .offset();
                    check(early == start,
                            "after deleteRecords: forTimestamp(0) " + level + " " + early
                                    + ", want the log start " + start);
                }
                System.out.println("OK dataLoss forTimestamp=" + start);
                return;
            }
        }
        try (KafkaConsumer<byte[], byte[]> consumer =
                        new KafkaConsumer<>(consumerProps(bootstrap, true))) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(Set.of(tp));
            long pos = consumer.position(tp, Duration.ofSeconds(WAIT_S));
            check(pos == start, "after deleteRecords: seekToBeginning position " + pos);
            consumer.seek(tp, start);
            ConsumerRecords<byte[], byte[]> polled = ConsumerRecords.empty();
            long deadline = System.currentTimeMillis() + READ_DEADLINE_MS;
            while (polled.isEmpty() && System.currentTimeMillis() < deadline) {
                polled = consumer.poll(POLL);
            }
            check(!polled.isEmpty() && polled.iterator().next().offset() == start,
                    "after deleteRecords: no record at the log start " + start);
            for (long offset : new long[] {start - 1, end + 5}) {
                consumer.seek(tp, offset);
                boolean outOfRange = false;
                deadline = System.currentTimeMillis() + READ_DEADLINE_MS;
                while (!outOfRange && System.currentTimeMillis() < deadline) {
                    try {
                        check(consumer.poll(POLL).isEmpty(),
                                "seek to " + offset + " returned records");
                    } catch (OffsetOutOfRangeException e) {
                        outOfRange = e.offsetOutOfRangePartitions().containsKey(tp);
                    }
                }
                check(outOfRange,
                        "seek to " + offset + " outside [" + start + ", " + end
                                + "): no OffsetOutOfRangeException");
            }
        }
        System.out.println("OK dataLoss seekToBeginning=" + start + " outOfRange");
    }

    /**
     * startingOffsetsByTimestamp on a transactional topic: transaction 1 (records stamped two
     * minutes ago, offsets 0-2) commits, its marker (offset 3) carries the broker's time now,
     * transaction 2 (stamped one minute ago, offsets 4-6) commits. A timestamp 90 s ago is after
     * transaction 1's records and before the marker and transaction 2's records: Kafka answers
     * the marker's offset (3), whose fetch then starts at 4; never "no such offset".
     */
    private static void runTimestampOverMarkers(String bootstrap, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        Properties props = producerProps(bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, topic + "-txn");
        long now = System.currentTimeMillis();
        try (Admin admin = admin(bootstrap);
                KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            get(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all());
            producer.initTransactions();
            for (long ts : new long[] {now - 120_000, now - 60_000}) {
                producer.beginTransaction();
                for (int i = 0; i < 3; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, ts, null, utf8(ts + "-" + i)));
                }
                producer.commitTransaction();
            }
            for (IsolationLevel level : IsolationLevel.values()) {
                ListOffsetsResultInfo got = listOffsets(
                        admin, List.of(tp), OffsetSpec.forTimestamp(now - 90_000), level)
                                                    .get(tp);
                check(got.offset() == 3 || got.offset() == 4,
                        "forTimestamp between two transactions " + level + " = " + got.offset()
                                + ", want 3 (the marker, as Kafka) or 4 (the next record)");
            }
        }
        System.out.println("OK forTimestamp over transaction markers");
    }

    /** The read_committed source over a transactional producer's topic. */
    private static void runTransactions(String bootstrap, String topic, int txns) throws Exception {
        Properties props = producerProps(bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, topic + "-txn");
        TopicPartition tp = new TopicPartition(topic, 0);
        List<TopicPartition> tps = List.of(tp);
        try (Admin admin = admin(bootstrap);
                KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            get(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all());
            producer.initTransactions();
            List<Sent> committed = new ArrayList<>();
            List<Sent> all = new ArrayList<>();
            for (int t = 0; t < txns; t++) {
                producer.beginTransaction();
                List<Sent> batch = sendTxnRecords(producer, topic, t, 5);
                all.addAll(batch);
                if (t % 2 == 0) {
                    producer.commitTransaction();
                    committed.addAll(batch);
                } else {
                    producer.abortTransaction();
                }
            }
            System.out.println("OK transactions " + txns + " committed=" + committed.size()
                    + " aborted=" + (all.size() - committed.size()));

            long end = checkStableEnd(admin, tp, -1, "closed");
            check(end > all.get(all.size() - 1).offset(),
                    "latest " + end + " is not past the last record "
                            + all.get(all.size() - 1).offset());
            Map<TopicPartition, Long> from = Map.of(tp, 0L);
            Map<TopicPartition, Long> until = Map.of(tp, end);
            readRanges(bootstrap, tps, committed, from, until, true, "txn-committed");
            readRanges(bootstrap, tps, all, from, until, false, "txn-all");

            // An open transaction: read_committed stops at its first offset, until it commits.
            producer.beginTransaction();
            List<Sent> open = sendTxnRecords(producer, topic, txns, 3);
            long firstOpen = open.get(0).offset();
            checkStableEnd(admin, tp, firstOpen, "open");
            readRanges(bootstrap, tps, committed, from, Map.of(tp, firstOpen), true,
                    "txn-before-open");
            producer.commitTransaction();
            committed.addAll(open);
            long end2 = checkStableEnd(admin, tp, -1, "committed");
            check(end2 > open.get(open.size() - 1).offset(),
                    "latest " + end2 + " after the commit");
            readRanges(bootstrap, tps, committed, from, Map.of(tp, end2), true, "txn-after-commit");
        }
    }

    private static List<Sent> sendTxnRecords(
            KafkaProducer<byte[], byte[]> producer, String topic, int txn, int n) throws Exception {
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        List<byte[]> values = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            byte[] value = utf8("txn-" + txn + "-" + i);
            RecordHeaders hs = new RecordHeaders();
            hs.add("seq", utf8("t" + txn + "." + i));
            futures.add(producer.send(
                    new ProducerRecord<>(topic, 0, null, utf8("k" + txn), value, hs)));
            values.add(value);
        }
        producer.flush();
        List<Sent> sent = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            RecordMetadata md = get(futures.get(i));
            sent.add(new Sent(0, md.offset(), md.timestamp(), utf8("k" + txn), values.get(i),
                    "t" + txn + "." + i));
        }
        return sent;
    }

    /**
     * listOffsets latest under both levels. With wantStable = -1 (no open transaction) both must
     * agree; otherwise read_committed must give wantStable (the last stable offset) and
     * read_uncommitted something past it. Returns the read_committed answer.
     */
    private static long checkStableEnd(
            Admin admin, TopicPartition tp, long wantStable, String label) throws Exception {
        long committed =
                listOffsets(admin, List.of(tp), OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)
                        .get(tp)
                        .offset();
        long uncommitted = listOffsets(
                admin, List.of(tp), OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED)
                                   .get(tp)
                                   .offset();
        if (wantStable < 0) {
            check(committed == uncommitted,
                    label + " txn: latest read_committed " + committed + " != read_uncommitted "
                            + uncommitted);
        } else {
            check(committed == wantStable,
                    label + " txn: latest read_committed " + committed
                            + ", want the last stable offset " + wantStable);
            check(uncommitted > wantStable,
                    label + " txn: latest read_uncommitted " + uncommitted
                            + " not past the open transaction at " + wantStable);
        }
        System.out.println("OK listOffsets latest " + label
                + " transaction read_committed=" + committed + " read_uncommitted=" + uncommitted);
        return committed;
    }

    private static Map<TopicPartition, Long> zeros(List<TopicPartition> tps) {
        Map<TopicPartition, Long> m = new HashMap<>();
        for (TopicPartition tp : tps) {
            m.put(tp, 0L);
        }
        return m;
    }

    /** describeCluster, listTopics and describeTopics, as the driver does before planning. */
    private static List<TopicPartition> describe(Admin admin, String topic, int partitions)
            throws Exception {
        DescribeClusterResult cluster = admin.describeCluster();
        String clusterId = get(cluster.clusterId());
        Collection<Node> nodes = get(cluster.nodes());
        Node controller = get(cluster.controller());
        check(clusterId != null && !clusterId.isEmpty(), "describeCluster: no cluster id");
        check(!nodes.isEmpty(), "describeCluster: no nodes");
        check(controller != null && !controller.isEmpty(), "describeCluster: no controller");
        System.out.println("OK describeCluster " + clusterId + " nodes=" + nodes.size());

        Set<String> names =
                get(admin.listTopics(new ListTopicsOptions().listInternal(false)).names());
        check(names.contains(topic), "listTopics: " + topic + " missing from " + names);
        System.out.println("OK listTopics");

        Map<String, TopicDescription> described =
                get(admin.describeTopics(List.of(topic)).allTopicNames());
        TopicDescription desc = described.get(topic);
        check(desc != null, "describeTopics: no description for " + topic);
        check(desc.partitions().size() == partitions,
                "describeTopics: " + desc.partitions().size() + " partitions, want " + partitions);
        List<TopicPartition> tps = new ArrayList<>();
        for (TopicPartitionInfo info : desc.partitions()) {
            check(info.leader() != null && !info.leader().isEmpty(),
                    "describeTopics: partition " + info.partition() + " has no leader");
            tps.add(new TopicPartition(topic, info.partition()));
        }
        tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        System.out.println("OK describeTopics " + topic + " partitions=" + tps.size());
        return tps;
    }

    /** The sink: an idempotent producer, null timestamps, keys and headers; flush, then check. */
    private static List<Sent> produce(
            String bootstrap, String topic, int partitions, int first, int n) throws Exception {
        Properties props = baseProps();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(
                ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        List<byte[]> keys = new ArrayList<>();
        List<byte[]> values = new ArrayList<>();
        List<String> headers = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (int i = first; i < first + n; i++) {
                byte[] key = i % 5 == 4 ? null : utf8("user-" + (i % 7));
                byte[] value = utf8("{\"seq\":" + i + ",\"page\":\"/p/" + (i % 11) + "\"}");
                String header = "h" + i;
                RecordHeaders hs = new RecordHeaders();
                hs.add("seq", utf8(header));
                // Spark's sink passes the "partition" column when it is set, null otherwise.
                Integer partition =
                        (i % 2 == 0 || key == null) ? Integer.valueOf(i % partitions) : null;
                futures.add(producer.send(
                        new ProducerRecord<>(topic, partition, null, key, value, hs)));
                keys.add(key);
                values.add(value);
                headers.add(header);
            }
            producer.flush();
        }
        List<Sent> sent = new ArrayList<>();
        for (int i = 0; i < futures.size(); i++) {
            RecordMetadata md;
            try {
                md = get(futures.get(i));
            } catch (ExecutionException e) {
                throw new CheckFailed("produce record " + (first + i) + ": " + e.getCause());
            }
            check(md.hasOffset(), "produce record " + (first + i) + ": no offset");
            sent.add(new Sent(md.partition(), md.offset(), md.timestamp(), keys.get(i),
                    values.get(i), headers.get(i)));
        }
        System.out.println("OK produce " + n + " idempotent");
        return sent;
    }

    private static Map<TopicPartition, List<Sent>> byPartition(
            List<TopicPartition> tps, List<Sent> sent) {
        Map<TopicPartition, List<Sent>> m = new HashMap<>();
        for (TopicPartition tp : tps) {
            m.put(tp, new ArrayList<>());
        }
        for (Sent s : sent) {
            m.get(new TopicPartition(tps.get(0).topic(), s.partition())).add(s);
        }
        for (List<Sent> l : m.values()) {
            l.sort((a, b) -> Long.compare(a.offset(), b.offset()));
        }
        return m;
    }

    private static Map<TopicPartition, ListOffsetsResultInfo> listOffsets(Admin admin,
            List<TopicPartition> tps, OffsetSpec spec, IsolationLevel level) throws Exception {
        Map<TopicPartition, OffsetSpec> req = new HashMap<>();
        for (TopicPartition tp : tps) {
            req.put(tp, spec);
        }
        return get(admin.listOffsets(req, new ListOffsetsOptions(level)).all());
    }

    /** Earliest and latest under both isolation levels: 0 and the acknowledged end. */
    private static Map<TopicPartition, Long> checkOffsets(
            Admin admin, List<TopicPartition> tps, List<Sent> sent, String label) throws Exception {
        Map<TopicPartition, List<Sent>> parts = byPartition(tps, sent);
        Map<TopicPartition, Long> latest = new HashMap<>();
        for (IsolationLevel level : IsolationLevel.values()) {
            Map<TopicPartition, ListOffsetsResultInfo> earliest =
                    listOffsets(admin, tps, OffsetSpec.earliest(), level);
            Map<TopicPartition, ListOffsetsResultInfo> end =
                    listOffsets(admin, tps, OffsetSpec.latest(), level);
            for (TopicPartition tp : tps) {
                List<Sent> p = parts.get(tp);
                long want = p.isEmpty() ? 0 : p.get(p.size() - 1).offset() + 1;
                check(earliest.get(tp).offset() == 0,
                        label + " listOffsets earliest " + level + " " + tp + " = "
                                + earliest.get(tp).offset());
                check(end.get(tp).offset() == want,
                        label + " listOffsets latest " + level + " " + tp + " = "
                                + end.get(tp).offset() + ", want " + want);
                latest.put(tp, want);
            }
            System.out.println("OK listOffsets " + label + " earliest,latest " + level);
        }
        return latest;
    }

    /**
     * startingOffsetsByTimestamp: the first offset whose timestamp is at or after the one asked.
     */
    private static void checkByTimestamp(String bootstrap, Admin admin, List<TopicPartition> tps,
            List<Sent> sent) throws Exception {
        Map<TopicPartition, List<Sent>> parts = byPartition(tps, sent);
        Map<TopicPartition, Long> from = new HashMap<>();
        Map<TopicPartition, Long> until = new HashMap<>();
        for (IsolationLevel level : IsolationLevel.values()) {
            for (TopicPartition tp : tps) {
                List<Sent> p = parts.get(tp);
                check(!p.isEmpty(), "byTimestamp: partition " + tp + " got no records");
                long ts = p.get(p.size() / 2).timestamp();
                long want = -1;
                for (Sent s : p) {
                    if (s.timestamp() >= ts) {
                        want = s.offset();
                        break;
                    }
                }
                ListOffsetsResultInfo got =
                        listOffsets(admin, List.of(tp), OffsetSpec.forTimestamp(ts), level).get(tp);
                check(got.offset() == want,
                        "listOffsets forTimestamp " + ts + " " + level + " " + tp + " = "
                                + got.offset() + ", want " + want);
                check(got.timestamp() >= ts,
                        "listOffsets forTimestamp " + ts + " " + level + " " + tp + " timestamp "
                                + got.timestamp());
                long last = p.get(p.size() - 1).timestamp();
                ListOffsetsResultInfo none = listOffsets(
                        admin, List.of(tp), OffsetSpec.forTimestamp(last + 60_000), level)
                                                     .get(tp);
                check(none.offset() == -1,
                        "listOffsets forTimestamp after the last record " + level + " " + tp + " = "
                                + none.offset() + ", want -1");
                from.put(tp, want);
                until.put(tp, p.get(p.size() - 1).offset() + 1);
            }
            System.out.println("OK listOffsets forTimestamp " + level);
        }
        readRanges(bootstrap, tps, sent, from, until, false, "byTimestamp");
    }

    private static Properties consumerProps(String bootstrap, boolean sparkExecutor) {
        Properties props = baseProps();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
                ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
                ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.RECEIVE_BUFFER_CONFIG, "65536");
        props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7");
        if (sparkExecutor) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG,
                    "spark-kafka-source-" + UUID.randomUUID() + "-executor");
            props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
            props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        } else {
            props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
            props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        }
        return props;
    }

    /**
     * Each partition's [from, until) as an executor task reads it: assign that partition alone,
     * seek to the wanted offset before every poll, take the records up to `until`, then seek on.
     * The records must be exactly the ones sent there, field by field.
     */
    private static void readRanges(String bootstrap, List<TopicPartition> tps, List<Sent> sent,
            Map<TopicPartition, Long> from, Map<TopicPartition, Long> until, boolean sparkExecutor,
            String label) throws Exception {
        Map<TopicPartition, List<Sent>> parts = byPartition(tps, sent);
        int total = 0;
        try (KafkaConsumer<byte[], byte[]> consumer =
                        new KafkaConsumer<>(consumerProps(bootstrap, sparkExecutor))) {
            for (TopicPartition tp : tps) {
                long start = from.get(tp);
                long end = until.get(tp);
                List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
                consumer.assign(List.of(tp));
                long offset = start;
                long deadline = System.currentTimeMillis() + READ_DEADLINE_MS;
                while (offset < end) {
                    check(System.currentTimeMillis() < deadline,
                            label + " read " + tp + " stuck at offset " + offset + " of [" + start
                                    + ", " + end + ")");
                    consumer.seek(tp, offset);
                    ConsumerRecords<byte[], byte[]> polled = consumer.poll(POLL);
                    for (ConsumerRecord<byte[], byte[]> r : polled.records(tp)) {
                        if (r.offset() >= end) {
                            break;
                        }
                        check(r.offset() >= offset,
                                label + " read " + tp + " went back to " + r.offset());
                        got.add(r);
                        offset = r.offset() + 1;
                    }
                    if (polled.isEmpty()) {
                        // Spark looks at position() to step over offsets that hold no records.
                        long pos = consumer.position(tp, Duration.ofSeconds(WAIT_S));
                        check(pos <= end,
                                label + " position " + pos + " past the end " + end + " of " + tp);
                        offset = Math.max(offset, Math.min(pos, end));
                    }
                }
                compare(tp, got, parts.get(tp), start, end, label);
                total += got.size();
            }
            consumer.unsubscribe();
        }
        System.out.println("OK read " + label + " "
                + (sparkExecutor ? "read_committed group" : "read_uncommitted nogroup")
                + " records=" + total);
    }

    private static void compare(TopicPartition tp, List<ConsumerRecord<byte[], byte[]>> got,
            List<Sent> sent, long start, long end, String label) {
        List<Sent> want = new ArrayList<>();
        for (Sent s : sent) {
            if (s.offset() >= start && s.offset() < end) {
                want.add(s);
            }
        }
        check(got.size() == want.size(),
                label + " " + tp + " [" + start + ", " + end + "): got " + got.size()
                        + " records, want " + want.size());
        for (int i = 0; i < want.size(); i++) {
            Sent w = want.get(i);
            ConsumerRecord<byte[], byte[]> r = got.get(i);
            String where = label + " " + tp + " offset " + w.offset() + ": ";
            check(r.offset() == w.offset(), where + "got offset " + r.offset());
            check(Arrays.equals(r.key(), w.key()),
                    where + "key " + str(r.key()) + ", want " + str(w.key()));
            check(Arrays.equals(r.value(), w.value()),
                    where + "value " + str(r.value()) + ", want " + str(w.value()));
            check(r.timestamp() == w.timestamp(),
                    where + "timestamp " + r.timestamp() + ", want " + w.timestamp());
            Header h = r.headers().lastHeader("seq");
            check(h != null && str(h.value()).equals(w.header()),
                    where + "header seq " + (h == null ? "missing" : str(h.value())) + ", want "
                            + w.header());
        }
    }

    /** KafkaDataConsumer.getAvailableOffsetRange: seekToBeginning / seekToEnd, then position(). */
    private static void checkAvailableRange(
            String bootstrap, List<TopicPartition> tps, Map<TopicPartition, Long> latest) {
        Map<TopicPartition, String> ranges =
                new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
        for (boolean sparkExecutor : new boolean[] {false, true}) {
            try (KafkaConsumer<byte[], byte[]> consumer =
                            new KafkaConsumer<>(consumerProps(bootstrap, sparkExecutor))) {
                for (TopicPartition tp : tps) {
                    consumer.assign(List.of(tp));
                    consumer.seekToBeginning(Set.of(tp));
                    long earliest = consumer.position(tp, Duration.ofSeconds(WAIT_S));
                    consumer.seekToEnd(Set.of(tp));
                    long end = consumer.position(tp, Duration.ofSeconds(WAIT_S));
                    check(earliest == 0, "available range " + tp + ": earliest " + earliest);
                    check(end == latest.get(tp),
                            "available range " + tp + ": latest " + end + ", want "
                                    + latest.get(tp));
                    ranges.put(tp, earliest + "-" + end);
                }
            }
        }
        System.out.println("OK availableRange " + ranges.values());
    }
}
