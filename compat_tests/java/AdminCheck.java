import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * AdminClient against odradek: createTopics, describeTopics, describeCluster, a duplicate
 * create, and a producer that auto-creates a topic. Prints one line per fact for the Python
 * test to check:
 *
 *   TOPIC <name> <partition count>
 *   PARTITION <name> <index> <leader> <replicas> <isr>
 *   CLUSTER <cluster id> <controller id> <node ids>
 *   EXISTS <exception class>
 *   AUTO <name> <partition count> <offset of the first record>
 *
 * Usage: AdminCheck <bootstrap> <topic> <auto-created topic>
 */
public class AdminCheck {
    static final long WAIT_S = 30;

    static String ids(List<Node> nodes) {
        return nodes.stream().map(n -> Integer.toString(n.id())).collect(Collectors.joining(","));
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String autoTopic = args[2];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1)))
                .all().get(WAIT_S, TimeUnit.SECONDS);
            Map<String, TopicDescription> described = admin.describeTopics(List.of(topic))
                .allTopicNames().get(WAIT_S, TimeUnit.SECONDS);
            TopicDescription desc = described.get(topic);
            System.out.println("TOPIC " + desc.name() + " " + desc.partitions().size());
            for (TopicPartitionInfo p : desc.partitions()) {
                System.out.println("PARTITION " + desc.name() + " " + p.partition() + " "
                    + p.leader().id() + " " + ids(p.replicas()) + " " + ids(p.isr()));
            }
            DescribeClusterResult cluster = admin.describeCluster();
            System.out.println("CLUSTER " + cluster.clusterId().get(WAIT_S, TimeUnit.SECONDS)
                + " " + cluster.controller().get(WAIT_S, TimeUnit.SECONDS).id()
                + " " + ids(List.copyOf(cluster.nodes().get(WAIT_S, TimeUnit.SECONDS))));
            try {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1)))
                    .all().get(WAIT_S, TimeUnit.SECONDS);
                System.out.println("EXISTS none");
            } catch (ExecutionException e) {
                System.out.println("EXISTS " + e.getCause().getClass().getSimpleName());
            }
        }

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            RecordMetadata md = producer.send(new ProducerRecord<>(autoTopic, "k", "v"))
                .get(WAIT_S, TimeUnit.SECONDS);
            int count = producer.partitionsFor(autoTopic).size();
            System.out.println("AUTO " + autoTopic + " " + count + " " + md.offset());
        }
    }
}
