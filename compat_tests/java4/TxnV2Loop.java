import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional producer (kafka-clients 4.x, transactions v2 when the cluster finalizes it)
 * committing `count` small transactions in a row, each with one record in partition 0 and one in
 * partition 1, while the test kills brokers under it. It recovers as an application does: a
 * commit that timed out is retried, any other abortable error aborts the attempt and the
 * transaction is tried again with the next attempt number. Prints:
 *
 *   COMMITTED <i> <attempt>    transaction i committed with the values t<i>-a<attempt>-p<0|1>
 *   ABORTED <i> <attempt> <exception class>
 *   FATAL <exception class> <message>   (exit 1)
 *   DONE
 *
 * Usage: TxnV2Loop <bootstrap> <topic> <transactional id> <count>
 */
public class TxnV2Loop {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], tid = args[2];
        int count = Integer.parseInt(args[3]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", tid);
        p.put("transaction.timeout.ms", "60000");
        p.put("max.block.ms", "60000");
        p.put("request.timeout.ms", "10000");
        p.put("delivery.timeout.ms", "60000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            for (int i = 0; i < count; i++) {
                for (int attempt = 0; ; attempt++) {
                    if (attempt > 20) {
                        System.out.println("FATAL TooManyAttempts " + i);
                        System.exit(1);
                    }
                    try {
                        producer.beginTransaction();
                        for (int part = 0; part < 2; part++) {
                            String value = "t" + i + "-a" + attempt + "-p" + part;
                            producer.send(new ProducerRecord<>(topic, part, null, value));
                        }
                        commit(producer);
                        System.out.println("COMMITTED " + i + " " + attempt);
                        System.out.flush();
                        break;
                    } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException e) {
                        System.out.println("FATAL " + e.getClass().getSimpleName() + " " + e.getMessage());
                        System.exit(1);
                    } catch (KafkaException e) {
                        System.out.println("ABORTED " + i + " " + attempt + " " + e.getClass().getSimpleName());
                        System.out.flush();
                        producer.abortTransaction();
                    }
                }
            }
        }
        System.out.println("DONE");
    }

    /** commitTransaction, retried after a timeout as the producer's javadoc asks. */
    static void commit(KafkaProducer<String, String> producer) {
        for (int tries = 0; ; tries++) {
            try {
                producer.commitTransaction();
                return;
            } catch (TimeoutException e) {
                if (tries >= 5) {
                    throw e;
                }
            }
        }
    }
}
