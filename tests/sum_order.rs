//! The order of summation (docs/src/reference/builtins.md, "Order of
//! summation"): every `f64` sum, materialised or fused with the
//! comprehension it sums, small body or large, nested, of matrix columns,
//! of a literal array, inside a loop, in derivatives too, gives the same
//! bits on the interpreter and on every backend, and those bits are the
//! ones the definition gives, computed here independently, for sums of
//! one block of 4096 terms and of several.

use arrayad::{Arg, Backend, Module, Options, Value};

const SOURCE: &str = "\
def whole(x: [n]f64) -> f64 = sum(x)
def dot2(x: [n]f64, z: [n]f64) -> f64 = dot(x, z)
def branchy(x: [n]f64, z: [n]f64) -> f64 =
  sum(for i < n => if x[i] > 0.0 then x[i] * z[i] else z[i] - x[i] * 3.0)
def nested(x: [n]f64, z: [n]f64) -> f64 = sum(for i < n => x[i] * sum(for j < n => x[j] * z[i]))
def columns(x: [n]f64, z: [n]f64) -> [2]f64 = sum(for i < n => [x[i], z[i] * x[i]])
def literal(x: [n]f64, z: [n]f64) -> f64 =
  sum([x[0], 1e16, z[0], -1e16, x[0], 1.0, z[0], 3.0, x[0], 2.0, z[0]])
def looped(x: [n]f64, z: [n]f64) -> f64 =
  loop s = 0.0 for k < 3 do s + sum(for i < n => x[i] * z[i] * f64(k + 1))
def scaled(x: [n]f64, z: [n]f64) -> f64 = sum(for i < n => x[i] / 3.0 * z[i] - 0.5)
def triangle(x: [n]f64, z: [n]f64) -> f64 = sum(for r < n => let w = z[r] in sum(for c < r => x[c] * w))
def incl(x: [n]f64, z: [n]f64) -> f64 = sum(for r < n => z[r] * sum(for c < r + 1 => x[c]))
def lower(x: [n]f64, z: [n]f64) -> f64 =
  let a = for r < n, c < n => x[c] * z[r] - x[r]
  in sum(for r < n => sum(for c < r => a[r, c]))
def rows(x: [n]f64, z: [n]f64) -> f64 =
  let m = for r < 3, j < n => x[j] * f64(r + 1) - z[j]
  in sum(for r < 3 => sum(for j < n => m[r, j] * z[j]))
def shifted(x: [n]f64, z: [n]f64) -> f64 =
  let m = n - 2
  in dot(x[0:m], x[1:m + 1]) + dot(z[0:m], x[2:m + 2]) * dot(x[0:m], z[0:m])
def squares(x: [n]f64, z: [n]f64) -> f64 =
  let q = for r < n => z[r] * sum(for c < r => x[c] * z[c])
  in sum(for r < n => q[r] * q[r])
";

fn backends() -> Vec<Backend> {
    let mut out = vec![Backend::Interp, Backend::Cranelift];
    if cfg!(feature = "llvm") {
        out.push(Backend::Llvm);
    }
    out
}

/// The definition, written out: blocks of 4096 terms, each summed by
/// [`spec_block`], the block sums added left to right.
fn spec_sum(xs: &[f64]) -> f64 {
    let mut blocks = xs.chunks(4096).map(spec_block);
    let first = blocks.next().unwrap_or(0.0);
    blocks.fold(first, |s, b| s + b)
}

/// One block: the first `8 * (n / 8)` terms in eight partial sums,
/// combined by halving, then the rest left to right.
fn spec_block(xs: &[f64]) -> f64 {
    let m = xs.len() / 8 * 8;
    let mut p = [0.0f64; 8];
    for i in 0..m {
        p[i % 8] += xs[i];
    }
    let mut s = if m == 0 { 0.0 } else { ((p[0] + p[4]) + (p[2] + p[6])) + ((p[1] + p[5]) + (p[3] + p[7])) };
    for x in &xs[m..] {
        s += x;
    }
    s
}

/// Values of widely spread magnitudes and both signs, so that the order
/// of the additions shows in the result.
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let mant = (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            let exp = ((s >> 3) % 17) as i32 - 8;
            mant * 10f64.powi(exp)
        })
        .collect()
}

fn scalar(v: &[Value]) -> f64 {
    match v {
        [Value::F64(x)] => *x,
        other => panic!("not one f64: {other:?}"),
    }
}

fn bits(v: &Value) -> Vec<u64> {
    match v {
        Value::F64(x) => vec![x.to_bits()],
        other => other.f64_elements().expect("f64 data").iter().map(|x| x.to_bits()).collect(),
    }
}

#[test]
fn sums_follow_the_defined_order_on_every_backend() {
    let modules: Vec<(Backend, Module)> = backends()
        .into_iter()
        .map(|b| (b, Module::compile_with("sums.arr", SOURCE, Options::backend(b)).expect("compiles")))
        .collect();
    let mut order_showed = 0;
    for n in [0usize, 1, 2, 7, 8, 9, 15, 16, 17, 23, 64, 100, 1001] {
        let x = data(n, n as u64 + 1);
        let z = data(n, n as u64 + 1000);
        let args = [Arg::Vector(&x), Arg::Vector(&z)];
        // The value each definition must give, from the definition.
        let products: Vec<f64> = x.iter().zip(&z).map(|(a, b)| a * b).collect();
        let branch_terms: Vec<f64> =
            x.iter().zip(&z).map(|(a, b)| if *a > 0.0 { a * b } else { b - a * 3.0 }).collect();
        let nested_terms: Vec<f64> =
            (0..n).map(|i| x[i] * spec_sum(&x.iter().map(|xj| xj * z[i]).collect::<Vec<_>>())).collect();
        let looped = (0..3)
            .fold(0.0, |s, k| s + spec_sum(&x.iter().zip(&z).map(|(a, b)| a * b * (k + 1) as f64).collect::<Vec<_>>()));
        let scaled: Vec<f64> = x.iter().zip(&z).map(|(a, b)| a / 3.0 * b - 0.5).collect();
        let triangle: Vec<f64> =
            (0..n).map(|r| spec_sum(&x[..r].iter().map(|xc| xc * z[r]).collect::<Vec<_>>())).collect();
        let incl: Vec<f64> = (0..n).map(|r| z[r] * spec_sum(&x[..r + 1])).collect();
        let lower: Vec<f64> =
            (0..n).map(|r| spec_sum(&(0..r).map(|c| x[c] * z[r] - x[r]).collect::<Vec<_>>())).collect();
        let rows: Vec<f64> = (0..3)
            .map(|r| spec_sum(&x.iter().zip(&z).map(|(a, b)| (a * (r + 1) as f64 - b) * b).collect::<Vec<_>>()))
            .collect();
        let squares: Vec<f64> =
            (0..n).map(|r| z[r] * spec_sum(&(0..r).map(|c| x[c] * z[c]).collect::<Vec<_>>())).map(|q| q * q).collect();
        let mut expected = vec![
            ("whole", spec_sum(&x)),
            ("squares", spec_sum(&squares)),
            ("dot2", spec_sum(&products)),
            ("branchy", spec_sum(&branch_terms)),
            ("nested", spec_sum(&nested_terms)),
            ("looped", looped),
            ("scaled", spec_sum(&scaled)),
            ("triangle", spec_sum(&triangle)),
            ("incl", spec_sum(&incl)),
            ("lower", spec_sum(&lower)),
            ("rows", spec_sum(&rows)),
        ];
        if n > 0 {
            let lit = [x[0], 1e16, z[0], -1e16, x[0], 1.0, z[0], 3.0, x[0], 2.0, z[0]];
            expected.push(("literal", spec_sum(&lit)));
        }
        for terms in [&x, &products, &branch_terms] {
            let sequential: f64 = terms.iter().fold(0.0, |s, p| s + p);
            order_showed += usize::from(sequential.to_bits() != spec_sum(terms).to_bits());
        }
        let column_want = [spec_sum(&x), spec_sum(&products)];
        for (b, m) in &modules {
            for (name, want) in &expected {
                let f = m.function(name).unwrap();
                let args: &[Arg] = if *name == "whole" { &args[..1] } else { &args };
                let got = scalar(&f.call(args).unwrap_or_else(|e| panic!("{name} {b:?} n={n}: {e}")));
                assert_eq!(got.to_bits(), want.to_bits(), "{name} on {b:?}, n = {n}: {got} against {want}");
            }
            let got = m.function("columns").unwrap().call(&args).unwrap();
            let got: Vec<f64> = got[0].f64_elements().unwrap().to_vec();
            // z[i] * x[i] is the same product as x[i] * z[i].
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                column_want.map(f64::to_bits),
                "columns on {b:?}, n = {n}"
            );
        }
        // Derivatives: the gradient and a jvp of every definition, bit for
        // bit the interpreter's on every backend.
        let t1 = data(n, 7);
        let t2 = data(n, 8);
        for name in [
            "whole", "dot2", "branchy", "nested", "literal", "looped", "scaled", "triangle", "incl", "lower", "rows",
            "shifted", "squares",
        ] {
            if name == "literal" && n == 0 {
                continue;
            }
            // Cotangents added into rows of `x` one element apart (and two):
            // a backward loop that must not run on pairs of iterations.
            if name == "shifted" && n < 2 {
                continue;
            }
            let args: &[Arg] = if name == "whole" { &args[..1] } else { &args };
            let tans = [Some(Arg::Vector(&t1)), Some(Arg::Vector(&t2))];
            derivatives_agree(&modules, name, args, &tans[..args.len()], n);
        }
    }
    assert!(order_showed >= 8, "the data shows the order of summation in only {order_showed} sums");
}

/// The gradient (with its value) and a jvp of `name` at `args` (tangents
/// `tans`; `n` for messages): bit for bit the same on every backend. The
/// gradient's value.
fn derivatives_agree(modules: &[(Backend, Module)], name: &str, args: &[Arg], tans: &[Option<Arg>], n: usize) -> f64 {
    let mut reference: Option<(Vec<Vec<u64>>, Vec<u64>)> = None;
    let mut value = f64::NAN;
    for (b, m) in modules {
        let f = m.function(name).unwrap();
        let g = f.grad(args).unwrap_or_else(|e| panic!("{name} grad {b:?} n={n}: {e}"));
        value = g.value;
        let mut grads: Vec<Vec<u64>> = g.gradient.iter().map(|(_, v)| bits(v.unwrap())).collect();
        grads.push(vec![g.value.to_bits()]);
        let j = f.jvp(args, tans).unwrap_or_else(|e| panic!("{name} jvp {b:?} n={n}: {e}"));
        let tangent = bits(j.tangent[0].as_ref().unwrap());
        match &reference {
            None => reference = Some((grads, tangent)),
            Some((rg, rt)) => {
                assert_eq!(&grads, rg, "{name} gradient on {b:?}, n = {n}");
                assert_eq!(&tangent, rt, "{name} tangent on {b:?}, n = {n}");
            }
        }
    }
    value
}

/// Sums of more than one block of 4096 terms, materialised or fused,
/// and their derivatives: the definition's bits on every backend (and on
/// the threads of parallel sums, which share out the blocks), which are
/// not those of one block of eight partial sums.
#[test]
fn long_sums_add_their_blocks_in_order() {
    let modules: Vec<(Backend, Module)> = backends()
        .into_iter()
        .map(|b| (b, Module::compile_with("sums.arr", SOURCE, Options::backend(b)).expect("compiles")))
        .collect();
    let mut order_showed = 0;
    for n in [4095usize, 4096, 4097, 8192, 8199, 20_000] {
        let x = data(n, n as u64 + 3);
        let z = data(n, n as u64 + 3000);
        let args = [Arg::Vector(&x), Arg::Vector(&z)];
        let products: Vec<f64> = x.iter().zip(&z).map(|(a, b)| a * b).collect();
        let branch_terms: Vec<f64> =
            x.iter().zip(&z).map(|(a, b)| if *a > 0.0 { a * b } else { b - a * 3.0 }).collect();
        let scaled: Vec<f64> = x.iter().zip(&z).map(|(a, b)| a / 3.0 * b - 0.5).collect();
        let expected = [
            ("whole", spec_sum(&x)),
            ("dot2", spec_sum(&products)),
            ("branchy", spec_sum(&branch_terms)),
            ("scaled", spec_sum(&scaled)),
        ];
        for terms in [&x, &products, &branch_terms, &scaled] {
            order_showed += usize::from(spec_block(terms).to_bits() != spec_sum(terms).to_bits());
        }
        let t1 = data(n, 17);
        let t2 = data(n, 18);
        for (name, want) in expected {
            let args: &[Arg] = if name == "whole" { &args[..1] } else { &args };
            for (b, m) in &modules {
                let got = m.function(name).unwrap().call(args);
                let got = scalar(&got.unwrap_or_else(|e| panic!("{name} {b:?} n={n}: {e}")));
                assert_eq!(got.to_bits(), want.to_bits(), "{name} on {b:?}, n = {n}: {got} against {want}");
            }
            let tans = [Some(Arg::Vector(&t1)), Some(Arg::Vector(&t2))];
            let value = derivatives_agree(&modules, name, args, &tans[..args.len()], n);
            assert_eq!(value.to_bits(), want.to_bits(), "{name} gradient's value, n = {n}");
        }
        let got = modules[0].1.function("columns").unwrap().call(&args).unwrap();
        let got: Vec<u64> = got[0].f64_elements().unwrap().iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, [spec_sum(&x), spec_sum(&products)].map(f64::to_bits), "columns, n = {n}");
    }
    // 16 sums of several blocks (n > 4096), 11 of which differ from one
    // block's eight partial sums with this data.
    assert!(order_showed >= 10, "the data shows the blocks in only {order_showed} sums");
}

/// A comprehension whose elements run a loop stays an array when another
/// comprehension reads it element by element (map fusion,
/// `ir/src/passes/fuse.rs`, moves only bodies without loops): a sum of
/// the reader then has a body of a load and a product, which code
/// generation unrolls into eight independent partial sums, where the
/// fused body would carry them, one element at a time, around the inner
/// loop. A producer without a loop is still fused. (`squares`' values and
/// derivatives are checked above.)
#[test]
fn producers_that_run_loops_are_not_fused_into_their_readers() {
    let src = "\
def squares(x: [n]f64, z: [n]f64) -> f64 =
  let q = for r < n => z[r] * sum(for c < r => x[c] * z[c])
  in sum(for r < n => q[r] * q[r])
def scaled(x: [n]f64, z: [n]f64) -> f64 =
  let q = for r < n => z[r] * x[r] - 1.0
  in sum(for r < n => q[r] * q[r])
";
    let program = arrayad_frontend::compile("fuse.arr", src).unwrap_or_else(|d| panic!("{}", d.render()));
    // The comprehensions at the top of the optimised primal.
    let builds = |name: &str| {
        let f = arrayad::driver::prepare(&program, program.find(name).unwrap()).unwrap();
        f.body
            .stmts
            .iter()
            .filter(|s| matches!(&s.kind, arrayad_ir::StmtKind::Let { expr: arrayad_ir::Expr::Build { .. }, .. }))
            .count()
    };
    assert_eq!(builds("squares"), 2, "squares: the triangle's sums fused into the sum of their squares");
    assert_eq!(builds("scaled"), 1, "scaled: the elementwise product is not fused into the sum of its squares");
}

/// Cranelift, which has no vectoriser, adds the partial sums of a sum
/// whose body is loads along the summed index and arithmetic two lanes at
/// a time (`f64x2` loads and additions: `lower/sum.rs`), in the primal and
/// in the jvp's sums of values and tangents, over rows of matrices and in
/// triangular nests; a body with other work (an index computed in the
/// body) stays scalar. The values are checked above.
#[test]
fn cranelift_adds_sums_in_pairs_of_lanes() {
    let src = "\
def dot2(x: [n]f64, z: [n]f64) -> f64 = dot(x, z)
def rows(a: [m][n]f64, x: [n]f64) -> [m]f64 = for r < m => sum(for j < n => a[r, j] * x[j] / 2.0)
def shifted(x: [n]f64) -> f64 = sum(for i < n => x[(i + 1) % n])
def tri(x: [n]f64, z: [n]f64) -> f64 = sum(for r < n => let w = z[r] in sum(for c < r => x[c] * w))
def incl(x: [n]f64, z: [n]f64) -> f64 = sum(for r < n => z[r] * sum(for c < r + 1 => x[c]))
def lower(a: [m][m]f64) -> f64 = sum(for r < m => sum(for c < r => a[r, c]))
";
    let m = Module::compile_with("pairs.arr", src, Options::backend(Backend::Cranelift)).expect("compiles");
    let ir = |func: &str, kind: &str| m.function(func).unwrap().backend_ir(kind).unwrap().expect("Cranelift IR");
    // tri, incl and lower: the inner index below an enclosing one (or up
    // to it) that is below the extent (`bound_within`).
    let paired = [
        ("dot2", "primal"),
        ("dot2", "jvp"),
        ("rows", "primal"),
        ("rows", "jvp"),
        ("tri", "primal"),
        ("incl", "primal"),
        ("lower", "primal"),
    ];
    for (func, kind) in paired {
        assert!(ir(func, kind).contains("load.f64x2"), "{func} {kind}: no pair loads");
    }
    assert!(!ir("shifted", "primal").contains("f64x2"), "shifted: paired");
}

/// Cranelift runs a map, and the backward loop of a map, two iterations
/// at a time (`lower/pairs.rs`): the product of vectors is computed, and
/// its cotangents added into, with `f64x2` loads and stores, bit for bit
/// as the interpreter computes them. (Rows one element apart run one
/// iteration at a time: `tests/differential.rs`,
/// `backward_rows_one_element_apart_keep_their_order`.)
#[test]
fn cranelift_runs_maps_and_their_backward_loops_on_pairs() {
    let src = "\
def prod(x: [n]f64, z: [n]f64) -> [n]f64 = for i < n => x[i] * z[i] - x[i] / 3.0
def picked(c: bool, x: [n]f64, z: [n]f64) -> [n]f64 =
  let v = if c then x else z
  in for i < n => sqrt(abs(v[i])) + x[i]
def indexed(x: [n]f64) -> [n]f64 = for i < n => x[i] * f64(i)
";
    let m = Module::compile_with("pairs.arr", src, Options::backend(Backend::Cranelift)).expect("compiles");
    let interp = Module::compile_with("pairs.arr", src, Options::backend(Backend::Interp)).expect("compiles");
    let ir = |func: &str, kind: &str| m.function(func).unwrap().backend_ir(kind).unwrap().expect("Cranelift IR");
    assert!(ir("prod", "primal").contains("load.f64x2"), "no pair loads in prod's primal");
    assert!(ir("prod", "vjp").contains("load.f64x2"), "no pair loads in prod's vjp:\n{}", ir("prod", "vjp"));
    assert!(!ir("indexed", "primal").contains("f64x2"), "indexed: paired (an index computed in the body)");
    let all_bits = |v: &[Value]| v.iter().map(bits).collect::<Vec<_>>();
    for n in [0usize, 1, 2, 3, 4, 9, 100] {
        let x = data(n, 3);
        let z = data(n, 4);
        let ct = data(n, 5);
        for (func, args) in [
            ("prod", vec![Arg::Vector(&x), Arg::Vector(&z)]),
            ("picked", vec![Arg::Bool(true), Arg::Vector(&x), Arg::Vector(&z)]),
            ("picked", vec![Arg::Bool(false), Arg::Vector(&x), Arg::Vector(&z)]),
            ("indexed", vec![Arg::Vector(&x)]),
        ] {
            let want = interp.function(func).unwrap().call(&args).unwrap();
            let got = m.function(func).unwrap().call(&args).unwrap();
            assert_eq!(all_bits(&got), all_bits(&want), "{func}, n = {n}");
        }
        let args = [Arg::Vector(&x), Arg::Vector(&z)];
        let cts = [Some(Arg::Vector(&ct))];
        let want = interp.function("prod").unwrap().vjp(&args, &cts).unwrap();
        let got = m.function("prod").unwrap().vjp(&args, &cts).unwrap();
        let ct_bits = |v: &arrayad::Vjp| v.cotangent.iter().map(|(_, c)| c.map(bits)).collect::<Vec<_>>();
        assert_eq!(ct_bits(&got), ct_bits(&want), "prod vjp, n = {n}");
    }
}

/// Conditionals that yield atoms are selects, which Cranelift computes on
/// pairs of lanes (`lower/pairs.rs`, `PairStmt::Select`): the mask of a
/// maximum's ties in logsumexp's gradient, a count of NaNs, a clip in a
/// map, each bit for bit as the interpreter computes it, NaNs and signed
/// zeros included.
#[test]
fn cranelift_selects_lane_by_lane() {
    let src = "\
def lse(v: [n]f64) -> f64 =
  let m = maximum(v)
  in m + log(sum(exp(v - m)))
def nans(x: [n]f64, t: f64) -> f64 =
  sum(for i < n =>
    let a = x[i]
    let s = if a > t then -0.0 else t
    in if a != a then 1.0 else s)
def clip(x: [n]f64, t: f64) -> [n]f64 = for i < n => let a = x[i] in if a < t then t else a
";
    let m = Module::compile_with("selects.arr", src, Options::backend(Backend::Cranelift)).expect("compiles");
    let interp = Module::compile_with("selects.arr", src, Options::backend(Backend::Interp)).expect("compiles");
    let ir = |func: &str, kind: &str| m.function(func).unwrap().backend_ir(kind).unwrap().expect("Cranelift IR");
    // A sum and a map (lse's exp selects lanes too).
    assert!(ir("nans", "primal").contains("bitselect"), "nans: no lane selects");
    assert!(ir("clip", "primal").contains("bitselect"), "clip: no lane selects");
    let all_bits = |v: &[Value]| v.iter().map(bits).collect::<Vec<_>>();
    for n in [0usize, 1, 2, 3, 4, 9, 100, 5001] {
        let mut x = data(n, 6);
        // Ties of the maximum, NaNs, signed zeros.
        for (i, e) in x.iter_mut().enumerate() {
            match i % 7 {
                1 | 4 => *e = 2.5,
                3 if i % 2 == 1 => *e = f64::NAN,
                5 => *e = -0.0,
                _ => {}
            }
        }
        let no_nan: Vec<f64> = x.iter().map(|e| if e.is_nan() { 0.0 } else { *e }).collect();
        let mut cases = vec![
            ("nans", vec![Arg::Vector(&x), Arg::F64(0.25)]),
            ("clip", vec![Arg::Vector(&x), Arg::F64(-0.0)]),
            ("clip", vec![Arg::Vector(&x), Arg::F64(0.5)]),
        ];
        if n > 0 {
            cases.push(("lse", vec![Arg::Vector(&no_nan)]));
        }
        for (func, args) in cases {
            let want = interp.function(func).unwrap().call(&args).unwrap();
            let got = m.function(func).unwrap().call(&args).unwrap();
            assert_eq!(all_bits(&got), all_bits(&want), "{func}, n = {n}");
        }
        if n == 0 {
            continue;
        }
        let args = [Arg::Vector(&no_nan)];
        let want = interp.function("lse").unwrap().vjp(&args, &[Some(Arg::F64(1.0))]).unwrap();
        let got = m.function("lse").unwrap().vjp(&args, &[Some(Arg::F64(1.0))]).unwrap();
        let ct_bits = |v: &arrayad::Vjp| v.cotangent.iter().map(|(_, c)| c.map(bits)).collect::<Vec<_>>();
        assert_eq!(ct_bits(&got), ct_bits(&want), "lse vjp, n = {n}");
    }
}
