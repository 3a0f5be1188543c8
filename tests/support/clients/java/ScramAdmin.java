// SCRAM credentials with the Java AdminClient against args[0] (args[1]: timeout in ms): upsert args[2]'s
// SCRAM-SHA-256 credential (8192 iterations, password args[3]), describe it, try an upsertion with too few
// iterations, describe a user that does not exist. Prints one JSON object with what each step saw; a
// failure goes to stderr with a non-zero exit.
//   java -cp <kafka-clients and its jars> ScramAdmin.java host:port timeout_ms user password
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;

public class ScramAdmin {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int timeoutMs = Integer.parseInt(args[1]);
        String user = args[2];
        byte[] password = args[3].getBytes(java.nio.charset.StandardCharsets.UTF_8);
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "samsa-test-java-scram-admin");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, timeoutMs);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, timeoutMs);
        try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(props)) {
            admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), password)))
                .all().get(timeoutMs, TimeUnit.MILLISECONDS);
            UserScramCredentialsDescription described = admin.describeUserScramCredentials(List.of(user))
                .description(user).get(timeoutMs, TimeUnit.MILLISECONDS);
            ScramCredentialInfo info = described.credentialInfos().get(0);
            String tooFew = "";
            try {
                admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                    user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 100), password)))
                    .all().get(timeoutMs, TimeUnit.MILLISECONDS);
            } catch (ExecutionException e) {
                tooFew = e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage();
            }
            List<String> missing = admin.describeUserScramCredentials(List.of("nobody-" + user))
                .users().get(timeoutMs, TimeUnit.MILLISECONDS);
            System.out.println("{\"mechanism\":\"" + info.mechanism().mechanismName() + "\",\"iterations\":"
                + info.iterations() + ",\"too_few\":\"" + tooFew + "\",\"missing_listed\":" + missing.size() + "}");
        }
    }
}
