//! `kmeans`: the cost of `centroids` for `points`, and the Newton direction
//! (the gradient over the Hessian diagonal, both taken inside the program).

use super::{field, to_json, unknown, Call, Eval};
use arrayad::Entry;
use serde_json::Value as Json;

pub struct Kmeans;

impl Eval for Kmeans {
    fn module(&self) -> &'static str {
        "kmeans"
    }
    fn source(&self) -> &'static str {
        include_str!("../../evals/kmeans.arr")
    }
    fn entries(&self) -> &'static [(&'static str, Entry)] {
        &[("cost", Entry::Value), ("dir", Entry::Value)]
    }
    fn call(&self, function: &str, input: &Json) -> Result<Call, String> {
        let def = match function {
            "cost" => "cost",
            "dir" => "dir",
            _ => return Err(unknown(self.module(), function, &["cost", "dir"])),
        };
        let args = vec![field(input, "points")?.clone(), field(input, "centroids")?.clone()];
        Ok(Call::json(def, Entry::Value, args, |o| Ok(to_json(o.value(0)?))))
    }
}
