/* gen_gmm: generate a GMM input file in the ADBench format.
 *
 *   usage: gen_gmm D K N [SEED] > file.txt
 *
 * Output layout (whitespace-separated ASCII, see shared/data/adbench/README.md):
 *   d k n
 *   K lines:  alpha_k                         (standard normal)
 *   K lines:  d means                         (uniform in (0,1))
 *   K lines:  d(d+1)/2 icf values             (standard normal)
 *   N lines:  d point coordinates             (standard normal)
 *   gamma m                                   (always "1 0")
 *
 * The distributions follow ADBench's own generator.  The random numbers come
 * from a fixed-seed splitmix64 generator; normals use the cosine branch of
 * Box-Muller (two uniforms per normal, the sine branch is discarded).  The
 * Rust test reference (tests/gmm_reference/mod.rs, generate_gmm) implements
 * exactly the same stream, so both produce identical data for the same
 * (D, K, N, SEED).  Values are printed with %.17g, which round-trips.
 *
 * Dependency-free C99: cc -std=c99 -O2 gen_gmm.c -o gen_gmm -lm */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define GEN_PI 3.14159265358979323846
#define DEFAULT_SEED 42u
#define MAX_DIM 2147483647LL /* ADBench readers use int */

static uint64_t rng_state;

/* splitmix64 (Steele, Lea, Flood 2014) */
static uint64_t splitmix64(void) {
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* uniform double strictly inside (0, 1): 53 random bits, centred in their cell */
static double uniform01(void) {
    return ((double)(splitmix64() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* standard normal, Box-Muller (cosine branch) */
static double normal01(void) {
    double u1 = uniform01();
    double u2 = uniform01();
    return sqrt(-2.0 * log(u1)) * cos(2.0 * GEN_PI * u2);
}

static void usage(void) {
    fprintf(stderr,
            "usage: gen_gmm D K N [SEED] > file.txt\n"
            "  D     dimension of the points (positive integer)\n"
            "  K     number of mixture components (positive integer)\n"
            "  N     number of points (positive integer)\n"
            "  SEED  non-negative integer seed of the generator (default %u)\n"
            "Writes an ADBench GMM input file (d k n, alphas, means, icf, points, \"1 0\")\n"
            "to standard output.\n",
            DEFAULT_SEED);
}

/* parse a positive integer argument no larger than MAX_DIM */
static int parse_positive(const char *name, const char *s, long long *out) {
    char *end = NULL;
    long long v;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (end == s || *end != '\0' || errno == ERANGE || v <= 0 || v > MAX_DIM) {
        fprintf(stderr, "gen_gmm: %s must be a positive integer (at most %lld), got '%s'\n",
                name, MAX_DIM, s);
        return 0;
    }
    *out = v;
    return 1;
}

static int parse_seed(const char *s, uint64_t *out) {
    char *end = NULL;
    unsigned long long v;
    if (s[0] < '0' || s[0] > '9') { /* no sign, no leading blanks */
        fprintf(stderr, "gen_gmm: SEED must be a non-negative integer, got '%s'\n", s);
        return 0;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (*end != '\0' || errno == ERANGE) {
        fprintf(stderr, "gen_gmm: SEED must be a non-negative integer below 2^64, got '%s'\n", s);
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

int main(int argc, char **argv) {
    long long d, k, n, i, j, t;
    uint64_t seed = DEFAULT_SEED;

    if (argc < 4 || argc > 5) {
        usage();
        return 2;
    }
    if (!parse_positive("D", argv[1], &d) || !parse_positive("K", argv[2], &k) ||
        !parse_positive("N", argv[3], &n) || (argc == 5 && !parse_seed(argv[4], &seed))) {
        usage();
        return 2;
    }
    t = d * (d + 1) / 2; /* fits: d <= 2^31 - 1 */
    rng_state = seed;

    printf("%lld %lld %lld\n", d, k, n);
    for (i = 0; i < k; i++) printf("%.17g\n", normal01());
    for (i = 0; i < k; i++)
        for (j = 0; j < d; j++) printf("%.17g%c", uniform01(), j + 1 < d ? ' ' : '\n');
    for (i = 0; i < k; i++)
        for (j = 0; j < t; j++) printf("%.17g%c", normal01(), j + 1 < t ? ' ' : '\n');
    for (i = 0; i < n; i++)
        for (j = 0; j < d; j++) printf("%.17g%c", normal01(), j + 1 < d ? ' ' : '\n');
    printf("1 0\n");

    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("gen_gmm: write error");
        return 1;
    }
    return 0;
}
