#!/usr/bin/env bash
# Builds the fuzz targets (cargo-fuzz, nightly) and runs one or all of them
# for SECONDS each with their seed corpus, then prints the number of
# executions of each (libFuzzer's `stat::number_of_executed_units`).
#
#   fuzz/run.sh TARGET SECONDS [LIBFUZZER_ARGS...]   TARGET: frontend, programs, json_args
#   fuzz/run.sh all SECONDS [LIBFUZZER_ARGS...]      each target in turn
#
# Corpora grow in fuzz/corpus/TARGET (seeded from tests/programs/*.arr and
# examples/*.arr for `frontend`, fuzz/seeds/json_args for `json_args`,
# fuzz/seeds/programs (random bytes: any bytes decode into a program) for
# `programs`); crashes go to
# fuzz/artifacts/TARGET. Reproduce one with
# `cargo +nightly fuzz run -a TARGET fuzz/artifacts/TARGET/crash-...` or,
# on any toolchain, `cargo run --release --example smoke -- TARGET FILE`
# (in fuzz/). Runs under `nice -n 10`. Environment: FUZZ_SANITIZER
# (cargo fuzz --sanitizer: address (default), none, ...), FUZZ_TIMEOUT
# (seconds one input may take, default 30), FUZZ_FEATURES (`llvm`: compare
# the LLVM backend too), ARRAYAD_FUZZ_RUNS (argument sets per generated
# program, default 16).
# Exit status: 0 if no target crashed, 1 otherwise.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

usage() {
    echo "usage: fuzz/run.sh frontend|programs|json_args|all SECONDS [LIBFUZZER_ARGS...]" >&2
    exit 2
}
[ $# -ge 2 ] || usage
which="$1"
seconds="$2"
shift 2
case "$which" in
frontend | programs | json_args) targets=("$which") ;;
all) targets=(frontend programs json_args) ;;
*) usage ;;
esac
[[ "$seconds" =~ ^[0-9]+$ ]] || usage

cargo +nightly fuzz --version >/dev/null 2>&1 || {
    echo "fuzz/run.sh: needs a nightly toolchain and cargo-fuzz (rustup toolchain install nightly; cargo install cargo-fuzz)" >&2
    exit 2
}
sanitizer="${FUZZ_SANITIZER:-address}"
flags=(--debug-assertions --sanitizer "$sanitizer")
# FUZZ_FEATURES=llvm compares the LLVM backend too (needs llvm-19-dev).
if [ -n "${FUZZ_FEATURES:-}" ]; then
    flags+=(--features "$FUZZ_FEATURES")
    export LLVM_SYS_191_PREFIX="${LLVM_SYS_191_PREFIX:-/usr/lib/llvm-19}"
fi

echo "==> cargo +nightly fuzz build ${flags[*]}"
nice -n 10 cargo +nightly fuzz build "${flags[@]}" || exit 1

# The seed corpus of a target, copied into its corpus directory.
seed() {
    mkdir -p "corpus/$1"
    case "$1" in
    frontend) cp ../tests/programs/*.arr ../examples/*.arr "corpus/$1/" ;;
    json_args) cp seeds/json_args/* "corpus/$1/" ;;
    programs) cp seeds/programs/* "corpus/$1/" ;;
    esac
}

# libFuzzer options of a target: `programs` needs long inputs from the
# start (the first bytes are the arguments, the rest the program).
options() {
    case "$1" in
    programs) echo "-len_control=0 -max_len=2048" ;;
    esac
}

# The argument sets each `programs` input runs on (src/programs.rs).
arrayad_fuzz_runs() {
    local r="${ARRAYAD_FUZZ_RUNS:-16}"
    [[ "$r" =~ ^[1-9][0-9]*$ ]] && echo "$r" || echo 16
}

status=0
summary=()
for t in "${targets[@]}"; do
    seed "$t"
    mkdir -p logs
    log="logs/$t.log"
    echo "==> $t for $seconds s (log: fuzz/$log)"
    nice -n 10 cargo +nightly fuzz run "${flags[@]}" "$t" "corpus/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1 -timeout="${FUZZ_TIMEOUT:-30}" \
        -rss_limit_mb=4096 $(options "$t") "$@" >"$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
    grep -E '^(Done|#[0-9]+ *DONE)' "$log" | tail -1
    line="$t: ${execs:-?} executions in $seconds s"
    if [ "$t" = programs ] && [ -n "$execs" ]; then
        line="$line, each $(arrayad_fuzz_runs) program runs: $((execs * $(arrayad_fuzz_runs))) runs"
    fi
    if [ "$rc" != 0 ]; then
        status=1
        line="$line, CRASH (exit $rc): $(grep -o 'Test unit written to .*' "$log" | tail -1)"
        grep -E -m 3 -A 12 "panicked at|ERROR: (AddressSanitizer|libFuzzer)" "$log"
    fi
    echo "$line"
    summary+=("$line")
done
echo "==> executions"
printf '%s\n' "${summary[@]}"
exit "$status"
