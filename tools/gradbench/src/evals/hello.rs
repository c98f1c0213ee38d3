//! `hello`: `square` is `x * x`, `double` its derivative (taken inside the
//! program). The input is the number itself.

use super::{scalar, to_json, unknown, Call, Eval};
use arrayad::{Entry, Value};
use serde_json::Value as Json;

pub struct Hello;

impl Eval for Hello {
    fn module(&self) -> &'static str {
        "hello"
    }
    fn source(&self) -> &'static str {
        include_str!("../../evals/hello.arr")
    }
    fn entries(&self) -> &'static [(&'static str, Entry)] {
        &[("square", Entry::Value), ("double", Entry::Value)]
    }
    fn call(&self, function: &str, input: &Json) -> Result<Call, String> {
        let def = match function {
            "square" => "square",
            "double" => "double",
            _ => return Err(unknown(self.module(), function, &["square", "double"])),
        };
        Ok(Call::json(def, Entry::Value, vec![input.clone()], |o| Ok(to_json(&Value::F64(scalar(o.value(0)?)?)))))
    }
}
