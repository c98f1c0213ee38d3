#!/usr/bin/env bash
# Memory of reverse mode and of repeated calls (not a test): GradBench's
# RK4 ode eval (tools/gradbench/evals/ode.arr) built with `arrayad build`
# for each backend, its primal and gradient called repeatedly by a C driver
# (bench/memory_bench.c: median time, minor page faults per call, peak RSS),
# and the peak RSS of `arrayad run --grad` with and without --checkpoint.
#
# usage: bench/memory.sh [--n N] [--steps S] [--reps R]   (default 100000 100 5)
# Environment: ARRAYAD (default target/release/arrayad, built when missing),
# ARRAYAD_BACKENDS (default "cranelift llvm" when llvm-19-dev is installed),
# CC (default cc). Outputs go to target/bench/memory/.
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$script_dir/.." && pwd)"
out="$root/target/bench/memory"
n=100000
steps=100
reps=5
while [ "$#" -gt 0 ]; do
    case "$1" in
        --n) n="$2"; shift 2 ;;
        --steps) steps="$2"; shift 2 ;;
        --reps) reps="$2"; shift 2 ;;
        -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "usage: $0 [--n N] [--steps S] [--reps R]" >&2; exit 2 ;;
    esac
done
cc="${CC:-cc}"
. "$script_dir/lib.sh"
bench_setup "$root"
mkdir -p "$out"
src="$root/tools/gradbench/evals/ode.arr"
echo "# bench/memory.sh: ode n=$n s=$steps, $reps calls each ($(date -u +%F), $(nproc) cores)"
for b in $backends; do
    d="$out/$b"
    mkdir -p "$d"
    "$bin" build "$src" -o "$d/libode.so" --export ode,ode_last --entries value,grad --wrt x --backend "$b"
    "$cc" -O2 -std=c99 -o "$d/memory_bench" "$script_dir/memory_bench.c" -I"$d" -L"$d" -lode -Wl,-rpath,"$d" -lm
    echo "## $b (.so, default environment)"
    "$d/memory_bench" "$n" "$steps" "$reps"
done
echo "## arrayad run --grad (Cranelift JIT): peak RSS"
python3 -c "import json; print(json.dumps([[1.0 + 1e-3 * (i % 7) for i in range($n)], $steps]))" >"$out/args.json"
for ck in "" "--checkpoint"; do
    /usr/bin/time -f "%M" -o "$out/rss" "$bin" run "$src" ode_last --args "$out/args.json" --grad --wrt x $ck >/dev/null
    echo "run --grad ${ck:-(taped)}: peak RSS $(( $(cat "$out/rss") / 1024 )) MB"
done
