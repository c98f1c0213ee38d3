#!/usr/bin/env bash
# Runs the C driver of scripts/sanitize.sh (scripts/c/driver.c against
# libstress.so built normally from scripts/c/stress.arr: every export, the
# error paths, THREADS threads comparing results) under valgrind:
#
#   1. memcheck: no invalid read or write, no use of uninitialised values,
#      no definitely lost block (each exiting thread frees its context);
#      unlike the sanitizers it also watches the generated machine code;
#   2. helgrind: no data race or lock-order problem between the threads
#      (8 threads, fewer iterations: helgrind is slow).
#
# usage: scripts/valgrind.sh [--quick]   (--quick: fewer iterations, for CI)
# Needs cc and valgrind; skips when either is missing.
# ARRAYAD_BIN=path uses that arrayad binary instead of building one.
set -euo pipefail
SCRIPT=valgrind.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

iterations=100
helgrind_iterations=30
if [ "${1:-}" = "--quick" ]; then
    iterations=10
    helgrind_iterations=5
fi
CC="${CC:-cc}"
command -v "$CC" >/dev/null || skip "no C compiler ($CC)"
command -v valgrind >/dev/null || skip "valgrind is not installed"

make_work valgrind
cd "$WORK"
find_arrayad
status=0

echo "==> building libstress.so and the driver"
CC="$CC" "$ARRAYAD" build stress.arr -o libstress.so
"$CC" -std=c99 -Wall -Wextra -Werror -g -O1 -pthread driver.c -o driver \
    -I. -L. -lstress -Wl,-rpath,'$ORIGIN' -lm

echo "==> driver under valgrind (memcheck)"
# Every parallel map on the library's pool of 3 threads (grain 0).
timed memcheck env ARRAYAD_PARALLEL_GRAIN=0 ARRAYAD_NUM_THREADS=3 \
    valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite \
    --track-origins=yes ./driver "$iterations" 8 ||
    { echo "==> $SCRIPT: FAILED under memcheck"; status=1; }

echo "==> driver under valgrind --tool=helgrind"
# Helgrind does not model atomic loads and stores (plain moves on x86-64):
# the pool's workers do not poll here (ARRAYAD_POLL_US=0) and wait on its
# condition variables only; ThreadSanitizer, which knows atomics, checks
# the polling (scripts/sanitize.sh).
timed helgrind env ARRAYAD_POLL_US=0 valgrind -q --tool=helgrind --error-exitcode=9 ./driver "$helgrind_iterations" 8 ||
    { echo "==> $SCRIPT: FAILED under helgrind"; status=1; }

[ "$status" = 0 ] && echo "==> $SCRIPT: OK"
exit "$status"
