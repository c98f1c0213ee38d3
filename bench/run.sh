#!/usr/bin/env bash
# The benchmark of the project: for every backend built in (Cranelift, and
# LLVM when llvm-19-dev is installed) and every ADBench input in
# ../shared/data/adbench, our primal, our derivative and the plain C objective
# of ../shared/bench/adbench_objectives.h (cc -O3 -march=native), timed in one
# run; median times and the ratios derivative/primal, primal/C and
# derivative/C. Prints the per-run output, then a Markdown summary table.
#
# usage: bench/run.sh [--quick] [--min-time SECONDS] [--out FILE]
#   --quick         only the smallest input of each problem, 0.2 s per timing
#   --min-time S    seconds per timed function (default 1)
#   --out FILE      also write the summary (with the machine and command) to FILE
# Environment: CC (default cc), ARRAYAD_BACKENDS (e.g. "cranelift" to skip LLVM).
# Outputs (libraries, drivers, generated inputs) go to target/bench/.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$script_dir/.." && pwd)"
shared="$(cd "$root/.." && pwd)/shared"
out="$root/target/bench"
cc="${CC:-cc}"
min_time=1
quick=0
summary_file=""
while [ "$#" -gt 0 ]; do
    case "$1" in
        --quick) quick=1; min_time=0.2; shift ;;
        --min-time) min_time="$2"; shift 2 ;;
        --out) summary_file="$2"; shift 2 ;;
        -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "usage: $0 [--quick] [--min-time SECONDS] [--out FILE]" >&2; exit 2 ;;
    esac
done

if [ ! -f "$shared/bench/adbench_objectives.h" ]; then
    echo "$0: the C reference $shared/bench/adbench_objectives.h is missing (see BENCHMARK_ANCHORS.md)." >&2
    exit 1
fi
mkdir -p "$out"

features=()
backends="${ARRAYAD_BACKENDS:-}"
if [ -z "$backends" ]; then
    if [ -x /usr/lib/llvm-19/bin/llvm-config ]; then
        backends="cranelift llvm"
    else
        echo "==> llvm-19-dev is not installed: Cranelift only"
        backends="cranelift"
    fi
fi
case " $backends " in *" llvm "*)
    features=(--features llvm)
    export LLVM_SYS_191_PREFIX="${LLVM_SYS_191_PREFIX:-/usr/lib/llvm-19}" ;;
esac

echo "==> building the arrayad CLI (release) ${features[*]:-}"
cargo build --release -p arrayad ${features[@]+"${features[@]}"} --manifest-path "$root/Cargo.toml"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
arrayad="$target_dir/release/arrayad"

# Inputs: the ADBench files, or generated ones when they are absent.
gmm_inputs=()
if [ -d "$shared/data/adbench/gmm" ]; then
    for f in gmm_d2_K5 gmm_d10_K25 gmm_d20_K50 gmm_d64_K100; do
        [ -f "$shared/data/adbench/gmm/$f.txt" ] && gmm_inputs+=("$shared/data/adbench/gmm/$f.txt")
    done
fi
if [ "${#gmm_inputs[@]}" -eq 0 ]; then
    echo "==> no ADBench GMM files: generating d=20 K=50 n=1000"
    "$cc" -std=c99 -O2 -Wall "$root/examples/gmm/gen_gmm.c" -o "$out/gen_gmm" -lm
    "$out/gen_gmm" 20 50 1000 > "$out/gmm_d20_K50_gen.txt"
    gmm_inputs=("$out/gmm_d20_K50_gen.txt")
fi
if [ "$quick" -eq 1 ]; then
    gmm_inputs=("${gmm_inputs[0]}")
fi

rows=()
# gmm VARIANT BACKEND: builds examples/VARIANT.arr and times it on every input.
gmm() {
    local variant="$1" backend="$2" dir="$out/$1-$2"
    mkdir -p "$dir"
    local start end
    start=$(date +%s.%N)
    (cd "$root" && "$arrayad" build "examples/$variant.arr" -o "$dir/libgmm.so" --export gmm \
        --wrt alphas,means,icf --backend "$backend")
    end=$(date +%s.%N)
    local secs
    secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
    echo "==> $variant ($backend): arrayad build took $secs s"
    "$cc" -std=c99 -O3 -march=native -Wall "$script_dir/gmm_bench.c" -o "$dir/gmm_bench" \
        -I"$shared/bench" -I"$root/examples/gmm" -I"$dir" -L"$dir" -lgmm -Wl,-rpath,"$dir" -lm
    local input name log
    for input in "${gmm_inputs[@]}"; do
        name="$(basename "$input" .txt)"
        log="$dir/$name.log"
        echo "==> $variant ($backend) $name"
        "$dir/gmm_bench" --min-time "$min_time" "$input" | tee "$log"
        rows+=("$(awk -v p="$variant" -v b="$backend" -v n="$name" '
            /^C objective/ { c = $5 " " $6 }
            /^arrayad gmm \(primal\)/ { pr = $5 " " $6 }
            /^arrayad gmm_grad/ { gr = $4 " " $5 }
            /^ratio grad\/primal/ { r1 = $3 }
            /^ratio primal\/C/ { r2 = $3 }
            /^ratio grad\/C/ { r3 = $3 }
            END { printf "| GMM %s %s | %s | gradient | %s | %s | %s | %s | %s | %s |", n, p, b, c, pr, gr, r1, r2, r3 }' "$log")")
    done
}

for backend in $backends; do
    gmm gmm "$backend"
    gmm gmm_packed "$backend"
done

summary() {
    echo "| problem | backend | derivative | C objective | primal | derivative | deriv/primal | primal/C | deriv/C |"
    echo "|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
}
echo
echo "==> summary"
summary
if [ -n "$summary_file" ]; then
    {
        echo "# Benchmarks"
        echo
        echo "Measured by \`bash bench/run.sh$( [ "$quick" -eq 1 ] && echo " --quick")\` on $(date -u +%Y-%m-%d):"
        echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"
        echo "$(uname -sr), $("$cc" --version | head -1). Median times; ratios taken in one run"
        echo "(C = ../shared/bench/adbench_objectives.h at \`$cc -O3 -march=native\`)."
        echo
        summary
    } > "$summary_file"
    echo "==> wrote $summary_file"
fi
