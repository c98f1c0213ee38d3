/* ba: the sparse Jacobian of an ADBench bundle adjustment problem, block by
 * block, with a library built by
 *
 *   arrayad build examples/ba.arr -o libba.so --export ba_obs --wrt cam,x,w
 *
 * usage: ba [--dump] FILE
 *
 * FILE is an ADBench BA input (see shared/data/adbench/README.md, or generate one
 * with gen_ba); it is replicated as ADBench does. For every observation,
 * ba_obs_jacobian gives its 3 residuals and their 3 x 15 Jacobian (11 camera,
 * 3 point, 1 weight columns), scattered into a CSR matrix of 3p rows (2p
 * reprojection errors, then p weight errors) and 11n + 3m + p columns.
 * Output:
 *   rows R / cols C / nnz Z
 *   residuals_head: the residuals of observation 0 (3 values)
 *   jacobian_norm: the Frobenius norm of the Jacobian
 *   jacobian_head: the 15 entries of row 0
 * With --dump, then every row as `row I: COL:VALUE ...`.
 *
 * Exit status: 0 success, 1 error, 2 usage error. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libba.h"

static const char *prog = "ba";

#include "ba_input.h"

/* Fills j->vals (row_ptr and cols from ba_sparse_init) and the residuals
 * (3p: reprojection errors 2p, then weight errors p). */
static int ba_jacobian(const ba_input *in, ba_sparse *j, double *residuals) {
    int64_t i;
    double out[3], jac[3 * 15];
    for (i = 0; i < in->p; i++) {
        const double *cam = &in->cams[11 * in->obs[2 * i]];
        const double *x = &in->x[3 * in->obs[2 * i + 1]];
        if (ba_obs_jacobian(cam, x, in->w[i], &in->feats[2 * i], out, jac) != 0) {
            fprintf(stderr, "%s: observation %lld: %s\n", prog, (long long)i, ba_last_error());
            return 0;
        }
        /* rows 2i and 2i+1: the 15 columns of the block, in the order of cols */
        memcpy(&j->vals[30 * i], jac, 30 * sizeof(double));
        /* the weight error row: d(1 - w^2)/dw, column 14 of row 2 */
        j->vals[30 * in->p + i] = jac[2 * 15 + 14];
        residuals[2 * i] = out[0];
        residuals[2 * i + 1] = out[1];
        residuals[2 * in->p + i] = out[2];
    }
    return 1;
}

int main(int argc, char **argv) {
    ba_input in;
    ba_sparse j;
    double *residuals, norm = 0.0;
    int64_t i, k, dump = 0;
    const char *path = NULL;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dump") == 0)
            dump = 1;
        else if (!path && argv[i][0] != '-')
            path = argv[i];
        else {
            fprintf(stderr, "usage: %s [--dump] FILE\n", prog);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: %s [--dump] FILE\n", prog);
        return 2;
    }
    if (!read_ba_input(path, &in)) return 1;
    if (!ba_sparse_init(&in, &j)) {
        free_ba_input(&in);
        return 1;
    }
    residuals = alloc_doubles(3 * in.p, "residuals");
    if (!residuals || !ba_jacobian(&in, &j, residuals)) {
        free(residuals);
        free_ba_sparse(&j);
        free_ba_input(&in);
        return 1;
    }
    for (k = 0; k < j.nnz; k++) norm += j.vals[k] * j.vals[k];
    printf("rows %lld\ncols %lld\nnnz %lld\n", (long long)j.nrows, (long long)j.ncols, (long long)j.nnz);
    printf("residuals_head %.17g %.17g %.17g\n", residuals[0], residuals[1], residuals[2 * in.p]);
    printf("jacobian_norm %.17g\njacobian_head", sqrt(norm));
    for (k = 0; k < 15; k++) printf(" %.17g", j.vals[k]);
    printf("\n");
    if (dump)
        for (i = 0; i < j.nrows; i++) {
            printf("row %lld:", (long long)i);
            for (k = j.row_ptr[i]; k < j.row_ptr[i + 1]; k++) printf(" %lld:%.17g", (long long)j.cols[k], j.vals[k]);
            printf("\n");
        }
    free(residuals);
    free_ba_sparse(&j);
    free_ba_input(&in);
    return 0;
}
