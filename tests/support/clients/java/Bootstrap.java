// Bootstrap check with the Java client: AdminClient describeCluster() and listTopics() against args[0]
// ("host:port"), with args[1] as the timeout in ms. Prints one JSON object on stdout; a failure goes to
// stderr with a non-zero exit. Run as a single-file program:
//   java -cp <kafka-clients and its jars> Bootstrap.java host:port [timeout_ms]
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.common.Node;

public class Bootstrap {
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
        int timeoutMs = args.length > 1 ? Integer.parseInt(args[1]) : 30000;
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "samsa-test-java");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, timeoutMs);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeoutMs);
        try (Admin admin = Admin.create(secured(props))) {
            DescribeClusterResult cluster = admin.describeCluster();
            String clusterId = cluster.clusterId().get(timeoutMs, TimeUnit.MILLISECONDS);
            Node controller = cluster.controller().get(timeoutMs, TimeUnit.MILLISECONDS);
            Collection<Node> nodes = cluster.nodes().get(timeoutMs, TimeUnit.MILLISECONDS);
            TreeSet<String> topics = new TreeSet<>(admin.listTopics().names().get(timeoutMs, TimeUnit.MILLISECONDS));

            List<String> brokers = new ArrayList<>();
            for (Node n : nodes) {
                brokers.add("{\"node_id\":" + n.id() + ",\"host\":" + quote(n.host()) + ",\"port\":" + n.port() + "}");
            }
            List<String> names = new ArrayList<>();
            for (String t : topics) {
                names.add(quote(t));
            }
            System.out.println("{\"cluster_id\":" + quote(clusterId)
                + ",\"controller_id\":" + (controller == null || controller.isEmpty() ? "null" : controller.id())
                + ",\"brokers\":[" + String.join(",", brokers) + "]"
                + ",\"topics\":[" + String.join(",", names) + "]}");
        }
    }

    // Minimal JSON string encoding: the values are host names, ids and topic names.
    static String quote(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
