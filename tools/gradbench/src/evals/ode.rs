//! `ode`: `s` steps of Runge-Kutta on a linear ODE in `x`, and the gradient
//! of the last element of the solution with respect to `x` (reverse mode at
//! the boundary).

use super::{field, to_json, unknown, Call, Eval};
use arrayad::Entry;
use serde_json::Value as Json;

pub struct Ode;

impl Eval for Ode {
    fn module(&self) -> &'static str {
        "ode"
    }
    fn source(&self) -> &'static str {
        include_str!("../../evals/ode.arr")
    }
    fn wrt(&self) -> Option<&'static [&'static str]> {
        Some(&["x"])
    }
    fn entries(&self) -> &'static [(&'static str, Entry)] {
        &[("ode", Entry::Value), ("ode_last", Entry::Grad)]
    }
    fn call(&self, function: &str, input: &Json) -> Result<Call, String> {
        let (def, entry, output): (&str, Entry, super::OutputFn) = match function {
            "primal" => ("ode", Entry::Value, |o| Ok(to_json(o.value(0)?))),
            "gradient" => ("ode_last", Entry::Grad, |o| Ok(to_json(o.gradient(0)?))),
            _ => return Err(unknown(self.module(), function, &["primal", "gradient"])),
        };
        let args = vec![field(input, "x")?.clone(), field(input, "s")?.clone()];
        Ok(Call::json(def, entry, args, output))
    }
}
