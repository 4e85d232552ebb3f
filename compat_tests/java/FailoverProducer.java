import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * An idempotent acks=all Java producer that keeps writing while the test fails brokers, then
 * reads the topic back. Record n has the value "j-%06d" and goes to partition n % partitions; it
 * sends chunks of CHUNK records and waits for each chunk's acknowledgements, so every record up
 * to the last ACKED count was acknowledged. A line "stop" on stdin ends the writing; the consumer
 * (no group) then reads every partition from the beginning up to its end offset. Output:
 *
 *   ACKED <count>                      after each acknowledged chunk
 *   FAILED <record> <exception>        a send failed (the program exits 1)
 *   PRODUCED <count>
 *   REC <partition> <offset> <value>   every record read, in order per partition
 *   DONE
 *
 * Usage: FailoverProducer <bootstrap> <topic> <partitions>
 */
public class FailoverProducer {
    static final int CHUNK = 50;
    static final long WAIT_S = 60;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("stop")) {
                        break;
                    }
                }
            } catch (Exception e) {
                // stdin closed: stop as well
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        pp.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        pp.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        pp.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        int sent = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            while (!stop.get()) {
                List<Future<RecordMetadata>> chunk = new ArrayList<>();
                for (int k = 0; k < CHUNK; k++) {
                    int n = sent + k;
                    byte[] value = String.format("j-%06d", n).getBytes(StandardCharsets.UTF_8);
                    chunk.add(producer.send(new ProducerRecord<>(topic, n % partitions, null, value)));
                }
                for (int k = 0; k < CHUNK; k++) {
                    try {
                        chunk.get(k).get(WAIT_S, TimeUnit.SECONDS);
                    } catch (Exception e) {
                        Throwable cause = e.getCause() != null ? e.getCause() : e;
                        System.out.println("FAILED " + (sent + k) + " " + cause);
                        System.out.flush();
                        System.exit(1);
                    }
                }
                sent += CHUNK;
                System.out.println("ACKED " + sent);
                System.out.flush();
            }
        }
        System.out.println("PRODUCED " + sent);
        System.out.flush();

        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofSeconds(WAIT_S));
            Map<TopicPartition, Long> next = new HashMap<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
            while (System.nanoTime() < deadline) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    done &= next.getOrDefault(tp, 0L) >= ends.get(tp);
                }
                if (done) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    String value = new String(r.value(), StandardCharsets.UTF_8);
                    System.out.println("REC " + r.partition() + " " + r.offset() + " " + value);
                    next.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
                }
            }
        }
        System.out.println("DONE");
        System.out.flush();
    }
}
