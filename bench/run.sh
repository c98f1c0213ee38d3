#!/usr/bin/env bash
# The benchmark of the project: for every backend built in (Cranelift, and
# LLVM when llvm-19-dev is installed) and every ADBench input in
# ../shared/data/adbench (and logsumexp at n = 10^6, bench/lse_bench.c), our
# primal, our derivative and the plain C objective
# of ../shared/bench/adbench_objectives.h (cc -O3 -march=native), timed in one
# run; median times and the ratios derivative/primal, primal/C and
# derivative/C. Prints the per-run output, then a Markdown summary table.
#
# usage: bench/run.sh [--quick] [--min-time SECONDS] [--flush-subnormals] [--out FILE]
#                     [--jax PYTHON] [--gradbench DIR] [--gradbench-evals "EVAL ..."]
#   --quick         only the smallest input of each problem, 0.2 s per timing
#   --flush-subnormals  the drivers flush subnormal numbers to zero (FTZ and
#                   DAZ) before timing, for the C objective and for our calls on
#                   every thread, as XLA's CPU threads do for JAX (GMM d64's
#                   backward pass adds many subnormal products: on some x86-64
#                   CPUs each costs a microcode assist); with --gradbench, the
#                   arrayad tools flush too (GradBench's manual tool does not)
#   --min-time S    seconds per timed function (default 1)
#   --out FILE      also write the summary (with the machine and command) to FILE
#   --jax PYTHON    also time JAX (bench/jax_bench.py; PYTHON's environment has
#                   `pip install jax`) on every input, on one thread (taskset to
#                   one core, XLA's one-thread flags) and on all cores, against
#                   the C objective of the same run
#   --gradbench DIR also run GradBench's own evals (DIR: a checkout of
#                   github.com/gradbench/gradbench) through its harness with
#                   tools/gradbench/run.sh --compare, on one thread and on all
#                   cores, every backend built in beside GradBench's `manual`
#                   tool, and print GradBench's scores and their ratios to
#                   manual's (run.sh sets up the checkout the first time;
#                   with --quick, one run of each workload)
#   --gradbench-evals "E ..."  the evals of --gradbench (default "lse gmm ba
#                   lstm ht")
# arrayad runs every input on one thread and on all cores (ARRAYAD_NUM_THREADS).
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
flush=()
summary_file=""
jax_python=""
gradbench_dir=""
gradbench_evals="lse gmm ba lstm ht"
while [ "$#" -gt 0 ]; do
    case "$1" in
        --quick) quick=1; min_time=0.2; shift ;;
        --min-time) min_time="$2"; shift 2 ;;
        --flush-subnormals) flush=(--flush-subnormals); shift ;;
        --out) summary_file="$2"; shift 2 ;;
        --jax) jax_python="$2"; shift 2 ;;
        --gradbench) gradbench_dir="$2"; shift 2 ;;
        --gradbench-evals) gradbench_evals="$2"; shift 2 ;;
        -h|--help) sed -n '2,36p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "usage: $0 [--quick] [--min-time SECONDS] [--flush-subnormals] [--out FILE] [--jax PYTHON] [--gradbench DIR] [--gradbench-evals \"E ...\"]" >&2; exit 2 ;;
    esac
done

if [ ! -f "$shared/bench/adbench_objectives.h" ]; then
    echo "$0: the C reference $shared/bench/adbench_objectives.h is missing (see BENCHMARK_ANCHORS.md)." >&2
    exit 1
fi
mkdir -p "$out"
if [ -n "$jax_python" ] && ! "$jax_python" -c 'import jax' 2>/dev/null; then
    echo "$0: --jax $jax_python: that Python cannot import jax (pip install jax)" >&2
    exit 2
fi
if [ -n "$gradbench_dir" ]; then
    if [ ! -f "$gradbench_dir/python/gradbench/gradbench/eval.py" ]; then
        echo "$0: --gradbench $gradbench_dir: not a checkout of github.com/gradbench/gradbench" >&2
        exit 2
    fi
    for e in $gradbench_evals; do
        [ -d "$gradbench_dir/python/gradbench/gradbench/evals/$e" ] || {
            echo "$0: --gradbench-evals: GradBench has no eval $e" >&2
            exit 2
        }
    done
fi

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
inputs() {
    local problem="$1" found=()
    shift
    if [ -d "$shared/data/adbench/$problem" ]; then
        for f in "$@"; do
            [ -f "$shared/data/adbench/$problem/$f.txt" ] && found+=("$shared/data/adbench/$problem/$f.txt")
        done
    fi
    if [ "${#found[@]}" -eq 0 ]; then
        "$cc" -std=c99 -O2 -Wall "$root/examples/$problem/gen_$problem.c" -o "$out/gen_$problem" -lm
        case "$problem" in
            gmm) "$out/gen_gmm" 20 50 1000 > "$out/gmm_generated.txt" ;;
            ba) "$out/gen_ba" 21 11315 36455 > "$out/ba_generated.txt" ;;
            lstm) "$out/gen_lstm" 2 1024 14 > "$out/lstm_generated.txt" ;;
        esac
        found=("$out/${problem}_generated.txt")
    fi
    if [ "$quick" -eq 1 ]; then
        found=("${found[0]}")
    fi
    printf '%s\n' "${found[@]}"
}
mapfile -t gmm_inputs < <(inputs gmm gmm_d2_K5 gmm_d10_K25 gmm_d20_K50 gmm_d64_K100)
mapfile -t ba_inputs < <(inputs ba ba1_n49_m7776_p31843 ba2_n21_m11315_p36455 ba3_n161_m48126_p182072 \
    ba4_n372_m47423_p204472 ba5_n257_m65132_p225911)
mapfile -t lstm_inputs < <(inputs lstm lstm_l2_c1024 lstm_l4_c1024)
# logsumexp of one vector at GradBench's largest size (its `lse` eval): the
# input file holds the length; lse_bench.c makes the vector.
echo 1000000 > "$out/lse_n1000000.txt"
lse_inputs=("$out/lse_n1000000.txt")

rows=()
block_rows=()
# problem SOURCE EXPORT WRT BACKEND DERIVATIVE LIB INPUT...: builds examples/SOURCE.arr
# and times examples' problem driver bench/PROBLEM_bench.c on every input.
problem() {
    local problem="$1" source="$2" export="$3" wrt="$4" backend="$5" what="$6" lib="$7"
    shift 7
    local dir="$out/$source-$backend"
    mkdir -p "$dir"
    local start end secs
    start=$(date +%s.%N)
    (cd "$root" && "$arrayad" build "examples/$source.arr" -o "$dir/lib$lib.so" --export "$export" \
        --wrt "$wrt" --backend "$backend")
    end=$(date +%s.%N)
    secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
    echo "==> $source ($backend): arrayad build took $secs s"
    # BA's blocks of all observations in one call, timed beside (ba_bench.c).
    local defines=()
    [[ ",$export," == *",ba_jacobian_blocks,"* ]] && defines=(-DBA_BLOCKS)
    "$cc" -std=c99 -O3 -march=native -Wall ${defines[@]+"${defines[@]}"} "$script_dir/${problem}_bench.c" -o "$dir/bench" \
        -I"$shared/bench" -I"$root/examples/$problem" -I"$script_dir" -I"$dir" -L"$dir" -l"$lib" \
        -Wl,-rpath,"$dir" -lm
    local input name log threads
    for input in "$@"; do
        name="$(basename "$input" .txt)"
        for threads in $thread_counts; do
            log="$dir/$name.log"
            [ "$threads" = 1 ] || log="$dir/$name-t$threads.log"
            echo "==> $source ($backend) $name, $threads thread(s)"
            ARRAYAD_NUM_THREADS="$threads" "$dir/bench" --min-time "$min_time" ${flush[@]+"${flush[@]}"} "$input" | tee "$log"
            rows+=("$(awk -v p="$source" -v b="$backend" -v n="$name" -v w="$what" -v t="$threads" '
                /^C objective/ { c = $4 " " $5 }
                /^arrayad primal/ { pr = $4 " " $5 }
                /^arrayad derivative/ { gr = $4 " " $5 }
                /^ratio derivative\/primal/ { r1 = $3 }
                /^ratio primal\/C/ { r2 = $3 }
                /^ratio derivative\/C/ { r3 = $3 }
                END { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", n, p, b, t, w, c, pr, gr, r1, r2, r3 }' "$log")")
            if grep -q '^arrayad blocks' "$log"; then
                block_rows+=("$(awk -v b="$backend" -v n="$name" -v t="$threads" '
                    /^C objective/ { c = $4 " " $5 }
                    /^arrayad derivative/ { gr = $4 " " $5 }
                    /^arrayad blocks/ { bl = $6 " " $7 }
                    /^ratio blocks\/derivative/ { r = $3 }
                    END { printf "| %s | %s | %s | %s | %s | %s | %s |", n, b, t, c, gr, bl, r }' "$log")")
            fi
        done
    done
}
# arrayad at one thread and at all cores (ARRAYAD_NUM_THREADS; the C
# objective runs on one thread).
thread_counts="1"
[ "$(nproc)" -gt 1 ] && thread_counts="1 $(nproc)"

for backend in $backends; do
    problem gmm gmm gmm alphas,means,icf "$backend" gradient gmm "${gmm_inputs[@]}"
    problem gmm gmm_packed gmm alphas,means,icf "$backend" gradient gmm "${gmm_inputs[@]}"
    problem ba ba ba_obs,ba_jacobian_blocks cam,x,w "$backend" "sparse Jacobian" ba "${ba_inputs[@]}"
    problem lstm lstm lstm main,extra "$backend" gradient lstm "${lstm_inputs[@]}"
    problem lse logsumexp logsumexp v "$backend" gradient lse "${lse_inputs[@]}"
done

# JAX on every input of PROBLEM, at one thread and at all cores, against the
# C objective timed (and its value printed) by the first backend's run of
# the same input.
jax_rows=()
jax_problem() {
    local problem="$1" input name log c_secs expect threads jlog pin
    shift
    for input in "$@"; do
        name="$(basename "$input" .txt)"
        log="$out/$problem-${backends%% *}/$name.log"
        c_secs=$(awk '/^C objective/ { v = $4; u = $5 } END { print v * (u == "ms" ? 1e-3 : (u == "us" ? 1e-6 : 1)) }' "$log")
        expect=$(awk '/^(objective|loss): C / { v = $3; sub(",", "", v); print v }' "$log")
        for threads in 1 "$(nproc)"; do
            jlog="$out/jax-$name-$threads.log"
            echo "==> JAX $problem $name, $threads thread(s)"
            pin=()
            if [ "$threads" = 1 ]; then
                pin=(env XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" taskset -c 0)
            fi
            ${pin[@]+"${pin[@]}"} "$jax_python" "$script_dir/jax_bench.py" "$problem" "$input" \
                --min-time "$min_time" ${expect:+--expect "$expect"} | tee "$jlog"
            jax_rows+=("$(awk -v p="$problem" -v n="$name" -v t="$threads" -v c="$c_secs" '
                /^jax times/ { split($3, a, "="); split($4, b, "="); pr = a[2]; de = b[2] }
                END { printf "| %s | %s | %s | %.3f ms | %.3f ms | %.3f ms | %.3f | %.3f |", n, p, t, 1e3 * c, 1e3 * pr, 1e3 * de, pr / c, de / c }' "$jlog")")
        done
    done
}
if [ -n "$jax_python" ]; then
    jax_problem gmm "${gmm_inputs[@]}"
    jax_problem ba "${ba_inputs[@]}"
    jax_problem lstm "${lstm_inputs[@]}"
fi

# GradBench's evals through its own harness, scored against its `manual`
# tool in the same run, on one thread and on all cores.
gradbench_tables=()
if [ -n "$gradbench_dir" ]; then
    gb_backend=both
    case " $backends " in
        *" llvm "*) [[ " $backends " == *" cranelift "* ]] || gb_backend=llvm ;;
        *) gb_backend=cranelift ;;
    esac
    gb_quick=()
    [ "$quick" -eq 1 ] && gb_quick=(--quick)
    for threads in $thread_counts; do
        gb_out="$out/gradbench-t$threads"
        rm -rf "$gb_out"
        echo "==> GradBench $gradbench_evals, $threads thread(s)"
        # A failed or invalid evaluation is reported in the table (and on
        # standard error) without losing the figures measured above.
        # shellcheck disable=SC2086
        ARRAYAD_NUM_THREADS="$threads" GRADBENCH_DIR="$gradbench_dir" \
            bash "$root/tools/gradbench/run.sh" --compare --backend "$gb_backend" --out "$gb_out" \
            ${gb_quick[@]+"${gb_quick[@]}"} ${flush[@]+"${flush[@]}"} $gradbench_evals ||
            echo "$0: GradBench on $threads thread(s) did not finish cleanly (see above)" >&2
        table="$(python3 "$root/tools/gradbench/score.py" "$gb_out" --against manual --markdown)" || true
        gradbench_tables+=("$threads" "$table")
    done
fi

summary() {
    echo "| input | program | backend | threads | derivative | C objective (1 thread) | primal | derivative | deriv/primal | primal/C | deriv/C |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    if [ "${#block_rows[@]}" -gt 0 ]; then
        echo
        echo "BA's Jacobian blocks of all observations in one call (ba_jacobian_blocks, a parallel map) against the sparse Jacobian's calls of ba_obs_jacobian, one per observation:"
        echo
        echo "| input | backend | threads | C objective (1 thread) | derivative (a call per observation) | blocks (one call) | blocks/derivative |"
        echo "|---|---|---|---|---|---|---|"
        printf '%s\n' "${block_rows[@]}"
    fi
    if [ "${#jax_rows[@]}" -gt 0 ]; then
        echo
        echo "JAX $("$jax_python" -c 'import jax; print(jax.__version__)') (bench/jax_bench.py: jit of the objective and of value_and_grad, BA's blocks by vmap(jacfwd)):"
        echo
        echo "| input | problem | threads | C objective | JAX primal | JAX derivative | primal/C | deriv/C |"
        echo "|---|---|---|---|---|---|---|---|"
        printf '%s\n' "${jax_rows[@]}"
    fi
    local i
    for ((i = 0; i < ${#gradbench_tables[@]}; i += 2)); do
        echo
        echo "GradBench (tools/gradbench/run.sh --compare; arrayad on ${gradbench_tables[i]} thread(s), manual on one; score = 1 / the sum of the mean times):"
        echo
        printf '%s\n' "${gradbench_tables[i + 1]}"
    done
}
echo
echo "==> summary"
summary
if [ -n "$summary_file" ]; then
    {
        echo "# Benchmarks"
        echo
        echo "Measured by \`bash bench/run.sh$( [ "$quick" -eq 1 ] && echo " --quick")$( [ "$quick" -eq 0 ] && [ "$min_time" != 1 ] && echo " --min-time $min_time")$( [ "${#flush[@]}" -gt 0 ] && echo " --flush-subnormals")$( [ -n "$jax_python" ] && echo " --jax PYTHON")$( [ -n "$gradbench_dir" ] && echo " --gradbench DIR --gradbench-evals \"$gradbench_evals\"")\` on $(date -u +%Y-%m-%d):"
        echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"
        echo "$(uname -sr), $("$cc" --version | head -1). Median times; ratios taken in one run"
        echo "(C = ../shared/bench/adbench_objectives.h at \`$cc -O3 -march=native\`)."
        echo
        summary
    } > "$summary_file"
    echo "==> wrote $summary_file"
fi
