/* gmm_bench: time the ADBench GMM objective in plain C (shared/bench/adbench_objectives.h,
 * the reference of BENCHMARK_ANCHORS.md) against the arrayad-compiled `gmm` (primal) and
 * `gmm_grad` (objective + full gradient w.r.t. alphas, means, icf), in one run.
 *
 *   usage: gmm_bench [--min-time SECONDS] [--flush-subnormals] FILE
 *
 * For each of the three functions: one warm-up call, then R timed calls with R chosen
 * so that the R calls take about SECONDS in total (default 1) and R >= 5; the median
 * of the R wall times (CLOCK_MONOTONIC) is reported.  Then the ratios grad/primal,
 * primal/C and grad/C of those medians, and the relative difference between our
 * objective and the C objective (must be <= 1e-10; exit status 1 otherwise).
 *
 * Build (see bench/run.sh):
 *   cc -std=c99 -O3 -march=native gmm_bench.c -I<shared/bench> -I<libdir> \
 *      -L<libdir> -lgmm -Wl,-rpath,<libdir> -lm
 *
 * Exit status: 0 success, 1 error or objective mismatch, 2 usage error. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the C reference; its gmm_objective is renamed so it cannot clash with the library */
#define gmm_objective adbench_gmm_objective
#include "adbench_objectives.h"
#undef gmm_objective

#include "libgmm.h"

#define REL_TOL 1e-10

static const char *prog = "gmm_bench";

#include "gmm_input.h" /* examples/gmm/gmm_input.h: the ADBench GMM reader */
#include "bench_common.h"

typedef enum { WHICH_C = BENCH_C, WHICH_PRIMAL = BENCH_PRIMAL, WHICH_GRAD = BENCH_DERIVATIVE } which_fn;

typedef struct {
    const gmm_input *in;
    double *grad; /* k + k*d + k*t */
    double value;
} bench_ctx;

/* Called through a volatile pointer, so that the compiler can neither inline the C
 * objective into the timing loop nor hoist the (loop-invariant) call out of it. */
static void (*volatile c_objective)(int, int, int, const double *, const double *,
                                    const double *, const double *, double, int,
                                    double *) = adbench_gmm_objective;

static volatile double sink;

/* one call; returns 0 on success, prints the library error and returns 1 otherwise */
static int call_once(which_fn which, bench_ctx *c) {
    const gmm_input *in = c->in;
    int32_t rc = 0;
    switch (which) {
    case WHICH_C:
        c_objective((int)in->d, (int)in->k, (int)in->n, in->alphas, in->means, in->icf, in->x,
                    in->gamma, (int)in->m, &c->value);
        break;
    case WHICH_PRIMAL:
        rc = gmm(in->k, in->d, in->t, in->n, in->alphas, in->means, in->icf, in->x, in->gamma,
                 in->m, &c->value);
        break;
    case WHICH_GRAD:
        rc = gmm_grad(in->k, in->d, in->t, in->n, in->alphas, in->means, in->icf, in->x,
                      in->gamma, in->m, &c->value, c->grad, c->grad + in->k,
                      c->grad + in->k + in->k * in->d);
        break;
    }
    if (rc != 0) {
        fprintf(stderr, "%s: %s failed (code %d): %s\n", prog,
                which == WHICH_PRIMAL ? "gmm" : "gmm_grad", (int)rc, gmm_last_error());
        return 1;
    }
    sink = c->value;
    return 0;
}

static int call(int which, void *c) { return call_once((which_fn)which, (bench_ctx *)c); }

int main(int argc, char **argv) {
    const char *path;
    double min_time;
    gmm_input in;
    bench_ctx ctx;
    double c_value, our_value, grad_value, rel, rel_grad, norm2 = 0.0;
    int64_t count, j;
    int status = 0;

    if (bench_args(argc, argv, "gradient", &min_time, &path)) return 2;
    if (!read_input(path, &in)) return 1;

    count = in.k * (1 + in.d + in.t);
    ctx.in = &in;
    ctx.value = 0.0;
    ctx.grad = alloc_doubles(count, "the gradient");
    if (ctx.grad == NULL) {
        free_input(&in);
        return 1;
    }

    printf("input %s: d=%lld K=%lld n=%lld, gradient length %lld\n", path, (long long)in.d,
           (long long)in.k, (long long)in.n, (long long)count);

    /* correctness first: the three values */
    if (call_once(WHICH_C, &ctx)) goto fail;
    c_value = ctx.value;
    if (call_once(WHICH_PRIMAL, &ctx)) goto fail;
    our_value = ctx.value;
    if (call_once(WHICH_GRAD, &ctx)) goto fail;
    grad_value = ctx.value;
    for (j = 0; j < count; j++) norm2 += ctx.grad[j] * ctx.grad[j];

    rel = fabs(our_value - c_value) / fmax(fabs(c_value), 1e-300);
    rel_grad = fabs(grad_value - c_value) / fmax(fabs(c_value), 1e-300);
    printf("objective: C %.17g, arrayad gmm %.17g, gmm_grad value %.17g\n", c_value, our_value,
           grad_value);
    printf("relative difference to C: gmm %.3e, gmm_grad value %.3e (tolerance %.0e)\n", rel,
           rel_grad, REL_TOL);
    printf("gradient norm %.17g\n", sqrt(norm2));
    if (!(rel <= REL_TOL) || !(rel_grad <= REL_TOL)) {
        printf("MISMATCH: arrayad's objective differs from the C objective\n");
        status = 1;
    }
    fflush(stdout);

    if (bench_run(call, &ctx, min_time, NULL)) goto fail;

    free(ctx.grad);
    free_input(&in);
    return status;

fail:
    free(ctx.grad);
    free_input(&in);
    return 1;
}
