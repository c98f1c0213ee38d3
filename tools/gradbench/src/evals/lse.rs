//! `lse`: LogSumExp of `x` and its gradient (reverse mode at the boundary).

use super::{field, to_json, unknown, Call, Eval};
use arrayad::Entry;
use serde_json::Value as Json;

pub struct Lse;

impl Eval for Lse {
    fn module(&self) -> &'static str {
        "lse"
    }
    fn source(&self) -> &'static str {
        include_str!("../../evals/lse.arr")
    }
    fn wrt(&self) -> Option<&'static [&'static str]> {
        Some(&["x"])
    }
    fn entries(&self) -> &'static [(&'static str, Entry)] {
        &[("lse", Entry::Value), ("lse", Entry::Grad)]
    }
    fn call(&self, function: &str, input: &Json) -> Result<Call, String> {
        let (def, entry, output): (&str, Entry, super::OutputFn) = match function {
            "primal" => ("lse", Entry::Value, |o| Ok(to_json(o.value(0)?))),
            "gradient" => ("lse", Entry::Grad, |o| Ok(to_json(o.gradient(0)?))),
            _ => return Err(unknown(self.module(), function, &["primal", "gradient"])),
        };
        let args = vec![field(input, "x")?.clone()];
        Ok(Call::json(def, entry, args, output))
    }
}
