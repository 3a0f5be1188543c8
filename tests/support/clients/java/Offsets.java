// ListOffsets, OffsetCommit and OffsetFetch with the Java clients against args[0] (args[1]: timeout in ms),
// for tests/integration/test_offsets_parity.py:
//   java -cp <kafka-clients and its jars> Offsets.java BOOTSTRAP TIMEOUT_MS TOPIC GROUP
// The AdminClient lists partition 0 of TOPIC at every OffsetSpec (earliest, latest, maxTimestamp,
// earliestLocal, latestTiered); a KafkaConsumer of GROUP (assigned, not subscribed) commits offset 2 with
// metadata "java-md" and reads it back, and looks up offsetsForTimes(0). Prints one JSON object, with
// the client's latest version of each API (the version used is the lower of it and the broker's).
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class Offsets {
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

    static String listed(org.apache.kafka.clients.admin.Admin admin, TopicPartition tp, OffsetSpec spec, int timeoutMs)
            throws Exception {
        ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, spec)).partitionResult(tp)
            .get(timeoutMs, TimeUnit.MILLISECONDS);
        return "{\"offset\":" + info.offset() + ",\"timestamp\":" + info.timestamp()
            + ",\"leader_epoch\":" + info.leaderEpoch().orElse(-1) + "}";
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int timeoutMs = Integer.parseInt(args[1]);
        String topic = args[2];
        String group = args[3];
        TopicPartition tp = new TopicPartition(topic, 0);
        StringBuilder out = new StringBuilder("{");
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, timeoutMs);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeoutMs);
        try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(secured(props))) {
            out.append("\"earliest\":").append(listed(admin, tp, OffsetSpec.earliest(), timeoutMs));
            out.append(",\"latest\":").append(listed(admin, tp, OffsetSpec.latest(), timeoutMs));
            out.append(",\"max_timestamp\":").append(listed(admin, tp, OffsetSpec.maxTimestamp(), timeoutMs));
            out.append(",\"earliest_local\":").append(listed(admin, tp, OffsetSpec.earliestLocal(), timeoutMs));
            out.append(",\"latest_tiered\":").append(listed(admin, tp, OffsetSpec.latestTiered(), timeoutMs));
        }
        Properties consumerProps = new Properties();
        consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerProps.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        consumerProps.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeoutMs);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(secured(consumerProps))) {
            consumer.assign(List.of(tp));
            Duration timeout = Duration.ofMillis(timeoutMs);
            consumer.commitSync(Map.of(tp, new OffsetAndMetadata(2, "java-md")), timeout);
            OffsetAndMetadata committed = consumer.committed(Set.of(tp), timeout).get(tp);
            OffsetAndTimestamp byTime = consumer.offsetsForTimes(Map.of(tp, 0L), timeout).get(tp);
            out.append(",\"committed\":{\"offset\":").append(committed.offset())
                .append(",\"metadata\":\"").append(committed.metadata()).append("\"}");
            out.append(",\"by_time\":").append(byTime == null ? -1 : byTime.offset());
        }
        out.append(",\"client_versions\":{\"list_offsets\":").append(ApiKeys.LIST_OFFSETS.latestVersion())
            .append(",\"offset_commit\":").append(ApiKeys.OFFSET_COMMIT.latestVersion())
            .append(",\"offset_fetch\":").append(ApiKeys.OFFSET_FETCH.latestVersion())
            .append(",\"find_coordinator\":").append(ApiKeys.FIND_COORDINATOR.latestVersion())
            .append("}}");
        System.out.println(out);
    }
}
