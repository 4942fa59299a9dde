// SPDX-License-Identifier: Apache-2.0
// The deoptimization workload of tests/integration/agent-java.py: prints its
// pid, waits for a line on stdin, then runs run() over Circle shapes for
// PHASE_SECONDS (C2 compiles run() with Circle.area inlined behind a type
// check), then over Square shapes for as long (the check fails: run() is
// deoptimized and compiled again), printing "phase K START_NS END_NS"
// (System.nanoTime) after each phase. Each area() calls a method too big to
// inline (its own), so the inlined area() has debug information of its own
// at that call and shows as a frame. Each @mix48 line is 48 statements,
// written out by tests/workloads/javasrc.py before javac runs.
public class JavaDeopt {
    interface Shape {
        long area(long s);
    }

    static long circleWork(long s, int x) {
        for (int j = 0; j < 4; j++) {
            // @mix48 s 31 x
        }
        return s;
    }

    static long squareWork(long s, int x) {
        for (int j = 0; j < 4; j++) {
            // @mix48 s 37 x
        }
        return s;
    }

    static final class Circle implements Shape {
        public long area(long s) {
            return circleWork(s, 1) + 1;
        }
    }

    static final class Square implements Shape {
        public long area(long s) {
            return squareWork(s, 3) + 3;
        }
    }

    static long run(Shape sh, long s) {
        for (int i = 0; i < 100; i++)
            s = sh.area(s);
        return s;
    }

    public static void main(String[] a) throws Exception {
        double secs = Double.parseDouble(a[0]);
        System.out.println(ProcessHandle.current().pid());
        System.out.flush();
        System.in.read();
        long sink = 0;
        Shape[] shapes = { new Circle(), new Square() };
        for (int k = 0; k < shapes.length; k++) {
            long start = System.nanoTime(), end = start + (long) (secs * 1e9);
            while (System.nanoTime() < end)
                sink = run(shapes[k], sink);
            System.out.println("phase " + k + " " + start + " " + System.nanoTime());
            System.out.flush();
        }
        System.out.println("done " + (sink & 1));
    }
}
