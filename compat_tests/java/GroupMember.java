import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One consumer-group member, printing the same JSON lines as compat_tests/group_member.py.
 *
 * <p>Arguments: bootstrap topic group assignor(range|roundrobin|cooperative-sticky)
 * instanceId("-" for none) sessionTimeoutMs commit(sync|async|auto) [protocol(classic|consumer)].
 * With "consumer" (KIP-848) the coordinator assigns: the assignor is group.remote.assignor when it
 * is uniform or range, and the session and heartbeat come from the broker. SIGTERM closes the
 * consumer.
 */
public final class GroupMember {
    private GroupMember() {}

    private static final TreeSet<String> CURRENT = new TreeSet<>();

    private static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    private static String tps(Collection<TopicPartition> parts) {
        List<String> out = new ArrayList<>();
        TreeSet<String> sorted = new TreeSet<>();
        for (TopicPartition tp : parts) {
            sorted.add(tp.topic() + "\u0000" + tp.partition());
        }
        for (String s : sorted) {
            String[] kv = s.split("\u0000");
            out.add("[\"" + kv[0] + "\", " + kv[1] + "]");
        }
        return "[" + String.join(", ", out) + "]";
    }

    private static String current() {
        List<TopicPartition> parts = new ArrayList<>();
        for (String s : CURRENT) {
            String[] kv = s.split("\u0000");
            parts.add(new TopicPartition(kv[0], Integer.parseInt(kv[1])));
        }
        return tps(parts);
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    public static void main(String[] args) throws Exception {
        String assignor = switch (args[3]) {
            case "roundrobin" -> "org.apache.kafka.clients.consumer.RoundRobinAssignor";
            case "cooperative-sticky" -> "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
            default -> "org.apache.kafka.clients.consumer.RangeAssignor";
        };
        int session = Integer.parseInt(args[5]);
        String commit = args[6];
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-group-member");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, String.valueOf(commit.equals("auto")));
        props.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, "200");
        props.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, String.valueOf(session * 5));
        if (args.length > 7 && args[7].equals("consumer")) {
            props.put("group.protocol", "consumer");
            if (args[3].equals("uniform") || args[3].equals("range")) {
                props.put("group.remote.assignor", args[3]);
            }
        } else {
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, String.valueOf(session));
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, String.valueOf(Math.max(Math.min(session / 6, 1000), 100)));
            props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
        }
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        if (!args[4].equals("-")) {
            props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, args[4]);
        }
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
        AtomicBoolean stopping = new AtomicBoolean(false);
        CountDownLatch closed = new CountDownLatch(1);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            consumer.wakeup();
            try {
                closed.await();
                main.join(10000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        consumer.subscribe(Collections.singletonList(args[1]), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                for (TopicPartition tp : parts) {
                    CURRENT.remove(tp.topic() + "\u0000" + tp.partition());
                }
                emit("{\"e\": \"revoked\", \"tps\": " + tps(parts) + ", \"all\": " + current() + "}");
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                for (TopicPartition tp : parts) {
                    CURRENT.add(tp.topic() + "\u0000" + tp.partition());
                }
                emit("{\"e\": \"assigned\", \"tps\": " + tps(parts) + ", \"all\": " + current() + "}");
            }
        });
        try {
            while (!stopping.get()) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                Map<Integer, Long> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    String value = r.value() == null ? "null" : quote(new String(r.value(), "UTF-8"));
                    emit("{\"e\": \"rec\", \"p\": " + r.partition() + ", \"o\": " + r.offset() + ", \"v\": " + value + "}");
                    offsets.put(r.partition(), r.offset() + 1);
                }
                if (!offsets.isEmpty() && (commit.equals("sync") || commit.equals("async"))) {
                    if (commit.equals("sync")) {
                        try {
                            consumer.commitSync();
                            List<String> parts = new ArrayList<>();
                            for (Map.Entry<Integer, Long> e : offsets.entrySet()) {
                                parts.add("\"" + e.getKey() + "\": " + e.getValue());
                            }
                            emit("{\"e\": \"committed\", \"offsets\": {" + String.join(", ", parts) + "}}");
                        } catch (org.apache.kafka.common.errors.RebalanceInProgressException
                                 | org.apache.kafka.clients.consumer.CommitFailedException e) {
                            emit("{\"e\": \"commit_failed\", \"msg\": " + quote(e.toString()) + "}");
                        }
                    } else {
                        consumer.commitAsync();
                    }
                }
            }
        } catch (WakeupException e) {
            // SIGTERM
        } catch (Exception e) {
            emit("{\"e\": \"error\", \"msg\": " + quote(e.toString()) + "}");
            closed.countDown();
            System.exit(0);
        }
        consumer.close();
        emit("{\"e\": \"closed\"}");
        closed.countDown();
    }
}
