import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A consumer group's offset commits and fetches through the Java client (classic protocol):
 * a first member reads a 2-partition topic and commits chosen offsets with metadata; the
 * committed offsets are read back by the consumer (OffsetFetch) and by Admin
 * (listConsumerGroupOffsets); a second member of the same group resumes from them, commits
 * its position, and the group is described once it is empty. Printed lines:
 *
 *   COMMITTED <who> <partition> <offset|null> <metadata>
 *   RESUMED <partition> <offset> <value>
 *   STATE <state> <members>
 *
 * Usage: GroupOffsets <bootstrap> <topic> <group>
 */
public class GroupOffsets {
    static final long WAIT_S = 45;

    static KafkaConsumer<String, String> consumer(String bootstrap, String group) {
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        return new KafkaConsumer<>(cp);
    }

    static List<ConsumerRecord<String, String>> pollN(KafkaConsumer<String, String> c, int n) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (got.size() < n) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("only " + got.size() + " of " + n + " records");
            }
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                got.add(r);
            }
        }
        return got;
    }

    static void print(String who, Map<TopicPartition, OffsetAndMetadata> offsets) {
        for (Map.Entry<Integer, OffsetAndMetadata> e : byPartition(offsets).entrySet()) {
            OffsetAndMetadata om = e.getValue();
            System.out.println("COMMITTED " + who + " " + e.getKey() + " "
                + (om == null ? "null -" : om.offset() + " " + (om.metadata().isEmpty() ? "=" : om.metadata())));
        }
    }

    static TreeMap<Integer, OffsetAndMetadata> byPartition(Map<TopicPartition, OffsetAndMetadata> m) {
        TreeMap<Integer, OffsetAndMetadata> out = new TreeMap<>();
        m.forEach((tp, om) -> out.put(tp.partition(), om));
        return out;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String group = args[2];
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1)))
                .all().get(WAIT_S, TimeUnit.SECONDS);
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>(topic, i % 2, "k" + i, "v" + i));
                }
                producer.flush();
            }
            try (KafkaConsumer<String, String> first = consumer(bootstrap, group)) {
                first.subscribe(List.of(topic));
                pollN(first, 10);
                print("before", first.committed(Set.of(p0, p1)));
                first.commitSync(Map.of(p0, new OffsetAndMetadata(2, "meta-0"),
                    p1, new OffsetAndMetadata(4)));
                print("consumer", first.committed(Set.of(p0, p1)));
            }
            print("admin", admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(WAIT_S, TimeUnit.SECONDS));
            try (KafkaConsumer<String, String> second = consumer(bootstrap, group)) {
                second.subscribe(List.of(topic));
                List<ConsumerRecord<String, String>> got = pollN(second, 4);
                got.sort((a, b) -> a.partition() != b.partition()
                    ? Integer.compare(a.partition(), b.partition())
                    : Long.compare(a.offset(), b.offset()));
                for (ConsumerRecord<String, String> r : got) {
                    System.out.println("RESUMED " + r.partition() + " " + r.offset() + " " + r.value());
                }
                second.commitSync();
                print("second", second.committed(Set.of(p0, p1)));
            }
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
                .describedGroups().get(group).get(WAIT_S, TimeUnit.SECONDS);
            System.out.println("STATE " + d.state() + " " + d.members().size());
        }
        System.out.println("DONE");
    }
}
