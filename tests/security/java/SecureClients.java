import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's Java clients (kafka-clients 3.9) with the settings of a properties file (security
 * protocol, SASL, TLS as odradek.testing's java_properties() writes them): Admin createTopics
 * and describeCluster, an acks=all producer (5 records), a transactional producer (3 records,
 * committed), and a group consumer reading read_committed that commits its offsets. Prints
 * "OK <step>" per step and "DONE"; "FAIL <what>" and exit 1 on a failed check.
 *
 * Usage: SecureClients <properties file> <topic>
 */
public class SecureClients {
    static final long WAIT_S = 30;

    static Properties load(String path) throws Exception {
        Properties props = new Properties();
        try (Reader in = Files.newBufferedReader(Path.of(path), StandardCharsets.UTF_8)) {
            props.load(in);
        }
        return props;
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("FAIL " + what);
            System.out.flush();
            System.exit(1);
        }
    }

    public static void main(String[] args) throws Exception {
        Properties base = load(args[0]);
        String topic = args[1];
        TopicPartition tp = new TopicPartition(topic, 0);

        Properties adminProps = new Properties();
        adminProps.putAll(base);
        adminProps.put("default.api.timeout.ms", "30000");
        try (Admin admin = Admin.create(adminProps)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all()
                    .get(WAIT_S, TimeUnit.SECONDS);
            int brokers = admin.describeCluster().nodes().get(WAIT_S, TimeUnit.SECONDS).size();
            check(brokers == 1, "describeCluster brokers=" + brokers);
            System.out.println("OK admin");
        }

        Properties producerProps = new Properties();
        producerProps.putAll(base);
        producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps)) {
            for (int i = 0; i < 5; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, ("plain-" + i).getBytes()))
                        .get(WAIT_S, TimeUnit.SECONDS);
            }
            System.out.println("OK produce");
        }

        Properties txnProps = new Properties();
        txnProps.putAll(producerProps);
        txnProps.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "txn-" + topic);
        try (KafkaProducer<byte[], byte[]> txn = new KafkaProducer<>(txnProps)) {
            txn.initTransactions();
            txn.beginTransaction();
            for (int i = 0; i < 3; i++) {
                txn.send(new ProducerRecord<>(topic, 0, null, ("txn-" + i).getBytes()));
            }
            txn.commitTransaction();
            System.out.println("OK transaction");
        }

        Properties consumerProps = new Properties();
        consumerProps.putAll(base);
        consumerProps.put(ConsumerConfig.GROUP_ID_CONFIG, "g-" + topic);
        consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerProps.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
            while (got.size() < 8 && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    got.add(new String(r.value(), StandardCharsets.UTF_8));
                }
            }
            List<String> want = List.of("plain-0", "plain-1", "plain-2", "plain-3", "plain-4",
                    "txn-0", "txn-1", "txn-2");
            check(got.equals(want), "consumed " + got);
            consumer.commitSync(Duration.ofSeconds(WAIT_S));
            Map<TopicPartition, OffsetAndMetadata> committed =
                    consumer.committed(Set.of(tp), Duration.ofSeconds(WAIT_S));
            long position = consumer.position(tp);
            check(committed.get(tp) != null && committed.get(tp).offset() == position
                    && position >= 8, "committed " + committed + " position " + position);
            System.out.println("OK group records=" + got.size() + " committed=" + position);
        }
        System.out.println("DONE");
    }
}
