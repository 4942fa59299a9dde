// SPDX-License-Identifier: Apache-2.0
// A Java workload with a split it times itself, for tests/integration/agent-java.py:
// prints its pid, waits for a line on stdin, then for SECONDS (its argument)
// runs rounds of alphaWork (too big for C2 to inline: a compiled frame of its
// own) and betaWork (small: C2 inlines it into round), timing each with
// System.nanoTime, and prints "done ALPHA_NS BETA_NS". The @mix48 line is 48
// statements, written out by tests/workloads/javasrc.py before javac runs.
public class JavaSplit {
    static long alphaNs, betaNs;

    static long alphaWork(long s, int n) {
        for (int i = 0; i < n; i++) {
            for (int x = 0; x < 4; x++) {
                // @mix48 s 31 x
            }
        }
        return s;
    }

    static long betaWork(long s, int n) {
        for (int i = 0; i < n; i++)
            s = s * 131 + (i ^ (s >>> 7));
        return s;
    }

    static long round(long s) {
        long t0 = System.nanoTime();
        s = alphaWork(s, 60);
        long t1 = System.nanoTime();
        s = betaWork(s, 9000);
        long t2 = System.nanoTime();
        alphaNs += t1 - t0;
        betaNs += t2 - t1;
        return s;
    }

    public static void main(String[] a) throws Exception {
        double secs = Double.parseDouble(a[0]);
        System.out.println(ProcessHandle.current().pid());
        System.out.flush();
        System.in.read();
        long s = 0;
        // Warm up first: the split counts from here, once C2 has compiled the rounds.
        for (int i = 0; i < 2000; i++)
            s = round(s);
        alphaNs = betaNs = 0;
        System.out.println("start " + System.nanoTime());
        System.out.flush();
        long end = System.nanoTime() + (long) (secs * 1e9);
        while (System.nanoTime() < end)
            s = round(s);
        System.out.println("done " + alphaNs + " " + betaNs + " " + (s & 1));
    }
}
