//! Forward mode by dual numbers (Krawiec et al. 2022, Fig. 3; the wrapper of
//! Fig. 15 for structured inputs and outputs): every `f64` carries its
//! tangent, and every primitive maps `(x, dx)` to `(f(x), f'(x) dx)`.

use super::evaluator::{Evaluator, Mode};
use super::shapes::{check_like, f64_value_like};
use super::values::DVal;
use arrayad_ir::interp::{checks, stack};
use arrayad_ir::{ErrorKind, FuncId, Program, RuntimeError, Value};

/// Tangents: `Some(t)`, or `None` for a constant (a tangent known to be
/// zero, which primitives skip so that `0 * inf` never arises from it).
pub(crate) struct Forward;

impl Mode for Forward {
    type D = Option<f64>;

    fn zero(&self) -> Option<f64> {
        None
    }

    fn is_zero(&self, d: &Option<f64>) -> bool {
        d.is_none()
    }

    /// `sum_i c_i dx_i`, left to right.
    fn linear(&mut self, terms: Vec<(f64, Option<f64>)>) -> Option<f64> {
        terms.into_iter().filter_map(|(c, d)| d.map(|d| c * d)).reduce(|a, b| a + b)
    }
}

/// Forward mode by dual numbers: evaluates function `func` of `program` (the
/// original IR, with its calls) on `args` where every `f64` scalar carries a
/// tangent.
///
/// `tangents[i]` is `Some` tangent (an `f64` value of the shape of
/// `args[i]`) for each active parameter with `f64` elements, `None`
/// otherwise (a constant). Returns the results and, for each `f64` result,
/// `Some` tangent of its shape (`None` for the others).
///
/// Only the pure forms of the IR are supported (the frontend produces no
/// others); the imperative forms give an [`ErrorKind::InvalidArgument`]
/// error, as do arguments or tangents that do not match the parameters.
/// Run-time errors are the interpreter's.
pub fn jvp(
    program: &Program,
    func: FuncId,
    args: &[Value],
    tangents: &[Option<Value>],
) -> Result<(Vec<Value>, Vec<Option<Value>>), RuntimeError> {
    checks::check_calls(program, func)?;
    checks::check_args(program, func, args)?;
    if tangents.len() != args.len() {
        let what = format!("{} tangents for {} arguments", tangents.len(), args.len());
        return Err(RuntimeError::new(ErrorKind::InvalidArgument, what));
    }
    for (k, (a, t)) in args.iter().zip(tangents).enumerate() {
        if let Some(t) = t {
            check_like(t, a, &format!("tangent {k}"))?;
        }
    }
    stack::with_deep_stack(|| {
        let duals: Vec<DVal<Option<f64>>> = args
            .iter()
            .zip(tangents)
            .map(|(a, t)| {
                let ts = t.as_ref().and_then(Value::f64_elements);
                DVal::from_value(a, |k| ts.and_then(|ts| ts.get(k).copied()))
            })
            .collect();
        let loc = program.func(func).loc;
        let out = Evaluator::new(program, Forward).call(func, duals, loc)?;
        let values: Vec<Value> = out.iter().map(DVal::primal).collect();
        let tangents = out
            .iter()
            .zip(&values)
            .map(|(o, v)| {
                let ds = o.derivs()?;
                f64_value_like(v, ds.into_iter().map(|d| d.unwrap_or(0.0)).collect())
            })
            .collect();
        Ok((values, tangents))
    })
}
