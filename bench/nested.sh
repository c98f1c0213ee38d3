#!/usr/bin/env bash
# The nested-derivative benchmark (bench/nested_bench.c): Hessian-vector
# product against gradient on GMM (ADBench d20 K50, or a generated input of
# that size) and on a Rosenbrock of n = 10^5, and the BA Jacobian blocks of
# all observations in one call against per-observation f_jacobian calls;
# also the GradBench particle and saddle examples, each variant timed by the
# CLI. One run; median times and ratios.
#
# usage: bench/nested.sh [--min-time SECONDS] [--backend cranelift|llvm]
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$script_dir/.." && pwd)"
shared="$(cd "$root/.." && pwd)/shared"
out="$root/target/bench/nested"
cc="${CC:-cc}"
min_time=1
backend=cranelift
while [ "$#" -gt 0 ]; do
    case "$1" in
        --min-time) min_time="$2"; shift 2 ;;
        --backend) backend="$2"; shift 2 ;;
        *) echo "usage: $0 [--min-time SECONDS] [--backend cranelift|llvm]" >&2; exit 2 ;;
    esac
done
features=()
if [ "$backend" = llvm ]; then
    features=(--features llvm)
    export LLVM_SYS_191_PREFIX="${LLVM_SYS_191_PREFIX:-/usr/lib/llvm-19}"
fi
mkdir -p "$out"
cargo build --release -p arrayad ${features[@]+"${features[@]}"} --manifest-path "$root/Cargo.toml"
arrayad="${CARGO_TARGET_DIR:-$root/target}/release/arrayad"
case "$arrayad" in /*) ;; *) arrayad="$root/$arrayad" ;; esac

gmm="$shared/data/adbench/gmm/gmm_d20_K50.txt"
if [ ! -f "$gmm" ]; then
    "$cc" -std=c99 -O2 "$root/examples/gmm/gen_gmm.c" -o "$out/gen_gmm" -lm
    "$out/gen_gmm" 20 50 1000 > "$out/gmm.txt"
    gmm="$out/gmm.txt"
fi
ba="$shared/data/adbench/ba/ba1_n49_m7776_p31843.txt"
if [ ! -f "$ba" ]; then
    "$cc" -std=c99 -O2 "$root/examples/ba/gen_ba.c" -o "$out/gen_ba" -lm
    "$out/gen_ba" 49 7776 31843 > "$out/ba.txt"
    ba="$out/ba.txt"
fi

"$arrayad" build "$root/examples/gmm.arr" -o "$out/libgmm.so" --backend "$backend" --export gmm \
    --wrt alphas,means,icf
"$arrayad" build "$root/examples/ba.arr" -o "$out/libba.so" --backend "$backend" \
    --export ba_obs,ba_jacobian_blocks --wrt cam,x,w
"$arrayad" build "$script_dir/rosenbrock.arr" -o "$out/librosen.so" --backend "$backend"
"$cc" -std=c99 -O3 -march=native -Wall -Wno-unused-function "$script_dir/nested_bench.c" -o "$out/nested_bench" \
    -I"$root/examples/gmm" -I"$root/examples/ba" -I"$script_dir" -I"$out" \
    -L"$out" -lgmm -lba -lrosen -Wl,-rpath,"$out" -lm
echo "==> nested_bench ($backend)"
"$out/nested_bench" --min-time "$min_time" "$gmm" "$ba"

echo "==> GradBench particle and saddle ($backend, CLI, including compilation)"
for v in ff fr rf rr; do
    for ex in particle saddle; do
        args='[0.0]'
        [ "$ex" = saddle ] && args='[[1.0, 1.0]]'
        start=$(date +%s.%N)
        value=$("$arrayad" run "$root/examples/$ex.arr" "${ex}_$v" --args "$args" --backend "$backend")
        end=$(date +%s.%N)
        printf '%-12s %6.3f s  %s\n' "${ex}_$v" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$value"
    done
done
