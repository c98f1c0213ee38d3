//! `llsq`: a linear least-squares objective of `x` on `n` grid points and
//! its gradient with respect to `x` (reverse mode at the boundary).

use super::{field, to_json, unknown, Call, Eval};
use arrayad::Entry;
use serde_json::Value as Json;

pub struct Llsq;

impl Eval for Llsq {
    fn module(&self) -> &'static str {
        "llsq"
    }
    fn source(&self) -> &'static str {
        include_str!("../../evals/llsq.arr")
    }
    fn wrt(&self) -> Option<&'static [&'static str]> {
        Some(&["x"])
    }
    fn entries(&self) -> &'static [(&'static str, Entry)] {
        &[("llsq", Entry::Value), ("llsq", Entry::Grad)]
    }
    fn call(&self, function: &str, input: &Json) -> Result<Call, String> {
        let (def, entry, output): (&str, Entry, super::OutputFn) = match function {
            "primal" => ("llsq", Entry::Value, |o| Ok(to_json(o.value(0)?))),
            "gradient" => ("llsq", Entry::Grad, |o| Ok(to_json(o.gradient(0)?))),
            _ => return Err(unknown(self.module(), function, &["primal", "gradient"])),
        };
        let args = vec![field(input, "x")?.clone(), field(input, "n")?.clone()];
        Ok(Call::json(def, entry, args, output))
    }
}
