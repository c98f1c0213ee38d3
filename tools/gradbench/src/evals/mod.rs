//! The evals: for each, its `.arr` program and the glue between the eval's
//! JSON and one definition of the program.
//!
//! The glue is small on purpose: it names the definition and the entry
//! point (the primal, or the gradient at the boundary with the module's
//! active parameters), lists the input's fields in the definition's
//! parameter order (nested lists stay nested: the JSON decoding of
//! `arrayad::json` turns them into arrays of the parameter types), and
//! writes the results in the eval's output form. Whatever the program can
//! compute (derivatives inside programs, layouts, packed columns), it does.

mod ba;
mod det;
mod gmm;
mod hello;
mod ht;
mod kmeans;
mod llsq;
mod lse;
mod lstm;
mod ode;
mod particle;
mod saddle;

use arrayad::{Entry, Value};
use serde_json::{Map, Value as Json};

/// One eval: a module of GradBench.
pub trait Eval: Sync {
    /// The module's name (`gmm`).
    fn module(&self) -> &'static str;
    /// The `.arr` program.
    fn source(&self) -> &'static str;
    /// The parameters differentiated at the boundary (`None`: every
    /// parameter with `f64` parts).
    fn wrt(&self) -> Option<&'static [&'static str]> {
        None
    }
    /// The definitions and entry points its functions call, compiled by
    /// `define`.
    fn entries(&self) -> &'static [(&'static str, Entry)];
    /// The call that evaluates `function` on `input`.
    ///
    /// Errors: an unknown function, an input without the fields the eval
    /// specifies.
    fn call(&self, function: &str, input: &Json) -> Result<Call, String>;
}

/// What an evaluation calls and how its result becomes the output.
pub struct Call {
    /// The definition.
    pub def: &'static str,
    /// [`Entry::Value`] (the primal), [`Entry::Grad`], or [`Entry::Jvp`]
    /// (forward mode in the `directions`, [`arrayad::Function::jvp_many`]).
    pub entry: Entry,
    /// The arguments.
    pub args: Args,
    /// For [`Entry::Jvp`]: the tangent directions, each one entry per
    /// argument leaf (`None`: a zero tangent, or a leaf not differentiated).
    pub directions: Vec<Vec<Option<Value>>>,
    /// The eval's output from the results.
    pub output: Output,
}

/// How results become the eval's output.
pub type Output = Box<dyn Fn(&Outcome) -> Result<Json, String>>;

/// An [`Output`] that captures nothing.
pub type OutputFn = fn(&Outcome) -> Result<Json, String>;

/// The arguments of a call.
pub enum Args {
    /// One JSON value per parameter of the definition (`ARGS`, LANGUAGE.md
    /// section 7), decoded against its signature.
    Json(Vec<Json>),
    /// The argument leaves themselves (built by the glue where the input is
    /// a recipe for large arrays, as `ba`'s duplication).
    Values(Vec<Value>),
}

impl Call {
    /// A call with JSON arguments.
    pub fn json(
        def: &'static str,
        entry: Entry,
        args: Vec<Json>,
        output: impl Fn(&Outcome) -> Result<Json, String> + 'static,
    ) -> Call {
        Call { def, entry, args: Args::Json(args), directions: Vec::new(), output: Box::new(output) }
    }
}

/// The results of a call.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The result leaves of the primal.
    Values(Vec<Value>),
    /// The value and the gradient, one entry per argument leaf (`None`
    /// where not differentiated).
    Grad { value: f64, gradient: Vec<Option<Value>> },
    /// The value and the tangents in each direction.
    JvpMany(arrayad::JvpMany),
}

impl Outcome {
    /// The result leaves of a primal call.
    pub fn values(&self) -> Result<&[Value], String> {
        match self {
            Outcome::Values(v) => Ok(v),
            Outcome::Grad { .. } | Outcome::JvpMany(_) => Err("expected the values of a primal call".into()),
        }
    }

    /// Result leaf `k` of a primal call.
    pub fn value(&self, k: usize) -> Result<&Value, String> {
        self.values()?.get(k).ok_or_else(|| format!("the call has no result {k}"))
    }

    /// The gradient of argument leaf `k`.
    pub fn gradient(&self, k: usize) -> Result<&Value, String> {
        match self {
            Outcome::Grad { gradient, .. } => {
                gradient.get(k).and_then(Option::as_ref).ok_or_else(|| format!("no gradient of argument {k}"))
            }
            Outcome::Values(_) | Outcome::JvpMany(_) => Err("expected a gradient".into()),
        }
    }
}

/// Every eval, in GradBench's order.
pub static ALL: &[&dyn Eval] = &[
    &hello::Hello,
    &lse::Lse,
    &llsq::Llsq,
    &det::Det,
    &ode::Ode,
    &kmeans::Kmeans,
    &gmm::Gmm,
    &ba::Ba,
    &lstm::Lstm,
    &ht::Ht,
    &particle::Particle,
    &saddle::Saddle,
];

/// The eval of module `name`.
pub fn find(name: &str) -> Option<&'static dyn Eval> {
    ALL.iter().copied().find(|e| e.module() == name)
}

/// Field `name` of an input object.
///
/// Errors: the input is not an object or has no such field.
pub fn field<'a>(input: &'a Json, name: &str) -> Result<&'a Json, String> {
    match input {
        Json::Object(m) => m.get(name).ok_or_else(|| format!("the input has no field `{name}`")),
        _ => Err(format!("the input must be an object with a field `{name}`")),
    }
}

/// An unknown function of module `module`.
pub fn unknown(module: &str, function: &str, known: &[&str]) -> String {
    format!("the module `{module}` has no function `{function}` (it has: {})", known.join(", "))
}

/// A value as JSON: numbers (non-finite `f64`s as the strings `"NaN"`,
/// `"inf"`, `"-inf"`), booleans, nested lists for arrays.
pub fn to_json(v: &Value) -> Json {
    fn f(x: f64) -> Json {
        serde_json::Number::from_f64(x).map_or_else(
            || {
                Json::String(
                    if x.is_nan() {
                        "NaN"
                    } else if x > 0.0 {
                        "inf"
                    } else {
                        "-inf"
                    }
                    .into(),
                )
            },
            Json::Number,
        )
    }
    match v {
        Value::F64(x) => f(*x),
        Value::I64(x) => Json::from(*x),
        Value::Bool(x) => Json::Bool(*x),
        Value::Array(a) => {
            let flat: Vec<Json> = match &a.data {
                arrayad::ArrayData::F64(d) => d.iter().map(|x| f(*x)).collect(),
                arrayad::ArrayData::I64(d) => d.iter().map(|x| Json::from(*x)).collect(),
                arrayad::ArrayData::Bool(d) => d.iter().map(|x| Json::Bool(*x)).collect(),
            };
            nest(flat, &a.shape)
        }
    }
}

/// Row-major elements as nested lists of `shape`.
fn nest(flat: Vec<Json>, shape: &[usize]) -> Json {
    match shape {
        [] | [_] => Json::Array(flat),
        [_, rest @ ..] => {
            let row: usize = rest.iter().product();
            if row == 0 {
                return Json::Array(vec![nest(Vec::new(), rest); shape[0]]);
            }
            let mut rows = Vec::with_capacity(shape[0]);
            let mut it = flat.into_iter();
            for _ in 0..shape[0] {
                rows.push(nest(it.by_ref().take(row).collect(), rest));
            }
            Json::Array(rows)
        }
    }
}

/// The `f64` elements of an array value, row-major.
pub fn f64_elements(v: &Value) -> Result<&[f64], String> {
    v.f64_elements().ok_or_else(|| "expected an f64 array".to_string())
}

/// The `i64` elements of an array value, row-major.
pub fn i64_elements(v: &Value) -> Result<&[i64], String> {
    match v {
        Value::Array(a) => match &a.data {
            arrayad::ArrayData::I64(d) => Ok(d),
            _ => Err("expected an i64 array".into()),
        },
        _ => Err("expected an i64 array".into()),
    }
}

/// The `f64` of a scalar value.
pub fn scalar(v: &Value) -> Result<f64, String> {
    v.as_f64().ok_or_else(|| "expected an f64".to_string())
}

/// A JSON object of `(name, value)` pairs.
pub fn object(fields: Vec<(&str, Json)>) -> Json {
    let mut m = Map::new();
    for (k, v) in fields {
        m.insert(k.to_string(), v);
    }
    Json::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrayad::ArrayValue;

    #[test]
    fn arrays_nest_row_major() {
        let v =
            Value::Array(ArrayValue { shape: vec![2, 3], data: arrayad::ArrayData::F64(vec![1., 2., 3., 4., 5., 6.]) });
        assert_eq!(to_json(&v), serde_json::json!([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]));
        let e = Value::Array(ArrayValue { shape: vec![2, 0], data: arrayad::ArrayData::F64(vec![]) });
        assert_eq!(to_json(&e), serde_json::json!([[], []]));
        assert_eq!(to_json(&Value::F64(f64::NAN)), serde_json::json!("NaN"));
    }

    #[test]
    fn every_eval_has_a_program_and_unique_name() {
        let mut names: Vec<&str> = ALL.iter().map(|e| e.module()).collect();
        assert_eq!(names.len(), 12);
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 12);
        for e in ALL {
            assert!(e.source().contains("def "), "{}", e.module());
        }
    }
}
