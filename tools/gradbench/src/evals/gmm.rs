//! `gmm`: the log posterior of a Gaussian mixture model and its gradient
//! with respect to `alpha`, `mu`, `q` and `l` (reverse mode at the
//! boundary).

use super::{field, object, to_json, unknown, Call, Eval};
use arrayad::Entry;
use serde_json::Value as Json;

pub struct Gmm;

impl Eval for Gmm {
    fn module(&self) -> &'static str {
        "gmm"
    }
    fn source(&self) -> &'static str {
        include_str!("../../evals/gmm.arr")
    }
    fn wrt(&self) -> Option<&'static [&'static str]> {
        Some(&["alpha", "mu", "q", "l"])
    }
    fn entries(&self) -> &'static [(&'static str, Entry)] {
        &[("gmm_objective", Entry::Value), ("gmm_objective", Entry::Grad)]
    }
    fn call(&self, function: &str, input: &Json) -> Result<Call, String> {
        let (entry, output): (Entry, super::OutputFn) = match function {
            "objective" => (Entry::Value, |o| Ok(to_json(o.value(0)?))),
            "jacobian" => (Entry::Grad, |o| {
                Ok(object(vec![
                    ("alpha", to_json(o.gradient(0)?)),
                    ("mu", to_json(o.gradient(1)?)),
                    ("q", to_json(o.gradient(2)?)),
                    ("l", to_json(o.gradient(3)?)),
                ]))
            }),
            _ => return Err(unknown(self.module(), function, &["objective", "jacobian"])),
        };
        let names = ["alpha", "mu", "q", "l", "x", "gamma", "m"];
        let args = names.iter().map(|n| field(input, n).cloned()).collect::<Result<Vec<_>, _>>()?;
        Ok(Call::json("gmm_objective", entry, args, output))
    }
}
