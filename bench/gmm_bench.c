/* gmm_bench: time the ADBench GMM objective in plain C (shared/bench/adbench_objectives.h,
 * the reference of BENCHMARK_ANCHORS.md) against the arrayad-compiled `gmm` (primal) and
 * `gmm_grad` (objective + full gradient w.r.t. alphas, means, icf), in one run.
 *
 *   usage: gmm_bench [--min-time SECONDS] FILE
 *
 * For each of the three functions: one warm-up call, then R timed calls with R chosen
 * so that the R calls take about SECONDS in total (default 1) and R >= 5; the median
 * of the R wall times (CLOCK_MONOTONIC) is reported.  Then the ratios grad/primal,
 * primal/C and grad/C of those medians, and the relative difference between our
 * objective and the C objective (must be <= 1e-10; exit status 1 otherwise).
 *
 * Build (see bench/run_gmm_bench.sh):
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
#define MIN_REPS 5
#define MAX_REPS 10000000L

static const char *prog = "gmm_bench";

#include "gmm_input.h" /* examples/gmm/gmm_input.h: the ADBench GMM reader */

/* ------------------------------------------------------------------------------ */
/* Timing                                                                           */
/* ------------------------------------------------------------------------------ */

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef enum { WHICH_C, WHICH_PRIMAL, WHICH_GRAD } which_fn;

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

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double median, min;
    long reps;
} timing;

/* median wall time of R calls, R >= MIN_REPS chosen so that the R calls take about
 * min_time seconds in total (estimated from a warm-up call) */
static int measure(which_fn which, bench_ctx *c, double min_time, timing *out) {
    double t0, est, *times;
    long reps, i;

    t0 = now_seconds();
    if (call_once(which, c)) return 1; /* warm-up (page faults, lazy binding, caches) */
    est = now_seconds() - t0;
    t0 = now_seconds();
    if (call_once(which, c)) return 1;
    est = fmin(est, now_seconds() - t0);
    if (est < 1e-9) est = 1e-9;
    reps = (long)ceil(min_time / est);
    if (reps < MIN_REPS) reps = MIN_REPS;
    if (reps > MAX_REPS) reps = MAX_REPS;

    times = (double *)malloc((size_t)reps * sizeof(double));
    if (times == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    for (i = 0; i < reps; i++) {
        t0 = now_seconds();
        if (call_once(which, c)) {
            free(times);
            return 1;
        }
        times[i] = now_seconds() - t0;
    }
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    out->median = reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
    out->min = times[0];
    out->reps = reps;
    free(times);
    return 0;
}

static void print_time(const char *label, const timing *t) {
    double ms = 1e3 * t->median;
    if (ms < 1.0)
        printf("%-26s median %10.3f us   (min %10.3f us, %ld reps)\n", label, 1e3 * ms,
               1e6 * t->min, t->reps);
    else
        printf("%-26s median %10.3f ms   (min %10.3f ms, %ld reps)\n", label, ms, 1e3 * t->min,
               t->reps);
}

static void usage(void) {
    fprintf(stderr,
            "usage: %s [--min-time SECONDS] FILE\n"
            "  Times the C reference GMM objective, arrayad's gmm and gmm_grad on an\n"
            "  ADBench GMM input FILE (median of R runs each taking >= SECONDS in\n"
            "  total, default 1, R >= %d) and prints the ratios.\n",
            prog, MIN_REPS);
}

int main(int argc, char **argv) {
    const char *path = NULL;
    double min_time = 1.0;
    gmm_input in;
    bench_ctx ctx;
    timing tc, tp, tg;
    double c_value, our_value, grad_value, rel, rel_grad, norm2 = 0.0;
    int64_t count, j;
    int i, status = 0;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--min-time") == 0 && i + 1 < argc) {
            char *end = NULL;
            min_time = strtod(argv[++i], &end);
            if (end == argv[i] || *end != '\0' || !(min_time >= 0.0 && min_time <= 3600.0)) {
                fprintf(stderr, "%s: --min-time needs a number of seconds in [0, 3600]\n", prog);
                return 2;
            }
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage();
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "%s: unknown option '%s'\n", prog, argv[i]);
            usage();
            return 2;
        } else if (path == NULL) {
            path = argv[i];
        } else {
            usage();
            return 2;
        }
    }
    if (path == NULL) {
        usage();
        return 2;
    }
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

    if (measure(WHICH_C, &ctx, min_time, &tc)) goto fail;
    print_time("C objective (adbench)", &tc);
    fflush(stdout);
    if (measure(WHICH_PRIMAL, &ctx, min_time, &tp)) goto fail;
    print_time("arrayad gmm (primal)", &tp);
    fflush(stdout);
    if (measure(WHICH_GRAD, &ctx, min_time, &tg)) goto fail;
    print_time("arrayad gmm_grad", &tg);

    printf("ratio grad/primal %.3f\n", tg.median / tp.median);
    printf("ratio primal/C    %.3f\n", tp.median / tc.median);
    printf("ratio grad/C      %.3f\n", tg.median / tc.median);

    free(ctx.grad);
    free_input(&in);
    return status;

fail:
    free(ctx.grad);
    free_input(&in);
    return 1;
}
