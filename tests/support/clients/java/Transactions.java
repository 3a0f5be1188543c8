// The transactions scenario with the Java client (kafka-clients), run as a single-file program by
// tests/support/clients/runners.py (transactions_java):
//   java -cp <jars> Transactions.java BOOTSTRAP TIMEOUT_MS DATA_TOPIC INPUT_TOPIC GROUP TXN_ID PARTITIONS
// The Java twin of py/transactions.py, which describes the scenario and the JSON printed on stdout: seed
// the input; P1 commits, aborts, commits twice back to back, commits an empty transaction; a group
// consumer of the input sends its offsets to an aborted, then a committed transaction; P2 fences P1; P3
// (a restart) commits, then leaves a transaction open; a read_committed and a read_uncommitted consumer
// read the data topic; P4 aborts the open transaction by its init and commits; both read again.
// Progress goes to stderr.
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class Transactions {
    // Security settings from tests/support/clients/runners.py: $SAMSA_CLIENT_PROPERTIES holds Java client
    // properties (security.protocol, ssl.*, sasl.*), loaded over the program's own.
    static Properties secured(Properties props) {
        String extra = System.getenv("SAMSA_CLIENT_PROPERTIES");
        if (extra != null) {
            try {
                props.load(new java.io.StringReader(extra));
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
        return props;
    }

    static final String CLIENT_ID = "samsa-test-txn-java";
    static final int INPUT_COUNT = 6;
    static final int TXN_RECORDS = 6;
    static final Duration POLL = Duration.ofMillis(200);
    static final long SETTLE_MS = 1500;
    static final int TRANSACTION_TIMEOUT_MS = 60_000;

    static String bootstrap;
    static int opTimeoutMs = 45_000;
    static int partitions;
    static final List<String> txns = new ArrayList<>();
    static int committedCount;
    static int writtenCount;

    static void step(String name) {
        System.err.println("step " + name);
        System.err.flush();
    }

    static String quoted(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }

    /** Every class in the cause chain (ExecutionException, ProducerFencedException, ...) and the last message. */
    static String errorText(Throwable e) {
        List<String> names = new ArrayList<>();
        String message = null;
        for (Throwable t = e; t != null; t = t.getCause()) {
            names.add(t.getClass().getSimpleName());
            if (t.getMessage() != null) {
                message = t.getMessage();
            }
        }
        return String.join(" <- ", names) + ": " + message;
    }

    static KafkaProducer<String, String> producer(String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, CLIENT_ID);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, opTimeoutMs / 2);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, opTimeoutMs);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, opTimeoutMs);
        if (txnId != null) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
            p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, TRANSACTION_TIMEOUT_MS);
        }
        return new KafkaProducer<>(secured(p));
    }

    static List<String[]> recordsOf(String name, int count) {
        List<String[]> records = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            records.add(new String[] {Integer.toString(i % partitions), name + "-" + i});
        }
        return records;
    }

    /** Sends the records (value as key), flushes, returns each one's offset. */
    static List<Long> send(KafkaProducer<String, String> producer, String topic, List<String[]> records)
            throws Exception {
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (String[] r : records) {
            futures.add(producer.send(new ProducerRecord<>(topic, Integer.parseInt(r[0]), r[1], r[1])));
        }
        producer.flush();
        List<Long> offsets = new ArrayList<>();
        for (Future<RecordMetadata> f : futures) {
            RecordMetadata m = f.get();
            offsets.add(m.hasOffset() ? m.offset() : null);
        }
        return offsets;
    }

    static void written(String name, String outcome, List<String[]> records, List<Long> acked) {
        List<String> rows = new ArrayList<>();
        for (int i = 0; i < records.size(); i++) {
            rows.add("[" + records.get(i)[0] + "," + quoted(records.get(i)[1]) + "," + acked.get(i) + "]");
        }
        writtenCount += records.size();
        if (outcome.equals("commit")) {
            committedCount += records.size();
        }
        txns.add("{\"name\":" + quoted(name) + ",\"outcome\":" + quoted(outcome) + ",\"records\":["
            + String.join(",", rows) + "]}");
    }

    static void transaction(KafkaProducer<String, String> producer, String topic, String name, String outcome,
                            int count) throws Exception {
        step(name);
        producer.beginTransaction();
        List<String[]> records = recordsOf(name, count);
        List<Long> acked = records.isEmpty() ? List.of() : send(producer, topic, records);
        if (outcome.equals("commit")) {
            producer.commitTransaction();
        } else {
            producer.abortTransaction();
        }
        written(name, outcome, records, acked);
    }

    static Properties consumerProps(String group, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, CLIENT_ID);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, opTimeoutMs);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, opTimeoutMs);
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        return secured(p);
    }

    static Long committed(KafkaConsumer<String, String> consumer, TopicPartition tp) {
        OffsetAndMetadata m = consumer.committed(Collections.singleton(tp), Duration.ofMillis(opTimeoutMs)).get(tp);
        return m == null ? null : m.offset();
    }

    /** Reads the topic from the beginning without a group: {"records": [[p, offset, value]...], "positions",
     *  "end_offsets"}. */
    static String read(String topic, String isolation, int expected) {
        List<String> out = new ArrayList<>();
        Map<Integer, Long> positions = new TreeMap<>();
        Map<Integer, Long> ends = new TreeMap<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(null, isolation))) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + opTimeoutMs;
            long settle = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(deadline, settle)) {
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    out.add("[" + r.partition() + "," + r.offset() + "," + quoted(r.value()) + "]");
                }
                if (settle == Long.MAX_VALUE && out.size() >= expected) {
                    settle = System.currentTimeMillis() + SETTLE_MS;
                }
            }
            for (TopicPartition tp : tps) {
                positions.put(tp.partition(), consumer.position(tp));
            }
            // ListOffsets at the consumer's isolation level: the last stable offset for read_committed.
            consumer.endOffsets(tps).forEach((tp, o) -> ends.put(tp.partition(), o));
        }
        return "{\"records\":[" + String.join(",", out) + "],\"positions\":" + jsonMap(positions)
            + ",\"end_offsets\":" + jsonMap(ends) + "}";
    }

    static String jsonMap(Map<Integer, Long> map) {
        List<String> entries = new ArrayList<>();
        map.forEach((k, v) -> entries.add("\"" + k + "\":" + v));
        return "{" + String.join(",", entries) + "}";
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        opTimeoutMs = Math.min(opTimeoutMs, Integer.parseInt(args[1]));
        String data = args[2];
        String input = args[3];
        String group = args[4];
        String txnId = args[5];
        partitions = Integer.parseInt(args[6]);

        step("seed");
        try (KafkaProducer<String, String> seeder = producer(null)) {
            List<String[]> seeds = new ArrayList<>();
            for (int i = 0; i < INPUT_COUNT; i++) {
                seeds.add(new String[] {"0", "in-" + i});
            }
            send(seeder, input, seeds);
        }

        step("init P1");
        KafkaProducer<String, String> p1 = producer(txnId);
        p1.initTransactions();
        transaction(p1, data, "commit-1", "commit", TXN_RECORDS);
        transaction(p1, data, "abort-1", "abort", TXN_RECORDS);
        transaction(p1, data, "back-1", "commit", TXN_RECORDS);
        transaction(p1, data, "back-2", "commit", TXN_RECORDS);
        transaction(p1, data, "empty", "commit", 0);

        step("group consumer");
        TopicPartition inputTp = new TopicPartition(input, 0);
        List<Long> inputRead = new ArrayList<>();
        Long afterAbort;
        Long afterCommit;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(group, "read_committed"))) {
            consumer.subscribe(List.of(input));
            long deadline = System.currentTimeMillis() + opTimeoutMs;
            while (inputRead.size() < INPUT_COUNT && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(POLL)) {
                    inputRead.add(r.offset());
                }
            }

            step("offsets-abort");
            p1.beginTransaction();
            List<String[]> records = recordsOf("offsets-abort", INPUT_COUNT / 2);
            List<Long> acked = send(p1, data, records);
            p1.sendOffsetsToTransaction(Map.of(inputTp, new OffsetAndMetadata(INPUT_COUNT / 2)), consumer.groupMetadata());
            p1.abortTransaction();
            written("offsets-abort", "abort", records, acked);
            afterAbort = committed(consumer, inputTp);

            step("offsets-commit");
            p1.beginTransaction();
            records = recordsOf("offsets-commit", INPUT_COUNT);
            acked = send(p1, data, records);
            p1.sendOffsetsToTransaction(Map.of(inputTp, new OffsetAndMetadata(INPUT_COUNT)), consumer.groupMetadata());
            p1.commitTransaction();
            written("offsets-commit", "commit", records, acked);
            // A read_committed consumer asks for stable offsets: the fetch waits out the pending commit.
            deadline = System.currentTimeMillis() + opTimeoutMs;
            afterCommit = committed(consumer, inputTp);
            while ((afterCommit == null || afterCommit != INPUT_COUNT) && System.currentTimeMillis() < deadline) {
                Thread.sleep(200);
                afterCommit = committed(consumer, inputTp);
            }
        }

        step("init P2 (fences P1)");
        KafkaProducer<String, String> p2 = producer(txnId);
        p2.initTransactions();
        String fenced = "null";
        String where = "begin";
        try {
            p1.beginTransaction();
            where = "send";
            send(p1, data, recordsOf("fenced", 3));
            where = "commit";
            p1.commitTransaction();
        } catch (Exception e) {
            fenced = "{\"step\":" + quoted(where) + ",\"error\":" + quoted(errorText(e)) + "}";
        }
        p1.close(Duration.ZERO);
        transaction(p2, data, "fencer-1", "commit", TXN_RECORDS);
        p2.close();

        step("init P3 (restart)");
        KafkaProducer<String, String> p3 = producer(txnId);
        p3.initTransactions();
        transaction(p3, data, "restart-1", "commit", TXN_RECORDS);
        step("crashed");
        p3.beginTransaction();
        List<String[]> crashed = recordsOf("crashed", TXN_RECORDS);
        // Aborted by P4's init: P3 stays as a crash leaves it, its transaction open, until P4 has the id.
        written("crashed", "abort", crashed, send(p3, data, crashed));
        // While it is open, read_committed stops at its first record (the last stable offset).
        step("read_committed (open)");
        String rcOpen = read(data, "read_committed", committedCount);
        step("read_uncommitted (open)");
        String ruOpen = read(data, "read_uncommitted", writtenCount);
        step("init P4 (after the crash)");
        KafkaProducer<String, String> p4 = producer(txnId);
        p4.initTransactions();
        transaction(p4, data, "recovered-1", "commit", TXN_RECORDS);
        p4.close();
        // A forced close does not try to abort (a graceful one would, and be fenced).
        p3.close(Duration.ZERO);

        step("read_committed");
        String rc = read(data, "read_committed", committedCount);
        step("read_uncommitted");
        String ru = read(data, "read_uncommitted", writtenCount);

        String inputs = inputRead.toString().replace(" ", "");
        System.out.println("{\"txns\":[" + String.join(",", txns) + "],"
            + "\"offsets\":{\"input_read\":" + inputs + ",\"after_abort\":" + afterAbort
            + ",\"after_commit\":" + afterCommit + "},"
            + "\"fenced\":" + fenced + ","
            + "\"read_committed\":" + rc + ",\"read_uncommitted\":" + ru + ","
            + "\"read_committed_open\":" + rcOpen + ",\"read_uncommitted_open\":" + ruOpen + ",\"notes\":[]}");
    }
}
