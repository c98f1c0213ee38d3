#!/usr/bin/env bash
# Runs GradBench's own evals (github.com/gradbench/gradbench) against the
# arrayad tool, outside docker, and prints per eval the evaluations answered
# and judged valid by the eval, and GradBench's score.
#
#   GRADBENCH_DIR=/path/to/gradbench bash tools/gradbench/run.sh [OPTIONS] [EVALS...]
#
#   EVALS          default: all 12 (hello lse llsq det ode kmeans gmm ba lstm
#                  ht particle saddle)
#   --backend B    cranelift, llvm or both (default: both when LLVM 19 is
#                  installed, else cranelift)
#   --compare      also run GradBench's hand-written C++ tool `manual` in the
#                  same run, and print each tool's score and its ratio to
#                  manual's (particle and saddle have no manual tool)
#   --quick        --min-seconds 0 and --min-runs 1 (a validity run)
#   --flush-subnormals  the arrayad tools flush subnormal numbers to zero in
#                  every call (named arrayad-BACKEND-flush), as XLA does for
#                  GradBench's jax tool; `manual` keeps IEEE arithmetic
#   --out DIR      where the logs go (default: target/gradbench/logs)
#   -- ARGS        passed on to every eval (e.g. -- --min-seconds 2)
#
# What it sets up in the GradBench checkout (once; each step is skipped when
# done): a Python venv with GradBench's requirements (numpy, scipy, pydantic,
# dataclasses-json) and `pip install -e python/gradbench`; `cpp/json.hpp`
# from Debian's nlohmann-json3-dev (GradBench's Makefile downloads it from
# GitHub, which these machines cannot reach); the `manual` tool (the
# reference the evals validate against: `make -C tools/manual NATIVE=no`);
# GradBench's intermediary (`cargo build --release -p gradbench`); and, if the
# checkout lacks it (snapshots may), `evals/lstm/data/lstm_full.txt`: any
# UTF-8 text of >= 8192 characters whose first 1024 characters hold one in
# U+2001..U+4000 gives the published character width 14. The ht eval runs
# with `--max 11` when the data of hand 12 is missing.
#
# Nothing of GradBench is copied into this repository.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
GRADBENCH_DIR="${GRADBENCH_DIR:-}"
if [ -z "$GRADBENCH_DIR" ] || [ ! -f "$GRADBENCH_DIR/python/gradbench/gradbench/eval.py" ]; then
    echo "run.sh: set GRADBENCH_DIR to a checkout of github.com/gradbench/gradbench" >&2
    exit 2
fi
GRADBENCH_DIR="$(cd "$GRADBENCH_DIR" && pwd)"

all_evals=(hello lse llsq det ode kmeans gmm ba lstm ht particle saddle)
backends=""
compare=0
quick=0
flush=0
out="$repo/target/gradbench/logs"
evals=()
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --backend) backends="$2"; shift 2 ;;
        --compare) compare=1; shift ;;
        --quick) quick=1; shift ;;
        --flush-subnormals) flush=1; shift ;;
        --out) out="$2"; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,33p' "${BASH_SOURCE[0]}"; exit 0 ;;
        -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
        *) evals+=("$1"); shift ;;
    esac
done
[ ${#evals[@]} -gt 0 ] || evals=("${all_evals[@]}")
for e in "${evals[@]}"; do
    case " ${all_evals[*]} " in *" $e "*) ;; *) echo "run.sh: unknown eval $e" >&2; exit 2 ;; esac
done
if [ $quick = 1 ]; then
    extra=(--min-runs 1 --min-seconds 0 "${extra[@]}")
fi

export LLVM_SYS_191_PREFIX="${LLVM_SYS_191_PREFIX:-/usr/lib/llvm-19}"
have_llvm=0
[ -x "$LLVM_SYS_191_PREFIX/bin/llvm-config" ] && have_llvm=1
if [ -z "$backends" ]; then
    if [ $have_llvm = 1 ]; then backends=both; else backends=cranelift; fi
fi
case "$backends" in
    both) backends="cranelift llvm" ;;
    cranelift|llvm) ;;
    *) echo "run.sh: --backend is cranelift, llvm or both" >&2; exit 2 ;;
esac
if [[ " $backends " == *" llvm "* ]] && [ $have_llvm = 0 ]; then
    echo "run.sh: the llvm backend needs LLVM 19 (apt-get install llvm-19-dev)" >&2
    exit 2
fi

# ---- the tool ---------------------------------------------------------------
echo "==> cargo build --release -p arrayad-gradbench" >&2
features=()
[ $have_llvm = 1 ] && features=(--features llvm)
(cd "$repo" && cargo build --release -p arrayad-gradbench "${features[@]}" >&2)
tool="$repo/target/release/arrayad-gradbench"

# ---- GradBench's side ---------------------------------------------------------
venv="${GRADBENCH_VENV:-$GRADBENCH_DIR/.venv-arrayad}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import gradbench, numpy, scipy, pydantic, dataclasses_json' 2>/dev/null; then
    echo "==> Python venv $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet 'numpy~=1.0' 'scipy~=1.0' 'pydantic~=2.0' 'dataclasses-json~=0.6' >&2
    "$venv/bin/pip" install --quiet -e "$GRADBENCH_DIR/python/gradbench" >&2
fi
py="$venv/bin/python"
if [ ! -f "$GRADBENCH_DIR/cpp/json.hpp" ]; then
    if [ ! -f /usr/include/nlohmann/json.hpp ]; then
        echo "==> apt-get install nlohmann-json3-dev" >&2
        apt-get install -y --no-install-recommends nlohmann-json3-dev >&2 || {
            echo "run.sh: needs nlohmann/json.hpp (Debian's nlohmann-json3-dev)" >&2
            exit 2
        }
    fi
    cp /usr/include/nlohmann/json.hpp "$GRADBENCH_DIR/cpp/json.hpp"
fi
echo "==> make -C tools/manual NATIVE=no" >&2
make -s -C "$GRADBENCH_DIR/tools/manual" NATIVE=no >&2
echo "==> cargo build --release -p gradbench (GradBench's intermediary)" >&2
(cd "$GRADBENCH_DIR" && cargo build --release -p gradbench >&2)
gradbench="$GRADBENCH_DIR/target/release/gradbench"
lstm_text="$GRADBENCH_DIR/evals/lstm/data/lstm_full.txt"
if [ ! -s "$lstm_text" ]; then
    echo "==> generating $lstm_text (absent from the checkout)" >&2
    "$py" - "$lstm_text" <<'EOF'
import sys
words = "the quick brown fox jumps over the lazy dog while a long short-term memory reads on".split()
text = ["An LSTM reads this text \u2014 generated for GradBench's lstm eval. "]
i = 0
while sum(len(t) for t in text) < 20000:
    text.append(words[i % len(words)] + (". " if i % 11 == 10 else " "))
    i += 1
open(sys.argv[1], "w", encoding="utf-8").write("".join(text))
EOF
fi
ht_args=()
if ! ls "$GRADBENCH_DIR"/evals/ht/data/complicated_big/hand12_* >/dev/null 2>&1 \
    || [ ! -s "$(ls "$GRADBENCH_DIR"/evals/ht/data/complicated_big/hand12_* | head -1)" ]; then
    ht_args=(--max 11)
fi

# ---- the runs -------------------------------------------------------------------
mkdir -p "$out"
status=0
cd "$GRADBENCH_DIR"
for e in "${evals[@]}"; do
    mkdir -p "$out/$e"
    eval_args=("${extra[@]}")
    [ "$e" = ht ] && eval_args+=("${ht_args[@]}")
    eval_cmd="$py python/gradbench/gradbench/evals/$e/run.py ${eval_args[*]}"
    tools=()
    for b in $backends; do
        if [ $flush = 1 ]; then
            tools+=("arrayad-$b-flush|$tool --backend $b --flush-subnormals")
        else
            tools+=("arrayad-$b|$tool --backend $b")
        fi
    done
    if [ $compare = 1 ] && [ "$e" != particle ] && [ "$e" != saddle ]; then
        tools+=("manual|$py python/gradbench/gradbench/cpp.py manual")
    fi
    for t in "${tools[@]}"; do
        name="${t%%|*}"
        cmd="${t#*|}"
        echo "==> $e: $name" >&2
        if ! "$gradbench" run --eval "$eval_cmd" --tool "$cmd" -o "$out/$e/$name.jsonl" >/dev/null; then
            echo "run.sh: $e with $name did not finish cleanly" >&2
            status=1
        fi
    done
done
cd "$repo"
against=()
[ $compare = 1 ] && against=(--against manual)
"$py" "$here/score.py" "$out" "${against[@]}" || status=1
exit $status
