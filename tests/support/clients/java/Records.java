// Produce and consume with the Java client, run as a single-file program by tests/support/clients/runners.py (see
// tests/support/clients/py/records.py for the input file and the JSON printed on stdout). Usage:
//   java -cp <jars> Records.java HOST:PORT TIMEOUT_MS produce TOPIC CODEC ACKS IDEMPOTENT INPUT
//   java -cp <jars> Records.java HOST:PORT TIMEOUT_MS consume TOPIC PARTITIONS EXPECTED
//   java -cp <jars> Records.java HOST:PORT TIMEOUT_MS consume-group TOPIC GROUP EXPECTED
// consume-group subscribes in GROUP (earliest where it has no offset), commits what it read (commitSync)
// and closes, leaving the group. Security settings: $SAMSA_CLIENT_PROPERTIES (see secured()).
// Every string in the output is base64, so the JSON needs no escaping.
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Records {
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

    static final String CLIENT_ID = "samsa-test-java";
    static final int LINGER_MS = 10;
    static final int BATCH_BYTES = 128 * 1024;
    static final Duration POLL = Duration.ofMillis(200);

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int timeoutMs = Integer.parseInt(args[1]);
        String mode = args[2];
        String topic = args[3];
        long started = System.nanoTime();
        String result = mode.equals("produce")
            ? produce(bootstrap, timeoutMs, topic, args[4], args[5], args[6].equals("1"), Path.of(args[7]))
            : consume(bootstrap, timeoutMs, topic, mode.equals("consume-group") ? args[4] : null,
                mode.equals("consume-group") ? 0 : Integer.parseInt(args[4]), Integer.parseInt(args[5]));
        double seconds = (System.nanoTime() - started) / 1e9;
        System.out.println("{" + result + ",\"seconds\":" + seconds + "}");
    }

    static String produce(String bootstrap, int timeoutMs, String topic, String codec, String acks,
                          boolean idempotent, Path input) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, CLIENT_ID);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, acks.equals("-1") ? "all" : acks);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.LINGER_MS_CONFIG, LINGER_MS);
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, BATCH_BYTES);
        // The Java client turns idempotence on by default since 3.0: say it either way.
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, idempotent);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, timeoutMs / 2);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, timeoutMs);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, timeoutMs);

        List<String> lines = Files.readAllLines(input, StandardCharsets.UTF_8);
        String[] acked = new String[lines.size()];
        AtomicReference<Exception> failure = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(secured(p))) {
            for (int i = 0; i < lines.size(); i++) {
                String[] f = lines.get(i).split("\t", -1);
                ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(
                    topic, null, Long.parseLong(f[2]), bytes(f[0]), bytes(f[1]));
                for (int h = 3; h + 1 < f.length; h += 2) {
                    record.headers().add(f[h], bytes(f[h + 1]));
                }
                int line = i;
                producer.send(record, (metadata, e) -> {
                    if (e != null) {
                        failure.compareAndSet(null, e);
                    } else {
                        acked[line] = "[" + line + "," + metadata.partition() + ","
                            + (metadata.hasOffset() ? Long.toString(metadata.offset()) : "null") + "]";
                    }
                });
            }
            producer.flush();
        }
        if (failure.get() != null) {
            throw failure.get();
        }
        return "\"acks\":[" + String.join(",", acked) + "]";
    }

    static String consume(String bootstrap, int timeoutMs, String topic, String group, int partitions,
                          int expected) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, CLIENT_ID);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, timeoutMs);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeoutMs);
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        List<String> out = new ArrayList<>();
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(secured(p))) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) {
                tps.add(new TopicPartition(topic, i));
            }
            if (group == null) {
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
            } else {
                consumer.subscribe(List.of(topic));
            }
            while (out.size() < expected && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(POLL)) {
                    List<String> headers = new ArrayList<>();
                    for (Header h : r.headers()) {
                        headers.add("[" + b64(bytes(h.key())) + "," + b64(h.value()) + "]");
                    }
                    out.add("[" + r.partition() + "," + r.offset() + "," + r.timestamp() + "," + b64(r.key())
                        + "," + b64(r.value()) + ",[" + String.join(",", headers) + "]]");
                    next.put(new TopicPartition(topic, r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
            }
            if (group != null && !next.isEmpty()) {
                consumer.commitSync(next);
            }
        }
        return "\"records\":[" + String.join(",", out) + "]";
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String b64(byte[] data) {
        return data == null ? "null" : "\"" + Base64.getEncoder().encodeToString(data) + "\"";
    }
}
