/* nested_bench: derivatives of derivatives, timed in one run.
 *
 *   usage: nested_bench [--min-time SECONDS] GMM_FILE BA_FILE
 *
 * - GMM (examples/gmm.arr, ADBench input GMM_FILE): gmm_grad against gmm_hvp
 *   (value, gradient and Hessian-vector product for a tangent of ones);
 * - Rosenbrock of n = 10^5 (bench/rosenbrock.arr): rosen_grad against
 *   rosen_hvp, and against the gradient of the gradient penalty
 *   sum(grad(rosen, x) ** 2) (reverse over reverse); rosen_hvp (forward
 *   over reverse) against rosen_hvp_by_vjp (the vjp of the gradient,
 *   reverse over reverse), which must agree;
 * - BA (examples/ba.arr, ADBench input BA_FILE): the 3 x 15 Jacobian blocks
 *   of all p observations by p calls of ba_obs_jacobian against one call of
 *   ba_jacobian_blocks (vjp inside the program); checks they agree.
 *
 * Build: see bench/nested.sh. Exit status: 0 success, 1 error or mismatch. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libgmm.h"
#include "libba.h"
#include "librosen.h"

static const char *prog = "nested_bench";

#include "bench_common.h"
#include "gmm_input.h"
#include "ba_input.h"

#define ROSEN_N 100000

enum { GMM_GRAD, GMM_HVP, ROSEN_GRAD, ROSEN_HVP, ROSEN_PENALTY_GRAD, ROSEN_HVP_BY_VJP, BA_CALLS, BA_BLOCKS };

typedef struct {
    const gmm_input *g;
    double *grad, *hvp, *ones; /* gradient-sized */
    double *rx, *rt, *rg, *rh; /* ROSEN_N each */
    const ba_input *b;
    double *cams, *xs, *feats; /* gathered per observation: [p][11], [p][3], [p][2] */
    double *blocks_calls, *blocks_one; /* [p][3][15] */
    double value;
} ctx_t;

static volatile double sink;

static int fail(int32_t rc, const char *what, const char *msg) {
    fprintf(stderr, "%s: %s failed (code %d): %s\n", prog, what, (int)rc, msg);
    return 1;
}

static int call(int which, void *p) {
    ctx_t *c = (ctx_t *)p;
    const gmm_input *g = c->g;
    int32_t rc = 0;
    int64_t i, kd = g->k * g->d;
    switch (which) {
    case GMM_GRAD:
        rc = gmm_grad(g->k, g->d, g->t, g->n, g->alphas, g->means, g->icf, g->x, g->gamma, g->m, &c->value,
                      c->grad, c->grad + g->k, c->grad + g->k + kd);
        break;
    case GMM_HVP:
        rc = gmm_hvp(g->k, g->d, g->t, g->n, g->alphas, g->means, g->icf, g->x, g->gamma, g->m, c->ones,
                     c->ones + g->k, c->ones + g->k + kd, &c->value, c->grad, c->grad + g->k, c->grad + g->k + kd,
                     c->hvp, c->hvp + g->k, c->hvp + g->k + kd);
        break;
    case ROSEN_GRAD:
        rc = rosen_grad(ROSEN_N, c->rx, &c->value, c->rg);
        break;
    case ROSEN_HVP:
        rc = rosen_hvp(ROSEN_N, c->rx, c->rt, &c->value, c->rg, c->rh);
        break;
    case ROSEN_PENALTY_GRAD:
        rc = rosen_penalty_grad(ROSEN_N, c->rx, &c->value, c->rh);
        break;
    case ROSEN_HVP_BY_VJP:
        rc = rosen_hvp_by_vjp(ROSEN_N, c->rx, c->rt, c->rg);
        break;
    case BA_CALLS:
        for (i = 0; i < c->b->p && rc == 0; i++) {
            double out[3];
            rc = ba_obs_jacobian(&c->cams[11 * i], &c->xs[3 * i], c->b->w[i], &c->feats[2 * i], out,
                                 &c->blocks_calls[45 * i]);
        }
        break;
    case BA_BLOCKS:
        rc = ba_jacobian_blocks(c->b->p, c->cams, c->xs, c->b->w, c->feats, c->blocks_one);
        break;
    }
    if (rc != 0) {
        const char *msg = which <= GMM_HVP ? gmm_last_error() : which <= ROSEN_HVP_BY_VJP ? rosen_last_error() : ba_last_error();
        return fail(rc, "a call", msg);
    }
    sink = c->value;
    return 0;
}

static double *doubles(int64_t n) {
    double *p = (double *)calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    if (!p) fprintf(stderr, "%s: out of memory\n", prog);
    return p;
}

static int pair(ctx_t *c, int a, int b, const char *la, const char *lb, double min_time) {
    bench_timing ta, tb;
    if (bench_measure(call, a, c, min_time, &ta)) return 1;
    bench_print_time(la, &ta);
    if (bench_measure(call, b, c, min_time, &tb)) return 1;
    bench_print_time(lb, &tb);
    printf("ratio %s/%s %.3f\n", lb, la, tb.median / ta.median);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    double min_time = 1.0;
    int argi = 1;
    gmm_input g;
    ba_input b;
    ctx_t c;
    int64_t i, count, p;
    double maxdiff = 0.0;
    if (argc > 2 && strcmp(argv[1], "--min-time") == 0) {
        min_time = atof(argv[2]);
        argi = 3;
    }
    if (argc - argi != 2) {
        fprintf(stderr, "usage: %s [--min-time SECONDS] GMM_FILE BA_FILE\n", prog);
        return 2;
    }
    if (!read_input(argv[argi], &g)) return 1;
    if (!read_ba_input(argv[argi + 1], &b)) return 1;
    memset(&c, 0, sizeof c);
    c.g = &g;
    c.b = &b;
    count = g.k * (1 + g.d + g.t);
    p = b.p;
    c.grad = doubles(count);
    c.hvp = doubles(count);
    c.ones = doubles(count);
    c.rx = doubles(ROSEN_N);
    c.rt = doubles(ROSEN_N);
    c.rg = doubles(ROSEN_N);
    c.rh = doubles(ROSEN_N);
    c.cams = doubles(11 * p);
    c.xs = doubles(3 * p);
    c.feats = doubles(2 * p);
    c.blocks_calls = doubles(45 * p);
    c.blocks_one = doubles(45 * p);
    if (!c.grad || !c.hvp || !c.ones || !c.rx || !c.rt || !c.rg || !c.rh || !c.cams || !c.xs || !c.feats ||
        !c.blocks_calls || !c.blocks_one)
        return 1;
    for (i = 0; i < count; i++) c.ones[i] = 1.0;
    for (i = 0; i < ROSEN_N; i++) {
        c.rx[i] = 0.5 + 0.5 * sin((double)i);
        c.rt[i] = 1.0;
    }
    for (i = 0; i < p; i++) {
        memcpy(&c.cams[11 * i], &b.cams[11 * b.obs[2 * i]], 11 * sizeof(double));
        memcpy(&c.xs[3 * i], &b.x[3 * b.obs[2 * i + 1]], 3 * sizeof(double));
        memcpy(&c.feats[2 * i], &b.feats[2 * i], 2 * sizeof(double));
    }
    printf("GMM %s: d=%lld K=%lld n=%lld\n", argv[argi], (long long)g.d, (long long)g.k, (long long)g.n);
    if (pair(&c, GMM_GRAD, GMM_HVP, "gmm_grad", "gmm_hvp", min_time)) return 1;
    printf("Rosenbrock n=%d\n", ROSEN_N);
    if (pair(&c, ROSEN_GRAD, ROSEN_HVP, "rosen_grad", "rosen_hvp", min_time)) return 1;
    if (pair(&c, ROSEN_GRAD, ROSEN_PENALTY_GRAD, "rosen_grad", "rosen_penalty_grad", min_time)) return 1;
    if (pair(&c, ROSEN_HVP, ROSEN_HVP_BY_VJP, "rosen_hvp", "rosen_hvp_by_vjp", min_time)) return 1;
    if (call(ROSEN_HVP, &c) || call(ROSEN_HVP_BY_VJP, &c)) return 1;
    for (i = 0; i < ROSEN_N; i++) maxdiff = fmax(maxdiff, fabs(c.rh[i] - c.rg[i]) / fmax(1.0, fabs(c.rh[i])));
    printf("Rosenbrock H v: largest relative difference of the two %.3e\n", maxdiff);
    if (maxdiff > 1e-12) return 1;
    maxdiff = 0;
    printf("BA %s: p=%lld observations\n", argv[argi + 1], (long long)p);
    if (pair(&c, BA_CALLS, BA_BLOCKS, "per-call", "one-call", min_time)) return 1;
    for (i = 0; i < 45 * p; i++) maxdiff = fmax(maxdiff, fabs(c.blocks_calls[i] - c.blocks_one[i]));
    printf("BA blocks: largest difference between the two %.3e\n", maxdiff);
    return maxdiff <= 1e-9 ? 0 : 1;
}
