import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Future;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Drives transactional producers, read_committed consumers and the Admin client one command per
 * line on stdin, for compat_tests/test_transactions.py (the Python drivers speak the same lines).
 *
 * <pre>
 *   producer NAME TRANSACTIONAL_ID [key=value ...]   a KafkaProducer with extra configs
 *   NAME init | begin | flush | commit | abort | close
 *   NAME send TOPIC PARTITION KEY VALUE
 *   NAME offsets GROUP TOPIC PARTITION OFFSET [TOPIC PARTITION OFFSET ...]
 *   consume ISOLATION TOPIC TIMEOUT_MS            until every partition shows key "__end__"
 *   committed GROUP TOPIC PARTITION
 *   admin list | admin describe TRANSACTIONAL_ID | admin producers TOPIC PARTITION
 *   quit
 * </pre>
 *
 * Every command answers zero or more data lines, then "ok" or "error NAMES message", where NAMES
 * are the simple class names of the exception and its causes joined by "<-".
 */
public final class TxnDriver {
    private TxnDriver() {}

    private static String bootstrap;
    private static final Map<String, KafkaProducer<byte[], byte[]>> PRODUCERS = new HashMap<>();
    private static final Map<String, List<Future<RecordMetadata>>> PENDING = new HashMap<>();
    private static Admin admin;

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private static String s(byte[] raw) {
        return raw == null ? "-" : new String(raw, StandardCharsets.UTF_8);
    }

    private static void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static String describe(Throwable t) {
        List<String> names = new ArrayList<>();
        String message = "";
        for (Throwable c = t; c != null && names.size() < 6; c = c.getCause()) {
            names.add(c.getClass().getSimpleName());
            if (c.getMessage() != null) {
                message = c.getMessage().replace('\n', ' ');
            }
        }
        return String.join("<-", names) + " " + message;
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            if (w.length == 0 || w[0].isEmpty()) {
                continue;
            }
            if (w[0].equals("quit")) {
                break;
            }
            try {
                run(w);
                out("ok");
            } catch (Throwable t) {
                out("error " + describe(t));
            }
        }
        for (KafkaProducer<byte[], byte[]> p : PRODUCERS.values()) {
            p.close(Duration.ofSeconds(5));
        }
        if (admin != null) {
            admin.close(Duration.ofSeconds(5));
        }
    }

    private static void run(String[] w) throws Exception {
        switch (w[0]) {
            case "producer":
                newProducer(w);
                return;
            case "consume":
                consume(w[1], w[2], Long.parseLong(w[3]));
                return;
            case "committed":
                committed(w[1], new TopicPartition(w[2], Integer.parseInt(w[3])));
                return;
            case "admin":
                admin(w);
                return;
            default:
                producerCommand(w);
        }
    }

    private static void newProducer(String[] w) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, w[2]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        props.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "20");
        for (int i = 3; i < w.length; i++) {
            String[] kv = w[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        PRODUCERS.put(w[1], new KafkaProducer<>(props));
        PENDING.put(w[1], new ArrayList<>());
    }

    private static void producerCommand(String[] w) throws Exception {
        KafkaProducer<byte[], byte[]> p = PRODUCERS.get(w[0]);
        if (p == null) {
            throw new IllegalArgumentException("no producer " + w[0]);
        }
        switch (w[1]) {
            case "init":
                p.initTransactions();
                return;
            case "begin":
                p.beginTransaction();
                return;
            case "send":
                PENDING.get(w[0]).add(p.send(new ProducerRecord<>(w[2], Integer.parseInt(w[3]),
                        b(w[4]), b(w[5]))));
                return;
            case "flush":
                p.flush();
                List<Future<RecordMetadata>> pending = PENDING.get(w[0]);
                try {
                    for (Future<RecordMetadata> f : pending) {
                        f.get();
                    }
                } finally {
                    pending.clear();
                }
                return;
            case "offsets":
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (int i = 3; i + 2 < w.length; i += 3) {
                    offsets.put(new TopicPartition(w[i], Integer.parseInt(w[i + 1])),
                            new OffsetAndMetadata(Long.parseLong(w[i + 2])));
                }
                p.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(w[2]));
                return;
            case "commit":
                PENDING.get(w[0]).clear();
                p.commitTransaction();
                return;
            case "abort":
                PENDING.get(w[0]).clear();
                p.abortTransaction();
                return;
            case "close":
                PRODUCERS.remove(w[0]).close(Duration.ofSeconds(5));
                return;
            default:
                throw new IllegalArgumentException("unknown command " + w[1]);
        }
    }

    private static KafkaConsumer<byte[], byte[]> consumer(String isolation, String group) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(props);
    }

    private static void consume(String isolation, String topic, long timeoutMs) {
        try (KafkaConsumer<byte[], byte[]> c = consumer(isolation, null)) {
            List<TopicPartition> parts = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(10))) {
                parts.add(new TopicPartition(topic, pi.partition()));
            }
            c.assign(parts);
            c.seekToBeginning(parts);
            Set<Integer> ended = new HashSet<>();
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (ended.size() < parts.size() && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                    if ("__end__".equals(s(r.key()))) {
                        ended.add(r.partition());
                    } else {
                        out("rec " + r.partition() + " " + r.offset() + " " + s(r.key()) + " "
                                + s(r.value()));
                    }
                }
            }
            for (TopicPartition tp : parts) {
                out("position " + tp.partition() + " " + c.position(tp));
            }
        }
    }

    private static void committed(String group, TopicPartition tp) {
        try (KafkaConsumer<byte[], byte[]> c = consumer("read_committed", group)) {
            Map<TopicPartition, OffsetAndMetadata> got = c.committed(Set.of(tp), Duration.ofSeconds(10));
            OffsetAndMetadata om = got.get(tp);
            out("committed " + (om == null ? -1 : om.offset()));
        }
    }

    private static void admin(String[] w) throws Exception {
        if (admin == null) {
            Properties props = new Properties();
            props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            admin = Admin.create(props);
        }
        switch (w[1]) {
            case "list":
                Collection<TransactionListing> listings = admin.listTransactions().all().get();
                for (TransactionListing l : listings) {
                    out("txn " + l.transactionalId() + " " + l.producerId() + " " + l.state());
                }
                return;
            case "describe":
                TransactionDescription d = admin.describeTransactions(List.of(w[2]))
                        .description(w[2]).get();
                List<String> tps = new ArrayList<>();
                for (TopicPartition tp : d.topicPartitions()) {
                    tps.add(tp.topic() + ":" + tp.partition());
                }
                tps.sort(null);
                out("desc " + d.state() + " " + d.producerId() + " " + d.producerEpoch() + " "
                        + d.transactionTimeoutMs() + " " + String.join(",", tps));
                return;
            case "producers":
                TopicPartition tp = new TopicPartition(w[2], Integer.parseInt(w[3]));
                PartitionProducerState st = admin.describeProducers(List.of(tp))
                        .partitionResult(tp).get();
                for (ProducerState ps : st.activeProducers()) {
                    out("producer " + ps.producerId() + " " + ps.producerEpoch() + " "
                            + ps.currentTransactionStartOffset().orElse(-1L));
                }
                return;
            default:
                throw new IllegalArgumentException("unknown admin command " + w[1]);
        }
    }
}
