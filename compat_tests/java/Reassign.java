import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

/**
 * The Java AdminClient's alterPartitionReassignments and listPartitionReassignments against
 * odradek: moves partition 0 of the topic to the replicas given, prints the moves listed while
 * it runs, waits (bounded) until none is listed, then prints the partition:
 *
 *   LISTED <topic>-<p> <replicas> <adding> <removing>   (zero or more)
 *   DONE <replicas> <leader>
 *
 * args: bootstrap topic replicas (comma separated)
 */
public class Reassign {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        String topic = args[1];
        List<Integer> target = new java.util.ArrayList<>();
        for (String s : args[2].split(",")) target.add(Integer.parseInt(s));
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = Admin.create(props)) {
            admin.alterPartitionReassignments(
                    Map.of(tp, Optional.of(new NewPartitionReassignment(target))))
                .all().get(30, TimeUnit.SECONDS);
            long deadline = System.currentTimeMillis() + 30_000;
            while (true) {
                Map<TopicPartition, PartitionReassignment> listed =
                    admin.listPartitionReassignments().reassignments().get(30, TimeUnit.SECONDS);
                for (Map.Entry<TopicPartition, PartitionReassignment> e : listed.entrySet()) {
                    PartitionReassignment r = e.getValue();
                    System.out.println("LISTED " + e.getKey() + " " + r.replicas() + " "
                        + r.addingReplicas() + " " + r.removingReplicas());
                }
                if (listed.isEmpty()) break;
                if (System.currentTimeMillis() > deadline) throw new AssertionError("not done");
                Thread.sleep(50);
            }
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
                .get(30, TimeUnit.SECONDS).get(topic);
            TopicPartitionInfo p = d.partitions().get(0);
            StringBuilder ids = new StringBuilder();
            for (var n : p.replicas()) ids.append(ids.length() == 0 ? "" : ",").append(n.id());
            System.out.println("DONE " + ids + " " + p.leader().id());
        }
    }
}
