// SPDX-License-Identifier: Apache-2.0
// The Java workload of tests/integration/agent-java.py: prints its pid, waits
// for a line on stdin, then spends SECONDS (its argument) of CPU in
// main -> alpha x 11 (recursion) -> spin -> mid (small: C2 inlines it into
// spin) -> work (too big to inline: compiled on its own). Line numbers are
// looked up by the test from this file's text, so edits keep it working.
public class JavaHot {
    // More bytecode than C2 inlines (FreqInlineSize): compiled on its own, called from mid's inlined copy.
    static long work(long s, int x) {
        for (int j = 0; j < 4; j++) {
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
        return s;
    }
    static long mid(long s, int x) {
        return work(s, x) + 1;
    }
    static long spin(int n) {
        long s = 0;
        for (int i = 0; i < n; i++)
            s = mid(s, i);
        return s;
    }
    static long alpha(int depth) {
        if (depth == 0)
            return spin(3000);
        return alpha(depth - 1) + 1;
    }
    public static void main(String[] a) throws Exception {
        double secs = Double.parseDouble(a[0]);
        System.out.println(ProcessHandle.current().pid());
        System.out.flush();
        System.in.read();
        long end = System.nanoTime() + (long)(secs * 1e9), s = 0;
        while (System.nanoTime() < end)
            s += alpha(10);
        System.out.println("done " + s);
    }
}
