// Client quotas with the Java AdminClient against args[0] (args[1]: timeout in ms): set producer_byte_rate
// and request_percentage on <user args[2], default client-id>, consumer_byte_rate on client-id args[3],
// validate-only an alteration, try a non-integral byte rate, describe user args[2]'s entities, then
// remove the client's quota. Prints one JSON object with what each step saw; a failure goes to stderr
// with a non-zero exit.
//   java -cp <kafka-clients and its jars> ClientQuotasAdmin.java host:port timeout_ms user client
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

public class ClientQuotasAdmin {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int timeoutMs = Integer.parseInt(args[1]);
        String user = args[2];
        String client = args[3];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "samsa-test-java-quotas-admin");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, timeoutMs);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeoutMs);
        try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(props)) {
            Map<String, String> userDefaultClient = new HashMap<>();
            userDefaultClient.put(ClientQuotaEntity.USER, user);
            userDefaultClient.put(ClientQuotaEntity.CLIENT_ID, null);
            ClientQuotaEntity pair = new ClientQuotaEntity(userDefaultClient);
            ClientQuotaEntity clientEntity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, client));
            admin.alterClientQuotas(List.of(
                new ClientQuotaAlteration(pair, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0),
                    new ClientQuotaAlteration.Op("request_percentage", 150.5))),
                new ClientQuotaAlteration(clientEntity, List.of(
                    new ClientQuotaAlteration.Op("consumer_byte_rate", 2048.0)))))
                .all().get(timeoutMs, TimeUnit.MILLISECONDS);
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(clientEntity, List.of(
                    new ClientQuotaAlteration.Op("consumer_byte_rate", 1.0)))),
                new AlterClientQuotasOptions().validateOnly(true)).all().get(timeoutMs, TimeUnit.MILLISECONDS);
            String invalid = "";
            try {
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(clientEntity, List.of(
                        new ClientQuotaAlteration.Op("producer_byte_rate", 1.5)))))
                    .all().get(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (ExecutionException e) {
                invalid = e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage();
            }
            Map<ClientQuotaEntity, Map<String, Double>> ofUser = admin.describeClientQuotas(
                    ClientQuotaFilter.contains(List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user))))
                .entities().get(timeoutMs, TimeUnit.MILLISECONDS);
            Map<ClientQuotaEntity, Map<String, Double>> clientsBefore = admin.describeClientQuotas(
                    ClientQuotaFilter.containsOnly(List.of(ClientQuotaFilterComponent.ofEntityType(ClientQuotaEntity.CLIENT_ID))))
                .entities().get(timeoutMs, TimeUnit.MILLISECONDS);
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(clientEntity, List.of(
                    new ClientQuotaAlteration.Op("consumer_byte_rate", null)))))
                .all().get(timeoutMs, TimeUnit.MILLISECONDS);
            Map<ClientQuotaEntity, Map<String, Double>> clientsAfter = admin.describeClientQuotas(
                    ClientQuotaFilter.containsOnly(List.of(ClientQuotaFilterComponent.ofEntityType(ClientQuotaEntity.CLIENT_ID))))
                .entities().get(timeoutMs, TimeUnit.MILLISECONDS);
            System.out.println("{\"of_user\":" + json(ofUser) + ",\"clients_before\":" + json(clientsBefore)
                + ",\"clients_after\":" + json(clientsAfter) + ",\"invalid\":\"" + invalid.replace("\"", "'") + "\"}");
        }
    }

    // [{"entity":{"user":"alice","client-id":null},"values":{"producer_byte_rate":1048576.0}}, ...] sorted.
    static String json(Map<ClientQuotaEntity, Map<String, Double>> found) {
        List<String> items = new ArrayList<>();
        for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : found.entrySet()) {
            StringBuilder out = new StringBuilder("{\"entity\":{");
            List<String> parts = new ArrayList<>();
            for (Map.Entry<String, String> p : new TreeMap<>(e.getKey().entries()).entrySet())
                parts.add("\"" + p.getKey() + "\":" + (p.getValue() == null ? "null" : "\"" + p.getValue() + "\""));
            out.append(String.join(",", parts)).append("},\"values\":{");
            parts = new ArrayList<>();
            for (Map.Entry<String, Double> v : new TreeMap<>(e.getValue()).entrySet())
                parts.add("\"" + v.getKey() + "\":" + v.getValue());
            out.append(String.join(",", parts)).append("}}");
            items.add(out.toString());
        }
        Collections.sort(items);
        return "[" + String.join(",", items) + "]";
    }
}
