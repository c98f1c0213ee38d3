/* gmm: evaluate the ADBench GMM objective and its gradient with a library built by
 *
 *   arrayad build examples/gmm.arr -o libgmm.so --wrt alphas,means,icf
 *
 * usage: gmm [--summary] FILE
 *
 * FILE is an ADBench GMM input (see shared/data/adbench/README.md, or generate one
 * with gen_gmm).  Output:
 *   objective <value>
 *   gradient <count>
 *   <one gradient entry per line: d alphas (K), d means (K*D), d icf (K*T), row-major>
 * With --summary, only the objective, the gradient length, its Euclidean norm and its
 * first (up to) 5 entries are printed.
 *
 * Build (DIR holds libgmm.so and libgmm.h):
 *   cc -std=c99 -O2 -Wall -Werror main.c -IDIR -LDIR -lgmm -Wl,-rpath,DIR -lm
 *
 * Exit status: 0 success, 1 error (unreadable file, malformed input, out of memory,
 * error reported by the library), 2 usage error. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libgmm.h"

static const char *prog = "gmm";

static void usage(void) {
    fprintf(stderr,
            "usage: %s [--summary] FILE\n"
            "  Reads an ADBench GMM input file and prints the objective and its gradient\n"
            "  with respect to alphas, means and icf.\n"
            "  --summary  print only the objective, the gradient length, its Euclidean\n"
            "             norm and its first 5 entries\n",
            prog);
}

#include "gmm_input.h"

/* ------------------------------------------------------------------------------ */

int main(int argc, char **argv) {
    const char *path = NULL;
    int summary = 0, i;
    gmm_input in;
    double value = 0.0, grad_value = 0.0;
    double *grad;
    int64_t kd, kt, count, j;
    int32_t rc;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--summary") == 0)
            summary = 1;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage();
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "%s: unknown option '%s'\n", prog, argv[i]);
            usage();
            return 2;
        } else if (path == NULL)
            path = argv[i];
        else {
            fprintf(stderr, "%s: more than one input file given\n", prog);
            usage();
            return 2;
        }
    }
    if (path == NULL) {
        usage();
        return 2;
    }

    if (!read_input(path, &in)) return 1;
    kd = in.k * in.d;
    kt = in.k * in.t;
    count = in.k + kd + kt;

    rc = gmm(in.k, in.d, in.t, in.n, in.alphas, in.means, in.icf, in.x, in.gamma, in.m, &value);
    if (rc != 0) {
        fprintf(stderr, "%s: gmm failed (code %d): %s\n", prog, (int)rc, gmm_last_error());
        free_input(&in);
        return 1;
    }

    grad = alloc_doubles(count, "the gradient");
    if (grad == NULL) {
        free_input(&in);
        return 1;
    }
    /* the gradient blocks are contiguous: d alphas, d means, d icf */
    rc = gmm_grad(in.k, in.d, in.t, in.n, in.alphas, in.means, in.icf, in.x, in.gamma, in.m,
                  &grad_value, grad, grad + in.k, grad + in.k + kd);
    if (rc != 0) {
        fprintf(stderr, "%s: gmm_grad failed (code %d): %s\n", prog, (int)rc, gmm_last_error());
        free(grad);
        free_input(&in);
        return 1;
    }
    if (!(fabs(grad_value - value) <= 1e-10 * fabs(value)) && grad_value != value)
        fprintf(stderr, "%s: warning: gmm_grad value %.17g differs from gmm value %.17g\n", prog,
                grad_value, value);

    printf("objective %.17g\n", value);
    printf("gradient %lld\n", (long long)count);
    if (summary) {
        double norm2 = 0.0;
        for (j = 0; j < count; j++) norm2 += grad[j] * grad[j];
        printf("gradient_norm %.17g\n", sqrt(norm2));
        printf("gradient_head");
        for (j = 0; j < count && j < 5; j++) printf(" %.17g", grad[j]);
        printf("\n");
    } else {
        for (j = 0; j < count; j++) printf("%.17g\n", grad[j]);
    }

    free(grad);
    free_input(&in);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "%s: write error on standard output\n", prog);
        return 1;
    }
    return 0;
}
