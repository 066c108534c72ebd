/* Accuracy of the activations of include/cells/common.h against libm in long double.
 *
 *   gcc -O3 -fno-wrapv -fno-trapping-math -I include tests/c/test_activations.c -o t -lm
 *   ./t                                     (tests/test_activations.py does this)
 *
 * Over a dense sweep of each function's range (and the clamp points), it prints the largest
 * error of each function, relative for e^x (|e - exact| / exact), absolute for σ, tanh and
 * elu (whose documented bounds are absolute), and "N failures" against the bounds below:
 * a few ulps of the documented error, 1 ulp = 2^-23 (float) or 2^-52 (double).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "cells/common.h"

static int failures = 0;

static void report(const char *name, long double worst, long double bound) {
    int ok = worst <= bound;
    failures += !ok;
    printf("%-10s max error %.3Le (bound %.1Le) %s\n", name, worst, bound, ok ? "ok" : "FAIL");
}

int main(void) {
    long double e_f = 0, e_d = 0, s_f = 0, s_d = 0, t_f = 0, t_d = 0, u_f = 0, u_d = 0;
    const int steps = 2000000;
    for (int i = 0; i <= steps; ++i) {
        /* e^x where neither overflows nor goes subnormal: float [-87, 88], double [-708, 709] */
        double xd = -708.0 + 1417.0 * i / steps;
        float xf = (float)(-87.0 + 175.0 * i / steps);
        long double exact_d = expl((long double)xd), exact_f = expl((long double)xf);
        long double rd = fabsl((cells_exp_d(xd) - exact_d) / exact_d);
        long double rf = fabsl((cells_exp_f(xf) - exact_f) / exact_f);
        e_d = rd > e_d ? rd : e_d;
        e_f = rf > e_f ? rf : e_f;
        /* σ, tanh and elu over [-40, 40], where they vary */
        double z = -40.0 + 80.0 * i / steps;
        float zf = (float)z;
        long double sd = fabsl(cells_sigmoid_d(z) - 1.0L / (1.0L + expl(-(long double)z)));
        long double sf = fabsl(cells_sigmoid_f(zf) - 1.0L / (1.0L + expl(-(long double)zf)));
        long double td = fabsl(cells_tanh_d(z) - tanhl((long double)z));
        long double tf = fabsl(cells_tanh_f(zf) - tanhl((long double)zf));
        long double ud = fabsl(cells_elu_d(z) - (z > 0 ? (long double)z : expm1l(z)));
        long double uf = fabsl(cells_elu_f(zf) - (zf > 0 ? (long double)zf : expm1l(zf)));
        s_d = sd > s_d ? sd : s_d;
        s_f = sf > s_f ? sf : s_f;
        t_d = td > t_d ? td : t_d;
        t_f = tf > t_f ? tf : t_f;
        u_d = ud > u_d ? ud : u_d;
        u_f = uf > u_f ? uf : u_f;
    }
    report("exp_d", e_d, 4 * DBL_EPSILON);
    report("exp_f", e_f, 4 * FLT_EPSILON);
    report("sigmoid_d", s_d, 4 * DBL_EPSILON);
    report("sigmoid_f", s_f, 4 * FLT_EPSILON);
    report("tanh_d", t_d, 4 * DBL_EPSILON);
    report("tanh_f", t_f, 4 * FLT_EPSILON);
    report("elu_d", u_d, 4 * DBL_EPSILON);
    report("elu_f", u_f, 4 * FLT_EPSILON);
    /* The clamps: e^x at and beyond the ends stays finite and positive. */
    int clamped = cells_exp_d(-1000.0) > 0 && isfinite(cells_exp_d(1000.0))
                  && cells_exp_f(-1000.0f) > 0 && isfinite(cells_exp_f(1000.0f));
    failures += !clamped;
    printf("clamps %s\n%d failures\n", clamped ? "ok" : "FAIL", failures);
    return failures != 0;
}
