//! `det`: the determinant of the `ell x ell` matrix `A` (flat, row-major)
//! by expansion in minors, and its gradient (reverse mode at the boundary),
//! flat like `A`.

use super::{field, to_json, unknown, Call, Eval};
use arrayad::Entry;
use serde_json::Value as Json;

pub struct Det;

impl Eval for Det {
    fn module(&self) -> &'static str {
        "det"
    }
    fn source(&self) -> &'static str {
        include_str!("../../evals/det.arr")
    }
    fn wrt(&self) -> Option<&'static [&'static str]> {
        Some(&["A"])
    }
    fn entries(&self) -> &'static [(&'static str, Entry)] {
        &[("det", Entry::Value), ("det", Entry::Grad)]
    }
    fn call(&self, function: &str, input: &Json) -> Result<Call, String> {
        let (entry, output): (Entry, super::OutputFn) = match function {
            "primal" => (Entry::Value, |o| Ok(to_json(o.value(0)?))),
            "gradient" => (Entry::Grad, |o| Ok(to_json(o.gradient(0)?))),
            _ => return Err(unknown(self.module(), function, &["primal", "gradient"])),
        };
        let ell = field(input, "ell")?;
        // The program has a definition per size up to 12 (no recursion in
        // the language); beyond, its dispatcher gives NaN.
        if !ell.as_i64().is_some_and(|l| (1..=12).contains(&l)) {
            return Err(format!(
                "`ell` must be an integer from 1 to 12 (det.arr expands minors up to 12 x 12), found {ell}"
            ));
        }
        let args = vec![field(input, "A")?.clone(), ell.clone()];
        Ok(Call::json("det", entry, args, output))
    }
}
