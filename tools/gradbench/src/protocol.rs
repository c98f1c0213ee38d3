//! GradBench's protocol (its CONTRIBUTING.md, "Protocol"): the messages an
//! eval sends and how often an evaluation runs.

use serde_json::Value as Json;

/// A message from the eval (through GradBench's intermediary).
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// `{"id", "kind": "start", "eval"?, "config"?}`.
    Start { id: Json },
    /// `{"id", "kind": "define", "module"}`.
    Define { id: Json, module: String },
    /// `{"id", "kind": "evaluate", "module", "function", "input", "description"?}`.
    Evaluate { id: Json, module: String, function: String, input: Json },
    /// Any other kind (`analysis`, ...): answered with the id alone.
    Other { id: Json },
}

impl Message {
    /// Reads one line of the protocol.
    ///
    /// Errors: the message's `id` (`null` when it has none) and why it
    /// cannot be read: not JSON, not an object, no `id` or `kind`, a
    /// `define` or `evaluate` without its fields.
    pub fn parse(line: &str) -> Result<Message, (Json, String)> {
        let j: Json = serde_json::from_str(line).map_err(|e| (Json::Null, format!("malformed message: {e}")))?;
        let Json::Object(obj) = &j else {
            return Err((Json::Null, "malformed message: not a JSON object".into()));
        };
        let Some(id) = obj.get("id").cloned() else {
            return Err((Json::Null, "malformed message: no `id`".into()));
        };
        let text = |field: &str| -> Result<String, (Json, String)> {
            match obj.get(field) {
                Some(Json::String(s)) => Ok(s.clone()),
                _ => Err((id.clone(), format!("malformed message: no string `{field}`"))),
            }
        };
        Ok(match text("kind")?.as_str() {
            "start" => Message::Start { id },
            "define" => Message::Define { module: text("module")?, id },
            "evaluate" => {
                let input = obj.get("input").cloned().unwrap_or(Json::Null);
                Message::Evaluate { module: text("module")?, function: text("function")?, input, id }
            }
            _ => Message::Other { id },
        })
    }
}

/// How often to run an evaluation: at least `min_runs` times and for at
/// least `min_seconds` in total, whichever is longer, and at least once
/// (inputs without these fields, as `hello`'s, run once).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Runs {
    pub min_runs: u64,
    pub min_seconds: f64,
}

impl Runs {
    /// The fields of an input (`min_runs`, `min_seconds`; absent means 1
    /// and 0).
    ///
    /// Errors: a field that is present but not a non-negative number.
    pub fn of(input: &Json) -> Result<Runs, String> {
        let min_runs = match input.get("min_runs") {
            None => 1,
            Some(j) => j.as_u64().ok_or_else(|| format!("`min_runs` must be a non-negative integer, found {j}"))?,
        };
        let min_seconds = match input.get("min_seconds") {
            None => 0.0,
            Some(j) => match j.as_f64() {
                Some(s) if s >= 0.0 && s.is_finite() => s,
                _ => return Err(format!("`min_seconds` must be a non-negative number, found {j}")),
            },
        };
        Ok(Runs { min_runs, min_seconds })
    }

    /// Whether to run once more after `done` runs that took `total_ns`.
    pub fn more(&self, done: usize, total_ns: u64) -> bool {
        done == 0 || (done as u64) < self.min_runs || (total_ns as f64) < self.min_seconds * 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_parse_or_say_why_not() {
        assert_eq!(Message::parse(r#"{"id": 0, "kind": "start", "eval": "x"}"#), Ok(Message::Start { id: json!(0) }));
        assert_eq!(
            Message::parse(r#"{"id": 3, "kind": "analysis", "of": 2, "valid": true}"#),
            Ok(Message::Other { id: json!(3) })
        );
        assert_eq!(
            Message::parse(r#"{"id": 1, "kind": "define"}"#),
            Err((json!(1), "malformed message: no string `module`".into()))
        );
        assert!(matches!(Message::parse("not json"), Err((Json::Null, _))));
        assert!(matches!(Message::parse("[1]"), Err((Json::Null, _))));
        assert!(matches!(Message::parse(r#"{"kind": "start"}"#), Err((Json::Null, _))));
    }

    #[test]
    fn runs_follow_the_longer_of_count_and_time() {
        let r = Runs::of(&json!({"min_runs": 3, "min_seconds": 0})).unwrap();
        assert!(r.more(0, 0) && r.more(2, 10) && !r.more(3, 10));
        let r = Runs::of(&json!({"min_runs": 1, "min_seconds": 1e-6})).unwrap();
        assert!(r.more(1, 999) && !r.more(1, 1000));
        let r = Runs::of(&json!(2.5)).unwrap();
        assert_eq!(r, Runs { min_runs: 1, min_seconds: 0.0 });
        assert!(r.more(0, 0) && !r.more(1, 0));
        assert!(Runs::of(&json!({"min_runs": -1})).is_err());
        assert!(Runs::of(&json!({"min_seconds": "x"})).is_err());
    }
}
