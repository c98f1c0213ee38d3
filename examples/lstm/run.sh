#!/usr/bin/env bash
# Build the LSTM example end to end and run it:
#   1. the arrayad CLI (cargo build --release -p arrayad)
#   2. gen_lstm, and a generated input target/lstm-example/lstm_l2_c1024_b14.txt
#   3. liblstm.so + liblstm.h from examples/lstm.arr (gradient w.r.t. main, extra)
#   4. main.c against the library: the loss and its gradient
#
# usage: examples/lstm/run.sh [INPUT_FILE]
#   INPUT_FILE  an ADBench LSTM file to run instead of the generated one
#               (e.g. ../shared/data/adbench/lstm/lstm_l2_c1024.txt)
# Works from any directory; outputs go to target/lstm-example/ of the repository.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$script_dir/../.." && pwd)"
out="$root/target/lstm-example"
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
    "$cc" -std=c99 -O2 -Wall -Werror "$script_dir/gen_lstm.c" -o "$out/gen_lstm"
    input="$out/lstm_l2_c1024_b14.txt"
    echo "==> generating $input"
    "$out/gen_lstm" 2 1024 14 > "$input"
fi

echo "==> arrayad build examples/lstm.arr -o $out/liblstm.so --export lstm --wrt main,extra"
(cd "$root" && "$arrayad" build examples/lstm.arr -o "$out/liblstm.so" --export lstm --wrt main,extra)

echo "==> compiling main.c"
"$cc" -std=c99 -O2 -Wall -Werror "$script_dir/main.c" -o "$out/lstm" -I"$out" -L"$out" -llstm -Wl,-rpath,"$out" -lm

echo "==> $out/lstm --summary $input"
"$out/lstm" --summary "$input"
