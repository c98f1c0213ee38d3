/* The small-thread-stack test of scripts/sanitize.sh: calls of libbig.so
 * (scripts/sanitize.sh writes big.arr: `chain`, whose reverse pass keeps
 * thousands of values live, a frame far larger than 64 KB, and `small`) on
 * a thread whose stack is 64 KB, laid out as
 *
 *     [ canary: 1 MiB of 0xA5 ][ guard page: PROT_NONE ][ stack: 64 KB ]
 *
 * in memory shared with a forked child that makes the call. Each call must
 * either work (status 0 and the values of the same call on the main
 * thread, bit for bit) or fail cleanly: an error code, or a fault at the
 * guard page (SIGSEGV: frames are probed page by page, so they cannot
 * jump over the guard). In every case the canary below the guard must be
 * intact: a frame that skipped the guard would have written there. `small`
 * must work.
 *
 * Prints one line per call and OK, or FAILED and exits 1. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "libbig.h"

#define STACK (64 * 1024)
#define CANARY (1024 * 1024)

struct job {
    int which;
    int32_t rc;
    double v, d[4];
};

static void *call(void *arg) {
    struct job *j = arg;
    double x[4] = {0.5, -1.0, 2.0, 0.25}, t[4] = {1, 0, 0, 1}, h[4];
    switch (j->which) {
    case 0: j->rc = small_grad(4, x, &j->v, j->d); break;
    case 1: j->rc = small_hvp(4, x, t, &j->v, j->d, h); break;
    case 2: j->rc = chain(0.5, &j->v); break;
    case 3: j->rc = chain_grad(0.5, &j->v, j->d); break;
    case 4: j->rc = chain_jacobian(0.5, &j->v, j->d); break;
    }
    return NULL;
}

static const char *names[] = {"small_grad", "small_hvp", "chain", "chain_grad", "chain_jacobian"};

int main(void) {
    long page = sysconf(_SC_PAGESIZE);
    int which, fails = 0;
    for (which = 0; which < 5; which++) {
        struct job ref = {which, 0, 0, {0}};
        size_t len = CANARY + (size_t)page + STACK, i;
        unsigned char *region;
        struct job *shared;
        pid_t pid;
        int status = 0, intact = 1;

        call(&ref); /* on the main thread's 8 MB stack */
        if (ref.rc != 0) {
            printf("%s: fails on the main thread (%d: %s)\n", names[which], (int)ref.rc, big_last_error());
            fails++;
            continue;
        }
        region = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (region == MAP_FAILED || shared == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        memset(region, 0xA5, CANARY);
        if (mprotect(region + CANARY, (size_t)page, PROT_NONE) != 0) {
            perror("mprotect");
            return 1;
        }
        shared->which = which;
        shared->rc = -1;
        fflush(stdout);
        pid = fork();
        if (pid == 0) {
            pthread_attr_t attr;
            pthread_t th;
            pthread_attr_init(&attr);
            if (pthread_attr_setstack(&attr, region + CANARY + page, STACK) != 0) _exit(20);
            if (pthread_create(&th, &attr, call, shared) != 0) _exit(21);
            pthread_join(th, NULL);
            _exit(0);
        }
        waitpid(pid, &status, 0);
        for (i = 0; i < CANARY; i++) intact &= region[i] == 0xA5;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && shared->rc == 0) {
            int same = shared->v == ref.v && memcmp(shared->d, ref.d, sizeof ref.d) == 0;
            printf("%s on a 64 KB stack: works%s\n", names[which], same ? "" : ", WRONG VALUES");
            fails += !same;
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            printf("%s on a 64 KB stack: error %d\n", names[which], (int)shared->rc);
        } else if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS)) {
            printf("%s on a 64 KB stack: faults at the guard page (signal %d)\n", names[which], WTERMSIG(status));
        } else {
            printf("%s on a 64 KB stack: UNEXPECTED status 0x%x\n", names[which], status);
            fails++;
        }
        if (which < 2 && !(WIFEXITED(status) && shared->rc == 0)) {
            printf("  FAIL: a small frame must work on a 64 KB stack\n");
            fails++;
        }
        if (!intact) {
            printf("  FAIL: memory below the guard page was written\n");
            fails++;
        }
        munmap(region, len);
        munmap(shared, sizeof *shared);
    }
    printf(fails ? "FAILED\n" : "OK\n");
    return fails ? 1 : 0;
}
