/* gmm_jvp_bench: the forward derivative (jvp) of examples/gmm.arr on an
 * ADBench input, on one thread against two, the calls alternating
 * (gmm_set_num_threads) so that both see the same machine; checks that
 * the value and tangent are the same bits on both. Prints
 *
 *   gmm jvp FILE: 1 thread median S ms (min S), 2 threads S ms (min S): X (X); same bits
 *
 * Build (as bench/run.sh builds the library):
 *   arrayad build examples/gmm.arr -o DIR/libgmm.so --export gmm --wrt alphas,means,icf --backend llvm
 *   cc -std=c99 -O2 bench/gmm_jvp_bench.c -o DIR/gmm_jvp_bench -Ibench -Iexamples/gmm -IDIR -LDIR -lgmm \
 *      -Wl,-rpath,DIR -lm
 * usage: gmm_jvp_bench FILE */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libgmm.h"

static const char *prog = "gmm_jvp_bench";
#include "gmm_input.h" /* examples/gmm/gmm_input.h: the ADBench GMM reader */
#include "bench_common.h" /* bench_now, bench_cmp_double */

#define REPS 20

int main(int argc, char **argv) {
    gmm_input in;
    int64_t i, na, nm, ni;
    double *ta, *tm, *ti, t[2][REPS], value[2], tangent[2];
    int r, side;
    if (argc != 2) {
        fprintf(stderr, "usage: %s FILE\n", prog);
        return 2;
    }
    if (!read_input(argv[1], &in)) return 1;
    na = in.k;
    nm = in.k * in.d;
    ni = in.k * in.t;
    ta = alloc_doubles(na, "the tangent of alphas");
    tm = alloc_doubles(nm, "the tangent of means");
    ti = alloc_doubles(ni, "the tangent of icf");
    if (!ta || !tm || !ti) return 1;
    for (i = 0; i < na; i++) ta[i] = sin((double)i);
    for (i = 0; i < nm; i++) tm[i] = cos((double)i);
    for (i = 0; i < ni; i++) ti[i] = sin(0.3 * (double)i);
    for (r = 0; r < REPS; r++) {
        for (side = 0; side < 2; side++) {
            double t0;
            gmm_set_num_threads(side + 1);
            t0 = bench_now();
            if (gmm_jvp(in.k, in.d, in.t, in.n, in.alphas, in.means, in.icf, in.x, in.gamma, in.m, ta, tm, ti,
                        &value[side], &tangent[side]) != 0) {
                fprintf(stderr, "%s: gmm_jvp failed: %s\n", prog, gmm_last_error());
                return 1;
            }
            t[side][r] = bench_now() - t0;
        }
    }
    if (memcmp(&value[0], &value[1], sizeof value[0]) != 0 || memcmp(&tangent[0], &tangent[1], sizeof tangent[0]) != 0) {
        fprintf(stderr, "%s: one thread and two differ: %.17g %.17g against %.17g %.17g\n", prog, value[0],
                tangent[0], value[1], tangent[1]);
        return 1;
    }
    qsort(t[0], REPS, sizeof t[0][0], bench_cmp_double);
    qsort(t[1], REPS, sizeof t[1][0], bench_cmp_double);
    printf("gmm jvp %s: 1 thread median %.3f ms (min %.3f), 2 threads %.3f ms (min %.3f): %.2fx (%.2fx); same bits\n",
           argv[1], t[0][REPS / 2] * 1e3, t[0][0] * 1e3, t[1][REPS / 2] * 1e3, t[1][0] * 1e3,
           t[0][REPS / 2] / t[1][REPS / 2], t[0][0] / t[1][0]);
    free_input(&in);
    free(ta);
    free(tm);
    free(ti);
    return 0;
}
