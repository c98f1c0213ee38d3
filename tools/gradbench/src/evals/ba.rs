//! `ba`: bundle adjustment. The input is one camera, point, weight and
//! feature and the counts `n`, `m`, `p`; the problem is these duplicated
//! (`n` cameras, `m` points, `p` observations, observation `i` of point
//! `i % m` by camera `i % n`), which the glue builds, as GradBench's
//! reference does, before the timed calls. The program computes every
//! observation; the Jacobian is computed inside it, in GradBench's sparse
//! row (CSR) form, of which the output carries the first 30 entries and the
//! last of each list.

use super::{f64_elements, field, i64_elements, object, unknown, Args, Call, Eval, Outcome, Output};
use arrayad::{ArrayData, ArrayValue, Entry, Value};
use serde_json::Value as Json;

pub struct Ba;

/// `count` copies of `row` as a `[count][row.len()]` array.
fn repeated(row: &[f64], count: usize) -> Result<Value, String> {
    let len = row.len().checked_mul(count).ok_or("the problem is too large")?;
    let mut data = Vec::new();
    data.try_reserve_exact(len).map_err(|_| format!("cannot allocate {len} numbers"))?;
    for _ in 0..count {
        data.extend_from_slice(row);
    }
    Ok(Value::Array(ArrayValue { shape: vec![count, row.len()], data: ArrayData::F64(data) }))
}

fn numbers(input: &Json, name: &str, len: usize) -> Result<Vec<f64>, String> {
    let v = field(input, name)?;
    let xs: Option<Vec<f64>> = v.as_array().and_then(|a| a.iter().map(Json::as_f64).collect());
    match xs {
        Some(xs) if xs.len() == len => Ok(xs),
        _ => Err(format!("`{name}` must be a list of {len} numbers, found {v}")),
    }
}

fn count(input: &Json, name: &str) -> Result<usize, String> {
    let v = field(input, name)?;
    v.as_u64()
        .and_then(|x| usize::try_from(x).ok())
        .ok_or_else(|| format!("`{name}` must be a non-negative integer, found {v}"))
}

/// The arguments of `ba_objective` and `ba_jacobian`.
fn args(input: &Json) -> Result<Vec<Value>, String> {
    let (n, m, p) = (count(input, "n")?, count(input, "m")?, count(input, "p")?);
    if n == 0 || m == 0 {
        return Err("`n` and `m` must be positive".into());
    }
    let cam = numbers(input, "cam", 11)?;
    let x = numbers(input, "x", 3)?;
    let feat = numbers(input, "feat", 2)?;
    let w = field(input, "w")?.as_f64().ok_or("`w` must be a number")?;
    let mut obs = Vec::new();
    obs.try_reserve_exact(p.checked_mul(2).ok_or("the problem is too large")?)
        .map_err(|_| format!("cannot allocate {p} observations"))?;
    for i in 0..p {
        obs.extend([(i % n) as i64, (i % m) as i64]);
    }
    Ok(vec![
        repeated(&cam, n)?,
        repeated(&x, m)?,
        Value::Array(ArrayValue { shape: vec![p], data: ArrayData::F64(vec![w; p]) }),
        Value::Array(ArrayValue { shape: vec![p, 2], data: ArrayData::I64(obs) }),
        repeated(&feat, p)?,
    ])
}

/// The first 30 entries and the last of a list.
fn head_and_last<T: Copy + Into<Json>>(xs: &[T]) -> Json {
    let mut out: Vec<Json> = xs.iter().take(30).map(|x| (*x).into()).collect();
    if xs.len() > 30 {
        if let Some(last) = xs.last() {
            out.push((*last).into());
        }
    }
    Json::Array(out)
}

fn objective(o: &Outcome, p: usize) -> Result<Json, String> {
    let r = f64_elements(o.value(0)?)?;
    let w = f64_elements(o.value(1)?)?;
    let (Some(r), Some(w)) = (r.get(..2), w.first()) else {
        return Err("an empty problem (p = 0) has no errors to show".into());
    };
    Ok(object(vec![
        ("reproj_error", object(vec![("elements", Json::from(r.to_vec())), ("repeated", Json::from(p))])),
        ("w_err", object(vec![("element", Json::from(*w)), ("repeated", Json::from(p))])),
    ]))
}

fn jacobian(o: &Outcome) -> Result<Json, String> {
    Ok(object(vec![
        ("rows", head_and_last(i64_elements(o.value(0)?)?)),
        ("cols", head_and_last(i64_elements(o.value(1)?)?)),
        ("vals", head_and_last(f64_elements(o.value(2)?)?)),
    ]))
}

impl Eval for Ba {
    fn module(&self) -> &'static str {
        "ba"
    }
    fn source(&self) -> &'static str {
        include_str!("../../evals/ba.arr")
    }
    fn entries(&self) -> &'static [(&'static str, Entry)] {
        &[("ba_objective", Entry::Value), ("ba_jacobian", Entry::Value)]
    }
    fn call(&self, function: &str, input: &Json) -> Result<Call, String> {
        let def = match function {
            "objective" => "ba_objective",
            "jacobian" => "ba_jacobian",
            _ => return Err(unknown(self.module(), function, &["objective", "jacobian"])),
        };
        let p = count(input, "p")?;
        let output: Output =
            if def == "ba_objective" { Box::new(move |o| objective(o, p)) } else { Box::new(jacobian) };
        Ok(Call { def, entry: Entry::Value, args: Args::Values(args(input)?), directions: Vec::new(), output })
    }
}
