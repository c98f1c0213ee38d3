//! Reverse and forward mode on hand-built IR, checked against finite
//! differences with the reference interpreter.

use arrayad_ad::{AdOptions, Which};
use arrayad_ir::builder::Builder;
use arrayad_ir::*;

/// The derivative `which` of definition `id`, from its prepared primal.
fn derived(p: &Program, id: FuncId, active: &[bool], which: Which) -> Function {
    let primal = passes::prepare(p, id);
    let mut d = arrayad_ad::derive(&primal, active, AdOptions::default(), &[which], None).unwrap();
    d.take(which).unwrap()
}

fn func(name: &str, params: &[(&str, Type)]) -> Function {
    let mut f = Function {
        name: name.into(),
        params: vec![],
        body: Block::default(),
        vars: vec![],
        result_types: vec![Type::F64],
        signature: Signature {
            params: params
                .iter()
                .map(|(n, t)| SrcParam {
                    name: n.to_string(),
                    ty: if t.rank == 0 {
                        SrcType::Scalar(t.elem)
                    } else {
                        SrcType::Array {
                            elem: t.elem,
                            dims: (0..t.rank).map(|k| SrcDim::Var(format!("n{k}"))).collect(),
                        }
                    },
                })
                .collect(),
            result: SrcType::Scalar(Scalar::F64),
        },
        loc: Loc::default(),
    };
    for (n, t) in params {
        let v = f.new_var(*n, *t);
        f.params.push(v);
    }
    f
}

/// f(x: [n]f64, y: f64) = sum(for i < n => sin(x[i]) * y) + exp(y) with a loop
/// state multiplying by x[i].
fn sample() -> Program {
    let mut f = func("f", &[("x", Type::array(Scalar::F64, 1)), ("y", Type::F64)]);
    let (x, y) = (f.params[0], f.params[1]);
    let mut b = Builder::new(&mut f);
    let n = b.let_one("n", Expr::Dim { array: x, axis: 0 });
    let i = b.var("i", Type::I64);
    b.begin_block();
    let xi = b.let_one("xi", Expr::Index { array: x, indices: vec![Atom::Var(i)] });
    let s = b.unary(UnOp::Sin, xi);
    let t = b.binary(BinOp::Mul, s, Atom::Var(y));
    let body = b.end_block(vec![t]);
    let arr = b.let_one("arr", Expr::Build { n, index: i, body });
    let sum = b.let_one("sum", Expr::Reduce { op: ReduceOp::Sum, array: arr.as_var().unwrap() });
    let e = b.unary(UnOp::Exp, Atom::Var(y));
    // loop p = y for j < n do p * x[j] + 0.1
    let j = b.var("j", Type::I64);
    let p = b.var("p", Type::F64);
    b.begin_block();
    let xj = b.let_one("xj", Expr::Index { array: x, indices: vec![Atom::Var(j)] });
    let q = b.binary(BinOp::Mul, Atom::Var(p), xj);
    let q2 = b.unary(UnOp::Tanh, q);
    let body = b.end_block(vec![q2]);
    let lp = b.let_one("lp", Expr::Loop { n, index: j, states: vec![p], init: vec![Atom::Var(y)], body });
    let r0 = b.binary(BinOp::Add, sum, e);
    let r = b.binary(BinOp::Add, r0, lp);
    f.body = b.finish(vec![r]);
    Program { file: "t.arr".into(), funcs: vec![f] }
}

fn eval(p: &Program, x: &[f64], y: f64) -> f64 {
    let args = [Value::Array(ArrayValue::f64(vec![x.len()], x.to_vec()).unwrap()), Value::F64(y)];
    interp::run(p, FuncId(0), &args).unwrap()[0].as_f64().unwrap()
}

#[test]
fn vjp_matches_finite_differences() {
    let p = sample();
    verify::verify_program(&p).unwrap();
    let x = vec![0.3, -1.2, 0.7, 2.0];
    let y = 0.4;
    let vjp = derived(&p, FuncId(0), &[true, true], Which::Vjp);
    verify::verify_function(&vjp, None).unwrap_or_else(|e| panic!("{e}\n{}", printer::print_function(&vjp, None)));
    let vp = Program { file: "t.arr".into(), funcs: vec![vjp] };
    let args = [Value::Array(ArrayValue::f64(vec![4], x.clone()).unwrap()), Value::F64(y), Value::F64(1.0)];
    let out = interp::run(&vp, FuncId(0), &args).unwrap_or_else(|e| panic!("{e}\n{}", printer::print_program(&vp)));
    assert!((out[0].as_f64().unwrap() - eval(&p, &x, y)).abs() < 1e-14);
    let gx = out[1].f64_elements().unwrap().to_vec();
    let gy = out[2].as_f64().unwrap();
    let h = 1e-6;
    for k in 0..4 {
        let mut xp = x.clone();
        xp[k] += h;
        let mut xm = x.clone();
        xm[k] -= h;
        let fd = (eval(&p, &xp, y) - eval(&p, &xm, y)) / (2.0 * h);
        assert!((fd - gx[k]).abs() < 1e-6, "x[{k}]: fd {fd} vjp {}", gx[k]);
    }
    let fd = (eval(&p, &x, y + h) - eval(&p, &x, y - h)) / (2.0 * h);
    assert!((fd - gy).abs() < 1e-6, "y: fd {fd} vjp {gy}");

    let jvp = derived(&p, FuncId(0), &[true, true], Which::Jvp);
    verify::verify_function(&jvp, None).unwrap();
    let jp = Program { file: "t.arr".into(), funcs: vec![jvp] };
    let t = vec![0.5, -0.25, 1.0, 0.125];
    let ty = -0.75;
    let args = [
        Value::Array(ArrayValue::f64(vec![4], x.clone()).unwrap()),
        Value::F64(y),
        Value::Array(ArrayValue::f64(vec![4], t.clone()).unwrap()),
        Value::F64(ty),
    ];
    let out = interp::run(&jp, FuncId(0), &args).unwrap();
    let dot: f64 = gx.iter().zip(&t).map(|(a, b)| a * b).sum::<f64>() + gy * ty;
    assert!((out[1].as_f64().unwrap() - dot).abs() < 1e-12);
}

#[test]
fn print_vjp() {
    let p = sample();
    let vjp = derived(&p, FuncId(0), &[true, true], Which::Vjp);
    println!("{}", printer::print_function(&vjp, None));
}

#[test]
fn delta_program_prints_scale_and_index() {
    let p = sample();
    let j = arrayad_ad::linearize(&arrayad_ir::passes::prepare(&p, FuncId(0)), &[true, true]).unwrap();
    let text = arrayad_ad::print_delta(&j);
    assert!(text.contains("Scale("), "{text}");
    assert!(text.contains("Index("), "{text}");
    assert!(text.contains("Loop("), "{text}");
}

#[test]
#[ignore]
fn print_gmm() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/gmm.arr")).unwrap();
    let p = arrayad_frontend::compile("gmm.arr", &src).unwrap();
    let fid = p.find("gmm").unwrap();
    let active =
        arrayad_ad::active_leaves(&p.func(fid).signature, Some(&["alphas".into(), "means".into(), "icf".into()]));
    let prim = arrayad_ir::passes::prepare(&p, fid);
    println!("{}", printer::print_function(&prim, None));
    let vjp = derived(&p, fid, &active, Which::Vjp);
    println!("{}", printer::print_function(&vjp, None));
}
