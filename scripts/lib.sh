# Shared by scripts/sanitize.sh and scripts/valgrind.sh (sourced, not run).
# Sets ROOT (the repository) and ARRAYAD (the CLI: $ARRAYAD_BIN, else
# target/debug/arrayad built by cargo), and makes WORK, a scratch directory
# under target/.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Skips the script (exit 0) with a message.
skip() {
    echo "==> $SCRIPT: skipped: $*"
    exit 0
}

# The arrayad binary.
find_arrayad() {
    if [ -n "${ARRAYAD_BIN:-}" ]; then
        ARRAYAD="$ARRAYAD_BIN"
    else
        (cd "$ROOT" && cargo build --quiet --bin arrayad)
        ARRAYAD="$ROOT/target/debug/arrayad"
    fi
    [ -x "$ARRAYAD" ] || { echo "$SCRIPT: no arrayad binary at $ARRAYAD" >&2; exit 1; }
}

# make_work NAME: a fresh scratch directory target/NAME with the program and
# drivers of scripts/c/ in it.
make_work() {
    WORK="$ROOT/target/$1"
    rm -rf "$WORK"
    mkdir -p "$WORK"
    cp "$ROOT"/scripts/c/stress.arr "$ROOT"/scripts/c/driver.c "$ROOT"/scripts/c/small_stack.c "$WORK"/
}

# The source of big.arr for the small-stack test: `small`, and `chain`, a
# chain of 6000 sines whose reverse pass keeps every value live (a frame of
# about 96 KB).
write_big_arr() {
    {
        echo "def small(x: [n]f64) -> f64 = sum(x * x) + sin(x[0])"
        echo "def chain(x: f64) -> f64 ="
        echo "  let a0 = x"
        awk 'BEGIN { for (i = 1; i <= 6000; i++) printf "  let a%d = sin(a%d) * 1.0001\n", i, i - 1 }'
        echo "  in a6000"
    } >"$1"
}

# timed LABEL COMMAND...: runs the command, then prints its wall time;
# returns the command's status.
timed() {
    local label="$1" start ms rc=0
    shift
    start=$(date +%s%N)
    "$@" || rc=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    printf '    (%s: %d.%d s)\n' "$label" $((ms / 1000)) $((ms % 1000 / 100))
    return "$rc"
}
