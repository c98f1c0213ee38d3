#!/usr/bin/env bash
# Benchmark arrayad's GMM objective and gradient against the plain C objective of
# ../shared/bench/adbench_objectives.h (the reference of BENCHMARK_ANCHORS.md).
#
# usage: bench/run_gmm_bench.sh [INPUT_FILE] [-- GMM_BENCH_OPTIONS...]
#   INPUT_FILE  an ADBench GMM file (default ../shared/data/adbench/gmm/gmm_d20_K50.txt;
#               if that is absent, a d=20 K=50 n=1000 input is generated with gen_gmm)
#   options after --, e.g. --min-time 2, are passed to gmm_bench
# Environment: ARRAYAD_BACKEND (e.g. llvm) adds --backend to `arrayad build`;
#              CC selects the C compiler (default cc).
# Works from any directory; paths are relative to this script. Outputs go to
# target/gmm-bench/ of the repository.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$script_dir/.." && pwd)"
shared="$(cd "$root/.." && pwd)/shared"
header_dir="$shared/bench"
out="$root/target/gmm-bench"
cc="${CC:-cc}"

input=""
bench_args=()
while [ "$#" -gt 0 ]; do
    case "$1" in
        --) shift; bench_args=("$@"); break ;;
        -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *)
            if [ -n "$input" ]; then
                echo "usage: $0 [INPUT_FILE] [-- GMM_BENCH_OPTIONS...]" >&2
                exit 2
            fi
            if [ ! -r "$1" ]; then
                echo "$0: cannot read input file '$1'" >&2
                exit 2
            fi
            input="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
            shift ;;
    esac
done

if [ ! -f "$header_dir/adbench_objectives.h" ]; then
    echo "$0: the C reference $header_dir/adbench_objectives.h is missing." >&2
    echo "The benchmark compares against that file (see BENCHMARK_ANCHORS.md); it lives in" >&2
    echo "the shared folder next to the repository (../shared) and is not part of it." >&2
    exit 1
fi

mkdir -p "$out"

echo "==> building the arrayad CLI (release)"
cargo build --release -p arrayad --manifest-path "$root/Cargo.toml"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
arrayad="$target_dir/release/arrayad"

if [ -z "$input" ]; then
    input="$shared/data/adbench/gmm/gmm_d20_K50.txt"
    if [ ! -f "$input" ]; then
        echo "==> $input not found: generating a d=20 K=50 n=1000 input with gen_gmm"
        "$cc" -std=c99 -O2 -Wall -Werror "$root/examples/gmm/gen_gmm.c" -o "$out/gen_gmm" -lm
        input="$out/gmm_d20_K50_n1000.txt"
        "$out/gen_gmm" 20 50 1000 > "$input"
    fi
fi

backend_args=()
if [ -n "${ARRAYAD_BACKEND:-}" ]; then
    backend_args=(--backend "$ARRAYAD_BACKEND")
fi
echo "==> arrayad build examples/gmm.arr -o $out/libgmm.so --export gmm --wrt alphas,means,icf ${backend_args[*]:-}"
build_start=$(date +%s.%N)
(cd "$root" && "$arrayad" build examples/gmm.arr -o "$out/libgmm.so" \
    --export gmm --wrt alphas,means,icf ${backend_args[@]+"${backend_args[@]}"})
build_end=$(date +%s.%N)
echo "    (arrayad build took $(awk -v a="$build_start" -v b="$build_end" 'BEGIN { printf "%.3f", b - a }') s)"

echo "==> compiling gmm_bench.c (cc -O3 -march=native)"
"$cc" -std=c99 -O3 -march=native -Wall "$script_dir/gmm_bench.c" -o "$out/gmm_bench" \
    -I"$header_dir" -I"$root/examples/gmm" -I"$out" -L"$out" -lgmm -Wl,-rpath,"$out" -lm

echo "==> $out/gmm_bench ${bench_args[*]:-} $input"
"$out/gmm_bench" ${bench_args[@]+"${bench_args[@]}"} "$input"
