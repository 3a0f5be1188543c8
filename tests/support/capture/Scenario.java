// Capture scenario for the Java client (kafka-clients): a broad walk over the APIs it has (see
// scen_python.py for the protocol: `VERSION ...`, then `OK|FAIL|SKIP step detail` lines).
// Usage: java -cp <kafka-clients and its jars> Scenario.java BOOTSTRAP
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DeleteRecordsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;

public class Scenario {
    static final String TOPIC = "vec-java";
    static final String GROUP = "vec-java-grp";
    static final byte[] PAYLOAD = "samsa-vector samsa-vector samsa-vector samsa-vector samsa-vector ".getBytes();
    // Tansu's first rebalance waits about the rebalance timeout; keep it short.
    static final int GROUP_TIMEOUT_MS = 10000;
    static final long WAIT_S = 20;

    static void report(String status, String name, Object detail) {
        String text = String.valueOf(detail).replaceAll("\\s+", " ");
        System.out.println(status + " " + name + " " + (text.length() > 200 ? text.substring(0, 200) : text));
        System.out.flush();
    }

    static boolean step(String name, Callable<Object> fn) {
        try {
            report("OK", name, fn.call());
            return true;
        } catch (Exception e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            report("FAIL", name, cause.getClass().getSimpleName() + ": " + cause.getMessage());
            return false;
        }
    }

    static Properties base(String bootstrap, String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        p.put("request.timeout.ms", 10000);
        return p;
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String clientId, Map<String, Object> extra) {
        Properties p = base(bootstrap, clientId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 20000);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 15000);
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    static ProducerRecord<byte[], byte[]> keyed(int i, Integer partition, byte[] value) {
        ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(TOPIC, partition, ("k" + i).getBytes(), value);
        r.headers().add(new RecordHeader("trace", "t-1".getBytes())).add(new RecordHeader("empty", new byte[0]));
        return r;
    }

    static Object produce(KafkaProducer<byte[], byte[]> producer, int n, Integer partition, byte[] value) throws Exception {
        List<Object> offsets = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            offsets.add(producer.send(keyed(i, partition, value != null ? value : ("v" + i).getBytes()))
                .get(WAIT_S, TimeUnit.SECONDS).offset());
        }
        return offsets;
    }

    @SuppressWarnings("deprecation")
    static Object legacyAlterConfigs(Admin admin, ConfigResource topic) throws Exception {
        return admin.alterConfigs(Map.of(topic, new Config(List.of(new ConfigEntry("retention.ms", "600000")))))
            .all().get(WAIT_S, TimeUnit.SECONDS);
    }

    public static void main(String[] args) throws Exception {
        String bs = args[0];
        System.out.println("VERSION kafka-clients (Java) " + AppInfoParser.getVersion());
        Properties adminProps = base(bs, "vec-admin");
        adminProps.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 15000);
        Admin admin = Admin.create(adminProps);
        ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, TOPIC);
        TopicPartition tp0 = new TopicPartition(TOPIC, 0);

        step("create_topics", () -> admin.createTopics(List.of(new NewTopic(TOPIC, 3, (short) 1)))
            .all().get(WAIT_S, TimeUnit.SECONDS));
        step("create_partitions", () -> admin.createPartitions(Map.of(TOPIC, NewPartitions.increaseTo(4)))
            .all().get(WAIT_S, TimeUnit.SECONDS));
        step("describe_configs", () -> admin.describeConfigs(List.of(topicResource)).all().get(WAIT_S, TimeUnit.SECONDS));
        step("incremental_alter_configs", () -> admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
            new AlterConfigOp(new ConfigEntry("retention.ms", "600000"), AlterConfigOp.OpType.SET))))
            .all().get(WAIT_S, TimeUnit.SECONDS));
        step("alter_configs", () -> legacyAlterConfigs(admin, topicResource));
        step("describe_cluster", () -> admin.describeCluster().nodes().get(WAIT_S, TimeUnit.SECONDS));
        step("list_topics", () -> admin.listTopics().names().get(WAIT_S, TimeUnit.SECONDS));
        step("describe_topics", () -> admin.describeTopics(List.of(TOPIC)).allTopicNames().get(WAIT_S, TimeUnit.SECONDS));

        try (KafkaProducer<byte[], byte[]> p = producer(bs, "vec-produce", Map.of("enable.idempotence", false, "acks", "1"))) {
            step("produce", () -> produce(p, 5, null, null));
        }
        for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
            try (KafkaProducer<byte[], byte[]> p = producer(bs, "vec-" + codec,
                    Map.of("enable.idempotence", false, "compression.type", codec, "linger.ms", 20))) {
                step("produce_" + codec, () -> {
                    List<java.util.concurrent.Future<?>> futures = new ArrayList<>();
                    for (int i = 0; i < 5; i++) {
                        futures.add(p.send(keyed(i, 0, PAYLOAD)));
                    }
                    for (java.util.concurrent.Future<?> f : futures) {
                        f.get(WAIT_S, TimeUnit.SECONDS);
                    }
                    return futures.size();
                });
            }
        }
        try (KafkaProducer<byte[], byte[]> p = producer(bs, "vec-idempotent", Map.of("enable.idempotence", true))) {
            step("produce_idempotent", () -> produce(p, 5, null, null));
        }
        try (KafkaProducer<byte[], byte[]> p = producer(bs, "vec-txn", Map.of("transactional.id", "vec-java-tx"))) {
            if (step("txn_init", () -> { p.initTransactions(); return null; })) {
                step("txn", () -> {
                    p.beginTransaction();
                    p.send(new ProducerRecord<>(TOPIC, 1, "t".getBytes(), "txn".getBytes())).get(WAIT_S, TimeUnit.SECONDS);
                    p.sendOffsetsToTransaction(Map.of(tp0, new OffsetAndMetadata(1)), new ConsumerGroupMetadata(GROUP + "-tx"));
                    p.commitTransaction();
                    return null;
                });
            }
        }

        Properties cp = base(bs, "vec-consumer");
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, GROUP);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, GROUP_TIMEOUT_MS);
        cp.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, GROUP_TIMEOUT_MS);
        cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 1000);
        cp.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 15000);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of(TOPIC));
            step("consume_commit", () -> {
                int got = 0;
                long deadline = System.currentTimeMillis() + 40000;
                while (got < 10 && System.currentTimeMillis() < deadline) {
                    got += c.poll(Duration.ofSeconds(1)).count();
                }
                c.commitSync(Duration.ofSeconds(WAIT_S));
                return got;
            });
            step("committed", () -> c.committed(Set.of(tp0)));
            step("offsets_for_times", () -> c.offsetsForTimes(Map.of(tp0, 0L)));
            step("beginning_offsets", () -> c.beginningOffsets(List.of(tp0)));
            step("end_offsets", () -> c.endOffsets(List.of(tp0)));
        }

        step("list_groups", () -> admin.listConsumerGroups().all().get(WAIT_S, TimeUnit.SECONDS));
        step("describe_groups", () -> admin.describeConsumerGroups(List.of(GROUP)).all().get(WAIT_S, TimeUnit.SECONDS));
        step("list_group_offsets", () -> admin.listConsumerGroupOffsets(GROUP).partitionsToOffsetAndMetadata()
            .get(WAIT_S, TimeUnit.SECONDS));
        step("alter_group_offsets", () -> admin.alterConsumerGroupOffsets(GROUP, Map.of(tp0, new OffsetAndMetadata(2)))
            .all().get(WAIT_S, TimeUnit.SECONDS));
        step("list_offsets", () -> admin.listOffsets(Map.of(
                tp0, OffsetSpec.earliest(),
                new TopicPartition(TOPIC, 1), OffsetSpec.latest(),
                new TopicPartition(TOPIC, 2), OffsetSpec.forTimestamp(0)))
            .all().get(WAIT_S, TimeUnit.SECONDS));
        step("list_offsets_max_timestamp", () -> admin.listOffsets(Map.of(tp0, OffsetSpec.maxTimestamp()))
            .all().get(WAIT_S, TimeUnit.SECONDS));
        // Tansu drops the connection on DeleteRecords; the request is on the wire before that.
        step("delete_records", () -> admin.deleteRecords(Map.of(tp0, RecordsToDelete.beforeOffset(1)),
                new DeleteRecordsOptions().timeoutMs(5000))
            .all().get(8, TimeUnit.SECONDS));
        step("delete_groups", () -> admin.deleteConsumerGroups(List.of(GROUP + "-tx")).all().get(WAIT_S, TimeUnit.SECONDS));
        step("delete_topics", () -> admin.deleteTopics(List.of(TOPIC)).all().get(WAIT_S, TimeUnit.SECONDS));
        admin.close(Duration.ofSeconds(5));
    }
}
