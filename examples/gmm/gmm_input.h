/* Reading an ADBench GMM input file (format in ../shared/data/adbench/README.md),
 * shared by the example driver main.c and the benchmark bench/gmm_bench.c.
 * Header-only (static functions); the including file defines
 * `static const char *prog`, the program name used in messages. Needs
 * <errno.h>, <stdint.h>, <stdio.h>, <stdlib.h> and <string.h>. */
#ifndef ARRAYAD_EXAMPLES_GMM_INPUT_H
#define ARRAYAD_EXAMPLES_GMM_INPUT_H

/* ------------------------------------------------------------------------------ */
/* Reading the ADBench format, token by token                                      */
/* ------------------------------------------------------------------------------ */

typedef struct {
    FILE *f;
    const char *path;
} reader;

/* Report a failed fscanf: end of file, read error, or a token that is not a number. */
static void read_failure(const reader *r, int got, const char *what) {
    if (got == EOF && ferror(r->f))
        fprintf(stderr, "%s: %s: read error while reading %s: %s\n", prog, r->path, what,
                strerror(errno));
    else if (got == EOF)
        fprintf(stderr, "%s: %s: unexpected end of file while reading %s\n", prog, r->path,
                what);
    else {
        char tok[64] = "";
        if (fscanf(r->f, "%63s", tok) != 1) tok[0] = '\0';
        fprintf(stderr, "%s: %s: expected a number for %s, found '%s'\n", prog, r->path, what,
                tok);
    }
}

/* a positive integer (d, k or n); the ADBench readers store them in int */
static int read_size(reader *r, const char *what, int64_t *out) {
    long long v;
    int got = fscanf(r->f, "%lld", &v);
    if (got != 1) {
        read_failure(r, got, what);
        return 0;
    }
    if (v <= 0 || v > 2147483647LL) {
        fprintf(stderr, "%s: %s: %s must be a positive integer, found %lld\n", prog, r->path,
                what, v);
        return 0;
    }
    *out = (int64_t)v;
    return 1;
}

static int read_int(reader *r, const char *what, int64_t *out) {
    long long v;
    int got = fscanf(r->f, "%lld", &v);
    if (got != 1) {
        read_failure(r, got, what);
        return 0;
    }
    *out = (int64_t)v;
    return 1;
}

static int read_doubles(reader *r, const char *what, double *v, int64_t count) {
    int64_t i;
    for (i = 0; i < count; i++) {
        int got = fscanf(r->f, "%lf", &v[i]);
        if (got != 1) {
            char desc[128];
            snprintf(desc, sizeof desc, "%.40s (value %lld of %lld)", what, (long long)(i + 1),
                    (long long)count);
            read_failure(r, got, desc);
            return 0;
        }
    }
    return 1;
}

/* malloc of count doubles, with an overflow check; count >= 1 */
static double *alloc_doubles(int64_t count, const char *what) {
    double *p;
    if (count <= 0 || (uint64_t)count > (uint64_t)(SIZE_MAX / sizeof(double))) {
        fprintf(stderr, "%s: %s is too large (%lld values)\n", prog, what, (long long)count);
        return NULL;
    }
    p = (double *)malloc((size_t)count * sizeof(double));
    if (p == NULL)
        fprintf(stderr, "%s: out of memory allocating %s (%lld values)\n", prog, what,
                (long long)count);
    return p;
}

/* a*b for positive a, b, or -1 on int64 overflow */
static int64_t mul_checked(int64_t a, int64_t b) {
    if (a > INT64_MAX / b) return -1;
    return a * b;
}

typedef struct {
    int64_t d, k, n, t;
    double *alphas, *means, *icf, *x;
    double gamma;
    int64_t m;
} gmm_input;

static void free_input(gmm_input *in) {
    free(in->alphas);
    free(in->means);
    free(in->icf);
    free(in->x);
}

static int read_input(const char *path, gmm_input *in) {
    reader r;
    int ok = 0, c;
    int64_t kd, kt, nd;

    memset(in, 0, sizeof *in);
    r.path = path;
    r.f = fopen(path, "r");
    if (r.f == NULL) {
        fprintf(stderr, "%s: cannot open %s: %s\n", prog, path, strerror(errno));
        return 0;
    }
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
    do c = fgetc(r.f);
    while (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f');
    if (c != EOF) {
        fprintf(stderr, "%s: %s: unexpected data after 'gamma m'\n", prog, path);
        goto done;
    }
    if (ferror(r.f)) {
        fprintf(stderr, "%s: %s: read error\n", prog, path);
        goto done;
    }
    ok = 1;
done:
    fclose(r.f);
    if (!ok) free_input(in);
    return ok;
}

#endif
