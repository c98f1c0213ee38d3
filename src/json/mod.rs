//! The JSON encoding of values (LANGUAGE.md section 7).
//!
//! - `f64`: a number, printed in the shortest form that round-trips and
//!   always with a fraction or exponent (`2.0`, `0.1`, `1e-7`); the
//!   strings `"NaN"`, `"inf"`, `"-inf"` for non-finite values. Input also
//!   accepts integers, `"nan"`, `"+inf"`, `"Infinity"`, `"-Infinity"`.
//! - `i64`: an integer. `bool`: `true`/`false`.
//! - arrays: nested JSON arrays, rectangular, row-major.
//! - tuples: JSON arrays of their components.
//!
//! Decoding is driven by the expected source type, so `[[1, 2], [3, 4]]`
//! becomes a `[2][2]f64` array for a parameter of type `[n][m]f64`, and the
//! result is the list of IR leaves (tuples flattened left to right). Text
//! is decoded as it is parsed, into one flat buffer per leaf with fallible
//! allocation (module `decode`).
//! Encoding rebuilds tuples from the leaves.

mod decode;

use crate::error::Error;
use crate::shapes::{describe_f64_shape, leaf_infos, param_leaves};
use arrayad_ir::{ArrayData, ArrayValue, Scalar, Signature, SrcDim, SrcType, Value};
use decode::{decode, Elems, LeafSpec, Partial, Top};
use serde_json::Value as Json;
use std::fmt::Write;

// ----------------------------------------------------------------------------
// Decoding
// ----------------------------------------------------------------------------

/// JSON to decode: text, decoded as it is parsed (into typed buffers,
/// without a tree of JSON values: the way for large inputs), or a value
/// parsed already.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// JSON text; `what` names it in messages about its syntax (`ARGS
    /// (args.json)`). A leading UTF-8 byte-order mark is skipped.
    Text {
        /// The input's name in messages.
        what: &'a str,
        /// The JSON text.
        text: &'a str,
    },
    /// A parsed value.
    Value(&'a Json),
}

impl<'a> From<&'a Json> for Input<'a> {
    fn from(json: &'a Json) -> Input<'a> {
        Input::Value(json)
    }
}

/// Parses JSON text into a value. `what` names the input in messages
/// (`ARGS`, ...). A leading UTF-8 byte-order mark (U+FEFF, as some editors
/// write) is skipped, as it is in `.arr` files; line and column count from
/// the character after it. For large arguments decode [`Input::Text`]
/// instead: a parsed value costs 32 bytes and more per number.
///
/// Errors: [`Error::InvalidArgument`] with serde_json's line and column.
pub fn parse(what: &str, text: &str) -> Result<Json, Error> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str(text).map_err(|e| Error::InvalidArgument(format!("{what}: malformed JSON: {e}")))
}

/// Checks that `text` is one JSON value, without allocating for it (a
/// leading byte-order mark is skipped).
///
/// Errors: [`Error::InvalidArgument`] with serde_json's line and column.
pub fn check_syntax(what: &str, text: &str) -> Result<(), Error> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map(|_| ())
        .map_err(|e| Error::InvalidArgument(format!("{what}: malformed JSON: {e}")))
}

/// Decodes `ARGS`: a JSON array with one entry per source parameter of
/// `sig`. Returns the IR argument leaves (tuples flattened). The shapes of
/// empty arrays' inner axes are taken from literal dimensions or from the
/// sizes other arguments bind (otherwise 0).
///
/// Errors: [`Error::InvalidArgument`] for malformed JSON, a wrong count, a
/// value of the wrong type or rank, a ragged array (sizes are checked by
/// the call); [`Error::Runtime`] out of memory (exit status 3) when the
/// elements cannot be allocated.
pub fn decode_args<'a>(func: &str, sig: &Signature, input: impl Into<Input<'a>>) -> Result<Vec<Value>, Error> {
    let spec = |_: usize, ty: &SrcType, name: &str| {
        let (elem, rank) = leaf_elem_rank(ty);
        Some(LeafSpec {
            elem,
            rank,
            what: format!("ARGS: argument `{name}` ({ty})"),
            root: name.to_string(),
            nullable: false,
        })
    };
    let top = Top::Entries { what: "ARGS", func, params: &sig.params };
    let leaves: Vec<Partial> = decode(input.into(), top, &spec, false)?
        .into_iter()
        .map(|leaf| leaf.ok_or_else(|| Error::Internal("an argument leaf was skipped".into())))
        .collect::<Result<_, _>>()?;
    // Fill in the unknown inner extents of empty arrays.
    let bound = bind_known_sizes(sig, &leaves);
    let infos = param_leaves(sig);
    Ok(leaves
        .into_iter()
        .zip(infos)
        .map(|(leaf, info)| {
            let dims = match info.ty {
                SrcType::Array { dims, .. } => dims.as_slice(),
                _ => &[],
            };
            leaf.complete(|axis| match dims.get(axis) {
                Some(SrcDim::Lit(n)) => usize::try_from(*n).unwrap_or(0),
                Some(SrcDim::Var(v)) => bound.iter().find(|(n, _)| n == v).map_or(0, |(_, x)| *x),
                Some(SrcDim::Expr(e)) => e
                    .eval(&|v| bound.iter().find(|(n, _)| n == v).and_then(|(_, x)| i64::try_from(*x).ok()))
                    .ok()
                    .and_then(|x| usize::try_from(x).ok())
                    .unwrap_or(0),
                None => 0,
            })
        })
        .collect())
}

/// Decodes `TANGENTS`: one entry per source parameter, `null` (zero) or
/// a value of the parameter's type with `f64` elements and the shape of
/// the argument. Entries for inactive leaves or leaves without `f64`
/// elements are ignored (write `null`). Returns one entry per IR leaf, as
/// [`crate::Function::jvp`] takes them (as [`crate::Arg::Value`]).
///
/// Errors: as [`decode_args`], and a tangent whose shape is not its
/// argument's.
pub fn decode_tangents<'a>(
    func: &str,
    sig: &Signature,
    args: &[Value],
    active: &[bool],
    input: impl Into<Input<'a>>,
) -> Result<Vec<Option<Value>>, Error> {
    let spec = |k: usize, ty: &SrcType, name: &str| {
        active.get(k).copied().unwrap_or(false).then(|| LeafSpec {
            elem: Scalar::F64,
            rank: leaf_elem_rank(ty).1,
            what: format!("TANGENTS: the tangent of `{name}`"),
            root: name.to_string(),
            nullable: true,
        })
    };
    let top = Top::Entries { what: "TANGENTS", func, params: &sig.params };
    let leaves = decode(input.into(), top, &spec, true)?;
    let names: Vec<String> = param_leaves(sig).iter().map(|l| l.name.clone()).collect();
    leaves
        .into_iter()
        .enumerate()
        .map(|(k, leaf)| {
            let Some(leaf) = leaf else { return Ok(None) };
            let expected = args.get(k).map(crate::shapes::shape_of).unwrap_or(&[]);
            let name = names.get(k).map_or("?", String::as_str);
            f64_of_shape(leaf, &format!("TANGENTS: the tangent of `{name}`"), expected).map(Some)
        })
        .collect()
}

/// Decodes `COTANGENT`: one value shaped like the result (type `result`),
/// whose leaves with `f64` elements have the shapes `shapes` (one per
/// result leaf; `[]` for scalars). `null` stands for zero; leaves without
/// `f64` elements are ignored. Returns one entry per result leaf.
///
/// Errors: as [`decode_tangents`].
pub fn decode_cotangent<'a>(
    result: &SrcType,
    shapes: &[Vec<usize>],
    input: impl Into<Input<'a>>,
) -> Result<Vec<Option<Value>>, Error> {
    let what =
        |name: &str| if name == "result" { "COTANGENT".to_string() } else { format!("COTANGENT component `{name}`") };
    let spec = |_: usize, ty: &SrcType, name: &str| {
        let (elem, rank) = leaf_elem_rank(ty);
        (elem == Scalar::F64).then(|| LeafSpec {
            elem: Scalar::F64,
            rank,
            what: what(name),
            root: name.to_string(),
            nullable: true,
        })
    };
    let leaves = decode(input.into(), Top::Value { ty: result, name: "result" }, &spec, true)?;
    let names: Vec<String> = leaf_infos("result", result).iter().map(|l| l.name.clone()).collect();
    leaves
        .into_iter()
        .enumerate()
        .map(|(k, leaf)| {
            let Some(leaf) = leaf else { return Ok(None) };
            let expected = shapes.get(k).map(Vec::as_slice).unwrap_or(&[]);
            f64_of_shape(leaf, &what(names.get(k).map_or("result", String::as_str)), expected).map(Some)
        })
        .collect()
}

/// The element type and rank of a leaf type.
fn leaf_elem_rank(ty: &SrcType) -> (Scalar, usize) {
    match ty {
        SrcType::Scalar(s) => (*s, 0),
        SrcType::Array { elem, dims } => (*elem, dims.len()),
        // Not a leaf: decoded as a tuple before any leaf is asked for.
        SrcType::Tuple(_) => (Scalar::F64, 0),
    }
}

impl Partial {
    /// The value, with unknown extents taken from `extent(axis)`.
    fn complete(self, extent: impl Fn(usize) -> usize) -> Value {
        let shape = self.shape.map(|shape| -> Vec<usize> {
            shape.iter().enumerate().map(|(axis, d)| d.unwrap_or_else(|| extent(axis))).collect()
        });
        match (shape, self.data) {
            (None, Elems::F64(v)) => Value::F64(v.first().copied().unwrap_or(0.0)),
            (None, Elems::I64(v)) => Value::I64(v.first().copied().unwrap_or(0)),
            (None, Elems::Bool(v)) => Value::Bool(v.first().copied().unwrap_or(false)),
            (Some(shape), Elems::F64(v)) => Value::Array(ArrayValue { shape, data: ArrayData::F64(v) }),
            (Some(shape), Elems::I64(v)) => Value::Array(ArrayValue { shape, data: ArrayData::I64(v) }),
            (Some(shape), Elems::Bool(v)) => Value::Array(ArrayValue { shape, data: ArrayData::Bool(v) }),
        }
    }
}

/// A decoded `f64` leaf (a tangent or cotangent) whose shape must equal
/// `expected` (unknown inner extents of empty arrays are taken from it).
/// `what` describes it in messages.
fn f64_of_shape(leaf: Partial, what: &str, expected: &[usize]) -> Result<Value, Error> {
    let Some(shape) = &leaf.shape else { return Ok(leaf.complete(|_| 0)) };
    let shape: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(axis, d)| d.unwrap_or_else(|| expected.get(axis).copied().unwrap_or(0)))
        .collect();
    if shape != expected {
        return Err(Error::InvalidArgument(format!(
            "{what}: expected {}, found {}",
            describe_f64_shape(expected),
            describe_f64_shape(&shape)
        )));
    }
    Ok(leaf.complete(|axis| expected.get(axis).copied().unwrap_or(0)))
}

/// Size variables bound by the known extents of the decoded leaves (first
/// binding wins; disagreements are reported by the call).
fn bind_known_sizes(sig: &Signature, leaves: &[Partial]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for (info, leaf) in param_leaves(sig).iter().zip(leaves) {
        if let (SrcType::Array { dims, .. }, Some(shape)) = (info.ty, &leaf.shape) {
            for (d, e) in dims.iter().zip(shape) {
                if let (SrcDim::Var(v), Some(e)) = (d, e) {
                    if !out.iter().any(|(n, _)| n == v) {
                        out.push((v.clone(), *e));
                    }
                }
            }
        }
    }
    out
}

// ----------------------------------------------------------------------------
// Encoding
// ----------------------------------------------------------------------------

/// An `f64` in the shortest form that round-trips, with a fraction or an
/// exponent (`2.0`, `-0.0`, `1e-7`), or `"NaN"`, `"inf"`, `"-inf"`.
pub fn encode_f64(x: f64) -> String {
    if x.is_nan() {
        "\"NaN\"".into()
    } else if x.is_infinite() {
        if x > 0.0 { "\"inf\"" } else { "\"-inf\"" }.into()
    } else {
        // Debug prints the shortest round-trip form and keeps `.0` on
        // integral values; it is valid JSON for every finite f64.
        format!("{x:?}")
    }
}

/// Appends the JSON of one value (a scalar or a nested array).
pub fn encode_value(out: &mut String, v: &Value) {
    match v {
        Value::F64(x) => out.push_str(&encode_f64(*x)),
        Value::I64(x) => {
            let _ = write!(out, "{x}");
        }
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Array(a) => encode_array(out, a, 0, 0),
    }
}

fn encode_array(out: &mut String, a: &ArrayValue, axis: usize, offset: usize) {
    let n = a.shape.get(axis).copied().unwrap_or(0);
    let stride: usize = a.shape.get(axis + 1..).map_or(1, |s| s.iter().product());
    out.push('[');
    for i in 0..n {
        if i > 0 {
            out.push_str(", ");
        }
        if axis + 1 >= a.shape.len() {
            let k = offset + i;
            match &a.data {
                ArrayData::F64(v) => out.push_str(&v.get(k).map_or_else(|| "null".into(), |x| encode_f64(*x))),
                ArrayData::I64(v) => {
                    let _ = v.get(k).map(|x| write!(out, "{x}"));
                }
                ArrayData::Bool(v) => {
                    let _ = v.get(k).map(|x| write!(out, "{x}"));
                }
            }
        } else {
            encode_array(out, a, axis + 1, offset + i * stride);
        }
    }
    out.push(']');
}

/// The JSON of a value of source type `ty` given its leaves (tuples become
/// arrays of components; a `None` leaf is `null`). Missing leaves print as
/// `null`.
pub fn encode_tree(ty: &SrcType, leaves: &[Option<&Value>]) -> String {
    fn go(out: &mut String, ty: &SrcType, leaves: &mut std::slice::Iter<'_, Option<&Value>>) {
        match ty {
            SrcType::Tuple(ts) => {
                out.push('[');
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    go(out, t, leaves);
                }
                out.push(']');
            }
            _ => match leaves.next() {
                Some(Some(v)) => encode_value(out, v),
                _ => out.push_str("null"),
            },
        }
    }
    let mut out = String::new();
    go(&mut out, ty, &mut leaves.iter());
    out
}

/// The JSON of a result (type `ty`) from its leaves.
pub fn encode_result(ty: &SrcType, leaves: &[Value]) -> String {
    let refs: Vec<Option<&Value>> = leaves.iter().map(Some).collect();
    encode_tree(ty, &refs)
}

/// The JSON array with one entry per source parameter of `sig` from
/// per-leaf derivatives (`None`: not differentiated): a parameter whose
/// leaves are all `None` is `null`.
pub fn encode_per_param(sig: &Signature, leaves: &[Option<Value>]) -> String {
    let mut out = String::from("[");
    let mut start = 0;
    for (i, p) in sig.params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let n = leaf_infos(&p.name, &p.ty).len();
        let mine: Vec<Option<&Value>> = (start..start + n).map(|k| leaves.get(k).and_then(Option::as_ref)).collect();
        start += n;
        if mine.iter().all(Option::is_none) {
            out.push_str("null");
        } else {
            out.push_str(&encode_tree(&p.ty, &mine));
        }
    }
    out.push(']');
    out
}

/// A JSON string literal.
pub fn encode_string(s: &str) -> String {
    Json::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrayad_ir::SrcParam;

    fn f64_array(dims: &[&str]) -> SrcType {
        SrcType::Array {
            elem: Scalar::F64,
            dims: dims
                .iter()
                .map(|d| d.parse::<i64>().map_or_else(|_| SrcDim::Var(d.to_string()), SrcDim::Lit))
                .collect(),
        }
    }

    fn sig(params: Vec<(&str, SrcType)>, result: SrcType) -> Signature {
        Signature { params: params.into_iter().map(|(n, ty)| SrcParam { name: n.into(), ty }).collect(), result }
    }

    /// Decodes `text` both ways (as text and parsed first): the two must
    /// agree, in values and in messages.
    fn args(s: &Signature, text: &str) -> Result<Vec<Value>, Error> {
        let streamed = decode_args("f", s, Input::Text { what: "ARGS", text });
        let parsed = parse("ARGS", text).and_then(|j| decode_args("f", s, &j));
        assert_eq!(streamed, parsed, "{text}");
        streamed
    }

    #[test]
    fn f64_output_round_trips() {
        for x in [2.0, -0.0, 0.1, 1e-7, 1e21, 123456789.125, f64::MIN_POSITIVE, f64::MAX, 5e-324, 1.0 / 3.0] {
            let s = encode_f64(x);
            let back: f64 = serde_json::from_str::<Json>(&s).unwrap().as_f64().unwrap();
            assert_eq!(back.to_bits(), x.to_bits(), "{s}");
        }
        assert_eq!(encode_f64(2.0), "2.0");
        assert_eq!(encode_f64(f64::NAN), "\"NaN\"");
        assert_eq!(encode_f64(f64::NEG_INFINITY), "\"-inf\"");
    }

    #[test]
    fn decodes_nested_arrays_and_tuples() {
        let s = sig(
            vec![
                ("a", f64_array(&["n", "m"])),
                ("p", SrcType::Tuple(vec![SrcType::Scalar(Scalar::I64), SrcType::Scalar(Scalar::Bool)])),
                ("x", SrcType::Scalar(Scalar::F64)),
            ],
            SrcType::Scalar(Scalar::F64),
        );
        let v = args(&s, r#"[[[1, 2.5], [3, 4]], [7, true], "-inf"]"#).unwrap();
        assert_eq!(v.len(), 4);
        assert_eq!(
            v[0],
            Value::Array(ArrayValue { shape: vec![2, 2], data: ArrayData::F64(vec![1.0, 2.5, 3.0, 4.0]) })
        );
        assert_eq!(v[1], Value::I64(7));
        assert_eq!(v[2], Value::Bool(true));
        assert_eq!(v[3], Value::F64(f64::NEG_INFINITY));
    }

    #[test]
    fn rejects_ragged_and_wrong_types() {
        let s = sig(vec![("a", f64_array(&["n", "m"]))], SrcType::Scalar(Scalar::F64));
        let e = args(&s, "[[[1, 2], [3]]]").unwrap_err().to_string();
        assert!(e.contains("ragged") && e.contains("a[1]") && e.contains("a[0]"), "{e}");
        let e = args(&s, "[[1, 2]]").unwrap_err().to_string();
        assert!(e.contains("a[0]") && e.contains("expected an array"), "{e}");
        let e = args(&s, "[[[1, true]]]").unwrap_err().to_string();
        assert!(e.contains("a[0][1]"), "{e}");
        let e = args(&s, "[]").unwrap_err().to_string();
        assert!(e.contains("one entry per parameter"), "{e}");
        let e = args(&s, "[[[1]]").unwrap_err().to_string();
        assert!(e.contains("malformed JSON"), "{e}");
        let s = sig(vec![("i", SrcType::Scalar(Scalar::I64))], SrcType::Scalar(Scalar::F64));
        assert!(args(&s, "[2.5]").is_err());
        assert!(args(&s, "[18446744073709551615]").is_err());
        assert_eq!(args(&s, "[-3]").unwrap(), vec![Value::I64(-3)]);
    }

    #[test]
    fn messages_name_what_was_found_where() {
        let s = sig(
            vec![
                ("a", f64_array(&["n", "m"])),
                ("p", SrcType::Tuple(vec![SrcType::Scalar(Scalar::I64), SrcType::Scalar(Scalar::Bool)])),
            ],
            SrcType::Scalar(Scalar::F64),
        );
        let cases = [
            ("[[[1, 2], [3, 4, 5]], [1, true]]", "ARGS: argument `a` ([n][m]f64): ragged array: a[1] has 3 elements but a[0] has 2"),
            ("[[[1, 2], [3]], [1, true]]", "ragged array: a[1] has 1 element but a[0] has 2"),
            ("[[[1, 2], 3], [1, true]]", "expected an array (1 more dimension), found the number 3 at a[1]"),
            ("[[[1, [2]]], [1, true]]", "expected an f64, found an array of 1 element at a[0][1]"),
            ("[[[1, {}]], [1, true]]", "expected an f64, found an object at a[0][1]"),
            ("[[[1, \"x\"]], [1, true]]", "found the string \"x\" at a[0][1]"),
            ("[[[1.5e300]], [2.5, true]]", "ARGS: argument `p.0` (i64): expected an i64 (an integer), found the number 2.5"),
            ("[[[1]], [1]]", "`p`: expected a tuple (i64, bool) (a JSON array of 2 components), found an array of 1 element"),
            ("[[[1]], [1, true, 3]]", "found an array of 3 elements"),
            ("[[[1]], null]", "`p`: expected a tuple (i64, bool) (a JSON array of 2 components), found null"),
            ("[[[1]]]", "ARGS: expected an array with one entry per parameter of `f` (a: [n][m]f64, p: (i64, bool)), found 1 entry"),
            ("[[[1]], [1, true], 3, 4]", "found 4 entries"),
            ("{\"a\": 1}", "found an object"),
            ("7", "found the number 7"),
            ("[1, [1, true]]", "expected an array of rank 2 (2 more dimensions), found the number 1"),
        ];
        for (text, want) in cases {
            let e = args(&s, text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn text_and_parsed_inputs_agree_on_tangents_and_cotangents() {
        let s = sig(
            vec![
                ("x", f64_array(&["n"])),
                ("q", SrcType::Tuple(vec![f64_array(&["2"]), SrcType::Scalar(Scalar::F64)])),
            ],
            SrcType::Tuple(vec![f64_array(&["n"]), SrcType::Scalar(Scalar::I64), SrcType::Scalar(Scalar::F64)]),
        );
        let a = args(&s, "[[1, 2], [[3, 4], 5]]").unwrap();
        for text in
            ["[[0.5, 1], null]", "[null, [[1, 2], null]]", "[[1], null]", "[[1, 2], [[1, 2], \"x\"]]", "[[1, 2]]"]
        {
            let streamed = decode_tangents("f", &s, &a, &[true, true, true], Input::Text { what: "T", text });
            let parsed = parse("T", text).and_then(|j| decode_tangents("f", &s, &a, &[true, true, true], &j));
            assert_eq!(streamed, parsed, "{text}");
        }
        let shapes = [vec![2], vec![], vec![]];
        for text in
            ["[[1, 0], null, 2]", "null", "[null, 7, null]", "[[1], 0, 0]", "[[1, 2], 0]", "[[1, 2], \"a\", [1]]"]
        {
            let streamed = decode_cotangent(&s.result, &shapes, Input::Text { what: "C", text });
            let parsed = parse("C", text).and_then(|j| decode_cotangent(&s.result, &shapes, &j));
            assert_eq!(streamed, parsed, "{text}");
        }
        let ct = decode_cotangent(&s.result, &shapes, Input::Text { what: "C", text: "[null, 7, 2]" }).unwrap();
        assert_eq!(ct, vec![None, None, Some(Value::F64(2.0))]);
        let e = decode_cotangent(&s.result, &shapes, Input::Text { what: "C", text: "[[1], 0, 0]" }).unwrap_err();
        assert!(
            e.to_string().contains("COTANGENT component `result.0`: expected a [2]f64 array, found a [1]f64 array"),
            "{e}"
        );
    }

    #[test]
    fn malformed_text_is_reported_before_types() {
        let s = sig(vec![("i", SrcType::Scalar(Scalar::I64))], SrcType::Scalar(Scalar::F64));
        let e = decode_args("f", &s, Input::Text { what: "ARGS (a.json)", text: "[true, " }).unwrap_err().to_string();
        assert!(e.starts_with("ARGS (a.json): malformed JSON: EOF while parsing"), "{e}");
        let e = decode_args("f", &s, Input::Text { what: "ARGS", text: "\u{feff}[2] x" }).unwrap_err().to_string();
        assert!(e.contains("malformed JSON: trailing characters at line 1 column 5"), "{e}");
        assert_eq!(
            decode_args("f", &s, Input::Text { what: "ARGS", text: "\u{feff}[2]" }).unwrap(),
            vec![Value::I64(2)]
        );
    }

    #[test]
    fn empty_arrays_take_known_extents() {
        let s = sig(vec![("a", f64_array(&["n", "m"])), ("b", f64_array(&["m"]))], SrcType::Scalar(Scalar::F64));
        let v = args(&s, "[[], [1, 2, 3]]").unwrap();
        assert_eq!(v[0], Value::Array(ArrayValue { shape: vec![0, 3], data: ArrayData::F64(vec![]) }));
        let s = sig(vec![("a", f64_array(&["n", "4"]))], SrcType::Scalar(Scalar::F64));
        let v = args(&s, "[[]]").unwrap();
        assert_eq!(crate::shapes::shape_of(&v[0]), &[0, 4]);
    }

    #[test]
    fn tangents_and_cotangents() {
        let s = sig(
            vec![("x", f64_array(&["n"])), ("k", SrcType::Scalar(Scalar::I64))],
            SrcType::Tuple(vec![f64_array(&["n"]), SrcType::Scalar(Scalar::I64)]),
        );
        let a = args(&s, "[[1, 2], 3]").unwrap();
        let t = decode_tangents("f", &s, &a, &[true, false], &parse("T", "[[0.5, 1], null]").unwrap()).unwrap();
        assert_eq!(t[0], Some(Value::Array(ArrayValue { shape: vec![2], data: ArrayData::F64(vec![0.5, 1.0]) })));
        assert_eq!(t[1], None);
        let e = decode_tangents("f", &s, &a, &[true, false], &parse("T", "[[1], null]").unwrap()).unwrap_err();
        assert!(e.to_string().contains("tangent of `x`"), "{e}");
        let ct = decode_cotangent(&s.result, &[vec![2], vec![]], &parse("C", "[[1, 0], null]").unwrap()).unwrap();
        assert_eq!(ct[0].as_ref().and_then(Value::f64_elements), Some(&[1.0, 0.0][..]));
        assert_eq!(ct[1], None);
        assert!(decode_cotangent(&s.result, &[vec![3], vec![]], &parse("C", "[[1, 0], 0]").unwrap()).is_err());
    }

    #[test]
    fn encodes_results_and_gradients() {
        let ty = SrcType::Tuple(vec![f64_array(&["n", "m"]), SrcType::Scalar(Scalar::Bool)]);
        let m = Value::Array(ArrayValue { shape: vec![2, 2], data: ArrayData::F64(vec![1.0, 2.0, 3.0, f64::NAN]) });
        assert_eq!(encode_result(&ty, &[m.clone(), Value::Bool(false)]), r#"[[[1.0, 2.0], [3.0, "NaN"]], false]"#);
        let s = sig(vec![("a", ty), ("i", SrcType::Scalar(Scalar::I64))], SrcType::Scalar(Scalar::F64));
        assert_eq!(encode_per_param(&s, &[Some(m), None, None]), r#"[[[[1.0, 2.0], [3.0, "NaN"]], null], null]"#);
        let e = Value::Array(ArrayValue { shape: vec![0, 3], data: ArrayData::F64(vec![]) });
        let mut out = String::new();
        encode_value(&mut out, &e);
        assert_eq!(out, "[]");
    }
}
