//! `particle`: Pearlmutter and Siskind's charged particle, nested AD in four
//! mode combinations (`ff`, `fr`, `rf`, `rr`), all inside the program.

use super::{field, to_json, unknown, Call, Eval};
use arrayad::Entry;
use serde_json::Value as Json;

pub struct Particle;

const FUNCTIONS: [(&str, &str); 4] =
    [("ff", "particle_ff"), ("fr", "particle_fr"), ("rf", "particle_rf"), ("rr", "particle_rr")];

impl Eval for Particle {
    fn module(&self) -> &'static str {
        "particle"
    }
    fn source(&self) -> &'static str {
        include_str!("../../evals/particle.arr")
    }
    fn entries(&self) -> &'static [(&'static str, Entry)] {
        &[
            ("particle_ff", Entry::Value),
            ("particle_fr", Entry::Value),
            ("particle_rf", Entry::Value),
            ("particle_rr", Entry::Value),
        ]
    }
    fn call(&self, function: &str, input: &Json) -> Result<Call, String> {
        let Some((_, def)) = FUNCTIONS.iter().find(|(f, _)| *f == function) else {
            return Err(unknown(self.module(), function, &["ff", "fr", "rf", "rr"]));
        };
        Ok(Call::json(def, Entry::Value, vec![field(input, "w")?.clone()], |o| Ok(to_json(o.value(0)?))))
    }
}
