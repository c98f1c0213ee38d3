#!/usr/bin/env bash
# Compile-time scaling benchmark (not a test): generates programs of growing
# size and prints, per shape and size, the wall time and peak RSS of
# `arrayad run --grad` and `arrayad build`, and the log-log slope of the
# time between consecutive sizes (1 = linear, 2 = quadratic).
#
# Shapes:
#   chain  one definition, a chain of N scalar lets, each using the previous
#   live   one definition, N lets all live until the end (summed last)
#   defs   N small definitions (build exports every one; run calls the last)
#   calls  N definitions, each calling the previous (inlined into one chain)
#   helpers  g0 .. gN, each calling the 10 before it (so each is called 10
#          times): a library of N definitions, kept as calls; built only
#          (--export gN, every entry), since running gN makes about 2^N calls
#   doubling  f0 .. fN, fk = f{k-1}(f{k-1}(x)): 2^N applications of f0 once
#          inlined (its large definitions are kept as calls; the gradient
#          runs all 2^N; the library has every entry of fN, each calling
#          the kept definitions' code); sizes are N (try --sizes "10 14 20 30")
#
# usage: bench/scaling.sh [--sizes "1000 4000 10000 100000"] [--shapes "chain live defs calls"]
#                         [--timeout SECONDS] [--no-build]
# Environment: ARRAYAD (the binary; default target/release/arrayad, built
# with `cargo build --release` when missing). Programs and outputs go to
# target/scaling/.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$script_dir/.." && pwd)"
out="$root/target/scaling"
sizes="1000 4000 10000 100000"
shapes="chain live defs calls"
limit=300
do_build=1
while [ "$#" -gt 0 ]; do
    case "$1" in
        --sizes) sizes="$2"; shift 2 ;;
        --shapes) shapes="$2"; shift 2 ;;
        --timeout) limit="$2"; shift 2 ;;
        --no-build) do_build=0; shift ;;
        -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "usage: $0 [--sizes LIST] [--shapes LIST] [--timeout S] [--no-build]" >&2; exit 2 ;;
    esac
done

bin="${ARRAYAD:-$root/target/release/arrayad}"
if [ -z "${ARRAYAD:-}" ] && [ ! -x "$bin" ]; then
    (cd "$root" && cargo build --release --quiet)
fi
if [ ! -x /usr/bin/time ]; then
    echo "$0: needs GNU time (/usr/bin/time -v) for the peak RSS" >&2
    exit 1
fi
mkdir -p "$out"

# gen SHAPE N FILE: writes the program; prints the definition to run.
gen() {
    local shape="$1" n="$2" file="$3"
    case "$shape" in
        chain)
            awk -v n="$n" 'BEGIN {
                print "def f(x: f64) -> f64 ="
                print "  let a0 = x"
                for (i = 1; i <= n; i++) printf "  let a%d = sin(a%d) * 0.5 + x * %d.0\n", i, i - 1, i % 7 + 1
                printf "  in a%d\n", n
            }' >"$file"
            echo f ;;
        live)
            awk -v n="$n" 'BEGIN {
                print "def f(x: f64) -> f64 ="
                for (i = 1; i <= n; i++) printf "  let a%d = sin(x * %d.0)\n", i, i
                print "  let s1 = a1"
                for (i = 2; i <= n; i++) printf "  let s%d = s%d + a%d\n", i, i - 1, i
                printf "  in s%d\n", n
            }' >"$file"
            echo f ;;
        defs)
            awk -v n="$n" 'BEGIN {
                for (i = 1; i <= n; i++) printf "def g%d(x: f64) -> f64 = sin(x) * %d.0 + x\n", i, i
            }' >"$file"
            echo "g$n" ;;
        calls)
            awk -v n="$n" 'BEGIN {
                print "def g0(x: f64) -> f64 = x"
                for (i = 1; i <= n; i++) printf "def g%d(x: f64) -> f64 = g%d(x) + 1.0\n", i, i - 1
            }' >"$file"
            echo "g$n" ;;
        helpers)
            awk -v n="$n" 'BEGIN {
                print "def g0(x: f64) -> f64 = sin(x)"
                for (i = 1; i <= n; i++) {
                    printf "def g%d(x: f64) -> f64 =", i
                    for (j = 1; j <= 10 && j <= i; j++) printf "%s g%d(x * %d.0e-1)", (j > 1 ? " +" : ""), i - j, j
                    print ""
                }
            }' >"$file"
            echo "g$n" ;;
        doubling)
            awk -v n="$n" 'BEGIN {
                print "def f0(x: f64) -> f64 = x + 0.0000001 * sin(x)"
                for (i = 1; i <= n; i++) printf "def f%d(x: f64) -> f64 = f%d(f%d(x))\n", i, i - 1, i - 1
            }' >"$file"
            echo "f$n" ;;
        *) echo "unknown shape $shape" >&2; exit 2 ;;
    esac
}

# measure ARGS...: runs `arrayad ARGS` under GNU time with the timeout;
# prints "SECONDS RSS_MB STATUS".
measure() {
    local log="$out/time.log"
    local status=0
    timeout "$limit" /usr/bin/time -v -o "$log" "$bin" "$@" >"$out/stdout" 2>"$out/stderr" || status=$?
    local secs rss
    secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {
        n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$log" 2>/dev/null || true)
    rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$log" 2>/dev/null || true)
    local what=ok
    case "$status" in
        0) ;;
        124) what=timeout; secs=">$limit" ;;
        *) what="exit$status" ;;
    esac
    echo "${secs:-?} ${rss:-?} $what"
}

slope() { # slope N0 T0 N1 T1
    awk -v a="$1" -v ta="$2" -v b="$3" -v tb="$4" 'BEGIN {
        if (ta + 0 <= 0.02 || tb + 0 <= 0.02 || ta ~ />/ || tb ~ />/) { print "-"; exit }
        printf "%.2f", log(tb / ta) / log(b / a) }'
}

printf '%-6s %8s | %9s %8s %-8s %6s | %9s %8s %-8s %6s\n' \
    shape size "grad s" "RSS MB" status slope "build s" "RSS MB" status slope
for shape in $shapes; do
    prev_n="" prev_g="" prev_b=""
    for n in $sizes; do
        file="$out/$shape-$n.arr"
        func=$(gen "$shape" "$n" "$file")
        if [ "$shape" = helpers ]; then
            gs="-" gm="-" gstat="-"
        else
            read -r gs gm gstat < <(measure run "$file" "$func" --args '[0.3]' --grad)
        fi
        if [ "$do_build" = 1 ]; then
            extra=()
            if [ "$shape" = doubling ] || [ "$shape" = helpers ]; then
                extra=(--export "$func")
            fi
            read -r bs bm bstat < <(measure build "$file" -o "$out/lib$shape$n.so" "${extra[@]}")
        else
            bs="-" bm="-" bstat="-"
        fi
        gsl="-" bsl="-"
        if [ -n "$prev_n" ]; then
            gsl=$(slope "$prev_n" "$prev_g" "$n" "$gs")
            bsl=$(slope "$prev_n" "$prev_b" "$n" "$bs")
        fi
        printf '%-6s %8s | %9s %8s %-8s %6s | %9s %8s %-8s %6s\n' \
            "$shape" "$n" "$gs" "$gm" "$gstat" "$gsl" "$bs" "$bm" "$bstat" "$bsl"
        prev_n=$n prev_g=$gs prev_b=$bs
    done
done
