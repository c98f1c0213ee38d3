//! `ht`: hand tracking. The residuals of a posed hand model against measured
//! points and their Jacobian (one forward pass per column, inside the
//! program). An empty `us` is the "simple" case (points at vertices), else
//! the "complicated" one (points on triangles, with two more, packed,
//! columns for `us`).

use super::{field, to_json, unknown, Call, Eval};
use arrayad::Entry;
use serde_json::Value as Json;

pub struct Ht;

impl Eval for Ht {
    fn module(&self) -> &'static str {
        "ht"
    }
    fn source(&self) -> &'static str {
        include_str!("../../evals/ht.arr")
    }
    fn entries(&self) -> &'static [(&'static str, Entry)] {
        &[
            ("ht_objective_simple", Entry::Value),
            ("ht_objective_complicated", Entry::Value),
            ("ht_jacobian_simple", Entry::Value),
            ("ht_jacobian_complicated", Entry::Value),
        ]
    }
    fn call(&self, function: &str, input: &Json) -> Result<Call, String> {
        let data = field(input, "data")?;
        let model = field(data, "model")?;
        let us = field(input, "us")?;
        let simple = us.as_array().is_some_and(Vec::is_empty);
        let def = match (function, simple) {
            ("objective", true) => "ht_objective_simple",
            ("objective", false) => "ht_objective_complicated",
            ("jacobian", true) => "ht_jacobian_simple",
            ("jacobian", false) => "ht_jacobian_complicated",
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
        Ok(Call::json(def, Entry::Value, args, |o| Ok(to_json(o.value(0)?))))
    }
}
