// SPDX-License-Identifier: Apache-2.0
// The deoptimization workload of tests/integration/agent-java.py: prints its
// pid, waits for a line on stdin, then runs run() over Circle shapes for
// PHASE_SECONDS (C2 compiles run() with Circle.area inlined behind a type
// check), then over Square shapes for as long (the check fails: run() is
// deoptimized and compiled again), printing "phase K START_NS END_NS"
// (System.nanoTime) after each phase. Each area() calls a method too big to
// inline (its own), so the inlined area() has debug information of its own
// at that call and shows as a frame.
public class JavaDeopt {
    interface Shape {
        long area(long s);
    }

    static long circleWork(long s, int x) {
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

    static long squareWork(long s, int x) {
        for (int j = 0; j < 4; j++) {
            s = s * 37 + (x ^ 0);
            s = s * 37 + (x ^ 1);
            s = s * 37 + (x ^ 2);
            s = s * 37 + (x ^ 3);
            s = s * 37 + (x ^ 4);
            s = s * 37 + (x ^ 5);
            s = s * 37 + (x ^ 6);
            s = s * 37 + (x ^ 7);
            s = s * 37 + (x ^ 8);
            s = s * 37 + (x ^ 9);
            s = s * 37 + (x ^ 10);
            s = s * 37 + (x ^ 11);
            s = s * 37 + (x ^ 12);
            s = s * 37 + (x ^ 13);
            s = s * 37 + (x ^ 14);
            s = s * 37 + (x ^ 15);
            s = s * 37 + (x ^ 16);
            s = s * 37 + (x ^ 17);
            s = s * 37 + (x ^ 18);
            s = s * 37 + (x ^ 19);
            s = s * 37 + (x ^ 20);
            s = s * 37 + (x ^ 21);
            s = s * 37 + (x ^ 22);
            s = s * 37 + (x ^ 23);
            s = s * 37 + (x ^ 24);
            s = s * 37 + (x ^ 25);
            s = s * 37 + (x ^ 26);
            s = s * 37 + (x ^ 27);
            s = s * 37 + (x ^ 28);
            s = s * 37 + (x ^ 29);
            s = s * 37 + (x ^ 30);
            s = s * 37 + (x ^ 31);
            s = s * 37 + (x ^ 32);
            s = s * 37 + (x ^ 33);
            s = s * 37 + (x ^ 34);
            s = s * 37 + (x ^ 35);
            s = s * 37 + (x ^ 36);
            s = s * 37 + (x ^ 37);
            s = s * 37 + (x ^ 38);
            s = s * 37 + (x ^ 39);
            s = s * 37 + (x ^ 40);
            s = s * 37 + (x ^ 41);
            s = s * 37 + (x ^ 42);
            s = s * 37 + (x ^ 43);
            s = s * 37 + (x ^ 44);
            s = s * 37 + (x ^ 45);
            s = s * 37 + (x ^ 46);
            s = s * 37 + (x ^ 47);
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
