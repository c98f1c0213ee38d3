/* lse_bench: time logsumexp (GradBench's `lse` eval: log sum_i exp(x_i) of one
 * vector, at n = 10^6 in its largest input) in plain C against the arrayad-compiled
 * `logsumexp` of examples/logsumexp.arr (primal) and `logsumexp_grad` (value and
 * gradient, the softmax), in one run.
 *
 *   usage: lse_bench [--min-time SECONDS] [--flush-subnormals] FILE
 *
 * FILE holds one integer, the length n; the vector is x_i = 3 sin(0.001 i) +
 * 0.5 cos(0.37 i), fixed so that runs compare.  The C objective is the stable
 * form (maximum, then the sum of exp(x_i - max)) in one thread at the driver's
 * -O3.  Timing as in bench_common.h: the median of calls taking about SECONDS
 * in all; then the ratios, and the relative difference between our value and
 * C's (<= 1e-12, else exit status 1) and between our gradient's sum and 1 (the
 * softmax sums to 1).
 *
 * Build (see bench/run.sh):
 *   cc -std=c99 -O3 -march=native lse_bench.c -I<libdir> -L<libdir> -llse \
 *      -Wl,-rpath,<libdir> -lm
 *
 * Exit status: 0 success, 1 error or mismatch, 2 usage error. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "liblse.h"

#define REL_TOL 1e-12

static const char *prog = "lse_bench";

#include "bench_common.h"

typedef struct {
    int64_t n;
    const double *x;
    double *grad;
    double value;
} bench_ctx;

/* The C objective, behind a volatile pointer so that the timing loop can
 * neither inline it nor hoist it. */
static double c_logsumexp(int64_t n, const double *x) {
    double mx = -INFINITY, s = 0.0;
    int64_t i;
    for (i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (i = 0; i < n; i++) s += exp(x[i] - mx);
    return mx + log(s);
}
static double (*volatile c_objective)(int64_t, const double *) = c_logsumexp;

static volatile double sink;

static double *alloc_doubles(int64_t count, const char *what) {
    double *p = (double *)malloc((size_t)count * sizeof(double));
    if (p == NULL) fprintf(stderr, "%s: out of memory for %s\n", prog, what);
    return p;
}

static int call(int which, void *p) {
    bench_ctx *c = (bench_ctx *)p;
    int32_t rc = 0;
    switch (which) {
    case BENCH_C: c->value = c_objective(c->n, c->x); break;
    case BENCH_PRIMAL: rc = logsumexp(c->n, c->x, &c->value); break;
    default: rc = logsumexp_grad(c->n, c->x, &c->value, c->grad); break;
    }
    if (rc != 0) {
        fprintf(stderr, "%s: %s failed (code %d): %s\n", prog,
                which == BENCH_PRIMAL ? "logsumexp" : "logsumexp_grad", (int)rc, lse_last_error());
        return 1;
    }
    sink = c->value;
    return 0;
}

int main(int argc, char **argv) {
    const char *path;
    double min_time, c_value, our_value, grad_value, total = 0.0, rel, rel_grad;
    long long n_read;
    bench_ctx ctx;
    double *x;
    int64_t i;
    FILE *fp;
    int status = 0;

    if (bench_args(argc, argv, "gradient", &min_time, &path)) return 2;
    fp = fopen(path, "r");
    if (fp == NULL) {
        fprintf(stderr, "%s: cannot open %s\n", prog, path);
        return 1;
    }
    if (fscanf(fp, "%lld", &n_read) != 1 || n_read < 1 || n_read > (1LL << 30)) {
        fprintf(stderr, "%s: %s: expected a length between 1 and 2^30\n", prog, path);
        fclose(fp);
        return 1;
    }
    fclose(fp);
    ctx.n = (int64_t)n_read;
    x = alloc_doubles(ctx.n, "the vector");
    ctx.grad = alloc_doubles(ctx.n, "the gradient");
    if (x == NULL || ctx.grad == NULL) {
        free(x);
        free(ctx.grad);
        return 1;
    }
    for (i = 0; i < ctx.n; i++) x[i] = 3.0 * sin(0.001 * (double)i) + 0.5 * cos(0.37 * (double)i);
    ctx.x = x;
    printf("input %s: n=%lld, gradient length %lld\n", path, n_read, n_read);

    if (call(BENCH_C, &ctx)) goto fail;
    c_value = ctx.value;
    if (call(BENCH_PRIMAL, &ctx)) goto fail;
    our_value = ctx.value;
    if (call(BENCH_DERIVATIVE, &ctx)) goto fail;
    grad_value = ctx.value;
    for (i = 0; i < ctx.n; i++) total += ctx.grad[i];
    rel = fabs(our_value - c_value) / fmax(fabs(c_value), 1e-300);
    rel_grad = fabs(grad_value - c_value) / fmax(fabs(c_value), 1e-300);
    printf("objective: C %.17g, arrayad logsumexp %.17g, logsumexp_grad value %.17g\n", c_value,
           our_value, grad_value);
    printf("relative difference to C: logsumexp %.3e, logsumexp_grad value %.3e (tolerance %.0e)\n",
           rel, rel_grad, REL_TOL);
    printf("sum of the gradient %.17g (the softmax sums to 1)\n", total);
    if (!(rel <= REL_TOL) || !(rel_grad <= REL_TOL) || !(fabs(total - 1.0) <= 1e-9)) {
        printf("MISMATCH: arrayad's value or gradient is wrong\n");
        status = 1;
    }
    fflush(stdout);

    if (bench_run(call, &ctx, min_time, NULL)) goto fail;
    free(x);
    free(ctx.grad);
    return status;

fail:
    free(x);
    free(ctx.grad);
    return 1;
}
