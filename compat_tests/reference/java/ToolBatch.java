import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;

import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs several Kafka command-line tools in one JVM, one after the other, so that a test pays
 * for one JVM start instead of one per command.
 *
 * Usage: ToolBatch SCRIPT OUT_DIR. Each line of SCRIPT is one command, tab-separated:
 * id, stdin file ("-" for none), main class, arguments. An id of the form ID~TEXT reruns the
 * command (up to 50 times, 100 ms apart) until its System.out holds TEXT: for a read of state a
 * broker applies a moment after it answered the write (a KRaft broker applies a client quota
 * when the controller's record reaches its metadata cache). For each command, OUT_DIR gets
 * id.out (its System.out), id.err (its System.err) and id.rc (its exit status: the argument of
 * its first Exit.exit, 0 when main returns, 99 with the stack trace in id.err when main throws).
 * Kafka's tools exit through org.apache.kafka.common.utils.Exit, whose procedures are replaced
 * here by one that throws.
 */
public final class ToolBatch {
    static final class ExitTrap extends RuntimeException {
        final int status;

        ExitTrap(int status) {
            super("exit " + status, null, false, false);
            this.status = status;
        }
    }

    /** The first status a command passed to Exit.exit: some tools catch the trap and exit again. */
    static Integer firstExit;

    static RuntimeException trap(int status) {
        if (firstExit == null) firstExit = status;
        throw new ExitTrap(status);
    }

    public static void main(String[] argv) throws Exception {
        List<String> lines = Files.readAllLines(Paths.get(argv[0]), StandardCharsets.UTF_8);
        Path outDir = Paths.get(argv[1]);
        Exit.setExitProcedure((status, message) -> {
            throw trap(status);
        });
        Exit.setHaltProcedure((status, message) -> {
            throw trap(status);
        });
        Exit.setShutdownHookAdder((name, hook) -> { });
        for (String line : lines) {
            if (line.isEmpty()) continue;
            String[] parts = line.split("\t", -1);
            String[] idAndUntil = parts[0].split("~", 2);
            String id = idAndUntil[0];
            String until = idAndUntil.length > 1 ? idAndUntil[1] : null;
            for (int attempt = 1; ; attempt++) {
                byte[] out = runOne(parts, outDir, id);
                if (until == null || attempt >= 50
                        || new String(out, StandardCharsets.UTF_8).contains(until)) break;
                Thread.sleep(100);
            }
        }
        Runtime.getRuntime().halt(0);
    }

    /** Runs one command of the script, writes its id.out, id.err and id.rc; returns its out. */
    static byte[] runOne(String[] parts, Path outDir, String id) throws Exception {
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        InputStream realIn = System.in;
        {
            String[] args = Arrays.copyOfRange(parts, 3, parts.length);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            PrintStream pout = new PrintStream(out, true, StandardCharsets.UTF_8);
            PrintStream perr = new PrintStream(err, true, StandardCharsets.UTF_8);
            InputStream in = parts[1].equals("-") ? InputStream.nullInputStream() : new FileInputStream(parts[1]);
            System.setOut(pout);
            System.setErr(perr);
            System.setIn(in);
            int status = 0;
            firstExit = null;
            try {
                Method main = Class.forName(parts[2]).getMethod("main", String[].class);
                main.invoke(null, (Object) args);
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                if (cause instanceof ExitTrap) {
                    status = ((ExitTrap) cause).status;
                } else {
                    status = 99;
                    cause.printStackTrace(perr);
                }
            } catch (ExitTrap e) {
                status = e.status;
            } finally {
                System.setOut(realOut);
                System.setErr(realErr);
                System.setIn(realIn);
                in.close();
            }
            if (firstExit != null) status = firstExit;
            pout.flush();
            perr.flush();
            Files.write(outDir.resolve(id + ".out"), out.toByteArray());
            Files.write(outDir.resolve(id + ".err"), err.toByteArray());
            Files.write(outDir.resolve(id + ".rc"), Integer.toString(status).getBytes(StandardCharsets.UTF_8));
            return out.toByteArray();
        }
    }
}
