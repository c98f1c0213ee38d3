#!/usr/bin/env bash
# What a call costs beside its arithmetic (not a test): the functions of
# bench/calls.arr built as a shared library for each backend and called
# repeatedly by a C driver (bench/calls_bench.c) against the plain C loop
# (cc -O3 -march=native) computing the same thing: a map with a large
# result, a reduction, a gradient as large as its input, log-sum-exp and
# its gradient at P_MAP / 10 (GradBench's lse size by default); their
# speedup on every core against one thread (calls of the two alternating,
# in one run); then the time of `arrayad build` for all entry points
# against `--entries value` of GradBench's det chain (export det8).
# Threads as ARRAYAD_NUM_THREADS says (default: every core).
#
# usage: bench/calls.sh [--map P] [--sum P] [--reps R]   (default 10000000 100000 20)
# Environment: ARRAYAD (default target/release/arrayad, built when missing),
# ARRAYAD_BACKENDS (default "cranelift llvm" when llvm-19-dev is installed),
# CC (default cc). Outputs go to target/bench/calls/.
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$script_dir/.." && pwd)"
out="$root/target/bench/calls"
pmap=10000000
psum=100000
reps=20
while [ "$#" -gt 0 ]; do
    case "$1" in
        --map) pmap="$2"; shift 2 ;;
        --sum) psum="$2"; shift 2 ;;
        --reps) reps="$2"; shift 2 ;;
        -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "usage: $0 [--map P] [--sum P] [--reps R]" >&2; exit 2 ;;
    esac
done
cc="${CC:-cc}"
. "$script_dir/lib.sh"
bench_setup "$root"
mkdir -p "$out"
echo "# bench/calls.sh: map p=$pmap, sum p=$psum, $reps calls each ($(date -u +%F), $(nproc) cores)"
for b in $backends; do
    d="$out/$b"
    mkdir -p "$d"
    "$bin" build "$script_dir/calls.arr" -o "$d/libcalls.so" --backend "$b"
    "$cc" -O3 -march=native -std=c99 -o "$d/calls_bench" "$script_dir/calls_bench.c" -I"$d" -L"$d" -lcalls -Wl,-rpath,"$d" -lm
    echo "## $b"
    "$d/calls_bench" "$pmap" "$psum" "$reps"
done
echo "## arrayad build of det8 (tools/gradbench/evals/det.arr)"
for b in $backends; do
    for entries in "" "value"; do
        start=$(date +%s.%N)
        "$bin" build "$root/tools/gradbench/evals/det.arr" -o "$out/libdet.so" --export det8 --backend "$b" \
            ${entries:+--entries "$entries"} 2>/dev/null
        end=$(date +%s.%N)
        printf '%-10s entries %-6s %s s\n' "$b" "${entries:-all}" "$(awk "BEGIN { printf \"%.2f\", $end - $start }")"
    done
done
