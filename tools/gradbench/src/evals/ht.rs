//! `ht`: hand tracking. The residuals of a posed hand model against measured
//! points and their Jacobian: forward mode of the objective in 26 (28)
//! directions by [`arrayad::Function::jvp_many`], the primal once per pass
//! of the vector jvp (one pass of 26 lanes in the simple case, where only
//! `theta: [26]f64` is active; passes of eight with the `us` of a size
//! variable; `arrayad_ad::jvp_lane_count`) (the program's `ht_jacobian_*`
//! compute the same with one `jvp`
//! per column inside the language). An empty `us` is the "simple" case
//! (points at vertices), else the "complicated" one (points on triangles,
//! with two more, packed, columns for `us`: residual `i` depends on `us[i]`
//! only, so one direction perturbs every point's `us[i, k]`).

use super::{field, to_json, unknown, Call, Eval, Outcome};
use arrayad::{ArrayData, ArrayValue, Entry, Value};
use serde_json::Value as Json;

pub struct Ht;

impl Eval for Ht {
    fn module(&self) -> &'static str {
        "ht"
    }
    fn source(&self) -> &'static str {
        include_str!("../../evals/ht.arr")
    }
    fn wrt(&self) -> Option<&'static [&'static str]> {
        Some(&["theta", "us"])
    }
    fn entries(&self) -> &'static [(&'static str, Entry)] {
        &[
            ("ht_objective_simple", Entry::Value),
            ("ht_objective_complicated", Entry::Value),
            ("ht_objective_simple", Entry::Jvp),
            ("ht_objective_complicated", Entry::Jvp),
        ]
    }
    fn call(&self, function: &str, input: &Json) -> Result<Call, String> {
        let data = field(input, "data")?;
        let model = field(data, "model")?;
        let us = field(input, "us")?;
        let simple = us.as_array().is_some_and(Vec::is_empty);
        let def = if simple { "ht_objective_simple" } else { "ht_objective_complicated" };
        let jacobian = match function {
            "objective" => false,
            "jacobian" => true,
            _ => return Err(unknown(self.module(), function, &["objective", "jacobian"])),
        };
        let mut args = vec![field(input, "theta")?.clone()];
        if !simple {
            // Two per point: pairs, or a flat list of numbers.
            let list = us.as_array().ok_or("`us` must be a list")?;
            if list.iter().all(Json::is_number) {
                args.push(Json::Array(list.chunks(2).map(|c| Json::Array(c.to_vec())).collect()));
            } else {
                args.push(us.clone());
            }
        }
        for name in ["parents", "base_relatives", "inverse_base_absolutes", "base_positions", "weights"] {
            args.push(field(model, name)?.clone());
        }
        if !simple {
            args.push(field(model, "triangles")?.clone());
        }
        args.push(field(model, "is_mirrored")?.clone());
        args.push(field(data, "correspondences")?.clone());
        args.push(field(data, "points")?.clone());
        if !jacobian {
            return Ok(Call::json(def, Entry::Value, args, |o| Ok(to_json(o.value(0)?))));
        }
        let n_us = if simple { 0 } else { args[1].as_array().map_or(0, Vec::len) };
        let n_leaves = args.len();
        let mut call = Call::json(def, Entry::Jvp, args, jacobian_output);
        call.directions = directions(n_leaves, simple, n_us);
        Ok(call)
    }
}

/// The directions of the Jacobian's columns: for `us` (complicated only)
/// every point's `us[i, k]` for k = 0, 1, then each of the 26 thetas.
fn directions(n_leaves: usize, simple: bool, n_us: usize) -> Vec<Vec<Option<Value>>> {
    let mut out = Vec::new();
    if !simple {
        for k in 0..2 {
            let data = (0..2 * n_us).map(|e| if e % 2 == k { 1.0 } else { 0.0 }).collect();
            let mut d = vec![None; n_leaves];
            d[1] = Some(Value::Array(ArrayValue { shape: vec![n_us, 2], data: ArrayData::F64(data) }));
            out.push(d);
        }
    }
    for j in 0..26 {
        let data = (0..26).map(|e| if e == j { 1.0 } else { 0.0 }).collect();
        let mut d = vec![None; n_leaves];
        d[0] = Some(Value::Array(ArrayValue { shape: vec![26], data: ArrayData::F64(data) }));
        out.push(d);
    }
    out
}

/// The Jacobian `[n * 3][columns]` from the tangents of the residuals in
/// each direction (column).
fn jacobian_output(o: &Outcome) -> Result<Json, String> {
    let Outcome::JvpMany(j) = o else { return Err("expected the tangents of a jvp".into()) };
    let columns: Vec<&[f64]> = j
        .tangents
        .iter()
        .map(|t| {
            t.first()
                .and_then(Option::as_ref)
                .ok_or_else(|| "no tangent of the residuals".to_string())
                .and_then(super::f64_elements)
        })
        .collect::<Result<_, String>>()?;
    let rows = columns.first().map_or(0, |c| c.len());
    let rows: Vec<Json> =
        (0..rows).map(|r| Json::Array(columns.iter().map(|c| to_json(&Value::F64(c[r]))).collect())).collect();
    Ok(Json::Array(rows))
}
