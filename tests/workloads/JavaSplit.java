// SPDX-License-Identifier: Apache-2.0
// A Java workload with a split it times itself, for tests/integration/agent-java.py:
// prints its pid, waits for a line on stdin, then for SECONDS (its argument)
// runs rounds of alphaWork (too big for C2 to inline: a compiled frame of its
// own) and betaWork (small: C2 inlines it into round), timing each with
// System.nanoTime, and prints "done ALPHA_NS BETA_NS PARITY SKIPPED" and a line
// "marks T A B ...": every 50 ms, the time (System.nanoTime) and both running
// totals, so that a test can take the split over exactly the time its profile
// covers (the split drifts while C2 compiles, which a loaded machine draws
// out). A round that takes over 0.5 ms (some 20 times its length) was held up
// (the thread waited for a CPU, or for a safepoint): time it did not run on a
// CPU is no part of a CPU profile, so such rounds are counted as SKIPPED, not
// timed. The @mix48 line is 48 statements, written out by
// tests/workloads/javasrc.py before javac runs.
public class JavaSplit {
    static long alphaNs, betaNs, skipped;

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

    static long rng = 0x9e3779b97f4a7c15L;

    static long round(long s) {
        // Each round's length varies (xorshift), so that a sampler's period never
        // falls into step with the rounds and sees the same part of each.
        rng ^= rng << 13;
        rng ^= rng >>> 7;
        rng ^= rng << 17;
        int r = (int) (rng >>> 40);
        long t0 = System.nanoTime();
        s = alphaWork(s, 29 + (r & 63));
        long t1 = System.nanoTime();
        s = betaWork(s, 4904 + ((r >>> 6) & 8191));
        long t2 = System.nanoTime();
        if (t2 - t0 > 500_000L) {
            skipped++;
        } else {
            alphaNs += t1 - t0;
            betaNs += t2 - t1;
        }
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
        alphaNs = betaNs = skipped = 0;
        System.out.println("start " + System.nanoTime());
        System.out.flush();
        long now = System.nanoTime(), end = now + (long) (secs * 1e9), next = now;
        long[] marks = new long[3 * (int) (secs * 20 + 4)];
        int m = 0;
        while (now < end) {
            if (now >= next && m + 3 <= marks.length) {
                marks[m++] = now;
                marks[m++] = alphaNs;
                marks[m++] = betaNs;
                next += 50_000_000L;
            }
            s = round(s);
            now = System.nanoTime();
        }
        System.out.println("done " + alphaNs + " " + betaNs + " " + (s & 1) + " " + skipped);
        StringBuilder line = new StringBuilder("marks");
        for (int i = 0; i < m; i++)
            line.append(' ').append(marks[i]);
        line.append(' ').append(now).append(' ').append(alphaNs).append(' ').append(betaNs);
        System.out.println(line);
    }
}
