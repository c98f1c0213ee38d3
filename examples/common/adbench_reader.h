/* Reading ADBench input files (format in ../shared/data/adbench/README.md) token
 * by token, shared by the example drivers and the benchmarks. Header-only (static
 * functions); the including file defines `static const char *prog`, the program
 * name used in messages. Needs <errno.h>, <stdint.h>, <stdio.h>, <stdlib.h> and
 * <string.h>. */
#ifndef ARRAYAD_EXAMPLES_ADBENCH_READER_H
#define ARRAYAD_EXAMPLES_ADBENCH_READER_H

/* ------------------------------------------------------------------------------ */
/* Reading the ADBench format, token by token                                      */
/* ------------------------------------------------------------------------------ */

typedef struct {
    FILE *f;
    const char *path;
} reader;

/* Report a failed fscanf: end of file, read error, or a token that is not a number. */
static inline void read_failure(const reader *r, int got, const char *what) {
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
static inline int read_size(reader *r, const char *what, int64_t *out) {
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

static inline int read_int(reader *r, const char *what, int64_t *out) {
    long long v;
    int got = fscanf(r->f, "%lld", &v);
    if (got != 1) {
        read_failure(r, got, what);
        return 0;
    }
    *out = (int64_t)v;
    return 1;
}

static inline int read_doubles(reader *r, const char *what, double *v, int64_t count) {
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
static inline double *alloc_doubles(int64_t count, const char *what) {
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
static inline int64_t mul_checked(int64_t a, int64_t b) {
    if (a > INT64_MAX / b) return -1;
    return a * b;
}

/* 1 when nothing but white space is left in the file, else a message and 0 */
static inline int expect_end(reader *r, const char *after) {
    int c;
    do c = fgetc(r->f);
    while (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f');
    if (c != EOF) {
        fprintf(stderr, "%s: %s: unexpected data after %s\n", prog, r->path, after);
        return 0;
    }
    if (ferror(r->f)) {
        fprintf(stderr, "%s: %s: read error\n", prog, r->path);
        return 0;
    }
    return 1;
}

/* opens path for reading into r, or a message and 0 */
static inline int open_reader(reader *r, const char *path) {
    r->path = path;
    r->f = fopen(path, "r");
    if (r->f == NULL) {
        fprintf(stderr, "%s: cannot open %s: %s\n", prog, path, strerror(errno));
        return 0;
    }
    return 1;
}

#endif
