// What Kafka's own classes (kafka-clients 3.9) answer, for tests/security/test_acl_java.py.
//
// stdin, one case a line, tab separated, "-" for null:
//   MATCH  f_type f_name f_pattern f_principal f_host f_op f_perm  b_type b_name b_pattern b_principal b_host b_op b_perm
//          (codes as numbers) -> prints 1 or 0: AclBindingFilter.matches(AclBinding)
//   NAMES  -> prints "R <code> <SecurityUtils.resourceTypeName>", "O ...", "P ..." for every enum value
//   PARSE  <kind R|O|P> <text> -> prints the code SecurityUtils parses it to
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

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
import org.apache.kafka.common.utils.SecurityUtils;

public class AclOracle {
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
                default:
                    throw new IllegalArgumentException("bad line: " + line);
            }
        }
        System.out.print(out);
    }
}
