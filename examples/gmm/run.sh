#!/usr/bin/env bash
# Build the GMM example end to end and run it:
#   1. the arrayad CLI (cargo build --release -p arrayad)
#   2. gen_gmm, and a generated input target/gmm-example/gmm_d10_K25_n1000.txt
#   3. libgmm.so + libgmm.h from examples/gmm.arr (gradient w.r.t. alphas, means, icf)
#   4. main.c against the library, run with --summary
#
# usage: examples/gmm/run.sh [INPUT_FILE]
#   INPUT_FILE  an ADBench GMM file to run instead of the generated one
#               (e.g. ../shared/data/adbench/gmm/gmm_d64_K100.txt)
# Works from any directory; outputs go to target/gmm-example/ of the repository.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$script_dir/../.." && pwd)"
out="$root/target/gmm-example"
cc="${CC:-cc}"

if [ "$#" -gt 1 ]; then
    echo "usage: $0 [INPUT_FILE]" >&2
    exit 2
fi
input=""
if [ "$#" -eq 1 ]; then
    if [ ! -r "$1" ]; then
        echo "$0: cannot read input file '$1'" >&2
        exit 2
    fi
    # absolute path, so that it stays valid whatever the current directory is
    input="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
fi

mkdir -p "$out"

echo "==> building the arrayad CLI (release)"
cargo build --release -p arrayad --manifest-path "$root/Cargo.toml"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
arrayad="$target_dir/release/arrayad"

echo "==> building gen_gmm"
"$cc" -std=c99 -O2 -Wall -Werror "$script_dir/gen_gmm.c" -o "$out/gen_gmm" -lm

if [ -z "$input" ]; then
    input="$out/gmm_d10_K25_n1000.txt"
    echo "==> generating $input"
    "$out/gen_gmm" 10 25 1000 > "$input"
fi

echo "==> arrayad build examples/gmm.arr -o $out/libgmm.so --export gmm --wrt alphas,means,icf"
(cd "$root" && "$arrayad" build examples/gmm.arr -o "$out/libgmm.so" --export gmm --wrt alphas,means,icf)

echo "==> compiling main.c"
"$cc" -std=c99 -O2 -Wall -Werror "$script_dir/main.c" -o "$out/gmm" \
    -I"$out" -L"$out" -lgmm -Wl,-rpath,"$out" -lm

echo "==> $out/gmm --summary $input"
"$out/gmm" --summary "$input"
