/* Timing shared by the benchmark drivers (gmm_bench.c, ba_bench.c,
 * lstm_bench.c, lse_bench.c): each times three functions of one input in one
 * run, the C objective (../shared/bench/adbench_objectives.h's for the
 * ADBench problems, lse_bench.c's own for logsumexp), arrayad's primal and
 * arrayad's derivative, and prints median times and their ratios:
 *
 *   C objective           median ...
 *   arrayad primal        median ...
 *   arrayad derivative    median ...
 *   ratio derivative/primal R
 *   ratio primal/C          R
 *   ratio derivative/C      R
 *
 * Header-only; the including file defines `static const char *prog`. Needs
 * <math.h>, <stdio.h>, <stdlib.h>, <string.h> and <time.h> (with
 * _POSIX_C_SOURCE >= 199309L for clock_gettime). */
#ifndef ARRAYAD_BENCH_COMMON_H
#define ARRAYAD_BENCH_COMMON_H

#define BENCH_MIN_REPS 5
#define BENCH_MAX_REPS 10000000L

/* Which of the three functions a call runs. */
enum { BENCH_C = 0, BENCH_PRIMAL = 1, BENCH_DERIVATIVE = 2 };

/* Runs function `which` once on `ctx`; 0 on success, else it printed why. */
typedef int (*bench_call)(int which, void *ctx);

static double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double median, min;
    long reps;
} bench_timing;

/* The median wall time of R calls, R >= BENCH_MIN_REPS chosen so that the R
 * calls take about min_time seconds in total (estimated from warm-up calls). */
static int bench_measure(bench_call call, int which, void *ctx, double min_time, bench_timing *out) {
    double t0, est, *times;
    long reps, i;
    t0 = bench_now();
    if (call(which, ctx)) return 1; /* warm-up (page faults, lazy binding, caches) */
    est = bench_now() - t0;
    t0 = bench_now();
    if (call(which, ctx)) return 1;
    est = fmin(est, bench_now() - t0);
    if (est < 1e-9) est = 1e-9;
    reps = (long)ceil(min_time / est);
    if (reps < BENCH_MIN_REPS) reps = BENCH_MIN_REPS;
    if (reps > BENCH_MAX_REPS) reps = BENCH_MAX_REPS;
    times = (double *)malloc((size_t)reps * sizeof(double));
    if (times == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    for (i = 0; i < reps; i++) {
        t0 = bench_now();
        if (call(which, ctx)) {
            free(times);
            return 1;
        }
        times[i] = bench_now() - t0;
    }
    qsort(times, (size_t)reps, sizeof(double), bench_cmp_double);
    out->median = reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
    out->min = times[0];
    out->reps = reps;
    free(times);
    return 0;
}

static void bench_print_time(const char *label, const bench_timing *t) {
    double ms = 1e3 * t->median;
    if (ms < 1.0)
        printf("%-22s median %10.3f us   (min %10.3f us, %ld reps)\n", label, 1e3 * ms, 1e6 * t->min, t->reps);
    else
        printf("%-22s median %10.3f ms   (min %10.3f ms, %ld reps)\n", label, ms, 1e3 * t->min, t->reps);
}

/* Times the three functions and prints them and their ratios, the
 * derivative's timing in *derivative unless NULL; 0 on success. */
static int bench_run(bench_call call, void *ctx, double min_time, bench_timing *derivative) {
    bench_timing tc, tp, td;
    if (bench_measure(call, BENCH_C, ctx, min_time, &tc)) return 1;
    bench_print_time("C objective", &tc);
    fflush(stdout);
    if (bench_measure(call, BENCH_PRIMAL, ctx, min_time, &tp)) return 1;
    bench_print_time("arrayad primal", &tp);
    fflush(stdout);
    if (bench_measure(call, BENCH_DERIVATIVE, ctx, min_time, &td)) return 1;
    bench_print_time("arrayad derivative", &td);
    printf("ratio derivative/primal %.3f\n", td.median / tp.median);
    printf("ratio primal/C          %.3f\n", tp.median / tc.median);
    printf("ratio derivative/C      %.3f\n", td.median / tc.median);
    if (derivative) *derivative = td;
    return 0;
}

/* Makes this thread flush subnormal numbers to zero, results (FTZ) and
 * operands (DAZ), as programs linked with -ffast-math and XLA's CPU threads
 * do: MXCSR on x86-64, FPCR.FZ on AArch64. The C objective then runs in that
 * mode too, and arrayad's calls on every thread (the pool runs a call's
 * chunks in the caller's floating-point environment). 0 on success. */
static int bench_flush_subnormals(void) {
#if defined(__x86_64__)
    unsigned csr;
    __asm__ volatile("stmxcsr %0" : "=m"(csr));
    csr |= 0x8040u;
    __asm__ volatile("ldmxcsr %0" : : "m"(csr));
    return 0;
#elif defined(__aarch64__)
    unsigned long fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    fpcr |= 1ul << 24;
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr));
    return 0;
#else
    return 1;
#endif
}

/* Parses `[--min-time SECONDS] [--flush-subnormals] FILE`; 0 on success,
 * else 2 (usage printed). */
static int bench_args(int argc, char **argv, const char *what, double *min_time, const char **path) {
    int i;
    *min_time = 1.0;
    *path = NULL;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--flush-subnormals") == 0) {
            if (bench_flush_subnormals() != 0) {
                fprintf(stderr, "%s: --flush-subnormals: not supported on this architecture\n", prog);
                return 2;
            }
            printf("subnormal numbers flushed to zero (FTZ and DAZ) in every call\n");
        } else if (strcmp(argv[i], "--min-time") == 0 && i + 1 < argc) {
            char *end = NULL;
            *min_time = strtod(argv[++i], &end);
            if (end == argv[i] || *end != '\0' || !(*min_time >= 0.0 && *min_time <= 3600.0)) {
                fprintf(stderr, "%s: --min-time needs a number of seconds in [0, 3600]\n", prog);
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            break;
        } else if (*path == NULL) {
            *path = argv[i];
        } else {
            break;
        }
    }
    if (i < argc || *path == NULL) {
        fprintf(stderr,
                "usage: %s [--min-time SECONDS] [--flush-subnormals] FILE\n"
                "  Times the C reference objective, arrayad's primal and its %s on an\n"
                "  input FILE (the median of R calls taking about SECONDS in total,\n"
                "  default 1, R >= %d) and prints the ratios. --flush-subnormals runs\n"
                "  all three with subnormal numbers flushed to zero (FTZ and DAZ).\n",
                prog, what, BENCH_MIN_REPS);
        return 2;
    }
    return 0;
}

#endif
