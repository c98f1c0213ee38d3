/* gen_lstm: write an LSTM problem in the ADBench format (see
 * shared/data/adbench/README.md) with random parameters, state and sequence,
 * so that examples/lstm runs without ../shared.
 *
 *   usage: gen_lstm L C B [SEED] > file.txt */
#include <stdio.h>
#include <stdlib.h>

static unsigned long long state = 88172645463325252ULL;

/* uniform in [0, 1) (xorshift64) */
static double uniform(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (double)(state >> 11) / 9007199254740992.0;
}

int main(int argc, char **argv) {
    long l, c, b, i, count;
    if (argc < 4 || argc > 5 || (l = atol(argv[1])) <= 0 || (c = atol(argv[2])) < 2 || (b = atol(argv[3])) <= 0) {
        fprintf(stderr, "usage: gen_lstm L C B [SEED] > file.txt  (L, B >= 1, C >= 2)\n");
        return 2;
    }
    if (argc == 5) state ^= strtoull(argv[4], NULL, 10) * 2654435761ULL;
    printf("%ld %ld %ld\n\n", l, c, b);
    count = 8 * l * b + 3 * b + 2 * l * b + c * b;
    for (i = 0; i < count; i++) printf("%.17g%c", uniform(), (i + 1) % b == 0 ? '\n' : ' ');
    return 0;
}
