/* Reading an ADBench BA input file (format in ../shared/data/adbench/README.md)
 * and replicating it as ADBench does: n cameras, m points, p observations, all
 * cameras equal to the one stored, all points equal to the point stored, all
 * weights and features equal to the ones stored; observation i links camera
 * i mod n with point i mod m. Shared by the example driver main.c and the
 * benchmark bench/ba_bench.c. Header-only; the including file defines
 * `static const char *prog`. */
#ifndef ARRAYAD_EXAMPLES_BA_INPUT_H
#define ARRAYAD_EXAMPLES_BA_INPUT_H

#include "../common/adbench_reader.h"

typedef struct {
    int64_t n, m, p;
    double *cams;  /* [n][11] */
    double *x;     /* [m][3] */
    double *w;     /* [p] */
    double *feats; /* [p][2] */
    int *obs;      /* [p][2]: camera, point */
} ba_input;

static inline void free_ba_input(ba_input *in) {
    free(in->cams);
    free(in->x);
    free(in->w);
    free(in->feats);
    free(in->obs);
}

static inline int read_ba_input(const char *path, ba_input *in) {
    reader r;
    int ok = 0;
    int64_t i, j;
    double cam[11], pt[3], w, feat[2];

    memset(in, 0, sizeof *in);
    if (!open_reader(&r, path)) return 0;
    if (!read_size(&r, "n (number of cameras)", &in->n) || !read_size(&r, "m (number of points)", &in->m) ||
        !read_size(&r, "p (number of observations)", &in->p) || !read_doubles(&r, "the camera", cam, 11) ||
        !read_doubles(&r, "the point", pt, 3) || !read_doubles(&r, "the weight", &w, 1) ||
        !read_doubles(&r, "the feature", feat, 2) || !expect_end(&r, "the feature"))
        goto done;
    if (mul_checked(in->n, 11) < 0 || mul_checked(in->m, 3) < 0 || mul_checked(in->p, 2) < 0) {
        fprintf(stderr, "%s: %s: the problem is too large\n", prog, path);
        goto done;
    }
    in->obs = (int *)malloc((size_t)in->p * 2 * sizeof(int));
    if ((in->cams = alloc_doubles(in->n * 11, "cameras")) == NULL ||
        (in->x = alloc_doubles(in->m * 3, "points")) == NULL || (in->w = alloc_doubles(in->p, "weights")) == NULL ||
        (in->feats = alloc_doubles(in->p * 2, "features")) == NULL || in->obs == NULL) {
        if (in->obs == NULL) fprintf(stderr, "%s: out of memory\n", prog);
        goto done;
    }
    for (i = 0; i < in->n; i++)
        for (j = 0; j < 11; j++) in->cams[i * 11 + j] = cam[j];
    for (i = 0; i < in->m; i++)
        for (j = 0; j < 3; j++) in->x[i * 3 + j] = pt[j];
    for (i = 0; i < in->p; i++) {
        in->w[i] = w;
        in->feats[2 * i] = feat[0];
        in->feats[2 * i + 1] = feat[1];
        in->obs[2 * i] = (int)(i % in->n);
        in->obs[2 * i + 1] = (int)(i % in->m);
    }
    ok = 1;
done:
    fclose(r.f);
    if (!ok) free_ba_input(in);
    return ok;
}

/* The sparse Jacobian of a BA problem in CSR form (ADBench's layout): 3p rows
 * (the 2p reprojection errors, observation by observation, then the p weight
 * errors), 11n + 3m + p columns (cameras, points, weights), 31p nonzeros. */
typedef struct {
    int64_t nrows, ncols, nnz;
    int64_t *row_ptr; /* nrows + 1 */
    int64_t *cols;    /* nnz */
    double *vals;     /* nnz */
} ba_sparse;

static inline void free_ba_sparse(ba_sparse *j) {
    free(j->row_ptr);
    free(j->cols);
    free(j->vals);
}

/* Allocates the CSR arrays and fills row_ptr and cols for `in`. */
static inline int ba_sparse_init(const ba_input *in, ba_sparse *j) {
    int64_t i, k, nz = 0;
    memset(j, 0, sizeof *j);
    j->nrows = 3 * in->p;
    j->ncols = 11 * in->n + 3 * in->m + in->p;
    j->nnz = 31 * in->p;
    j->row_ptr = (int64_t *)malloc((size_t)(j->nrows + 1) * sizeof(int64_t));
    j->cols = (int64_t *)malloc((size_t)j->nnz * sizeof(int64_t));
    j->vals = (double *)malloc((size_t)j->nnz * sizeof(double));
    if (!j->row_ptr || !j->cols || !j->vals) {
        fprintf(stderr, "%s: out of memory for the Jacobian\n", prog);
        free_ba_sparse(j);
        return 0;
    }
    for (i = 0; i < in->p; i++) {
        int64_t cam = in->obs[2 * i], pt = in->obs[2 * i + 1], r;
        for (r = 0; r < 2; r++) {
            j->row_ptr[2 * i + r] = nz;
            for (k = 0; k < 11; k++) j->cols[nz++] = 11 * cam + k;
            for (k = 0; k < 3; k++) j->cols[nz++] = 11 * in->n + 3 * pt + k;
            j->cols[nz++] = 11 * in->n + 3 * in->m + i;
        }
    }
    for (i = 0; i < in->p; i++) {
        j->row_ptr[2 * in->p + i] = nz;
        j->cols[nz++] = 11 * in->n + 3 * in->m + i;
    }
    j->row_ptr[j->nrows] = nz;
    return 1;
}

#endif
