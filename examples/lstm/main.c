/* lstm: the ADBench LSTM loss and its gradient with respect to the main and
 * extra parameters, with a library built by
 *
 *   arrayad build examples/lstm.arr -o liblstm.so --export lstm --wrt main,extra
 *
 * usage: lstm [--summary] FILE
 *
 * FILE is an ADBench LSTM input (see shared/data/adbench/README.md, or generate
 * one with gen_lstm). Output:
 *   loss <value>
 *   gradient <count>
 *   <one entry per line: d main (8lb), then d extra (3b), row-major>
 * With --summary, only the loss, the gradient length, its norm and its first 5
 * entries.
 *
 * Exit status: 0 success, 1 error, 2 usage error. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "liblstm.h"

static const char *prog = "lstm";

#include "lstm_input.h"

int main(int argc, char **argv) {
    lstm_input in;
    double loss, *d_main, *d_extra, norm = 0.0;
    int64_t i, n_main, n_extra, summary = 0;
    const char *path = NULL;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--summary") == 0)
            summary = 1;
        else if (!path && argv[i][0] != '-')
            path = argv[i];
        else {
            fprintf(stderr, "usage: %s [--summary] FILE\n", prog);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "usage: %s [--summary] FILE\n", prog);
        return 2;
    }
    if (!read_lstm_input(path, &in)) return 1;
    n_main = 8 * in.l * in.b;
    n_extra = 3 * in.b;
    d_main = alloc_doubles(n_main, "the gradient");
    d_extra = alloc_doubles(n_extra, "the gradient");
    if (!d_main || !d_extra) return 1;
    if (lstm_grad(in.l, in.b, in.c, in.main_params, in.extra_params, in.state, in.seq, &loss, d_main, d_extra) != 0) {
        fprintf(stderr, "%s: %s\n", prog, lstm_last_error());
        return 1;
    }
    for (i = 0; i < n_main; i++) norm += d_main[i] * d_main[i];
    for (i = 0; i < n_extra; i++) norm += d_extra[i] * d_extra[i];
    printf("loss %.17g\ngradient %lld\n", loss, (long long)(n_main + n_extra));
    if (summary) {
        printf("gradient_norm %.17g\ngradient_head", sqrt(norm));
        for (i = 0; i < 5 && i < n_main; i++) printf(" %.17g", d_main[i]);
        printf("\n");
    } else {
        for (i = 0; i < n_main; i++) printf("%.17g\n", d_main[i]);
        for (i = 0; i < n_extra; i++) printf("%.17g\n", d_extra[i]);
    }
    free(d_main);
    free(d_extra);
    free_lstm_input(&in);
    return 0;
}
