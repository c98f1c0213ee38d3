/* What a call costs beside its arithmetic (bench/calls.sh): functions of
 * bench/calls.arr built as a shared library, each called REPS times after
 * a warm-up call, against the plain C loop computing the same thing.
 * Prints, per case, the median time of arrayad and of C, their ratio,
 * arrayad's minor page faults per call (getrusage), and the minimum times
 * of arrayad and of C (steadier than medians on a busy machine):
 *
 *   CASE  arrayad S s  C S s  ratio R  minflt/call F  (minimums S, S s)
 *
 * (log-sum-exp `lse` and its gradient at P_MAP / 10 elements against C
 * loops of the same formulas), and for the Jacobian of `fit` (28 columns,
 * P_MAP / 32 rows), its time against arrayad's own primal call:
 *
 *   jacobian ...  primal S s  ratio R  (minimums S, S s)
 *
 * and then, for log-sum-exp, its gradient and its jvp, the jvp of the map
 * `scale` (its value and tangent: one parallel map of two arrays) and the
 * Jacobian of `fit`, the speedup on every core the process may use
 * against one thread, the calls of the two alternating
 * (calls_set_num_threads) so that both see the same machine:
 *
 *   threads CASE  1: S s  N: S s  speedup X  (minimums S, S s: X)
 *
 * usage: calls_bench P_MAP P_SUM REPS */
#define _GNU_SOURCE /* sched_getaffinity */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sched.h>
#include <time.h>

#include "libcalls.h"

static const char *prog = "calls_bench";
#include "bench_common.h"

static long minflt(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

static int64_t pm, ps, pf, pl;
static double *x, *y, *z, *ty, *jac, value, tangent, params[28];
static int64_t *us;
static volatile double sink;

/* log-sum-exp of x[0..pl] in C; with g, its gradient too. */
static double c_lse(double *g) {
    int64_t i;
    double m = x[0], s = 0;
    for (i = 1; i < pl; i++) m = x[i] > m ? x[i] : m;
    for (i = 0; i < pl; i++) s += exp(x[i] - m);
    if (g)
        for (i = 0; i < pl; i++) g[i] = exp(x[i] - m) / s;
    return m + log(s);
}

/* case 0: scale, 1: dot2, 2: norm2_grad, 3: lse, 4: lse_grad (C when c is
   set); 5: fit_jacobian (fit when c is set); 6: lse_jvp, 7: scale_jvp
   (tangents z; arrayad only). */
static int call(int which, int c) {
    int64_t i;
    int32_t rc = 0;
    if (which == 0) {
        if (c) {
            for (i = 0; i < pm; i++) y[i] = x[i] * 2.0 + 1.0;
        } else {
            rc = scale(pm, x, y);
        }
    } else if (which == 1) {
        if (c) {
            double s = 0;
            for (i = 0; i < ps; i++) s += x[i] * z[i];
            value = s;
        } else {
            rc = dot2(ps, x, z, &value);
        }
        sink = value;
    } else if (which == 2) {
        if (c) {
            for (i = 0; i < pm; i++) y[i] = 2.0 * x[i];
        } else {
            rc = norm2_grad(pm, x, &value, y);
        }
    } else if (which == 3) {
        if (c) {
            value = c_lse(NULL);
        } else {
            rc = lse(pl, x, &value);
        }
        sink = value;
    } else if (which == 4) {
        if (c) {
            value = c_lse(y);
        } else {
            rc = lse_grad(pl, x, &value, y);
        }
    } else if (which == 5) {
        rc = c ? fit(pf, params, us, y) : fit_jacobian(pf, params, us, y, jac);
    } else if (which == 6) {
        rc = lse_jvp(pl, x, z, &value, &tangent);
        sink = tangent;
    } else {
        rc = scale_jvp(pm, x, z, y, ty);
    }
    if (rc != 0) {
        fprintf(stderr, "call failed (%d): %s\n", (int)rc, calls_last_error());
        return 1;
    }
    return 0;
}

/* The median time of `reps` calls of case `which` (c: the C loop), the
   minimum in *least, the minor page faults per call in *faults. */
static double median(int which, int c, long reps, double *faults, double *least) {
    double *t = (double *)malloc((size_t)reps * sizeof *t), m;
    long f0, r;
    if (!t || call(which, c)) exit(1);
    f0 = minflt();
    for (r = 0; r < reps; r++) {
        double t0 = bench_now();
        if (call(which, c)) exit(1);
        t[r] = bench_now() - t0;
    }
    *faults = (double)(minflt() - f0) / (double)reps;
    qsort(t, (size_t)reps, sizeof *t, bench_cmp_double);
    m = t[reps / 2];
    *least = t[0];
    free(t);
    return m;
}

/* The calls of one side of a speedup in a row (after a warm-up call). */
#define SPEEDUP_ROUND 5

/* Case `which` on one thread and on `threads`, `reps` calls of each, in
   alternating rounds of SPEEDUP_ROUND: prints their medians and minimums, and the speedups. */
static void speedup(const char *name, int which, int threads, long reps) {
    double *t1 = (double *)malloc((size_t)reps * sizeof *t1), *tn = (double *)malloc((size_t)reps * sizeof *tn);
    long r;
    if (!t1 || !tn) exit(1);
    for (r = 0; r < reps; r += SPEEDUP_ROUND) {
        long k, m = reps - r < SPEEDUP_ROUND ? reps - r : SPEEDUP_ROUND;
        int side;
        for (side = 0; side < 2; side++) {
            double *t = side ? tn : t1;
            calls_set_num_threads(side ? threads : 1);
            if (call(which, 0)) exit(1);
            for (k = 0; k < m; k++) {
                double t0 = bench_now();
                if (call(which, 0)) exit(1);
                t[r + k] = bench_now() - t0;
            }
        }
    }
    calls_set_num_threads(0);
    qsort(t1, (size_t)reps, sizeof *t1, bench_cmp_double);
    qsort(tn, (size_t)reps, sizeof *tn, bench_cmp_double);
    printf("threads %-14s 1: %.6g s  %d: %.6g s  speedup %.2f  (minimums %.6g, %.6g s: %.2f)\n", name, t1[reps / 2],
           threads, tn[reps / 2], t1[reps / 2] / tn[reps / 2], t1[0], tn[0], t1[0] / tn[0]);
    free(t1);
    free(tn);
}

int main(int argc, char **argv) {
    const char *names[5] = {"map (scale)", "sum(x * z) (dot2)", "gradient (norm2_grad)", "log-sum-exp (lse)",
                            "lse gradient"};
    long reps;
    int64_t i, n;
    int w;
    if (argc != 4) {
        fprintf(stderr, "usage: calls_bench P_MAP P_SUM REPS\n");
        return 2;
    }
    pm = atoll(argv[1]);
    ps = atoll(argv[2]);
    reps = atol(argv[3]);
    n = pm > ps ? pm : ps;
    x = (double *)malloc((size_t)n * sizeof *x);
    y = (double *)malloc((size_t)n * sizeof *y);
    z = (double *)malloc((size_t)n * sizeof *z);
    ty = (double *)malloc((size_t)n * sizeof *ty);
    pf = pm / 32;
    pl = pm / 10 > 0 ? pm / 10 : 1;
    jac = (double *)malloc((size_t)(pf > 0 ? pf : 1) * 28 * sizeof *jac);
    us = (int64_t *)malloc((size_t)(pf > 0 ? pf : 1) * sizeof *us);
    if (!x || !y || !z || !ty || !jac || !us || reps < 1) return 1;
    for (i = 0; i < 28; i++) params[i] = 0.1 + 0.05 * (double)i;
    for (i = 0; i < pf; i++) us[i] = 7 * i;
    for (i = 0; i < n; i++) {
        x[i] = 1.0 + 1e-3 * (double)(i % 7);
        z[i] = 0.5 - 1e-4 * (double)(i % 11);
        y[i] = 0;
        ty[i] = 0;
    }
    for (w = 0; w < 5; w++) {
        double fa, fc, la, lc, ta = median(w, 0, reps, &fa, &la), tc = median(w, 1, reps, &fc, &lc);
        printf("%-22s arrayad %.6g s  C %.6g s  ratio %.2f  minflt/call %.1f  (minimums %.6g, %.6g s)\n", names[w],
               ta, tc, ta / tc, fa, la, lc);
    }
    {
        double fa, fc, la, lc, ta = median(5, 0, reps, &fa, &la), tc = median(5, 1, reps, &fc, &lc);
        printf("jacobian (fit, %lld x 28) arrayad %.6g s  primal %.6g s  ratio %.2f  (minimums %.6g, %.6g s)\n",
               (long long)pf, ta, tc, ta / tc, la, lc);
    }
    {
        /* Every core the process may use, whatever ARRAYAD_NUM_THREADS. */
        cpu_set_t mask;
        int cores = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : 1;
        int threads = cores > 1 ? (cores > 64 ? 64 : cores) : 1;
        speedup("lse", 3, threads, reps);
        speedup("lse gradient", 4, threads, reps);
        speedup("lse jvp", 6, threads, reps);
        speedup("map jvp (scale)", 7, threads, reps);
        speedup("fit jacobian", 5, threads, reps);
    }
    return 0;
}
