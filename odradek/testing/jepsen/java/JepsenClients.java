import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client processes of the Jepsen queue workload (odradek.testing.jepsen.javaclient):
 * one JVM, one thread per workload process, each with its own KafkaProducer (idempotent or
 * transactional, KIP-98; transactions v2 when the broker finalizes it, KIP-890) and
 * KafkaConsumer (read_committed, subscribed to the group or assigned every key).
 *
 * Line protocol, one JSON object per line. Commands on stdin carry "id", "proc" and "op"; each
 * process runs its commands in order on its own thread and answers {"id", ...} or {"id",
 * "error", "timeout"}. A send also reports its acknowledgement later as {"ack": id, "offset"}
 * or {"ack": id, "error"}; a subscribed consumer's rebalances as {"event": "assign", "proc",
 * "keys"} (written before the answer of the poll that ran them). {"op": "exit"} closes all.
 */
public final class JepsenClients {
    static final ObjectMapper JSON = new ObjectMapper();
    static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    static final Map<String, Worker> WORKERS = new ConcurrentHashMap<>();

    static void emit(ObjectNode msg) {
        String line = msg.toString();
        synchronized (OUT) {
            OUT.println(line);
            OUT.flush();
        }
    }

    static ObjectNode error(Throwable e) {
        ObjectNode n = JSON.createObjectNode();
        Throwable cause = e;
        while (cause instanceof org.apache.kafka.common.KafkaException
                && cause.getCause() != null
                && cause.getClass() == org.apache.kafka.common.KafkaException.class) {
            cause = cause.getCause();
        }
        n.put("error", cause.getClass().getSimpleName() + ": " + cause.getMessage());
        n.put("timeout", cause instanceof TimeoutException || cause instanceof InterruptException);
        return n;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            JsonNode cmd = JSON.readTree(line);
            if ("exit".equals(cmd.path("op").asText())) {
                break;
            }
            String proc = cmd.path("proc").asText();
            WORKERS.computeIfAbsent(proc, p -> {
                Worker w = new Worker(p);
                w.start();
                return w;
            }).queue.put(cmd);
        }
        for (Worker w : WORKERS.values()) {
            w.queue.put(JSON.createObjectNode().put("op", "quit"));
        }
        for (Worker w : WORKERS.values()) {
            w.join(15000);
        }
        ObjectNode bye = JSON.createObjectNode();
        bye.put("exit", true);
        emit(bye);
        System.exit(0);
    }

    static Properties props(JsonNode config) {
        Properties p = new Properties();
        for (Iterator<Map.Entry<String, JsonNode>> it = config.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            p.put(e.getKey(), e.getValue().asText());
        }
        return p;
    }

    static final class Worker extends Thread {
        final String proc;
        final BlockingQueue<JsonNode> queue = new LinkedBlockingQueue<>();
        KafkaProducer<byte[], byte[]> producer;
        KafkaConsumer<byte[], byte[]> consumer;
        // the next offset of each partition after the records polls returned: what a commit
        // commits (only for partitions still assigned)
        final Map<TopicPartition, Long> consumed = new HashMap<>();

        Worker(String proc) {
            super("jepsen-" + proc);
            this.proc = proc;
            setDaemon(true);
        }

        @Override
        public void run() {
            while (true) {
                JsonNode cmd;
                try {
                    cmd = queue.take();
                } catch (InterruptedException e) {
                    return;
                }
                String op = cmd.path("op").asText();
                if (op.equals("quit")) {
                    closeAll();
                    return;
                }
                ObjectNode reply;
                try {
                    reply = handle(op, cmd);
                } catch (Throwable e) {
                    reply = error(e);
                }
                reply.put("id", cmd.path("id").asLong());
                emit(reply);
            }
        }

        void closeAll() {
            try {
                if (producer != null) producer.close(Duration.ofSeconds(2));
            } catch (Throwable ignored) {
            }
            try {
                if (consumer != null) consumer.close(Duration.ofSeconds(2));
            } catch (Throwable ignored) {
            }
            producer = null;
            consumer = null;
        }

        ObjectNode handle(String op, JsonNode cmd) throws Exception {
            ObjectNode reply = JSON.createObjectNode();
            switch (op) {
                case "producer": {
                    Properties p = props(cmd.path("config"));
                    p.put("key.serializer", ByteArraySerializer.class.getName());
                    p.put("value.serializer", ByteArraySerializer.class.getName());
                    KafkaProducer<byte[], byte[]> made = new KafkaProducer<>(p);
                    if (p.containsKey("transactional.id")) {
                        try {
                            made.initTransactions();
                        } catch (Throwable e) {
                            made.close(Duration.ZERO);
                            throw e;
                        }
                    }
                    producer = made;
                    return reply;
                }
                case "send": {
                    long id = cmd.path("id").asLong();
                    ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(
                            cmd.path("topic").asText(), cmd.path("key").asInt(), null,
                            cmd.path("value").asText().getBytes(StandardCharsets.UTF_8));
                    producer.send(record, (md, e) -> {
                        ObjectNode ack = e == null ? JSON.createObjectNode() : error(e);
                        ack.put("ack", id);
                        if (e == null) ack.put("offset", md.hasOffset() ? md.offset() : -1);
                        emit(ack);
                    });
                    return reply;
                }
                case "begin":
                    producer.beginTransaction();
                    return reply;
                case "commit_txn":
                    producer.commitTransaction();
                    return reply;
                case "abort_txn":
                    producer.abortTransaction();
                    return reply;
                case "close_producer":
                    if (producer != null) {
                        KafkaProducer<byte[], byte[]> p = producer;
                        producer = null;
                        p.close(Duration.ofMillis(cmd.path("timeout_ms").asLong(0)));
                    }
                    return reply;
                case "consumer":
                    return makeConsumer(cmd, reply);
                case "poll": {
                    ArrayNode records = reply.putArray("records");
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                        ArrayNode rec = records.addArray();
                        rec.add(r.partition());
                        rec.add(r.offset());
                        rec.add(r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8));
                        consumed.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
                    }
                    return reply;
                }
                case "commit": {
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (TopicPartition tp : consumer.assignment()) {
                        Long next = consumed.get(tp);
                        if (next != null) offsets.put(tp, new OffsetAndMetadata(next));
                    }
                    ObjectNode done = reply.putObject("offsets");
                    if (!offsets.isEmpty()) {
                        consumer.commitSync(offsets, Duration.ofSeconds(5));
                        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                            done.put(Integer.toString(e.getKey().partition()), e.getValue().offset());
                        }
                    }
                    return reply;
                }
                case "close_consumer":
                    if (consumer != null) {
                        KafkaConsumer<byte[], byte[]> c = consumer;
                        consumer = null;
                        consumed.clear();
                        c.close(Duration.ofSeconds(2));
                    }
                    return reply;
                default:
                    throw new IllegalArgumentException("unknown op " + op);
            }
        }

        ObjectNode makeConsumer(JsonNode cmd, ObjectNode reply) {
            Properties p = props(cmd.path("config"));
            p.put("key.deserializer", ByteArrayDeserializer.class.getName());
            p.put("value.deserializer", ByteArrayDeserializer.class.getName());
            consumer = new KafkaConsumer<>(p);
            consumed.clear();
            String topic = cmd.path("topic").asText();
            if (cmd.path("subscribe").asBoolean()) {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                        changed(tps);
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                        changed(tps);
                    }

                    @Override
                    public void onPartitionsLost(Collection<TopicPartition> tps) {
                        changed(tps);
                    }
                });
                return reply;
            }
            List<TopicPartition> tps = new ArrayList<>();
            for (int k = 0; k < cmd.path("keys").asInt(); k++) tps.add(new TopicPartition(topic, k));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            ArrayNode keys = reply.putArray("keys");
            for (TopicPartition tp : tps) keys.add(tp.partition());
            return reply;
        }

        /** A rebalance moved these partitions: reported, and their consumed positions dropped
         * (a commit names only what this member read since it was given a partition). */
        void changed(Collection<TopicPartition> tps) {
            ObjectNode ev = JSON.createObjectNode();
            ev.put("event", "assign");
            ev.put("proc", proc);
            ArrayNode keys = ev.putArray("keys");
            for (int k : new TreeSet<>(tps.stream().map(TopicPartition::partition).toList())) keys.add(k);
            for (TopicPartition tp : tps) consumed.remove(tp);
            emit(ev);
        }
    }
}
