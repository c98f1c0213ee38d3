#!/usr/bin/env bash
# Build the BA example end to end and run it:
#   1. the arrayad CLI (cargo build --release -p arrayad)
#   2. gen_ba, and a generated input target/ba-example/ba_n20_m500_p3000.txt
#   3. libba.so + libba.h from examples/ba.arr (Jacobian w.r.t. cam, x, w)
#   4. main.c against the library: the sparse Jacobian, block by block
#
# usage: examples/ba/run.sh [INPUT_FILE]
#   INPUT_FILE  an ADBench BA file to run instead of the generated one
#               (e.g. ../shared/data/adbench/ba/ba1_n49_m7776_p31843.txt)
# Works from any directory; outputs go to target/ba-example/ of the repository.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$script_dir/../.." && pwd)"
out="$root/target/ba-example"
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
    input="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
fi
mkdir -p "$out"

echo "==> building the arrayad CLI (release)"
cargo build --release -p arrayad --manifest-path "$root/Cargo.toml"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
arrayad="$target_dir/release/arrayad"

if [ -z "$input" ]; then
    "$cc" -std=c99 -O2 -Wall -Werror "$script_dir/gen_ba.c" -o "$out/gen_ba"
    input="$out/ba_n20_m500_p3000.txt"
    echo "==> generating $input"
    "$out/gen_ba" 20 500 3000 > "$input"
fi

echo "==> arrayad build examples/ba.arr -o $out/libba.so --export ba_obs --wrt cam,x,w"
(cd "$root" && "$arrayad" build examples/ba.arr -o "$out/libba.so" --export ba_obs --wrt cam,x,w)

echo "==> compiling main.c"
"$cc" -std=c99 -O2 -Wall -Werror "$script_dir/main.c" -o "$out/ba" -I"$out" -L"$out" -lba -Wl,-rpath,"$out" -lm

echo "==> $out/ba $input"
"$out/ba" "$input"
