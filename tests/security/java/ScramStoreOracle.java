import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.security.scram.internals.ScramCredentialUtils;
import org.apache.kafka.common.security.scram.internals.ScramFormatter;

/**
 * Kafka's own Admin client managing SCRAM credentials on an odradek broker, and Kafka's own
 * ScramFormatter / ScramCredentialUtils giving the credential string a broker must store.
 *
 *   ScramStoreOracle <bootstrap> [<sasl bootstrap>]
 *
 * prints one line per step: "alter <user> ok|<exception>", "describe <user> <mech> <iterations>",
 * "describe-one <user> ok|<exception>", "credential <ScramCredentialUtils string>" for
 * alice's SCRAM-SHA-256 credential (salt SALT, password alice-secret, 8192 iterations), and with
 * a SASL bootstrap "login <user> ok|<exception>" for a SCRAM-SHA-256 Admin client there.
 */
public class ScramStoreOracle {
    static final byte[] SALT = "java-fixed-salt".getBytes(StandardCharsets.UTF_8);

    static Admin admin(String bootstrap, Properties extra) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        props.putAll(extra);
        return Admin.create(props);
    }

    static String outcome(KafkaFuture<?> future) throws InterruptedException {
        try {
            future.get();
            return "ok";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        }
    }

    static void alter(Admin admin, List<UserScramCredentialAlteration> alterations)
            throws InterruptedException {
        Map<String, KafkaFuture<Void>> values =
            new TreeMap<>(admin.alterUserScramCredentials(alterations).values());
        for (Map.Entry<String, KafkaFuture<Void>> e : values.entrySet()) {
            System.out.println("alter " + e.getKey() + " " + outcome(e.getValue()));
        }
    }

    public static void main(String[] args) throws Exception {
        try (Admin admin = admin(args[0], new Properties())) {
            alter(admin, Arrays.asList(
                new UserScramCredentialUpsertion("alice",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                    "alice-secret".getBytes(StandardCharsets.UTF_8), SALT),
                new UserScramCredentialUpsertion("bob",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "bob-secret")));
            // two changes of one user in one request: Kafka's controller refuses both
            alter(admin, Arrays.asList(
                new UserScramCredentialUpsertion("carol",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "x"),
                new UserScramCredentialUpsertion("carol",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "x")));
            alter(admin, Arrays.asList(
                new UserScramCredentialUpsertion("dave",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), "x")));
            alter(admin, Collections.singletonList(
                new UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_256)));
            alter(admin, Collections.singletonList(
                new UserScramCredentialUpsertion("bob",
                    new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "bob-secret")));
            alter(admin, Collections.singletonList(
                new UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)));

            Map<String, UserScramCredentialsDescription> all =
                new TreeMap<>(admin.describeUserScramCredentials().all().get());
            for (UserScramCredentialsDescription d : all.values()) {
                List<String> lines = new ArrayList<>();
                for (ScramCredentialInfo info : d.credentialInfos()) {
                    lines.add("describe " + d.name() + " " + info.mechanism().mechanismName()
                        + " " + info.iterations());
                }
                Collections.sort(lines);
                lines.forEach(System.out::println);
            }
            var some = admin.describeUserScramCredentials(Arrays.asList("alice", "nobody"));
            System.out.println("describe-one alice " + outcome(some.description("alice")));
            System.out.println("describe-one nobody " + outcome(some.description("nobody")));
        }

        org.apache.kafka.common.security.scram.internals.ScramMechanism mech =
            org.apache.kafka.common.security.scram.internals.ScramMechanism.SCRAM_SHA_256;
        ScramFormatter formatter = new ScramFormatter(mech);
        byte[] salted = formatter.saltedPassword("alice-secret", SALT, 8192);
        System.out.println("credential "
            + ScramCredentialUtils.credentialToString(formatter.generateCredential(SALT, salted, 8192)));

        if (args.length > 1) {
            for (String[] login : new String[][] {{"alice", "alice-secret"}, {"alice", "wrong"}}) {
                Properties sasl = new Properties();
                sasl.put("security.protocol", "SASL_PLAINTEXT");
                sasl.put("sasl.mechanism", "SCRAM-SHA-256");
                sasl.put("sasl.jaas.config",
                    "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                    + login[0] + "\" password=\"" + login[1] + "\";");
                try (Admin client = admin(args[1], sasl)) {
                    System.out.println("login " + login[0] + ":" + login[1] + " "
                        + outcome(client.describeCluster().clusterId()));
                }
            }
        }
    }
}
