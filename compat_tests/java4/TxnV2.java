import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Transactions with the kafka-clients 4.x producer (transactions v2, KIP-890 part 2, once the
 * broker finalizes transaction.version 2). Prints one line per fact:
 *
 *   FEATURE transaction.version <finalized max level or none>
 *   EPOCH <step> <producer epoch from describeTransactions> <state>
 *   FENCED <exception class>         the zombie producer's commit
 *   TIMEOUT <exception class>        the commit of a transaction the coordinator aborted
 *   READ <value>                     every value a read_committed consumer sees, in order
 *   GROUP <committed offset>         the offset committed inside a transaction
 *   DONE
 *
 * Usage: TxnV2 <bootstrap> <topic> <transactional id prefix> <group>
 */
public class TxnV2 {
    static String bootstrap;

    static KafkaProducer<String, String> producer(String txnId, int timeoutMs) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("transaction.timeout.ms", Integer.toString(timeoutMs));
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.put("max.block.ms", "30000");
        return new KafkaProducer<>(p);
    }

    static TransactionDescription describe(Admin admin, String txnId) throws Exception {
        return admin.describeTransactions(List.of(txnId)).description(txnId).get(30, TimeUnit.SECONDS);
    }

    static void epoch(Admin admin, String step, String txnId) throws Exception {
        TransactionDescription d = describe(admin, txnId);
        System.out.println("EPOCH " + step + " " + d.producerEpoch() + " " + d.state());
    }

    static void send(KafkaProducer<String, String> p, String topic, String prefix, int n) throws Exception {
        for (int i = 0; i < n; i++) {
            p.send(new ProducerRecord<>(topic, i % 2, prefix, prefix + "-" + i)).get(30, TimeUnit.SECONDS);
        }
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        String topic = args[1], tid = args[2], group = args[3];
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            FeatureMetadata fm = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS);
            FinalizedVersionRange tv = fm.finalizedFeatures().get("transaction.version");
            System.out.println("FEATURE transaction.version " + (tv == null ? "none" : tv.maxVersionLevel()));
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get(30, TimeUnit.SECONDS);

            // commit, abort, commit with offsets: the epoch after each
            String main = tid + "-main";
            try (KafkaProducer<String, String> p = producer(main, 60000)) {
                p.initTransactions();
                epoch(admin, "init", main);
                p.beginTransaction();
                send(p, topic, "c1", 4);
                p.commitTransaction();
                epoch(admin, "commit", main);
                p.beginTransaction();
                send(p, topic, "a1", 4);
                p.abortTransaction();
                epoch(admin, "abort", main);
                p.beginTransaction();
                send(p, topic, "c2", 4);
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                offsets.put(new TopicPartition(topic, 0), new OffsetAndMetadata(42));
                p.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(group));
                p.commitTransaction();
                epoch(admin, "offsets", main);
            }

            // fencing: a second producer with the same id fences the first one
            String fenced = tid + "-fence";
            KafkaProducer<String, String> zombie = producer(fenced, 60000);
            zombie.initTransactions();
            zombie.beginTransaction();
            send(zombie, topic, "z", 2);
            try (KafkaProducer<String, String> fresh = producer(fenced, 60000)) {
                fresh.initTransactions();
                try {
                    zombie.commitTransaction();
                    System.out.println("FENCED none");
                } catch (Exception e) {
                    System.out.println("FENCED " + e.getClass().getSimpleName());
                }
                zombie.close(Duration.ZERO);
                fresh.beginTransaction();
                send(fresh, topic, "f", 2);
                fresh.commitTransaction();
            }

            // timeout: the coordinator aborts a transaction open past transaction.timeout.ms
            String slow = tid + "-slow";
            try (KafkaProducer<String, String> p = producer(slow, 3000)) {
                p.initTransactions();
                p.beginTransaction();
                send(p, topic, "t", 2);
                long deadline = System.currentTimeMillis() + 60_000;
                TransactionState state = describe(admin, slow).state();
                while (state == TransactionState.ONGOING && System.currentTimeMillis() < deadline) {
                    Thread.sleep(200);  // polling the coordinator's state, bounded by the deadline
                    state = describe(admin, slow).state();
                }
                System.out.println("ABORTED " + state);
                try {
                    p.commitTransaction();
                    System.out.println("TIMEOUT none");
                } catch (Exception e) {
                    System.out.println("TIMEOUT " + e.getClass().getSimpleName());
                }
            }

            Properties cp = new Properties();
            cp.put("bootstrap.servers", bootstrap);
            cp.put("isolation.level", "read_committed");
            cp.put("key.deserializer", StringDeserializer.class.getName());
            cp.put("value.deserializer", StringDeserializer.class.getName());
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
                c.assign(tps);
                c.seekToBeginning(tps);
                Map<TopicPartition, Long> end = c.endOffsets(tps);
                List<String> seen = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 30_000;
                while (System.currentTimeMillis() < deadline
                        && (c.position(tps.get(0)) < end.get(tps.get(0)) || c.position(tps.get(1)) < end.get(tps.get(1)))) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) {
                        seen.add(r.partition() + ":" + r.value());
                    }
                }
                for (String v : seen) System.out.println("READ " + v);
            }
            var committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                .get(30, TimeUnit.SECONDS);
            OffsetAndMetadata om = committed.get(new TopicPartition(topic, 0));
            System.out.println("GROUP " + (om == null ? "none" : Long.toString(om.offset())));
        }
        System.out.println("DONE");
    }
}
