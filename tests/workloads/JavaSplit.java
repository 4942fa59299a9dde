// SPDX-License-Identifier: Apache-2.0
// A Java workload with a split it times itself, for tests/integration/agent-java.py:
// prints its pid, waits for a line on stdin, then for SECONDS (its argument)
// runs rounds of alphaWork (too big for C2 to inline: a compiled frame of its
// own) and betaWork (small: C2 inlines it into round), timing each with
// System.nanoTime, and prints "done ALPHA_NS BETA_NS".
public class JavaSplit {
    static long alphaNs, betaNs;

    static long alphaWork(long s, int n) {
        for (int i = 0; i < n; i++) {
            for (int x = 0; x < 4; x++) {
                s = s * 31 + (x ^ 0);
                s = s * 31 + (x ^ 1);
                s = s * 31 + (x ^ 2);
                s = s * 31 + (x ^ 3);
                s = s * 31 + (x ^ 4);
                s = s * 31 + (x ^ 5);
                s = s * 31 + (x ^ 6);
                s = s * 31 + (x ^ 7);
                s = s * 31 + (x ^ 8);
                s = s * 31 + (x ^ 9);
                s = s * 31 + (x ^ 10);
                s = s * 31 + (x ^ 11);
                s = s * 31 + (x ^ 12);
                s = s * 31 + (x ^ 13);
                s = s * 31 + (x ^ 14);
                s = s * 31 + (x ^ 15);
                s = s * 31 + (x ^ 16);
                s = s * 31 + (x ^ 17);
                s = s * 31 + (x ^ 18);
                s = s * 31 + (x ^ 19);
                s = s * 31 + (x ^ 20);
                s = s * 31 + (x ^ 21);
                s = s * 31 + (x ^ 22);
                s = s * 31 + (x ^ 23);
                s = s * 31 + (x ^ 24);
                s = s * 31 + (x ^ 25);
                s = s * 31 + (x ^ 26);
                s = s * 31 + (x ^ 27);
                s = s * 31 + (x ^ 28);
                s = s * 31 + (x ^ 29);
                s = s * 31 + (x ^ 30);
                s = s * 31 + (x ^ 31);
                s = s * 31 + (x ^ 32);
                s = s * 31 + (x ^ 33);
                s = s * 31 + (x ^ 34);
                s = s * 31 + (x ^ 35);
                s = s * 31 + (x ^ 36);
                s = s * 31 + (x ^ 37);
                s = s * 31 + (x ^ 38);
                s = s * 31 + (x ^ 39);
                s = s * 31 + (x ^ 40);
                s = s * 31 + (x ^ 41);
                s = s * 31 + (x ^ 42);
                s = s * 31 + (x ^ 43);
                s = s * 31 + (x ^ 44);
                s = s * 31 + (x ^ 45);
                s = s * 31 + (x ^ 46);
                s = s * 31 + (x ^ 47);
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
