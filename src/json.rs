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
//! result is the list of IR leaves (tuples flattened left to right).
//! Encoding rebuilds tuples from the leaves.

use crate::error::Error;
use crate::shapes::{describe_f64_shape, leaf_infos, param_leaves};
use arrayad_ir::{ArrayData, ArrayValue, Scalar, Signature, SrcDim, SrcType, Value};
use serde_json::Value as Json;
use std::fmt::Write;

// ----------------------------------------------------------------------------
// Decoding
// ----------------------------------------------------------------------------

/// Parses JSON text. `what` names the input in messages (`ARGS`, ...).
/// A leading UTF-8 byte-order mark (U+FEFF, as some editors write) is
/// skipped, as it is in `.arr` files; line and column count from the
/// character after it.
///
/// Errors: [`Error::InvalidArgument`] with serde_json's line and column.
pub fn parse(what: &str, text: &str) -> Result<Json, Error> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str(text).map_err(|e| Error::InvalidArgument(format!("{what}: malformed JSON: {e}")))
}

/// Decodes `ARGS`: a JSON array with one entry per source parameter of
/// `sig`. Returns the IR argument leaves (tuples flattened). The shapes of
/// empty arrays' inner axes are taken from literal dimensions or from the
/// sizes other arguments bind (otherwise 0).
///
/// Errors: [`Error::InvalidArgument`] for a wrong count, a value of the
/// wrong type or rank, a ragged array. (Sizes are checked by the call.)
pub fn decode_args(func: &str, sig: &Signature, json: &Json) -> Result<Vec<Value>, Error> {
    let entries = expect_entries("ARGS", func, sig, json)?;
    let mut leaves = Vec::new();
    for (p, j) in sig.params.iter().zip(entries) {
        decode_tree(j, &p.ty, &p.name, &mut |leaf_json, ty, name| {
            leaves.push(decode_leaf(leaf_json, ty, name)?);
            Ok(())
        })?;
    }
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
pub fn decode_tangents(
    func: &str,
    sig: &Signature,
    args: &[Value],
    active: &[bool],
    json: &Json,
) -> Result<Vec<Option<Value>>, Error> {
    let entries = expect_entries("TANGENTS", func, sig, json)?;
    let mut out = Vec::new();
    for (p, j) in sig.params.iter().zip(entries) {
        let n = p.ty.leaves().len();
        if j.is_null() {
            out.extend(std::iter::repeat_n(None, n));
            continue;
        }
        decode_tree(j, &p.ty, &p.name, &mut |leaf_json, ty, name| {
            let k = out.len();
            let is_active = active.get(k).copied().unwrap_or(false);
            if !is_active || leaf_json.is_null() {
                out.push(None);
                return Ok(());
            }
            let expected = args.get(k).map(crate::shapes::shape_of).unwrap_or(&[]);
            out.push(Some(decode_f64_like(
                leaf_json,
                ty,
                &format!("TANGENTS: the tangent of `{name}`"),
                name,
                expected,
            )?));
            Ok(())
        })?;
    }
    Ok(out)
}

/// Decodes `COTANGENT`: one value shaped like the result (type `result`),
/// whose leaves with `f64` elements have the shapes `shapes` (one per
/// result leaf; `[]` for scalars). `null` stands for zero; leaves without
/// `f64` elements are ignored. Returns one entry per result leaf.
pub fn decode_cotangent(result: &SrcType, shapes: &[Vec<usize>], json: &Json) -> Result<Vec<Option<Value>>, Error> {
    let mut out = Vec::new();
    if json.is_null() {
        return Ok(vec![None; result.leaves().len()]);
    }
    decode_tree(json, result, "result", &mut |leaf_json, ty, name| {
        let k = out.len();
        if leaf_json.is_null() || !matches!(elem_of(ty), Some(Scalar::F64)) {
            out.push(None);
            return Ok(());
        }
        let expected = shapes.get(k).map(Vec::as_slice).unwrap_or(&[]);
        let what = if name == "result" { "COTANGENT".to_string() } else { format!("COTANGENT component `{name}`") };
        out.push(Some(decode_f64_like(leaf_json, ty, &what, name, expected)?));
        Ok(())
    })?;
    Ok(out)
}

/// The entries of an `ARGS`/`TANGENTS` array, checked against the number
/// of source parameters.
fn expect_entries<'j>(what: &str, func: &str, sig: &Signature, json: &'j Json) -> Result<&'j [Json], Error> {
    let params: Vec<String> = sig.params.iter().map(|p| format!("{}: {}", p.name, p.ty)).collect();
    let want = || {
        format!(
            "an array with one entry per parameter of `{func}` ({})",
            if params.is_empty() { "none".to_string() } else { params.join(", ") }
        )
    };
    let Json::Array(entries) = json else {
        return Err(Error::InvalidArgument(format!("{what}: expected {}, found {}", want(), describe_json(json))));
    };
    if entries.len() != sig.params.len() {
        return Err(Error::InvalidArgument(format!(
            "{what}: expected {}, found {} entr{}",
            want(),
            entries.len(),
            if entries.len() == 1 { "y" } else { "ies" }
        )));
    }
    Ok(entries)
}

/// Walks a tuple type and its JSON value together, calling `leaf` for each
/// (non-tuple) component with its JSON, type and name (`p`, `p.1.0`).
fn decode_tree(
    json: &Json,
    ty: &SrcType,
    name: &str,
    leaf: &mut dyn FnMut(&Json, &SrcType, &str) -> Result<(), Error>,
) -> Result<(), Error> {
    match ty {
        SrcType::Tuple(ts) => match json {
            Json::Array(items) if items.len() == ts.len() => {
                for (i, (j, t)) in items.iter().zip(ts).enumerate() {
                    decode_tree(j, t, &format!("{name}.{i}"), leaf)?;
                }
                Ok(())
            }
            _ => Err(Error::InvalidArgument(format!(
                "`{name}`: expected a tuple {ty} (a JSON array of {} components), found {}",
                ts.len(),
                describe_json(json)
            ))),
        },
        _ => leaf(json, ty, name),
    }
}

fn elem_of(ty: &SrcType) -> Option<Scalar> {
    match ty {
        SrcType::Scalar(s) => Some(*s),
        SrcType::Array { elem, .. } => Some(*elem),
        SrcType::Tuple(_) => None,
    }
}

/// A decoded leaf whose inner extents may be unknown (inside an empty
/// array).
struct Partial {
    elem: Scalar,
    /// `None` for the scalars.
    shape: Option<Vec<Option<usize>>>,
    data: Elems,
}

enum Elems {
    F64(Vec<f64>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

impl Partial {
    /// The value, with unknown extents taken from `extent(axis)`.
    fn complete(self, extent: impl Fn(usize) -> usize) -> Value {
        match self.shape {
            None => match self.data {
                Elems::F64(v) => Value::F64(v[0]),
                Elems::I64(v) => Value::I64(v[0]),
                Elems::Bool(v) => Value::Bool(v[0]),
            },
            Some(shape) => {
                let shape = shape.iter().enumerate().map(|(axis, d)| d.unwrap_or_else(|| extent(axis))).collect();
                let data = match self.data {
                    Elems::F64(v) => ArrayData::F64(v),
                    Elems::I64(v) => ArrayData::I64(v),
                    Elems::Bool(v) => ArrayData::Bool(v),
                };
                debug_assert_eq!(data.elem(), self.elem);
                Value::Array(ArrayValue { shape, data })
            }
        }
    }
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

/// Decodes one leaf (a scalar or an array of the element type of `ty`).
fn decode_leaf(json: &Json, ty: &SrcType, name: &str) -> Result<Partial, Error> {
    let (elem, rank) = match ty {
        SrcType::Scalar(s) => (*s, 0),
        SrcType::Array { elem, dims } => (*elem, dims.len()),
        SrcType::Tuple(_) => unreachable_tuple(name)?,
    };
    let what = format!("ARGS: argument `{name}` ({ty})");
    let mut w = Walker { what: &what, root: name, rank, shape: vec![None; rank], setter: vec![String::new(); rank] };
    let data = match elem {
        Scalar::F64 => Elems::F64(w.walk(json, &mut Vec::new(), &mut Vec::new(), to_f64)?),
        Scalar::I64 => Elems::I64(w.walk(json, &mut Vec::new(), &mut Vec::new(), to_i64)?),
        Scalar::Bool => Elems::Bool(w.walk(json, &mut Vec::new(), &mut Vec::new(), to_bool)?),
    };
    Ok(Partial { elem, shape: (rank > 0).then_some(w.shape), data })
}

fn unreachable_tuple<T>(name: &str) -> Result<T, Error> {
    Err(Error::Internal(format!("`{name}`: a tuple where a leaf was expected")))
}

/// Decodes an `f64` value of the shape of leaf type `ty` (its element type
/// is ignored: tangents and cotangents are `f64`), which must equal
/// `expected`. `what` describes it in messages, `name` starts positions.
fn decode_f64_like(json: &Json, ty: &SrcType, what: &str, name: &str, expected: &[usize]) -> Result<Value, Error> {
    let rank = match ty {
        SrcType::Array { dims, .. } => dims.len(),
        _ => 0,
    };
    let mut w = Walker { what, root: name, rank, shape: vec![None; rank], setter: vec![String::new(); rank] };
    let data = w.walk(json, &mut Vec::new(), &mut Vec::new(), to_f64)?;
    if rank == 0 {
        return Ok(Value::F64(data[0]));
    }
    let shape: Vec<usize> = w
        .shape
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
    Ok(Value::Array(ArrayValue { shape, data: ArrayData::F64(data) }))
}

/// Walks nested JSON arrays down to `rank`, checking that they are
/// rectangular, and collects the elements row-major.
struct Walker<'a> {
    /// What is decoded, for messages.
    what: &'a str,
    /// The name used in positions (`x[1][0]`).
    root: &'a str,
    rank: usize,
    /// Extent of each axis, once seen.
    shape: Vec<Option<usize>>,
    /// Position of the array that set each extent.
    setter: Vec<String>,
}

impl Walker<'_> {
    fn position(&self, path: &[usize]) -> String {
        let mut s = self.root.to_string();
        for i in path {
            let _ = write!(s, "[{i}]");
        }
        s
    }

    fn walk<T>(
        &mut self,
        json: &Json,
        path: &mut Vec<usize>,
        out: &mut Vec<T>,
        conv: fn(&Json) -> Result<T, String>,
    ) -> Result<Vec<T>, Error> {
        self.walk_into(json, path, out, conv)?;
        Ok(std::mem::take(out))
    }

    fn walk_into<T>(
        &mut self,
        json: &Json,
        path: &mut Vec<usize>,
        out: &mut Vec<T>,
        conv: fn(&Json) -> Result<T, String>,
    ) -> Result<(), Error> {
        let depth = path.len();
        if depth == self.rank {
            let x = conv(json).map_err(|e| {
                let at = if depth == 0 { String::new() } else { format!(" at {}", self.position(path)) };
                Error::InvalidArgument(format!("{}: {e}{at}", self.what))
            })?;
            out.push(x);
            return Ok(());
        }
        let Json::Array(items) = json else {
            let at = if depth == 0 { String::new() } else { format!(" at {}", self.position(path)) };
            let dims = self.rank - depth;
            return Err(Error::InvalidArgument(format!(
                "{}: expected an array{} ({} more dimension{}), found {}{at}",
                self.what,
                if depth == 0 { format!(" of rank {}", self.rank) } else { String::new() },
                dims,
                if dims == 1 { "" } else { "s" },
                describe_json(json)
            )));
        };
        match self.shape[depth] {
            None => {
                self.shape[depth] = Some(items.len());
                self.setter[depth] = self.position(path);
            }
            Some(n) if n != items.len() => {
                return Err(Error::InvalidArgument(format!(
                    "{}: ragged array: {} has {} element{} but {} has {}",
                    self.what,
                    self.position(path),
                    items.len(),
                    if items.len() == 1 { "" } else { "s" },
                    self.setter[depth],
                    n
                )));
            }
            Some(_) => {}
        }
        for (i, item) in items.iter().enumerate() {
            path.push(i);
            self.walk_into(item, path, out, conv)?;
            path.pop();
        }
        Ok(())
    }
}

fn to_f64(j: &Json) -> Result<f64, String> {
    match j {
        Json::Number(n) => n.as_f64().ok_or_else(|| format!("the number {n} is not an f64")),
        Json::String(s) => match s.as_str() {
            "NaN" | "nan" => Ok(f64::NAN),
            "inf" | "+inf" | "Infinity" | "+Infinity" => Ok(f64::INFINITY),
            "-inf" | "-Infinity" => Ok(f64::NEG_INFINITY),
            _ => Err(format!("expected an f64 (a number, \"NaN\", \"inf\" or \"-inf\"), found {}", describe_json(j))),
        },
        _ => Err(format!("expected an f64, found {}", describe_json(j))),
    }
}

fn to_i64(j: &Json) -> Result<i64, String> {
    match j {
        Json::Number(n) => match n.as_i64() {
            Some(x) => Ok(x),
            None if n.is_u64() => Err(format!("the integer {n} is out of the i64 range")),
            None => Err(format!("expected an i64 (an integer), found the number {n}")),
        },
        _ => Err(format!("expected an i64, found {}", describe_json(j))),
    }
}

fn to_bool(j: &Json) -> Result<bool, String> {
    match j {
        Json::Bool(b) => Ok(*b),
        _ => Err(format!("expected a bool (true or false), found {}", describe_json(j))),
    }
}

/// A short description of a JSON value for messages.
fn describe_json(j: &Json) -> String {
    match j {
        Json::Null => "null".into(),
        Json::Bool(b) => format!("{b}"),
        Json::Number(n) => format!("the number {n}"),
        Json::String(s) => {
            let short: String = s.chars().take(40).collect();
            format!("the string {:?}{}", short, if short.len() < s.len() { "..." } else { "" })
        }
        Json::Array(a) => format!("an array of {} element{}", a.len(), if a.len() == 1 { "" } else { "s" }),
        Json::Object(_) => "an object".into(),
    }
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

    fn args(s: &Signature, text: &str) -> Result<Vec<Value>, Error> {
        decode_args("f", s, &parse("ARGS", text)?)
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
