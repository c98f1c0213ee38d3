//! Every unary and binary operation, JIT against Rust reference values and
//! against the reference interpreter (bit for bit).

mod common;
use arrayad_ir::interp::ops;
use arrayad_ir::*;
use common::*;

const XS: [f64; 16] = [
    -2.5,
    -1.0,
    -0.0,
    0.0,
    0.3,
    0.5,
    1.0,
    2.5,
    10.0,
    1e300,
    -1e300,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    4.9e-324,
    -7.25,
];

fn unary_program(op: UnOp, t: Type) -> Program {
    program1(&[t], &[unop_result(op, t)], |b, ps| vec![b.unary(op, v(ps[0]))])
}

fn binary_program(op: BinOp, t: Type) -> Program {
    program1(&[t, t], &[binop_result(op, t)], |b, ps| vec![b.binary(op, v(ps[0]), v(ps[1]))])
}

fn rust_unary(op: UnOp, x: f64) -> f64 {
    use UnOp::*;
    match op {
        Neg => -x,
        Exp => x.exp(),
        Log => x.ln(),
        Sqrt => x.sqrt(),
        Sin => x.sin(),
        Cos => x.cos(),
        Tan => x.tan(),
        Tanh => x.tanh(),
        Sinh => x.sinh(),
        Cosh => x.cosh(),
        Asin => x.asin(),
        Acos => x.acos(),
        Atan => x.atan(),
        Log1p => x.ln_1p(),
        Expm1 => x.exp_m1(),
        Erf => ops::erf(x),
        Lgamma => arrayad_runtime::lgamma(x),
        Abs => x.abs(),
        Floor => x.floor(),
        Ceil => x.ceil(),
        Sign => ops::sign(x),
        Digamma => arrayad_runtime::digamma(x),
        Not | ToF64 | ToI64 => unreachable!(),
    }
}

#[test]
fn every_f64_unary_op_matches_rust_and_the_interpreter() {
    for op in UnOp::ALL.iter().copied().filter(|o| o.is_math()) {
        let p = unary_program(op, Type::F64);
        let m = jit(&p);
        for x in XS {
            let got = m.call("f", &[Value::F64(x)]).unwrap();
            let want = Value::F64(rust_unary(op, x));
            assert!(same(&got[0], &want), "{}({x}) = {:?}, want {want:?}", op.name(), got[0]);
            let interp = interp::run(&p, FuncId(0), &[Value::F64(x)]).unwrap();
            assert!(same(&got[0], &interp[0]), "{}({x}): JIT {:?}, interpreter {:?}", op.name(), got[0], interp[0]);
        }
    }
}

#[test]
fn digamma_is_the_interpreters_bit_for_bit() {
    let p = unary_program(UnOp::Digamma, Type::F64);
    let m = jit(&p);
    for k in -40..400 {
        let x = k as f64 * 0.0731 - 1.3;
        let got = m.call("f", &[Value::F64(x)]).unwrap();
        assert!(same(&got[0], &Value::F64(ops::digamma(x))), "digamma({x})");
    }
}

#[test]
fn conversions_and_integer_negation() {
    let p = unary_program(UnOp::ToI64, Type::F64);
    let m = jit(&p);
    for (x, want) in [
        (2.9, 2),
        (-2.9, -2),
        (f64::NAN, 0),
        (1e30, i64::MAX),
        (-1e30, i64::MIN),
        (f64::INFINITY, i64::MAX),
        (f64::NEG_INFINITY, i64::MIN),
        (-0.5, 0),
    ] {
        assert_eq!(m.call("f", &[Value::F64(x)]).unwrap(), vec![Value::I64(want)], "i64({x})");
        assert_eq!(run_both(&p, &[Value::F64(x)]).unwrap(), vec![Value::I64(want)]);
    }
    let p = unary_program(UnOp::ToF64, Type::I64);
    for x in [0i64, -3, i64::MAX, i64::MIN, 1 << 53 | 1] {
        assert_eq!(run_both(&p, &[Value::I64(x)]).unwrap(), vec![Value::F64(x as f64)]);
    }
    let p = unary_program(UnOp::Neg, Type::I64);
    for x in [0i64, -3, i64::MAX, i64::MIN] {
        assert_eq!(run_both(&p, &[Value::I64(x)]).unwrap(), vec![Value::I64(x.wrapping_neg())]);
    }
    let p = unary_program(UnOp::Not, Type::BOOL);
    assert_eq!(run_both(&p, &[Value::Bool(true)]).unwrap(), vec![Value::Bool(false)]);
    assert_eq!(run_both(&p, &[Value::Bool(false)]).unwrap(), vec![Value::Bool(true)]);
}

fn rust_f64(op: BinOp, x: f64, y: f64) -> Value {
    use BinOp::*;
    match op {
        Add => Value::F64(x + y),
        Sub => Value::F64(x - y),
        Mul => Value::F64(x * y),
        Div => Value::F64(x / y),
        Pow => Value::F64(x.powf(y)),
        Atan2 => Value::F64(x.atan2(y)),
        Polygamma => Value::F64(ops::polygamma(x, y)),
        Min => Value::F64(ops::min_f64(x, y)),
        Max => Value::F64(ops::max_f64(x, y)),
        Eq => Value::Bool(x == y),
        Ne => Value::Bool(x != y),
        Lt => Value::Bool(x < y),
        Le => Value::Bool(x <= y),
        Gt => Value::Bool(x > y),
        Ge => Value::Bool(x >= y),
        Rem | And | Or => unreachable!(),
    }
}

#[test]
fn every_f64_binary_op_matches_rust_and_the_interpreter() {
    use BinOp::*;
    for op in [Add, Sub, Mul, Div, Pow, Atan2, Polygamma, Min, Max, Eq, Ne, Lt, Le, Gt, Ge] {
        let p = binary_program(op, Type::F64);
        let m = jit(&p);
        for x in XS {
            for y in XS {
                let args = [Value::F64(x), Value::F64(y)];
                let got = m.call("f", &args).unwrap();
                let want = rust_f64(op, x, y);
                assert!(same(&got[0], &want), "{}({x}, {y}) = {:?}, want {want:?}", op.name(), got[0]);
                let interp = interp::run(&p, FuncId(0), &args).unwrap();
                assert!(same(&got[0], &interp[0]), "{}({x}, {y}) vs interpreter", op.name());
            }
        }
    }
}

#[test]
fn min_max_nan_and_signed_zero() {
    let min = jit(&binary_program(BinOp::Min, Type::F64));
    let max = jit(&binary_program(BinOp::Max, Type::F64));
    let call =
        |m: &common::Jits, x: f64, y: f64| m.call("f", &[Value::F64(x), Value::F64(y)]).unwrap()[0].as_f64().unwrap();
    assert!(call(&min, f64::NAN, 1.0).is_nan() && call(&min, 1.0, f64::NAN).is_nan());
    assert!(call(&max, f64::NAN, 1.0).is_nan() && call(&max, 1.0, f64::NAN).is_nan());
    assert_eq!(call(&min, 0.0, -0.0).to_bits(), 0.0f64.to_bits(), "the first of equal operands");
    assert_eq!(call(&max, -0.0, 0.0).to_bits(), (-0.0f64).to_bits());
    assert_eq!(call(&min, -3.0, 2.0), -3.0);
    assert_eq!(call(&max, -3.0, 2.0), 2.0);
}

const IS: [i64; 11] = [0, 1, -1, 2, -2, 7, -7, 1000, i64::MAX, i64::MIN, i64::MIN + 1];

#[test]
fn every_i64_binary_op_matches_rust_and_the_interpreter() {
    use BinOp::*;
    for op in [Add, Sub, Mul, Div, Rem, Min, Max, Eq, Ne, Lt, Le, Gt, Ge] {
        let p = binary_program(op, Type::I64);
        let m = jit(&p);
        for x in IS {
            for y in IS {
                let args = [Value::I64(x), Value::I64(y)];
                let got = m.call("f", &args);
                let want = match op {
                    Add => Some(Value::I64(x.wrapping_add(y))),
                    Sub => Some(Value::I64(x.wrapping_sub(y))),
                    Mul => Some(Value::I64(x.wrapping_mul(y))),
                    Div => (y != 0).then(|| Value::I64(x.wrapping_div(y))),
                    Rem => (y != 0).then(|| Value::I64(x.wrapping_rem(y))),
                    Min => Some(Value::I64(x.min(y))),
                    Max => Some(Value::I64(x.max(y))),
                    Eq => Some(Value::Bool(x == y)),
                    Ne => Some(Value::Bool(x != y)),
                    Lt => Some(Value::Bool(x < y)),
                    Le => Some(Value::Bool(x <= y)),
                    Gt => Some(Value::Bool(x > y)),
                    Ge => Some(Value::Bool(x >= y)),
                    _ => unreachable!(),
                };
                match want {
                    Some(w) => assert_eq!(got.as_ref().unwrap()[0], w, "{}({x}, {y})", op.name()),
                    None => {
                        let e = got.as_ref().unwrap_err();
                        assert_eq!(e.kind, ErrorKind::DivisionByZero);
                    }
                }
                let interp = interp::run(&p, FuncId(0), &args);
                match (&got, &interp) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b),
                    (Err(a), Err(b)) => assert_eq!(a, b),
                    _ => panic!("{}({x}, {y}): JIT {got:?} vs interpreter {interp:?}", op.name()),
                }
            }
        }
    }
}

/// Division and remainder by a literal (shifts for powers of two, the
/// instruction otherwise, the checks only for 0 and -1) equal Rust's
/// wrapping division for every dividend, on every backend.
#[test]
fn division_by_literals_matches_rust_and_the_interpreter() {
    let divisors = [1i64, -1, 2, -2, 4, 8, -8, 3, -7, 1 << 40, 1 << 62, -(1 << 62), i64::MIN, i64::MAX, 0];
    for d in divisors {
        for op in [BinOp::Div, BinOp::Rem] {
            let p = program1(&[Type::I64], &[Type::I64], |b, ps| vec![b.binary(op, v(ps[0]), Atom::I64(d))]);
            let m = jit(&p);
            for x in IS.iter().copied().chain([5, -5, 9, -9, 3, -3, 1 << 41, -(1 << 41) - 1]) {
                let args = [Value::I64(x)];
                let got = m.call("f", &args);
                if d == 0 {
                    assert_eq!(got.unwrap_err().kind, ErrorKind::DivisionByZero);
                    continue;
                }
                let want = if op == BinOp::Div { x.wrapping_div(d) } else { x.wrapping_rem(d) };
                assert_eq!(got.as_ref().unwrap()[0], Value::I64(want), "{}({x}, {d})", op.name());
                assert_eq!(got, interp::run(&p, FuncId(0), &args), "{}({x}, {d})", op.name());
            }
        }
    }
}

#[test]
fn min_over_minus_one_does_not_trap() {
    let div = binary_program(BinOp::Div, Type::I64);
    let rem = binary_program(BinOp::Rem, Type::I64);
    assert_eq!(run_both(&div, &[Value::I64(i64::MIN), Value::I64(-1)]).unwrap(), vec![Value::I64(i64::MIN)]);
    assert_eq!(run_both(&rem, &[Value::I64(i64::MIN), Value::I64(-1)]).unwrap(), vec![Value::I64(0)]);
    assert_eq!(run_both(&div, &[Value::I64(-7), Value::I64(2)]).unwrap(), vec![Value::I64(-3)]);
    assert_eq!(run_both(&rem, &[Value::I64(-7), Value::I64(2)]).unwrap(), vec![Value::I64(-1)]);
    let msg =
        expect_err(run_both(&div, &[Value::I64(5), Value::I64(0)]), ErrorKind::DivisionByZero, &["t.arr:3:7", "5"]);
    assert_eq!(msg, "t.arr:3:7: division by zero: integer division of 5 by zero");
    expect_err(
        run_both(&rem, &[Value::I64(-9), Value::I64(0)]),
        ErrorKind::DivisionByZero,
        &["t.arr:3:7", "remainder of -9"],
    );
}

#[test]
fn bool_ops() {
    use BinOp::*;
    for op in [And, Or, Eq, Ne] {
        let p = binary_program(op, Type::BOOL);
        for x in [false, true] {
            for y in [false, true] {
                let want = match op {
                    And => x && y,
                    Or => x || y,
                    Eq => x == y,
                    _ => x != y,
                };
                assert_eq!(run_both(&p, &[Value::Bool(x), Value::Bool(y)]).unwrap(), vec![Value::Bool(want)]);
            }
        }
    }
}

#[test]
fn literals_of_every_type() {
    let p = program1(&[], &[Type::F64, Type::I64, Type::BOOL, Type::BOOL], |_, _| {
        vec![Atom::F64(-1.5), Atom::I64(i64::MIN), Atom::Bool(true), Atom::Bool(false)]
    });
    assert_eq!(
        run_both(&p, &[]).unwrap(),
        vec![Value::F64(-1.5), Value::I64(i64::MIN), Value::Bool(true), Value::Bool(false)]
    );
}
