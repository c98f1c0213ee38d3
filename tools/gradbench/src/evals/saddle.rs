//! `saddle`: a saddle point by gradient descent inside gradient descent,
//! nested AD in four mode combinations (`ff`, `fr`, `rf`, `rr`), all inside
//! the program; the output is the two points concatenated.

use super::{f64_elements, field, unknown, Call, Eval};
use arrayad::Entry;
use serde_json::Value as Json;

pub struct Saddle;

const FUNCTIONS: [(&str, &str); 4] =
    [("ff", "saddle_ff"), ("fr", "saddle_fr"), ("rf", "saddle_rf"), ("rr", "saddle_rr")];

impl Eval for Saddle {
    fn module(&self) -> &'static str {
        "saddle"
    }
    fn source(&self) -> &'static str {
        include_str!("../../evals/saddle.arr")
    }
    fn entries(&self) -> &'static [(&'static str, Entry)] {
        &[
            ("saddle_ff", Entry::Value),
            ("saddle_fr", Entry::Value),
            ("saddle_rf", Entry::Value),
            ("saddle_rr", Entry::Value),
        ]
    }
    fn call(&self, function: &str, input: &Json) -> Result<Call, String> {
        let Some((_, def)) = FUNCTIONS.iter().find(|(f, _)| *f == function) else {
            return Err(unknown(self.module(), function, &["ff", "fr", "rf", "rr"]));
        };
        Ok(Call::json(def, Entry::Value, vec![field(input, "start")?.clone()], |o| {
            Ok(Json::from(f64_elements(o.value(0)?)?.to_vec()))
        }))
    }
}
