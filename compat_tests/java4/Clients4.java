import java.io.FileInputStream;
import java.time.Duration;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The kafka-clients 4.x API surface against one broker: Admin (createTopics, describeCluster,
 * listOffsets, a share group's config), the idempotent producer, a consumer group with the
 * classic protocol and one with group.protocol=consumer (KIP-848), and a KafkaShareConsumer
 * (KIP-932). Prints one line per step for the Python test to check:
 *
 *   OK admin nodes=<n>
 *   OK produce <count>
 *   OK <classic|consumer> records=<n> committed=<sum of committed offsets>
 *   OK share records=<n> distinct=<n>
 *   DONE
 *
 * Usage: Clients4 <properties file or -> <bootstrap> <topic> <group prefix> <count>
 */
public class Clients4 {
    static Properties base(String file, String bootstrap) throws Exception {
        Properties props = new Properties();
        if (!file.equals("-")) {
            try (FileInputStream in = new FileInputStream(file)) {
                props.load(in);
            }
        }
        props.put("bootstrap.servers", bootstrap);
        return props;
    }

    public static void main(String[] args) throws Exception {
        String file = args[0], bootstrap = args[1], topic = args[2], prefix = args[3];
        int count = Integer.parseInt(args[4]);
        Properties common = base(file, bootstrap);
        TopicPartition[] tps = {new TopicPartition(topic, 0), new TopicPartition(topic, 1)};

        try (Admin admin = Admin.create(common)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get(30, TimeUnit.SECONDS);
            int nodes = admin.describeCluster().nodes().get(30, TimeUnit.SECONDS).size();
            // a new share-partition starts at the log end unless the group says otherwise
            ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, prefix + "-share");
            AlterConfigOp op = new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(group, List.of(op))).all().get(30, TimeUnit.SECONDS);
            System.out.println("OK admin nodes=" + nodes);
        }

        Properties pp = (Properties) common.clone();
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("linger.ms", "5");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, i % 2, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
            }
            System.out.println("OK produce " + count);
        }
        try (Admin admin = Admin.create(common)) {
            long end = 0;
            for (var info : admin.listOffsets(Map.of(tps[0], OffsetSpec.latest(), tps[1], OffsetSpec.latest()))
                    .all().get(30, TimeUnit.SECONDS).values()) {
                end += info.offset();
            }
            System.out.println("OK listoffsets end=" + end);
        }

        for (String protocol : new String[] {"classic", "consumer"}) {
            Properties cp = (Properties) common.clone();
            cp.put("group.id", prefix + "-" + protocol);
            cp.put("group.protocol", protocol);
            cp.put("auto.offset.reset", "earliest");
            cp.put("enable.auto.commit", "false");
            cp.put("key.deserializer", StringDeserializer.class.getName());
            cp.put("value.deserializer", StringDeserializer.class.getName());
            int seen = 0;
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
                consumer.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 60_000;
                while (seen < count && System.currentTimeMillis() < deadline) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(500));
                    seen += records.count();
                }
                consumer.commitSync(Duration.ofSeconds(30));
                Map<TopicPartition, OffsetAndMetadata> committed =
                    consumer.committed(Set2.of(tps), Duration.ofSeconds(30));
                long sum = 0;
                for (OffsetAndMetadata om : committed.values()) {
                    if (om != null) sum += om.offset();
                }
                System.out.println("OK " + protocol + " records=" + seen + " committed=" + sum);
            }
        }

        Properties sp = (Properties) common.clone();
        sp.put("group.id", prefix + "-share");
        sp.put("key.deserializer", StringDeserializer.class.getName());
        sp.put("value.deserializer", StringDeserializer.class.getName());
        java.util.Set<String> distinct = new java.util.HashSet<>();
        int seen = 0;
        try (KafkaShareConsumer<String, String> share = new KafkaShareConsumer<>(sp)) {
            share.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (distinct.size() < count && System.currentTimeMillis() < deadline) {
                ConsumerRecords<String, String> records = share.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : records) {
                    seen++;
                    distinct.add(r.value());
                }
                share.commitSync(Duration.ofSeconds(30));
            }
        }
        System.out.println("OK share records=" + seen + " distinct=" + distinct.size());
        System.out.println("DONE");
    }

    static final class Set2 {
        static java.util.Set<TopicPartition> of(TopicPartition[] tps) {
            return new java.util.HashSet<>(List.of(tps));
        }
    }
}
