/* gen_ba: write a bundle adjustment problem in the ADBench BA format (see
 * shared/data/adbench/README.md) with a random camera, point, weight and
 * feature, so that examples/ba runs without ../shared.
 *
 *   usage: gen_ba N M P [SEED] > file.txt
 *
 * The camera is a plausible one: a small rotation, a centre in front of the
 * point, a focal length of a few hundred pixels, small distortion. */
#include <stdio.h>
#include <stdlib.h>

static unsigned long long state = 88172645463325252ULL;

/* uniform in [lo, hi) (xorshift64) */
static double uniform(double lo, double hi) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return lo + (hi - lo) * (double)(state >> 11) / 9007199254740992.0;
}

int main(int argc, char **argv) {
    long n, m, p;
    int i;
    if (argc < 4 || argc > 5 || (n = atol(argv[1])) <= 0 || (m = atol(argv[2])) <= 0 || (p = atol(argv[3])) <= 0) {
        fprintf(stderr, "usage: gen_ba N M P [SEED] > file.txt\n");
        return 2;
    }
    if (argc == 5) state ^= strtoull(argv[4], NULL, 10) * 2654435761ULL;
    printf("%ld %ld %ld\n", n, m, p);
    for (i = 0; i < 3; i++) printf("%.17g ", uniform(-1.0, 1.0));
    for (i = 0; i < 3; i++) printf("%.17g ", uniform(-50.0, 50.0));
    printf("%.17g ", uniform(300.0, 500.0));
    for (i = 0; i < 2; i++) printf("%.17g ", uniform(-10.0, 10.0));
    for (i = 0; i < 2; i++) printf("%.17g ", uniform(-0.1, 0.1));
    printf("\n");
    for (i = 0; i < 3; i++) printf("%.17g ", uniform(-5.0, 5.0));
    printf("\n%.17g\n", uniform(0.2, 1.0));
    printf("%.17g %.17g\n", uniform(0.0, 1000.0), uniform(0.0, 1000.0));
    return 0;
}
