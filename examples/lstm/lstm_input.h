/* Reading an ADBench LSTM input file (format in ../shared/data/adbench/README.md),
 * shared by the example driver main.c and the benchmark bench/lstm_bench.c.
 * Header-only; the including file defines `static const char *prog`. */
#ifndef ARRAYAD_EXAMPLES_LSTM_INPUT_H
#define ARRAYAD_EXAMPLES_LSTM_INPUT_H

#include "../common/adbench_reader.h"

typedef struct {
    int64_t l, c, b;
    double *main_params;  /* [l][8][b] */
    double *extra_params; /* [3][b] */
    double *state;        /* [l][2][b] */
    double *seq;          /* [c][b] */
} lstm_input;

static inline void free_lstm_input(lstm_input *in) {
    free(in->main_params);
    free(in->extra_params);
    free(in->state);
    free(in->seq);
}

static inline int read_lstm_input(const char *path, lstm_input *in) {
    reader r;
    int ok = 0;
    int64_t nm, ns, nseq;

    memset(in, 0, sizeof *in);
    if (!open_reader(&r, path)) return 0;
    if (!read_size(&r, "l (layers)", &in->l) || !read_size(&r, "c (characters)", &in->c) ||
        !read_size(&r, "b (bits per character)", &in->b))
        goto done;
    nm = mul_checked(8 * in->l, in->b);
    ns = mul_checked(2 * in->l, in->b);
    nseq = mul_checked(in->c, in->b);
    if (nm < 0 || ns < 0 || nseq < 0 || in->c < 2) {
        fprintf(stderr, "%s: %s: problem size l=%lld c=%lld b=%lld is unusable\n", prog, path, (long long)in->l,
                (long long)in->c, (long long)in->b);
        goto done;
    }
    if ((in->main_params = alloc_doubles(nm, "main parameters")) == NULL ||
        (in->extra_params = alloc_doubles(3 * in->b, "extra parameters")) == NULL ||
        (in->state = alloc_doubles(ns, "state")) == NULL || (in->seq = alloc_doubles(nseq, "sequence")) == NULL)
        goto done;
    if (!read_doubles(&r, "main parameters", in->main_params, nm) ||
        !read_doubles(&r, "extra parameters", in->extra_params, 3 * in->b) ||
        !read_doubles(&r, "state", in->state, ns) || !read_doubles(&r, "sequence", in->seq, nseq) ||
        !expect_end(&r, "the sequence"))
        goto done;
    ok = 1;
done:
    fclose(r.f);
    if (!ok) free_lstm_input(in);
    return ok;
}

#endif
