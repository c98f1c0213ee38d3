#!/usr/bin/env bash
# Builds libstress.so from scripts/c/stress.arr with the runtime C and the
# generated C wrappers compiled under the sanitizers (ARRAYAD_CFLAGS, see
# README) and runs the C driver scripts/c/driver.c against it: every export
# (primal, jvp, vjp, grad, jacobian, hvp), the error paths (bad sizes,
# negative and overflowing sizes, null pointers, out-of-bounds indices and
# slices, division by zero, empty arrays) and THREADS threads calling
# concurrently, comparing their results bit for bit with a single-threaded
# run; every parallel map runs on the library's pool of 3 threads
# (ARRAYAD_PARALLEL_GRAIN=0), and once on 1, 2 and 7, bit for bit equal.
#
#   1. AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer),
#      every report fatal;
#   2. ThreadSanitizer (the 8-thread stress);
#   3. the small-stack test (scripts/c/small_stack.c, no sanitizer): a
#      thread with a 64 KB stack calls functions with small frames (they
#      must work) and one with a ~96 KB frame (it must work or fault at the
#      guard page, never write below it).
#
# The machine code arrayad generates is not instrumented (Cranelift), only
# the C it links; valgrind (scripts/valgrind.sh) sees all of it.
#
# usage: scripts/sanitize.sh [--quick]   (--quick: fewer iterations, for CI)
# Needs cc (gcc or clang) with -fsanitize support; skips what is missing.
# ARRAYAD_BIN=path uses that arrayad binary instead of building one.
set -euo pipefail
SCRIPT=sanitize.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

iterations=100
[ "${1:-}" = "--quick" ] && iterations=10
CC="${CC:-cc}"
command -v "$CC" >/dev/null || skip "no C compiler ($CC)"

make_work sanitize
cd "$WORK"
echo 'int main(void) { return 0; }' >probe.c
have_flags() { "$CC" "$@" probe.c -o probe >/dev/null 2>&1 && ./probe >/dev/null 2>&1; }
find_arrayad
status=0

# build_and_run NAME SANITIZER_FLAGS ENV...: the library and the driver with
# the flags, then the driver with ENV.
build_and_run() {
    local name="$1" flags="$2"
    shift 2
    mkdir -p "$name"
    ARRAYAD_CFLAGS="$flags -g -fno-omit-frame-pointer" CC="$CC" \
        "$ARRAYAD" build stress.arr -o "$name/libstress.so" || return 1
    # shellcheck disable=SC2086
    "$CC" -std=c99 -Wall -Wextra -Werror -g -O1 $flags -pthread driver.c -o "$name/driver" \
        -I"$name" -L"$name" -lstress -Wl,-rpath,'$ORIGIN' -lm || return 1
    # Every parallel map on the pool (grain 0), on 3 threads.
    env ARRAYAD_PARALLEL_GRAIN=0 ARRAYAD_NUM_THREADS=3 "$@" "$name/driver" "$iterations" 8
}

san="-fsanitize=address,undefined -fno-sanitize-recover=all"
if have_flags $san; then
    echo "==> driver under AddressSanitizer + UndefinedBehaviorSanitizer"
    timed "address,undefined" build_and_run asan "$san" \
        ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 || { echo "==> $SCRIPT: FAILED under ASan/UBSan"; status=1; }
else
    echo "==> $CC has no -fsanitize=address,undefined: skipped"
fi

if have_flags -fsanitize=thread; then
    echo "==> driver under ThreadSanitizer"
    timed "thread" build_and_run tsan "-fsanitize=thread" TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ||
        { echo "==> $SCRIPT: FAILED under TSan"; status=1; }
else
    echo "==> $CC has no -fsanitize=thread (or it cannot run here): skipped"
fi

echo "==> small-stack test (64 KB thread stack)"
write_big_arr big.arr
mkdir -p plain
run_small_stack() {
    CC="$CC" "$ARRAYAD" build big.arr -o plain/libbig.so || return 1
    "$CC" -std=c99 -Wall -Wextra -Werror -g -O1 -pthread small_stack.c -o plain/small_stack \
        -Iplain -Lplain -lbig -Wl,-rpath,'$ORIGIN' -lm || return 1
    plain/small_stack
}
timed "small stack" run_small_stack || { echo "==> $SCRIPT: the small-stack test FAILED"; status=1; }

[ "$status" = 0 ] && echo "==> $SCRIPT: OK"
exit "$status"
