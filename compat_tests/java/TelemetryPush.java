import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A producer with KIP-714 metrics push on (kafka-clients' default): writes a record every 100 ms
 * for the given milliseconds, prints its client instance id (which GetTelemetrySubscriptions
 * assigned), then closes, which sends a last, terminating push.
 *
 * <p>Args: bootstrap topic client-id run-ms
 */
public final class TelemetryPush {
    private TelemetryPush() {}

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, args[2]);
        props.put(ProducerConfig.ENABLE_METRICS_PUSH_CONFIG, "true");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        long runMs = Long.parseLong(args[3]);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            long end = System.currentTimeMillis() + runMs;
            while (System.currentTimeMillis() < end) {
                producer.send(new ProducerRecord<>(args[1], "v".getBytes())).get();
                Thread.sleep(100);
            }
            Uuid id = producer.clientInstanceId(java.time.Duration.ofSeconds(10));
            System.out.println("INSTANCE " + id);
        }
        System.out.println("CLOSED");
    }
}
