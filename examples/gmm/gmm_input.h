/* Reading an ADBench GMM input file (format in ../shared/data/adbench/README.md),
 * shared by the example driver main.c and the benchmark bench/gmm_bench.c.
 * Header-only (static functions); the including file defines
 * `static const char *prog`, the program name used in messages. Needs
 * <errno.h>, <stdint.h>, <stdio.h>, <stdlib.h> and <string.h>. */
#ifndef ARRAYAD_EXAMPLES_GMM_INPUT_H
#define ARRAYAD_EXAMPLES_GMM_INPUT_H

#include "../common/adbench_reader.h"

typedef struct {
    int64_t d, k, n, t;
    double *alphas, *means, *icf, *x;
    double gamma;
    int64_t m;
} gmm_input;

static inline void free_input(gmm_input *in) {
    free(in->alphas);
    free(in->means);
    free(in->icf);
    free(in->x);
}

static inline int read_input(const char *path, gmm_input *in) {
    reader r;
    int ok = 0;
    int64_t kd, kt, nd;

    memset(in, 0, sizeof *in);
    if (!open_reader(&r, path)) return 0;
    if (!read_size(&r, "d (dimension)", &in->d) ||
        !read_size(&r, "K (number of components)", &in->k) ||
        !read_size(&r, "n (number of points)", &in->n))
        goto done;
    in->t = in->d * (in->d + 1) / 2;
    kd = mul_checked(in->k, in->d);
    kt = mul_checked(in->k, in->t);
    nd = mul_checked(in->n, in->d);
    if (kd < 0 || kt < 0 || nd < 0) {
        fprintf(stderr, "%s: %s: problem size d=%lld K=%lld n=%lld is too large\n", prog, path,
                (long long)in->d, (long long)in->k, (long long)in->n);
        goto done;
    }
    if ((in->alphas = alloc_doubles(in->k, "alphas")) == NULL ||
        (in->means = alloc_doubles(kd, "means")) == NULL ||
        (in->icf = alloc_doubles(kt, "icf")) == NULL ||
        (in->x = alloc_doubles(nd, "x")) == NULL)
        goto done;
    if (!read_doubles(&r, "alphas", in->alphas, in->k) ||
        !read_doubles(&r, "means", in->means, kd) ||
        !read_doubles(&r, "icf", in->icf, kt) ||
        !read_doubles(&r, "x (points)", in->x, nd) ||
        !read_doubles(&r, "Wishart gamma", &in->gamma, 1) ||
        !read_int(&r, "Wishart m", &in->m))
        goto done;
    /* nothing but white space may follow */
    if (!expect_end(&r, "'gamma m'")) goto done;
    ok = 1;
done:
    fclose(r.f);
    if (!ok) free_input(in);
    return ok;
}

#endif
