// One Java KafkaConsumer group member against args[0] (args[1]: timeout in ms), for the consumer-group tests:
//   java -cp <kafka-clients and its jars> GroupMember.java BOOTSTRAP TIMEOUT_MS TOPIC GROUP SESSION_MS
// It subscribes to TOPIC (from the earliest offset where the group has none) and, without auto-commit,
// commits each polled batch synchronously after "processing" it (printing its records). One JSON object
// per stdout line, each with "ts" (epoch ms):
//   {"event": "assigned", "member": ID, "generation": G, "partitions": [...]}  after each rebalance
//   {"event": "revoked", "partitions": [...]}
//   {"event": "record", "partition": P, "offset": O}
//   {"event": "committed", "partition": P, "offset": O}      a commit that succeeded (O: next to read)
//   {"event": "commit_failed", "error": "..."}
//   {"event": "closed"}                                       after close(), which leaves the group
// A line "close" on stdin (or its end) closes the consumer.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class GroupMember {
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

    static final int HEARTBEAT_MS = 500;
    static final int MAX_POLL_INTERVAL_MS = 30_000;

    static void emit(String event, String fields) {
        String json = "{\"event\":\"" + event + "\",\"ts\":" + System.currentTimeMillis()
            + (fields.isEmpty() ? "" : "," + fields) + "}";
        synchronized (System.out) {
            System.out.println(json);
            System.out.flush();
        }
    }

    static String partitions(Collection<TopicPartition> assigned) {
        List<Integer> numbers = new ArrayList<>();
        for (TopicPartition tp : assigned) {
            numbers.add(tp.partition());
        }
        Collections.sort(numbers);
        return "\"partitions\":" + numbers;
    }

    static String quoted(String text) {
        return "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", " ") + "\"";
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int timeoutMs = Integer.parseInt(args[1]);
        String topic = args[2];
        String group = args[3];
        int sessionMs = Integer.parseInt(args[4]);
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "samsa-test-java-group");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, sessionMs);
        props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, HEARTBEAT_MS);
        props.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, MAX_POLL_INTERVAL_MS);
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, timeoutMs);
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeoutMs);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());

        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(secured(props));
        final boolean[] closing = {false};
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("close")) {
                    // only "close" means anything
                }
            } catch (Exception e) {
                // the test went away: close as well
            }
            synchronized (closing) {
                closing[0] = true;
            }
            consumer.wakeup();
        });
        stdin.setDaemon(true);
        stdin.start();

        consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                emit("revoked", partitions(revoked));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
                emit("assigned", "\"member\":" + quoted(consumer.groupMetadata().memberId())
                    + ",\"generation\":" + consumer.groupMetadata().generationId() + "," + partitions(assigned));
            }
        });
        while (true) {
            synchronized (closing) {
                if (closing[0]) {
                    break;
                }
            }
            try {
                Map<TopicPartition, OffsetAndMetadata> commits = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(100))) {
                    emit("record", "\"partition\":" + record.partition() + ",\"offset\":" + record.offset());
                    commits.put(new TopicPartition(record.topic(), record.partition()),
                        new OffsetAndMetadata(record.offset() + 1));
                }
                if (commits.isEmpty()) {
                    continue;
                }
                try {
                    consumer.commitSync(commits);
                } catch (WakeupException e) {
                    throw e;
                } catch (KafkaException e) {
                    emit("commit_failed", "\"error\":" + quoted(e.toString()));
                    continue;
                }
                for (Map.Entry<TopicPartition, OffsetAndMetadata> c : commits.entrySet()) {
                    emit("committed", "\"partition\":" + c.getKey().partition() + ",\"offset\":" + c.getValue().offset());
                }
            } catch (WakeupException e) {
                // closing
            }
        }
        consumer.close();
        emit("closed", "");
    }
}
