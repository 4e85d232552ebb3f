// What Kafka's own client and classes (kafka-clients 3.9) do, for tests/security/test_sasl_java.py.
//
// SaslOracle clients <bootstrap>
//   stdin: one case a line, "<client id>\t<mechanism>\t<sasl.jaas.config>"; every case gets an
//   Admin client (SASL_PLAINTEXT) calling describeCluster at once; prints per case
//   "<client id>\tERR\t<exception class>\t<message>" when authentication failed, else
//   "<client id>\tDONE" (the test listener ends the connection after authentication).
// SaslOracle dn
//   stdin: PEM certificate paths -> X500Principal.getName() of each subject (RFC 2253).
// SaslOracle map
//   stdin: "<rules>\t<dn>" -> SslPrincipalMapper.fromRules(rules).getName(dn), or "ERR <class>".
// SaslOracle jaas
//   stdin: Base64 of a sasl.jaas.config value -> "<module>\t<flag>\t<key>=<value>\t..." (keys
//   sorted, values Base64) as JaasContext.loadClientContext reads it, or "ERR <message>".
import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import javax.security.auth.login.AppConfigurationEntry;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.config.types.Password;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.security.JaasContext;
import org.apache.kafka.common.security.ssl.SslPrincipalMapper;

public class SaslOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<String> lines = new ArrayList<>();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (!line.isEmpty()) lines.add(line);
        }
        switch (args[0]) {
            case "clients": clients(args[1], lines); break;
            case "dn": dn(lines); break;
            case "map": map(lines); break;
            case "jaas": jaas(lines); break;
            default: throw new IllegalArgumentException(args[0]);
        }
        System.out.flush();
        System.exit(0);
    }

    static void clients(String bootstrap, List<String> cases) throws Exception {
        List<Admin> admins = new ArrayList<>();
        List<KafkaFuture<String>> futures = new ArrayList<>();
        for (String line : cases) {
            String[] f = line.split("\t", 3);
            Properties props = new Properties();
            props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(AdminClientConfig.CLIENT_ID_CONFIG, f[0]);
            props.put("security.protocol", "SASL_PLAINTEXT");
            props.put("sasl.mechanism", f[1]);
            props.put("sasl.jaas.config", f[2]);
            props.put("reconnect.backoff.ms", "10000");
            props.put("reconnect.backoff.max.ms", "10000");
            Admin admin = Admin.create(props);
            admins.add(admin);
            futures.add(admin.describeCluster(new DescribeClusterOptions().timeoutMs(4000)).clusterId());
        }
        for (int i = 0; i < cases.size(); i++) {
            String id = cases.get(i).split("\t", 2)[0];
            try {
                futures.get(i).get(6, TimeUnit.SECONDS);
                System.out.println(id + "\tDONE");
            } catch (ExecutionException e) {
                Throwable cause = e.getCause();
                if (cause instanceof AuthenticationException) {
                    System.out.println(id + "\tERR\t" + cause.getClass().getSimpleName() + "\t" + cause.getMessage());
                } else {
                    System.out.println(id + "\tDONE");
                }
            } catch (Exception e) {
                System.out.println(id + "\tDONE");
            }
        }
        for (Admin admin : admins) admin.close(java.time.Duration.ZERO);
    }

    static void dn(List<String> paths) throws Exception {
        CertificateFactory factory = CertificateFactory.getInstance("X.509");
        for (String path : paths) {
            try (FileInputStream stream = new FileInputStream(path)) {
                X509Certificate cert = (X509Certificate) factory.generateCertificate(stream);
                System.out.println(cert.getSubjectX500Principal().getName());
            }
        }
    }

    static void map(List<String> lines) {
        for (String line : lines) {
            String[] f = line.split("\t", 2);
            try {
                System.out.println(SslPrincipalMapper.fromRules(f[0]).getName(f[1]));
            } catch (Exception e) {
                System.out.println("ERR " + e.getClass().getSimpleName());
            }
        }
    }

    static String b64(String s) {
        return Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8));
    }

    static void jaas(List<String> lines) {
        for (String line : lines) {
            String text = new String(Base64.getDecoder().decode(line), StandardCharsets.UTF_8);
            Map<String, Object> configs = new HashMap<>();
            configs.put("sasl.jaas.config", new Password(text));
            try {
                JaasContext context = JaasContext.loadClientContext(configs);
                AppConfigurationEntry entry = context.configurationEntries().get(0);
                StringBuilder out = new StringBuilder(entry.getLoginModuleName());
                String flag = entry.getControlFlag().toString().replace("LoginModuleControlFlag: ", "");
                out.append('\t').append(flag);
                for (Map.Entry<String, ?> option : new TreeMap<>(entry.getOptions()).entrySet()) {
                    out.append('\t').append(option.getKey()).append('=').append(b64(String.valueOf(option.getValue())));
                }
                System.out.println(out);
            } catch (Exception e) {
                System.out.println("ERR " + e.getMessage());
            }
        }
    }
}
