//! `lstm`: the loss of an LSTM language model and its gradient with
//! respect to `main_params` and `extra_params` (taken inside the program,
//! flattened and concatenated as GradBench's output is).

use super::{field, to_json, unknown, Call, Eval};
use arrayad::Entry;
use serde_json::Value as Json;

pub struct Lstm;

impl Eval for Lstm {
    fn module(&self) -> &'static str {
        "lstm"
    }
    fn source(&self) -> &'static str {
        include_str!("../../evals/lstm.arr")
    }
    fn entries(&self) -> &'static [(&'static str, Entry)] {
        &[("lstm_objective", Entry::Value), ("lstm_jacobian", Entry::Value)]
    }
    fn call(&self, function: &str, input: &Json) -> Result<Call, String> {
        let def = match function {
            "objective" => "lstm_objective",
            "jacobian" => "lstm_jacobian",
            _ => return Err(unknown(self.module(), function, &["objective", "jacobian"])),
        };
        let names = ["main_params", "extra_params", "state", "sequence"];
        let args = names.iter().map(|n| field(input, n).cloned()).collect::<Result<Vec<_>, _>>()?;
        Ok(Call::json(def, Entry::Value, args, |o| Ok(to_json(o.value(0)?))))
    }
}
