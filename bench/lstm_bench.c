/* lstm_bench: time the ADBench LSTM loss in plain C
 * (shared/bench/adbench_objectives.h) against arrayad's lstm and lstm_grad
 * (loss and gradient with respect to the main and extra parameters), in one
 * run; checks that the losses agree (relative 1e-10).
 *
 *   usage: lstm_bench [--min-time SECONDS] [--flush-subnormals] FILE
 *
 * Build (see bench/run.sh; DIR holds liblstm.so from
 * `arrayad build examples/lstm.arr -o DIR/liblstm.so --export lstm --wrt main,extra`):
 *   cc -std=c99 -O3 -march=native lstm_bench.c -I<shared/bench> -I<examples/lstm> -I<bench> -IDIR \
 *      -LDIR -llstm -Wl,-rpath,DIR -lm
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

#define lstm_objective adbench_lstm_objective
#include "adbench_objectives.h"
#undef lstm_objective

#include "liblstm.h"

static const char *prog = "lstm_bench";

#include "bench_common.h"
#include "lstm_input.h"

typedef struct {
    const lstm_input *in;
    double value, *d_main, *d_extra;
} ctx_t;

static void (*volatile c_objective)(int, int, int, const double *, const double *, const double *, const double *,
                                    double *) = adbench_lstm_objective;

static volatile double sink;

static int call(int which, void *p) {
    ctx_t *c = (ctx_t *)p;
    const lstm_input *in = c->in;
    int32_t rc = 0;
    if (which == BENCH_C)
        c_objective((int)in->l, (int)in->c, (int)in->b, in->main_params, in->extra_params, in->state, in->seq,
                    &c->value);
    else if (which == BENCH_PRIMAL)
        rc = lstm(in->l, in->b, in->c, in->main_params, in->extra_params, in->state, in->seq, &c->value);
    else
        rc = lstm_grad(in->l, in->b, in->c, in->main_params, in->extra_params, in->state, in->seq, &c->value,
                       c->d_main, c->d_extra);
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", prog, lstm_last_error());
        return 1;
    }
    sink = c->value;
    return 0;
}

int main(int argc, char **argv) {
    const char *path;
    double min_time, c_value, ours, grad_value, rel;
    lstm_input in;
    ctx_t c;
    int status = 0;
    if (bench_args(argc, argv, "gradient", &min_time, &path)) return 2;
    if (!read_lstm_input(path, &in)) return 1;
    c.in = &in;
    c.d_main = alloc_doubles(8 * in.l * in.b, "the gradient");
    c.d_extra = alloc_doubles(3 * in.b, "the gradient");
    if (!c.d_main || !c.d_extra) return 1;
    printf("input %s: l=%lld c=%lld b=%lld, gradient length %lld\n", path, (long long)in.l, (long long)in.c,
           (long long)in.b, (long long)(8 * in.l * in.b + 3 * in.b));
    if (call(BENCH_C, &c)) return 1;
    c_value = c.value;
    if (call(BENCH_PRIMAL, &c)) return 1;
    ours = c.value;
    if (call(BENCH_DERIVATIVE, &c)) return 1;
    grad_value = c.value;
    rel = fmax(fabs(ours - c_value), fabs(grad_value - c_value)) / fmax(fabs(c_value), 1e-300);
    printf("loss: C %.17g, arrayad lstm %.17g, lstm_grad value %.17g (relative difference %.3e, tolerance 1e-10)\n",
           c_value, ours, grad_value, rel);
    if (!(rel <= 1e-10)) {
        printf("MISMATCH: arrayad's loss differs from the C objective\n");
        status = 1;
    }
    fflush(stdout);
    if (bench_run(call, &c, min_time, NULL)) return 1;
    free(c.d_main);
    free(c.d_extra);
    free_lstm_input(&in);
    return status;
}
