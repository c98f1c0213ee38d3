/* Memory and page faults of repeated calls (bench/memory.sh): the RK4
 * integrator of GradBench's ode eval (tools/gradbench/evals/ode.arr) built
 * as a shared library, its primal `ode` and the gradient `ode_last_grad`
 * (x active) called REPS times each on one input after a warm-up call.
 * Prints, per function, the median time, the minor page faults per call
 * (getrusage) and the peak RSS after it, and the ratio gradient/primal:
 *
 *   primal    median S s  minflt/call F  maxrss M MB
 *   gradient  median S s  minflt/call F  maxrss M MB
 *   ratio gradient/primal R
 *
 * usage: memory_bench N S REPS */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "libode.h"

static const char *prog = "memory_bench";
#include "bench_common.h"

static long minflt(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

static double maxrss_mb(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_maxrss / 1024.0;
}

static int64_t n, s;
static double *x, *y, *dx, value;

static int call(int which) {
    int32_t rc = which == 0 ? ode(n, x, s, y) : ode_last_grad(n, x, s, &value, dx);
    if (rc != 0) {
        fprintf(stderr, "call failed (%d): %s\n", (int)rc, ode_last_error());
        return 1;
    }
    return 0;
}

static int measure(int which, long reps, double *median) {
    double *t = (double *)malloc((size_t)reps * sizeof *t);
    long f0, f1, r;
    if (!t || call(which)) return 1;
    f0 = minflt();
    for (r = 0; r < reps; r++) {
        double t0 = bench_now();
        if (call(which)) return 1;
        t[r] = bench_now() - t0;
    }
    f1 = minflt();
    qsort(t, (size_t)reps, sizeof *t, bench_cmp_double);
    *median = t[reps / 2];
    printf("%-9s median %.6g s  minflt/call %.1f  maxrss %.1f MB\n", which == 0 ? "primal" : "gradient", *median,
           (double)(f1 - f0) / (double)reps, maxrss_mb());
    free(t);
    return 0;
}

int main(int argc, char **argv) {
    long reps;
    double tp, tg;
    int64_t i;
    if (argc != 4) {
        fprintf(stderr, "usage: %s N S REPS\n", argv[0]);
        return 2;
    }
    n = atol(argv[1]);
    s = atol(argv[2]);
    reps = atol(argv[3]);
    x = (double *)malloc((size_t)n * sizeof *x);
    y = (double *)malloc((size_t)n * sizeof *y);
    dx = (double *)malloc((size_t)n * sizeof *dx);
    if (!x || !y || !dx || reps < 1) return 1;
    for (i = 0; i < n; i++) x[i] = 1.0 + 1e-3 * (double)(i % 7);
    if (measure(0, reps, &tp) || measure(1, reps, &tg)) return 1;
    printf("ratio gradient/primal %.3g\n", tg / tp);
    return 0;
}
