// Topic administration with the Java AdminClient against args[0] (args[1]: timeout in ms): create args[2]
// with 3 partitions and retention.ms=3600000, describe it and its config, grow it to 5 partitions, delete
// it. Prints one JSON object with what each step saw; a failure goes to stderr with a non-zero exit.
//   java -cp <kafka-clients and its jars> Admin.java host:port timeout_ms topic
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

public class Admin {
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

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int timeoutMs = Integer.parseInt(args[1]);
        String topic = args[2];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "samsa-test-java-admin");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, timeoutMs);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeoutMs);
        try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(secured(props))) {
            NewTopic newTopic = new NewTopic(topic, 3, (short) 1).configs(Map.of("retention.ms", "3600000"));
            admin.createTopics(List.of(newTopic)).all().get(timeoutMs, TimeUnit.MILLISECONDS);
            boolean listed = admin.listTopics().names().get(timeoutMs, TimeUnit.MILLISECONDS).contains(topic);
            TopicDescription described = admin.describeTopics(List.of(topic)).allTopicNames()
                .get(timeoutMs, TimeUnit.MILLISECONDS).get(topic);
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = admin.describeConfigs(List.of(resource)).all()
                .get(timeoutMs, TimeUnit.MILLISECONDS).get(resource);
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all()
                .get(timeoutMs, TimeUnit.MILLISECONDS);
            int grown = admin.describeTopics(List.of(topic)).allTopicNames()
                .get(timeoutMs, TimeUnit.MILLISECONDS).get(topic).partitions().size();
            admin.deleteTopics(List.of(topic)).all().get(timeoutMs, TimeUnit.MILLISECONDS);
            boolean remaining = admin.listTopics().names().get(timeoutMs, TimeUnit.MILLISECONDS).contains(topic);
            StringBuilder leaders = new StringBuilder();
            for (TopicPartitionInfo p : described.partitions()) {
                leaders.append(leaders.length() == 0 ? "" : ",").append(p.leader() == null ? -1 : p.leader().id());
            }
            System.out.println("{\"created\":true,\"listed\":" + listed
                + ",\"partitions\":" + described.partitions().size()
                + ",\"leaders\":[" + leaders + "]"
                + ",\"retention_ms\":\"" + config.get("retention.ms").value() + "\""
                + ",\"partitions_after_growth\":" + grown
                + ",\"listed_after_delete\":" + remaining + "}");
        }
    }
}
