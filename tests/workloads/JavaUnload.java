// SPDX-License-Identifier: Apache-2.0
// The class-unloading workload of tests/integration/agent-java.py: prints its
// pid, waits for a line on stdin, then for each directory given after the
// first argument (PHASE_SECONDS) loads class Gen from it with a class loader
// of its own, calls its one static method (named phase0, phase1, ...) until
// PHASE_SECONDS of CPU have passed (C2 compiles it), prints
// "phase K START_NS END_NS" (System.nanoTime: CLOCK_MONOTONIC), drops the
// loader and collects it with System.gc(), which unloads the class and frees
// its methods and code for the next phase's to reuse.
import java.io.File;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;

public class JavaUnload {
    public static void main(String[] a) throws Exception {
        double secs = Double.parseDouble(a[0]);
        System.out.println(ProcessHandle.current().pid());
        System.out.flush();
        System.in.read();
        long sink = 0;
        for (int k = 1; k < a.length; k++) {
            URLClassLoader l = new URLClassLoader(new URL[] { new File(a[k]).toURI().toURL() }, null);
            Method m = l.loadClass("Gen").getMethod("phase" + (k - 1), long.class);
            long start = System.nanoTime(), end = start + (long) (secs * 1e9);
            while (System.nanoTime() < end)
                sink += (Long) m.invoke(null, sink);
            System.out.println("phase " + (k - 1) + " " + start + " " + System.nanoTime());
            System.out.flush();
            m = null;
            l.close();
            l = null;
            for (int i = 0; i < 3; i++)
                System.gc();
        }
        System.out.println("done " + (sink & 1));
    }
}
