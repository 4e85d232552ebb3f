import org.apache.kafka.common.utils.AppInfoParser;

/** Prints the version of the kafka-clients jar on the classpath: proves the Java harness works. */
public final class Smoke {
    private Smoke() {}

    public static void main(String[] args) {
        System.out.println(AppInfoParser.getVersion());
    }
}
