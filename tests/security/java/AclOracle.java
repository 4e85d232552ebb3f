// What Kafka's own classes (kafka-clients 3.9) answer, for tests/security/test_acl_java.py.
//
// stdin, one case a line, tab separated, "-" for null:
//   MATCH  f_type f_name f_pattern f_principal f_host f_op f_perm  b_type b_name b_pattern b_principal b_host b_op b_perm
//          (codes as numbers) -> prints 1 or 0: AclBindingFilter.matches(AclBinding)
//   NAMES  -> prints "R <code> <SecurityUtils.resourceTypeName>", "O ...", "P ..." for every enum value
//   PARSE  <kind R|O|P> <text> -> prints the code SecurityUtils parses it to
//   BYTYPE hardcode(0|1) principal host op type  then 7 fields per ACL (type name pattern principal
//          host op perm) -> prints 1 or 0: Authorizer.authorizeByResourceType, Kafka's default
//          method, over an authorizer whose acls() are those ACLs and whose authorize() answers
//          the "hardcode" probe with the given result (the Python authorizer's own answer)
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;

import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.common.utils.SecurityUtils;
import org.apache.kafka.common.Endpoint;
import org.apache.kafka.server.authorizer.AclCreateResult;
import org.apache.kafka.server.authorizer.AclDeleteResult;
import org.apache.kafka.server.authorizer.Action;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.authorizer.AuthorizationResult;
import org.apache.kafka.server.authorizer.Authorizer;
import org.apache.kafka.server.authorizer.AuthorizerServerInfo;

public class AclOracle {
    /** acls() from a list; authorize() only answers the "hardcode" probe, with a given result. */
    static final class ListAuthorizer implements Authorizer {
        final List<AclBinding> bindings;
        final AuthorizationResult hardcode;

        ListAuthorizer(List<AclBinding> bindings, AuthorizationResult hardcode) {
            this.bindings = bindings;
            this.hardcode = hardcode;
        }

        public Map<Endpoint, ? extends CompletionStage<Void>> start(AuthorizerServerInfo info) {
            return Collections.emptyMap();
        }

        public List<AuthorizationResult> authorize(AuthorizableRequestContext ctx, List<Action> actions) {
            List<AuthorizationResult> out = new ArrayList<>();
            for (Action a : actions) {
                if (!a.resourcePattern().name().equals("hardcode"))
                    throw new IllegalStateException("unexpected probe " + a);
                out.add(hardcode);
            }
            return out;
        }

        public List<? extends CompletionStage<AclCreateResult>> createAcls(AuthorizableRequestContext c, List<AclBinding> b) {
            throw new UnsupportedOperationException();
        }

        public List<? extends CompletionStage<AclDeleteResult>> deleteAcls(AuthorizableRequestContext c, List<AclBindingFilter> f) {
            throw new UnsupportedOperationException();
        }

        public Iterable<AclBinding> acls(AclBindingFilter filter) {
            List<AclBinding> out = new ArrayList<>();
            for (AclBinding b : bindings) if (filter.matches(b)) out.add(b);
            return out;
        }

        public void configure(Map<String, ?> configs) {
        }

        public void close() {
        }
    }

    static AuthorizableRequestContext context(String principal, String host) throws Exception {
        KafkaPrincipal p = SecurityUtils.parseKafkaPrincipal(principal);
        InetAddress address = InetAddress.getByName(host);
        return new AuthorizableRequestContext() {
            public String listenerName() { return "PLAINTEXT"; }
            public SecurityProtocol securityProtocol() { return SecurityProtocol.PLAINTEXT; }
            public KafkaPrincipal principal() { return p; }
            public InetAddress clientAddress() { return address; }
            public int requestType() { return 22; }
            public int requestVersion() { return 0; }
            public String clientId() { return "oracle"; }
            public int correlationId() { return 0; }
        };
    }

    private static String nul(String s) {
        return "-".equals(s) ? null : s;
    }

    private static byte b(String s) {
        return Byte.parseByte(s);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split("\t", -1);
            switch (f[0]) {
                case "MATCH": {
                    AclBindingFilter filter = new AclBindingFilter(
                        new ResourcePatternFilter(ResourceType.fromCode(b(f[1])), nul(f[2]), PatternType.fromCode(b(f[3]))),
                        new AccessControlEntryFilter(nul(f[4]), nul(f[5]), AclOperation.fromCode(b(f[6])),
                            AclPermissionType.fromCode(b(f[7]))));
                    AclBinding binding = new AclBinding(
                        new ResourcePattern(ResourceType.fromCode(b(f[8])), f[9], PatternType.fromCode(b(f[10]))),
                        new AccessControlEntry(f[11], f[12], AclOperation.fromCode(b(f[13])),
                            AclPermissionType.fromCode(b(f[14]))));
                    out.append(filter.matches(binding) ? "1" : "0").append('\n');
                    break;
                }
                case "NAMES":
                    for (ResourceType t : ResourceType.values())
                        out.append("R ").append(t.code()).append(' ').append(SecurityUtils.resourceTypeName(t)).append('\n');
                    for (AclOperation o : AclOperation.values())
                        out.append("O ").append(o.code()).append(' ').append(SecurityUtils.operationName(o)).append('\n');
                    for (AclPermissionType p : AclPermissionType.values())
                        out.append("P ").append(p.code()).append(' ').append(SecurityUtils.permissionTypeName(p)).append('\n');
                    for (PatternType p : PatternType.values())
                        out.append("T ").append(p.code()).append(' ').append(p.name()).append('\n');
                    break;
                case "PARSE": {
                    int code;
                    if (f[1].equals("R")) code = SecurityUtils.resourceType(f[2]).code();
                    else if (f[1].equals("O")) code = SecurityUtils.operation(f[2]).code();
                    else code = SecurityUtils.permissionType(f[2]).code();
                    out.append(code).append('\n');
                    break;
                }
                case "BYTYPE": {
                    List<AclBinding> bindings = new ArrayList<>();
                    for (int i = 6; i + 7 <= f.length; i += 7) {
                        bindings.add(new AclBinding(
                            new ResourcePattern(ResourceType.fromCode(b(f[i])), f[i + 1], PatternType.fromCode(b(f[i + 2]))),
                            new AccessControlEntry(f[i + 3], f[i + 4], AclOperation.fromCode(b(f[i + 5])),
                                AclPermissionType.fromCode(b(f[i + 6])))));
                    }
                    AuthorizationResult hardcode = f[1].equals("1") ? AuthorizationResult.ALLOWED : AuthorizationResult.DENIED;
                    Authorizer authorizer = new ListAuthorizer(bindings, hardcode);
                    AuthorizationResult r = authorizer.authorizeByResourceType(context(f[2], f[3]),
                        AclOperation.fromCode(b(f[4])), ResourceType.fromCode(b(f[5])));
                    out.append(r == AuthorizationResult.ALLOWED ? "1" : "0").append('\n');
                    break;
                }
                default:
                    throw new IllegalArgumentException("bad line: " + line);
            }
        }
        System.out.print(out);
    }
}
