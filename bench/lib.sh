# Sourced by bench/memory.sh and bench/calls.sh: the backends to measure
# and the arrayad binary.
#
# bench_setup ROOT sets `backends` ($ARRAYAD_BACKENDS, else "cranelift
# llvm" when llvm-19-dev is installed, else "cranelift") and `bin`
# ($ARRAYAD, else ROOT/target/release/arrayad, built with the features the
# backends need).
bench_setup() {
    local root="$1"
    backends="${ARRAYAD_BACKENDS:-}"
    if [ -z "$backends" ]; then
        if [ -x /usr/lib/llvm-19/bin/llvm-config ]; then backends="cranelift llvm"; else backends="cranelift"; fi
    fi
    bin="${ARRAYAD:-$root/target/release/arrayad}"
    if [ -z "${ARRAYAD:-}" ]; then
        local features=()
        case " $backends " in *" llvm "*) features=(--features llvm) ;; esac
        (cd "$root" && LLVM_SYS_191_PREFIX="${LLVM_SYS_191_PREFIX:-/usr/lib/llvm-19}" cargo build --release --quiet "${features[@]}")
    fi
}
