/* The C driver of scripts/sanitize.sh and scripts/valgrind.sh: calls every
 * export of libstress.so (built from stress.arr) -- primal, jvp, vjp, grad,
 * jacobian and hvp --, checks a few values against closed forms, then the
 * error paths (indices out of bounds, slices out of range, size mismatches,
 * negative sizes, division by zero, empty arrays, null pointers, each with
 * its code and a message naming stress.arr), then THREADS threads that run
 * all of it concurrently ITERATIONS times, comparing every result bit for
 * bit with the single-threaded run and checking their own error messages.
 *
 *     driver [ITERATIONS [THREADS]]     (default 100 and 8)
 *
 * Prints OK and exits 0, or prints each failure and exits 1. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libstress.h"

#define N 5
#define CAP 4096

static int fails = 0;

static void check(int ok, const char *what, int line) {
    if (!ok) {
        fprintf(stderr, "FAIL driver.c:%d: %s (last error: %s)\n", line, what, stress_last_error());
        __atomic_add_fetch(&fails, 1, __ATOMIC_RELAXED);
    }
}
#define CHECK(c) check((c) != 0, #c, __LINE__)
#define OK(call) check((call) == 0, #call, __LINE__)

/* Every output of one run of the suite, in order. */
typedef struct {
    double v[CAP];
    int len;
} Rec;

static void put(Rec *r, const double *v, int n) {
    if (r->len + n > CAP) {
        check(0, "record capacity", __LINE__);
        return;
    }
    memcpy(r->v + r->len, v, (size_t)n * sizeof(double));
    r->len += n;
}

static void put1(Rec *r, double v) { put(r, &v, 1); }

/* All successful calls for the inputs of `seed`; every output goes to r. */
static void suite(Rec *r, int seed) {
    double x[N], w[N], tx[N], tw[N], d1[N], d2[N], h1[N], h2[N], out[N];
    double v = 0, t = 0, jac[64 * 64];
    int64_t iv = 0;
    int i;
    r->len = 0;
    for (i = 0; i < N; i++) {
        x[i] = 0.1 * (i + 1) + 0.01 * seed;
        w[i] = 0.5 * i - 0.25 * seed;
        tx[i] = 1.0 - 0.3 * i;
        tw[i] = 0.2 * i + seed;
    }

    /* f = sum(x * w) + exp(x[0]) */
    OK(f(N, x, w, &v));
    {
        double want = exp(x[0]);
        for (i = 0; i < N; i++) want += x[i] * w[i];
        CHECK(fabs(v - want) <= 1e-12 * fabs(want));
    }
    put1(r, v);
    OK(f_grad(N, x, w, &v, d1, d2));
    CHECK(fabs(d1[0] - (w[0] + exp(x[0]))) <= 1e-12 * fabs(d1[0]));
    for (i = 0; i < N; i++) CHECK(d2[i] == x[i]);
    put1(r, v), put(r, d1, N), put(r, d2, N);
    OK(f_jvp(N, x, w, tx, tw, &v, &t));
    put1(r, v), put1(r, t);
    OK(f_vjp(N, x, w, 2.0, &v, d1, d2));
    put(r, d1, N), put(r, d2, N);
    OK(f_jacobian(N, x, w, &v, jac));
    put(r, jac, 2 * N);
    OK(f_hvp(N, x, w, tx, tw, &v, d1, d2, h1, h2));
    put(r, h1, N), put(r, h2, N);

    OK(get(N, x, 2, &v));
    CHECK(v == x[2]);
    OK(get_grad(N, x, 3, &v, d1));
    CHECK(d1[3] == 1.0 && d1[0] == 0.0);
    OK(add(N, N, x, w, out));
    CHECK(out[1] == x[1] + w[1]);
    OK(add_vjp(N, N, x, w, tx, out, d1, d2));
    CHECK(d1[4] == tx[4] && d2[4] == tx[4]);
    OK(count(7, &v));
    CHECK(v == 7.0);
    OK(divide(-7, 2, &iv));
    CHECK(iv == -3);
    OK(top_grad(N, x, &v, d1));
    CHECK(v == x[N - 1] && d1[N - 1] == 1.0);
    OK(window_grad(N, x, 1, 4, &v, d1));
    CHECK(d1[0] == 0.0 && d1[1] == 1.0 && d1[4] == 0.0);
    put1(r, v);

    {
        /* a [3][4] matrix times a [4] vector; Jacobian 3 x (12 + 4) */
        double a[12], vv[4], y[3], ty[3];
        for (i = 0; i < 12; i++) a[i] = sin(i + seed);
        for (i = 0; i < 4; i++) vv[i] = cos(i - seed);
        OK(matvec(3, 4, a, vv, y));
        CHECK(fabs(y[1] - (a[4] * vv[0] + a[5] * vv[1] + a[6] * vv[2] + a[7] * vv[3])) <= 1e-12);
        put(r, y, 3);
        OK(matvec_jvp(3, 4, a, vv, a, vv, y, ty));
        put(r, ty, 3);
        OK(matvec_jacobian(3, 4, a, vv, y, jac));
        put(r, jac, 3 * 16);
        CHECK(jac[1 * 16 + 12] == a[4]); /* d y1 / d v0 */
    }

    {
        /* a parallel map: 40 rows, in chunks on the pool with
           ARRAYAD_PARALLEL_GRAIN=0 (scripts/sanitize.sh) */
        double g[40], tg[40];
        int64_t gi[40];
        for (i = 0; i < 40; i++) gi[i] = (i * 7 + seed) % N;
        OK(gather(N, 40, x, gi, g));
        CHECK(g[3] == x[gi[3]] * x[gi[3]] + 3.0);
        put(r, g, 40);
        OK(gather_jvp(N, 40, x, gi, x, g, tg));
        put(r, tg, 40);
    }

    {
        /* a parallel maximum and sum over 3 blocks of 4096 elements, on
           the pool with ARRAYAD_PARALLEL_GRAIN=0, and its gradient */
        enum { L = 10000 };
        double *big = (double *)malloc(L * sizeof *big), *gb = (double *)malloc(L * sizeof *gb);
        double m = -1e300, s = 0, want, total = 0;
        CHECK(big && gb);
        if (big && gb) {
            for (i = 0; i < L; i++) big[i] = 3.0 * sin(0.01 * (double)i + seed);
            for (i = 0; i < L; i++) m = big[i] > m ? big[i] : m;
            for (i = 0; i < L; i++) s += exp(big[i] - m);
            want = m + log(s);
            OK(lse(L, big, &v));
            CHECK(fabs(v - want) <= 1e-12 * fabs(want));
            put1(r, v);
            OK(lse_grad(L, big, &v, gb));
            for (i = 0; i < L; i++) total += gb[i];
            CHECK(fabs(total - 1.0) <= 1e-12);
            put(r, gb, 16);
            put(r, gb + L - 16, 16);
        }
        free(big);
        free(gb);
    }

    OK(tape(N, x, 300, &v));
    put1(r, v);
    OK(tape_grad(N, x, 300, &v, d1));
    put(r, d1, N);
    OK(tape_jacobian(N, x, 300, &v, jac));
    put(r, jac, N);
    OK(tape_hvp(N, x, 300, tx, &v, d1, h1));
    put(r, h1, N);

    OK(grow_grad(0.5 + seed, &v, d1));
    put1(r, v), put1(r, d1[0]);
    OK(grow_hvp(0.5, 1.0, &v, d1, h1));
    put1(r, h1[0]);

    OK(g_hvp(N, x, tx, &v, d1, h1));
    put(r, d1, N), put(r, h1, N);
    OK(dg(N, x, out));
    for (i = 0; i < N; i++) CHECK(fabs(out[i] - d1[i]) <= 1e-12 * fabs(d1[i]) + 1e-300);
    OK(dg_jacobian(N, x, out, jac)); /* the Hessian of g */
    put(r, jac, N * N);
    OK(dg_vjp(N, x, tx, out, d1));
    put(r, d1, N);

    {
        double p[3] = {0.3 + seed, -1.2, 2.5}, q[3], tq[3], jp[9];
        OK(fixed(p, q));
        CHECK(q[0] == p[1] * p[2]);
        put(r, q, 3);
        OK(fixed_jvp(p, p, q, tq));
        put(r, tq, 3);
        OK(fixed_vjp(p, p, q, tq));
        put(r, tq, 3);
        OK(fixed_jacobian(p, q, jp));
        CHECK(jp[0 * 3 + 1] == p[2] && jp[2 * 3 + 0] == p[1]);
        put(r, jp, 9);
        /* in place: the output is the input */
        q[0] = p[0], q[1] = p[1], q[2] = p[2];
        OK(fixed(q, q));
        CHECK(q[2] == p[0] * p[1]);
    }

    {
        double p1[2] = {1.5, -0.5 * seed}, o0 = 0, o1[2], j2[3 * 3], c1[2] = {1.0, 2.0}, dp0 = 0, dp1[2];
        int64_t o2 = 0;
        OK(mixed(2.0, p1, 3, true, &o0, o1, &o2));
        CHECK(o0 == 2.0 * 1.5 * 3.0 && o2 == 4);
        put1(r, o0), put(r, o1, 2);
        OK(mixed_jacobian(2.0, p1, 3, false, &o0, o1, &o2, j2));
        put(r, j2, 9);
        OK(mixed_vjp(2.0, p1, 3, true, 1.0, c1, &o0, o1, &o2, &dp0, dp1));
        put1(r, dp0), put(r, dp1, 2);
    }

    {
        double o[2 * N];
        OK(rows_jacobian(N, x, o, jac)); /* 10 rows, 5 columns: forward mode */
        put(r, o, 2 * N), put(r, jac, 2 * N * N);
        OK(rows_vjp(N, x, jac, o, d1));
        put(r, d1, N);
    }

    /* no elements: null arrays are allowed */
    OK(g(0, NULL, &v));
    CHECK(v == 0.0);
}

/* A failing call: the code and a message naming the file and `word`. */
static void expect(int32_t rc, int32_t code, const char *word, int line) {
    const char *msg = stress_last_error();
    if (rc != code || !strstr(msg, "stress.arr") || (word && !strstr(msg, word))) {
        fprintf(stderr, "FAIL driver.c:%d: got code %d (want %d), message: %s\n", line, (int)rc, (int)code, msg);
        __atomic_add_fetch(&fails, 1, __ATOMIC_RELAXED);
    }
}
#define EXPECT(call, code, word) expect((call), (code), (word), __LINE__)

/* Every error path; `t` varies the index so that each thread's message
 * is its own. */
static void errors(int t) {
    double x[N] = {1, 2, 3, 4, 5}, w[N] = {0}, out[N], v = 0, d[N], jac[4 * N];
    double p[3] = {1, 2, 3}, q[3], jp[9];
    int64_t iv = 0;
    char idx[32];
    snprintf(idx, sizeof idx, "index %d", 10 + t);
    EXPECT(get(N, x, 10 + t, &v), STRESS_ERR_INDEX_OUT_OF_BOUNDS, idx);
    EXPECT(get(N, x, -1, &v), STRESS_ERR_INDEX_OUT_OF_BOUNDS, "index -1");
    EXPECT(get_grad(N, x, 10 + t, &v, d), STRESS_ERR_INDEX_OUT_OF_BOUNDS, idx);
    EXPECT(get_jvp(N, x, 10 + t, x, &v, out), STRESS_ERR_INDEX_OUT_OF_BOUNDS, idx);
    EXPECT(get_vjp(N, x, 10 + t, 1.0, &v, d), STRESS_ERR_INDEX_OUT_OF_BOUNDS, idx);
    EXPECT(get_jacobian(N, x, 10 + t, &v, jac), STRESS_ERR_INDEX_OUT_OF_BOUNDS, idx);
    EXPECT(get_hvp(N, x, 10 + t, x, &v, d, out), STRESS_ERR_INDEX_OUT_OF_BOUNDS, idx);
    EXPECT(f(0, x, w, &v), STRESS_ERR_INDEX_OUT_OF_BOUNDS, NULL);
    EXPECT(window(N, x, 3, 1, &v), STRESS_ERR_SLICE_OUT_OF_RANGE, NULL);
    EXPECT(window_grad(N, x, 0, N + 1 + t, &v, d), STRESS_ERR_SLICE_OUT_OF_RANGE, NULL);
    EXPECT(add(N, N - 1, x, w, out), STRESS_ERR_SIZE_MISMATCH, NULL);
    EXPECT(add_jacobian(N, 2, x, w, out, jac), STRESS_ERR_SIZE_MISMATCH, NULL);
    EXPECT(count(-1 - t, &v), STRESS_ERR_NEGATIVE_SIZE, NULL);
    EXPECT(count_grad(-1, &v), STRESS_ERR_NEGATIVE_SIZE, NULL);
    EXPECT(divide(1, 0, &iv), STRESS_ERR_DIVISION_BY_ZERO, NULL);
    EXPECT(top(0, x, &v), STRESS_ERR_EMPTY_ARRAY, NULL);
    EXPECT(lse(0, x, &v), STRESS_ERR_EMPTY_ARRAY, "maximum");
    EXPECT(top_grad(0, x, &v, d), STRESS_ERR_EMPTY_ARRAY, NULL);
    EXPECT(tape(0, x, 3, &v), STRESS_ERR_DIVISION_BY_ZERO, NULL);
    EXPECT(tape_grad(N, x, -5, &v, d), STRESS_ERR_NEGATIVE_SIZE, NULL);
    /* negative sizes */
    EXPECT(f(-1, x, w, &v), STRESS_ERR_NEGATIVE_SIZE, "-1");
    EXPECT(matvec(-2, 2, x, w, out), STRESS_ERR_NEGATIVE_SIZE, "-2");
    /* sizes whose element counts overflow: refused before any read */
    EXPECT(rows((int64_t)1 << 61, x, out), STRESS_ERR_OUT_OF_MEMORY, "overflows");
    EXPECT(matvec((int64_t)1 << 40, (int64_t)1 << 40, x, w, out), STRESS_ERR_OUT_OF_MEMORY, "overflows");
    EXPECT(rows_jacobian((int64_t)1 << 40, x, out, jac), STRESS_ERR_OUT_OF_MEMORY, NULL);
    EXPECT(dg_jacobian(INT64_MAX, x, out, jac), STRESS_ERR_OUT_OF_MEMORY, NULL);
    /* null pointers: arrays with elements, outputs, the Jacobian */
    EXPECT(f(N, NULL, w, &v), STRESS_ERR_INVALID_ARGUMENT, "null");
    EXPECT(f(N, x, w, NULL), STRESS_ERR_INVALID_ARGUMENT, "null");
    EXPECT(f_grad(N, x, w, &v, NULL, d), STRESS_ERR_INVALID_ARGUMENT, "null");
    EXPECT(f_jvp(N, x, w, NULL, w, &v, out), STRESS_ERR_INVALID_ARGUMENT, "null");
    EXPECT(f_vjp(N, x, w, 1.0, &v, d, NULL), STRESS_ERR_INVALID_ARGUMENT, "null");
    EXPECT(f_jacobian(N, x, w, &v, NULL), STRESS_ERR_INVALID_ARGUMENT, "null");
    EXPECT(f_hvp(N, x, w, x, w, &v, d, d, NULL, d), STRESS_ERR_INVALID_ARGUMENT, "null");
    EXPECT(fixed(NULL, q), STRESS_ERR_INVALID_ARGUMENT, "null");
    EXPECT(fixed(p, NULL), STRESS_ERR_INVALID_ARGUMENT, "null");
    EXPECT(fixed_jacobian(p, q, NULL), STRESS_ERR_INVALID_ARGUMENT, "null");
    EXPECT(fixed_vjp(p, NULL, q, jp), STRESS_ERR_INVALID_ARGUMENT, "null");
    EXPECT(rows(N, x, NULL), STRESS_ERR_INVALID_ARGUMENT, "null");
    {
        /* a parallel map failing in two iterations: the first is reported */
        int64_t gi[40];
        double g[40];
        int k;
        for (k = 0; k < 40; k++) gi[k] = k % N;
        gi[30] = 77;
        gi[17 + t % 5] = 99;
        EXPECT(gather(N, 40, x, gi, g), STRESS_ERR_INDEX_OUT_OF_BOUNDS, "index 99");
    }
    /* the thread's last error is still its own */
    EXPECT(get(N, x, 10 + t, &v), STRESS_ERR_INDEX_OUT_OF_BOUNDS, idx);
}

static Rec reference[3];
static int iterations = 100;

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg, it;
    Rec *mine = malloc(sizeof(Rec));
    if (!mine) return NULL;
    for (it = 0; it < iterations; it++) {
        int seed = (t + it) % 3;
        suite(mine, seed);
        if (mine->len != reference[seed].len ||
            memcmp(mine->v, reference[seed].v, (size_t)mine->len * sizeof(double)) != 0) {
            fprintf(stderr, "FAIL thread %d iteration %d: results differ from the single-threaded run\n", t, it);
            __atomic_add_fetch(&fails, 1, __ATOMIC_RELAXED);
            break;
        }
        errors(t);
        if (it % 7 == t % 7) stress_release_memory();
    }
    free(mine);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = 8, t, s;
    pthread_t th[64];
    if (argc > 1) iterations = atoi(argv[1]);
    if (argc > 2) threads = atoi(argv[2]);
    if (threads < 1 || threads > 64) threads = 8;

    for (s = 0; s < 3; s++) suite(&reference[s], s);
    errors(0);
    printf("single thread: %d values per run, %d failures\n", reference[0].len, fails);
    {
        /* parallel maps on 1, 2 and 7 threads: the same bits */
        static Rec again;
        int counts[3] = {1, 2, 7}, k;
        for (k = 0; k < 3; k++) {
            stress_set_num_threads(counts[k]);
            CHECK(stress_num_threads() == counts[k]);
            for (s = 0; s < 3; s++) {
                suite(&again, s);
                if (again.len != reference[s].len ||
                    memcmp(again.v, reference[s].v, (size_t)again.len * sizeof(double)) != 0) {
                    fprintf(stderr, "FAIL: results on %d threads differ\n", counts[k]);
                    fails++;
                }
            }
        }
        stress_set_num_threads(0);
        printf("1, 2 and 7 threads of parallel maps: %d failures\n", fails);
    }

    for (t = 0; t < threads; t++) {
        if (pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) != 0) {
            fprintf(stderr, "FAIL: pthread_create\n");
            return 1;
        }
    }
    for (t = 0; t < threads; t++) pthread_join(th[t], NULL);
    printf("%d threads x %d iterations: %d failures\n", threads, iterations, fails);
    stress_release_memory();
    printf(fails ? "FAILED\n" : "OK\n");
    return fails ? 1 : 0;
}
