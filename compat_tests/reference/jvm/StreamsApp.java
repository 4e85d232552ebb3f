import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * One Kafka Streams instance running two sub-topologies of one application:
 *
 * <ul>
 *   <li>word count: {@code <p>-lines} split into words, re-keyed by word (a repartition topic),
 *       counted in a RocksDB store (its changelog topic), every update to {@code <p>-counts};
 *   <li>a stream-table join and a windowed aggregation: {@code <p>-orders} (customer -> amount)
 *       joined with the table {@code <p>-customers} (customer -> region), re-keyed by region (a
 *       repartition topic), summed per region in one-minute tumbling windows (a windowed RocksDB
 *       store), every update to {@code <p>-totals} as "region@windowStart" -> sum.
 * </ul>
 *
 * <p>Exactly-once v2, one standby replica, no record cache (every update reaches the output).
 * Prints "STATE <new>" on every state change and "FATAL <exception>" on an uncaught exception;
 * SIGTERM closes it cleanly.
 *
 * <p>Arguments: bootstrap applicationId prefix stateDir groupProtocol(classic|streams)
 * [replicationFactor of the internal topics, default 1]
 */
public class StreamsApp {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], appId = args[1], p = args[2], stateDir = args[3];
        String protocol = args.length > 4 ? args[4] : "classic";
        int replication = args.length > 5 ? Integer.parseInt(args[5]) : 1;

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, replication);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
        props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        props.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 10000);
        if (!"classic".equals(protocol)) {
            props.put("group.protocol", protocol);
        }

        StreamsBuilder builder = new StreamsBuilder();

        KStream<String, String> lines = builder.stream(p + "-lines");
        lines.flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split("\\s+")))
                .groupBy((k, word) -> word, Grouped.as("words-by-word"))
                .count(Materialized.as("word-counts"))
                .toStream()
                .mapValues(n -> Long.toString(n))
                .to(p + "-counts");

        KTable<String, String> customers =
                builder.table(p + "-customers", Materialized.as("customers"));
        KStream<String, String> orders = builder.stream(p + "-orders");
        orders.join(customers, (amount, region) -> region + ":" + amount)
                .map((customer, joined) -> {
                    String[] parts = joined.split(":");
                    return KeyValue.pair(parts[0], parts[1]);
                })
                .groupByKey(Grouped.as("orders-by-region"))
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMinutes(1), Duration.ofDays(1)))
                .reduce((a, b) -> Long.toString(Long.parseLong(a) + Long.parseLong(b)),
                        Materialized.as("region-totals"))
                .toStream((wk, v) -> wk.key() + "@" + wk.window().start())
                .to(p + "-totals", Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("FATAL " + e);
            e.printStackTrace(System.out);
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            done.countDown();
        }));
        streams.start();
        done.await();
    }
}
