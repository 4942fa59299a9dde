// SPDX-License-Identifier: Apache-2.0
// The Java workload of tests/integration/agent-java.py: prints its pid, waits
// for a line on stdin, then spends SECONDS (its argument) of CPU in
// main -> alpha x 11 (recursion) -> spin -> mid (small: C2 inlines it into
// spin) -> work (too big to inline: compiled on its own). Line numbers are
// looked up by the test from this file's text, so edits keep it working.
public class JavaHot {
    // More bytecode than C2 inlines (FreqInlineSize: the 48 statements javasrc.py writes for the @mix48 line):
    // compiled on its own, called from mid's inlined copy.
    static long work(long s, int x) {
        for (int j = 0; j < 4; j++) {
            // @mix48 s 31 x
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
