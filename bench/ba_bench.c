/* ba_bench: time the ADBench BA objective in plain C (all 3p residuals,
 * shared/bench/adbench_objectives.h) against arrayad's ba_obs (the residuals,
 * observation by observation) and the sparse Jacobian built from
 * ba_obs_jacobian blocks (as examples/ba/main.c does), in one run; checks
 * that the residuals agree with C's (relative 1e-10).
 *
 *   usage: ba_bench [--min-time SECONDS] [--flush-subnormals] FILE
 *
 * With -DBA_BLOCKS (a library that also exports ba_jacobian_blocks), it
 * then times the Jacobian blocks of all observations in one call (a
 * parallel map on several threads), from cameras and points gathered per
 * observation beforehand, checks them against the blocks of
 * ba_obs_jacobian (relative 1e-12: a vjp per row against the many-row
 * vjp, which may round differently), and prints
 *
 *   arrayad blocks (one call) median ...
 *   ratio blocks/derivative R
 *
 * Build (see bench/run.sh; DIR holds libba.so from
 * `arrayad build examples/ba.arr -o DIR/libba.so --export ba_obs[,ba_jacobian_blocks] --wrt cam,x,w`):
 *   cc -std=c99 -O3 -march=native ba_bench.c -I<shared/bench> -I<examples/ba> -I<bench> -IDIR \
 *      -LDIR -lba -Wl,-rpath,DIR -lm
 *
 * Exit status: 0 success, 1 error or mismatch, 2 usage error. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ba_objective adbench_ba_objective
#include "adbench_objectives.h"
#undef ba_objective

#include "libba.h"

static const char *prog = "ba_bench";

#include "ba_input.h"
#include "bench_common.h"

typedef struct {
    const ba_input *in;
    ba_sparse jac;
    double *c_reproj, *c_werr, *ours; /* 2p, p, 3p */
#ifdef BA_BLOCKS
    double *cams, *xs, *blocks; /* [p][11], [p][3], [p][3][15]: per observation */
#endif
} ctx_t;

/* Called through a volatile pointer: not inlined or hoisted by the compiler. */
static void (*volatile c_objective)(int, int, int, const double *, const double *, const double *, const int *,
                                    const double *, double *, double *) = adbench_ba_objective;

static int call(int which, void *p) {
    ctx_t *c = (ctx_t *)p;
    const ba_input *in = c->in;
    int64_t i;
    double out[3], jac[45];
    if (which == BENCH_C) {
        c_objective((int)in->n, (int)in->m, (int)in->p, in->cams, in->x, in->w, in->obs, in->feats, c->c_reproj,
                    c->c_werr);
        return 0;
    }
    for (i = 0; i < in->p; i++) {
        const double *cam = &in->cams[11 * in->obs[2 * i]], *x = &in->x[3 * in->obs[2 * i + 1]];
        int32_t rc = which == BENCH_PRIMAL ? ba_obs(cam, x, in->w[i], &in->feats[2 * i], out)
                                           : ba_obs_jacobian(cam, x, in->w[i], &in->feats[2 * i], out, jac);
        if (rc != 0) {
            fprintf(stderr, "%s: observation %lld: %s\n", prog, (long long)i, ba_last_error());
            return 1;
        }
        c->ours[2 * i] = out[0];
        c->ours[2 * i + 1] = out[1];
        c->ours[2 * in->p + i] = out[2];
        if (which == BENCH_DERIVATIVE) {
            memcpy(&c->jac.vals[30 * i], jac, 30 * sizeof(double));
            c->jac.vals[30 * in->p + i] = jac[44];
        }
    }
    return 0;
}

#ifdef BA_BLOCKS
/* The blocks of all observations in one call (`which` is ignored). */
static int call_blocks(int which, void *p) {
    ctx_t *c = (ctx_t *)p;
    (void)which;
    if (ba_jacobian_blocks(c->in->p, c->cams, c->xs, c->in->w, c->in->feats, c->blocks) != 0) {
        fprintf(stderr, "%s: ba_jacobian_blocks: %s\n", prog, ba_last_error());
        return 1;
    }
    return 0;
}

/* Times the one call of all blocks against the derivative's median `td`:
   0 on success, 1 on an error, and 1 after the timing when its blocks
   differ from ba_obs_jacobian's. */
static int bench_blocks(ctx_t *c, double min_time, double td) {
    const ba_input *in = c->in;
    bench_timing tb;
    int64_t i, k;
    double out[3], jac[45], worst = 0.0;
    int status = 0;
    c->cams = alloc_doubles(11 * in->p, "cameras");
    c->xs = alloc_doubles(3 * in->p, "points");
    c->blocks = alloc_doubles(45 * in->p, "blocks");
    if (!c->cams || !c->xs || !c->blocks) return 1;
    for (i = 0; i < in->p; i++) {
        memcpy(&c->cams[11 * i], &in->cams[11 * in->obs[2 * i]], 11 * sizeof(double));
        memcpy(&c->xs[3 * i], &in->x[3 * in->obs[2 * i + 1]], 3 * sizeof(double));
    }
    if (call_blocks(0, c)) return 1;
    for (i = 0; i < in->p; i++) {
        if (ba_obs_jacobian(&c->cams[11 * i], &c->xs[3 * i], in->w[i], &in->feats[2 * i], out, jac) != 0) return 1;
        for (k = 0; k < 45; k++) {
            double a = c->blocks[45 * i + k], rel = a == jac[k] ? 0.0 : fabs(a - jac[k]) / fmax(fabs(jac[k]), 1e-300);
            if (rel > worst || rel != rel) worst = rel;
        }
    }
    printf("largest relative difference of the blocks to ba_obs_jacobian's: %.3e (tolerance 1e-12)\n", worst);
    if (!(worst <= 1e-12)) {
        printf("MISMATCH: the blocks of one call differ from ba_obs_jacobian's\n");
        status = 1;
    }
    if (bench_measure(call_blocks, 0, c, min_time, &tb)) return 1;
    bench_print_time("arrayad blocks (one call)", &tb);
    printf("ratio blocks/derivative %.3f\n", tb.median / td);
    free(c->cams);
    free(c->xs);
    free(c->blocks);
    return status;
}
#endif

int main(int argc, char **argv) {
    const char *path;
    double min_time, worst = 0.0;
    ba_input in;
    ctx_t c;
    int64_t i;
    int status = 0;
    if (bench_args(argc, argv, "sparse Jacobian", &min_time, &path)) return 2;
    if (!read_ba_input(path, &in)) return 1;
    memset(&c, 0, sizeof c);
    c.in = &in;
    if (!ba_sparse_init(&in, &c.jac)) return 1;
    c.c_reproj = alloc_doubles(2 * in.p, "residuals");
    c.c_werr = alloc_doubles(in.p, "residuals");
    c.ours = alloc_doubles(3 * in.p, "residuals");
    if (!c.c_reproj || !c.c_werr || !c.ours) return 1;
    printf("input %s: n=%lld m=%lld p=%lld, Jacobian %lld x %lld with %lld nonzeros\n", path, (long long)in.n,
           (long long)in.m, (long long)in.p, (long long)c.jac.nrows, (long long)c.jac.ncols, (long long)c.jac.nnz);
    if (call(BENCH_C, &c) || call(BENCH_DERIVATIVE, &c)) return 1;
    for (i = 0; i < 3 * in.p; i++) {
        double want = i < 2 * in.p ? c.c_reproj[i] : c.c_werr[i - 2 * in.p];
        double rel = fabs(c.ours[i] - want) / fmax(fabs(want), 1e-300);
        if (rel > worst) worst = rel;
    }
    printf("largest relative difference of the residuals to C: %.3e (tolerance 1e-10)\n", worst);
    if (!(worst <= 1e-10)) {
        printf("MISMATCH: arrayad's residuals differ from the C objective\n");
        status = 1;
    }
    fflush(stdout);
    {
        bench_timing td;
        if (bench_run(call, &c, min_time, &td)) return 1;
#ifdef BA_BLOCKS
        fflush(stdout);
        if (bench_blocks(&c, min_time, td.median)) status = 1;
#else
        (void)td;
#endif
    }
    free(c.c_reproj);
    free(c.c_werr);
    free(c.ours);
    free_ba_sparse(&c.jac);
    free_ba_input(&in);
    return status;
}
