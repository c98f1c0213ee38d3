//! Decoding JSON into typed buffers, driven by the expected source type.
//!
//! The text is never turned into a tree of JSON values: serde_json's
//! deserializer calls the visitors below, which check each array against the
//! rank and extents seen so far and append the elements to one flat
//! `Vec<f64>`, `Vec<i64>` or `Vec<bool>` per leaf with fallible allocation.
//! An argument of 10^7 numbers costs its text and its 80 MB, not a 32-byte
//! JSON value per number; memory that runs out is a run-time out-of-memory
//! error (exit status 3), not an abort. The same visitors read a parsed
//! [`Json`] value (serde_json's `&Value` is a deserializer too).
//!
//! serde errors carry only strings: a visitor keeps its located [`Error`] in
//! the [`Decoder`] and hands serde a marker; [`decode`] prefers the kept
//! error and reports any other serde error as malformed JSON.

use super::Input;
use crate::error::Error;
use arrayad_ir::{ErrorKind, RuntimeError, Scalar, SrcParam, SrcType};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt::{self, Write};

/// A decoded leaf whose inner extents may be unknown (inside an empty
/// array).
pub(super) struct Partial {
    /// `None` for the scalars.
    pub shape: Option<Vec<Option<usize>>>,
    pub data: Elems,
}

/// The elements of a leaf, row-major.
pub(super) enum Elems {
    F64(Vec<f64>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

/// How one leaf is decoded.
pub(super) struct LeafSpec {
    /// The element type asked for (`f64` for tangents and cotangents).
    pub elem: Scalar,
    /// The number of array dimensions (0 for a scalar).
    pub rank: usize,
    /// What is decoded, starting messages (`ARGS: argument `x` ([n]f64)`).
    pub what: String,
    /// The name positions start with (`x` in `x[1][0]`).
    pub root: String,
    /// `null` stands for zero (tangents, cotangents): the leaf is `None`.
    pub nullable: bool,
}

/// The leaf specification of leaf number `k` (counted over the whole
/// input, tuples flattened), of type `ty` and name `name`; `None` skips the
/// leaf without reading its JSON (an inactive tangent).
pub(super) type SpecFn<'a> = dyn Fn(usize, &SrcType, &str) -> Option<LeafSpec> + 'a;

/// The state of one decoding: the leaves so far and the error a visitor
/// stopped at.
pub(super) struct Decoder<'a> {
    spec: &'a SpecFn<'a>,
    /// Tuples (and whole parameters) may be `null` (zero).
    nullable: bool,
    leaves: Vec<Option<Partial>>,
    error: Option<Error>,
}

/// What the input is: one entry per parameter, or one value of a type.
pub(super) enum Top<'a> {
    /// `ARGS`/`TANGENTS`: a JSON array with one entry per parameter.
    Entries { what: &'a str, func: &'a str, params: &'a [SrcParam] },
    /// `COTANGENT`: one value of the result type.
    Value { ty: &'a SrcType, name: &'a str },
}

/// Decodes `input` as `top` asks: one entry per leaf (tuples flattened),
/// `None` for skipped and `null` leaves.
///
/// Errors: [`Error::InvalidArgument`] for malformed JSON (before anything
/// else, as a whole text is checked first), a wrong count, type or rank, a
/// ragged array; [`Error::Runtime`] out of memory when the elements cannot
/// be allocated.
pub(super) fn decode(
    input: Input<'_>,
    top: Top<'_>,
    spec: &SpecFn<'_>,
    nullable: bool,
) -> Result<Vec<Option<Partial>>, Error> {
    let mut dec = Decoder { spec, nullable, leaves: Vec::new(), error: None };
    let outcome = match input {
        Input::Text { what, text } => {
            let text = text.strip_prefix('\u{feff}').unwrap_or(text);
            // Syntax first, without allocating: a malformed text is
            // reported as malformed, whatever type errors precede the flaw.
            super::check_syntax(what, text)?;
            let mut de = serde_json::Deserializer::from_str(text);
            let r = TopSeed { dec: &mut dec, top }.deserialize(&mut de).and_then(|()| de.end());
            r.map_err(|e| (what.to_string(), e))
        }
        Input::Value(json) => TopSeed { dec: &mut dec, top }.deserialize(json).map_err(|e| (String::new(), e)),
    };
    match outcome {
        Ok(()) => Ok(dec.leaves),
        Err((what, e)) => Err(dec.error.take().unwrap_or_else(|| {
            Error::InvalidArgument(format!("{}malformed JSON: {e}", if what.is_empty() { what } else { what + ": " }))
        })),
    }
}

/// Keeps `e` in `slot` and returns serde's marker error.
fn fail<E: de::Error>(slot: &mut Option<Error>, e: Error) -> E {
    *slot = Some(e);
    E::custom("see the decoder's error")
}

/// Counts the remaining elements of a sequence without keeping them.
fn count_rest<'de, A: SeqAccess<'de>>(seq: &mut A) -> Result<usize, A::Error> {
    let mut n = 0;
    while seq.next_element::<IgnoredAny>()?.is_some() {
        n += 1;
    }
    Ok(n)
}

/// `1 entry`, `2 entries`; `1 element`, `2 elements`.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

// ----------------------------------------------------------------------------
// Entries and tuples
// ----------------------------------------------------------------------------

struct TopSeed<'d, 'a> {
    dec: &'d mut Decoder<'a>,
    top: Top<'d>,
}

impl<'de> DeserializeSeed<'de> for TopSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        match self.top {
            Top::Entries { .. } => d.deserialize_any(self),
            Top::Value { ty, name } => Tree { dec: self.dec, ty, name: name.to_string() }.deserialize(d),
        }
    }
}

impl TopSeed<'_, '_> {
    /// The error of a top-level input that is `found`, not an array.
    fn not_entries<E: de::Error>(mut self, found: Found<'_>) -> Result<(), E> {
        let e = self.wrong_entries(found.describe());
        Err(fail(&mut self.dec.error, e))
    }

    /// The message of a top-level input that is not one entry per parameter.
    fn wrong_entries(&mut self, found: String) -> Error {
        let Top::Entries { what, func, params } = &self.top else {
            return Error::Internal("a value input read as entries".into());
        };
        let list: Vec<String> = params.iter().map(|p| format!("{}: {}", p.name, p.ty)).collect();
        Error::InvalidArgument(format!(
            "{what}: expected an array with one entry per parameter of `{func}` ({}), found {found}",
            if list.is_empty() { "none".to_string() } else { list.join(", ") }
        ))
    }
}

impl<'de> Visitor<'de> for TopSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("one entry per parameter")
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let Top::Entries { params, .. } = self.top else { return Err(de::Error::custom("not entries")) };
        for (i, p) in params.iter().enumerate() {
            if seq.next_element_seed(Tree { dec: &mut *self.dec, ty: &p.ty, name: p.name.clone() })?.is_none() {
                let e = self.wrong_entries(plural(i, "entry", "entries"));
                return Err(fail(&mut self.dec.error, e));
            }
        }
        let extra = count_rest(&mut seq)?;
        if extra > 0 {
            let e = self.wrong_entries(plural(params.len() + extra, "entry", "entries"));
            return Err(fail(&mut self.dec.error, e));
        }
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.not_entries(Found::Object)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.not_entries(Found::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.not_entries(Found::I64(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.not_entries(Found::U64(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.not_entries(Found::F64(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.not_entries(Found::Str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.not_entries(Found::Null)
    }
}

/// A value of source type `ty` named `name` (`p`, `p.1.0`): a tuple is a
/// JSON array of its components, any other type one leaf.
struct Tree<'d, 'a> {
    dec: &'d mut Decoder<'a>,
    ty: &'d SrcType,
    name: String,
}

impl<'de> DeserializeSeed<'de> for Tree<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if let SrcType::Tuple(_) = self.ty {
            return d.deserialize_any(self);
        }
        let k = self.dec.leaves.len();
        let Some(spec) = (self.dec.spec)(k, self.ty, &self.name) else {
            IgnoredAny::deserialize(d)?;
            self.dec.leaves.push(None);
            return Ok(());
        };
        let leaf = match spec.elem {
            Scalar::F64 => decode_leaf(d, &spec, to_f64, Elems::F64, &mut self.dec.error)?,
            Scalar::I64 => decode_leaf(d, &spec, to_i64, Elems::I64, &mut self.dec.error)?,
            Scalar::Bool => decode_leaf(d, &spec, to_bool, Elems::Bool, &mut self.dec.error)?,
        };
        self.dec.leaves.push(leaf);
        Ok(())
    }
}

impl Tree<'_, '_> {
    fn not_a_tuple<E: de::Error>(self, found: Found<'_>) -> E {
        let n = match self.ty {
            SrcType::Tuple(ts) => ts.len(),
            _ => 0,
        };
        let e = Error::InvalidArgument(format!(
            "`{}`: expected a tuple {} (a JSON array of {n} components), found {}",
            self.name,
            self.ty,
            found.describe()
        ));
        fail(&mut self.dec.error, e)
    }
}

impl<'de> Visitor<'de> for Tree<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a tuple {}", self.ty)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let SrcType::Tuple(ts) = self.ty else { return Err(de::Error::custom("not a tuple")) };
        for (i, t) in ts.iter().enumerate() {
            if seq.next_element_seed(Tree { dec: &mut *self.dec, ty: t, name: format!("{}.{i}", self.name) })?.is_none()
            {
                return Err(self.not_a_tuple(Found::Array(i)));
            }
        }
        let extra = count_rest(&mut seq)?;
        if extra > 0 {
            return Err(self.not_a_tuple(Found::Array(ts.len() + extra)));
        }
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        if !self.dec.nullable {
            return Err(self.not_a_tuple(Found::Null));
        }
        let n = self.ty.leaves().len();
        self.dec.leaves.extend(std::iter::repeat_with(|| None).take(n));
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(self.not_a_tuple(Found::Object))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        Err(self.not_a_tuple(Found::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        Err(self.not_a_tuple(Found::I64(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        Err(self.not_a_tuple(Found::U64(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        Err(self.not_a_tuple(Found::F64(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        Err(self.not_a_tuple(Found::Str(v)))
    }
}

// ----------------------------------------------------------------------------
// Leaves
// ----------------------------------------------------------------------------

/// Decodes one leaf as `spec` says into a flat buffer of `T`; `None` for a
/// `null` where that is allowed. An error of the leaf lands in `error`.
fn decode_leaf<'de, D: Deserializer<'de>, T>(
    d: D,
    spec: &LeafSpec,
    conv: fn(Found<'_>) -> Result<T, String>,
    wrap: fn(Vec<T>) -> Elems,
    error: &mut Option<Error>,
) -> Result<Option<Partial>, D::Error> {
    let mut leaf = Leaf {
        spec,
        shape: vec![None; spec.rank],
        setter: vec![String::new(); spec.rank],
        path: Vec::new(),
        out: Vec::new(),
        conv,
        null: false,
        error: None,
    };
    if let Err(e) = (Level { leaf: &mut leaf }).deserialize(d) {
        *error = leaf.error.take();
        return Err(e);
    }
    Ok((!leaf.null).then(|| Partial { shape: (spec.rank > 0).then_some(leaf.shape), data: wrap(leaf.out) }))
}

/// The walk of one leaf: nested JSON arrays down to the rank, checked to be
/// rectangular, their elements collected row-major.
struct Leaf<'s, T> {
    spec: &'s LeafSpec,
    /// The extent of each axis, once an array of its depth has ended.
    shape: Vec<Option<usize>>,
    /// The position of the array that set each extent.
    setter: Vec<String>,
    /// The indices down to the current array.
    path: Vec<usize>,
    out: Vec<T>,
    conv: fn(Found<'_>) -> Result<T, String>,
    /// The leaf was `null`.
    null: bool,
    error: Option<Error>,
}

impl<T> Leaf<'_, T> {
    /// `x[1][0]` for the current path.
    fn position(&self) -> String {
        let mut s = self.spec.root.clone();
        for i in &self.path {
            let _ = write!(s, "[{i}]");
        }
        s
    }

    /// ` at x[1][0]` below the top, nothing at it.
    fn at(&self) -> String {
        if self.path.is_empty() {
            String::new()
        } else {
            format!(" at {}", self.position())
        }
    }

    fn fail<E: de::Error>(&mut self, message: String) -> E {
        fail(&mut self.error, Error::InvalidArgument(format!("{}: {message}", self.spec.what)))
    }

    /// A JSON scalar (or an object): an element at the full depth, else an
    /// error.
    fn scalar<E: de::Error>(&mut self, found: Found<'_>) -> Result<(), E> {
        let depth = self.path.len();
        if depth == 0 && self.spec.nullable && matches!(found, Found::Null) {
            self.null = true;
            return Ok(());
        }
        if depth < self.spec.rank {
            let dims = self.spec.rank - depth;
            let message = format!(
                "expected an array{} ({}), found {}{}",
                if depth == 0 { format!(" of rank {}", self.spec.rank) } else { String::new() },
                plural(dims, "more dimension", "more dimensions"),
                found.describe(),
                self.at()
            );
            return Err(self.fail(message));
        }
        match (self.conv)(found) {
            Ok(x) => {
                if self.out.try_reserve(1).is_err() {
                    let e = RuntimeError::new(
                        ErrorKind::OutOfMemory,
                        format!("{}: no memory for more than {} elements", self.spec.what, self.out.len()),
                    );
                    return Err(fail(&mut self.error, Error::Runtime(e)));
                }
                self.out.push(x);
                Ok(())
            }
            Err(e) => {
                let message = format!("{e}{}", self.at());
                Err(self.fail(message))
            }
        }
    }

    /// The message of an array at `position` with `n` elements where the
    /// first of its depth had `m`.
    fn ragged<E: de::Error>(&mut self, n: usize, m: usize) -> E {
        let depth = self.path.len();
        let message = format!(
            "ragged array: {} has {} but {} has {m}",
            self.position(),
            plural(n, "element", "elements"),
            self.setter[depth]
        );
        self.fail(message)
    }
}

/// One array or scalar of a leaf, at the depth of the leaf's path.
struct Level<'l, 's, T> {
    leaf: &'l mut Leaf<'s, T>,
}

impl<'de, T> DeserializeSeed<'de> for Level<'_, '_, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T> Visitor<'de> for Level<'_, '_, T> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array or a scalar")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let l = self.leaf;
        let depth = l.path.len();
        if depth == l.spec.rank {
            let n = count_rest(&mut seq)?;
            return l.scalar(Found::Array(n));
        }
        let known = l.shape[depth];
        let mut i = 0;
        loop {
            if known == Some(i) {
                // As long as the first array of this depth: any more
                // elements are only counted, for the message.
                let extra = count_rest(&mut seq)?;
                if extra > 0 {
                    return Err(l.ragged(i + extra, i));
                }
                return Ok(());
            }
            l.path.push(i);
            let more = seq.next_element_seed(Level { leaf: &mut *l })?;
            l.path.pop();
            if more.is_none() {
                break;
            }
            i += 1;
        }
        match known {
            None => {
                l.shape[depth] = Some(i);
                l.setter[depth] = l.position();
                Ok(())
            }
            Some(m) => Err(l.ragged(i, m)),
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.leaf.scalar(Found::Object)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.leaf.scalar(Found::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.leaf.scalar(Found::I64(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.leaf.scalar(Found::U64(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.leaf.scalar(Found::F64(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.leaf.scalar(Found::Str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.leaf.scalar(Found::Null)
    }
}

// ----------------------------------------------------------------------------
// Scalars
// ----------------------------------------------------------------------------

/// A JSON value where a scalar may stand, as a visitor saw it (an array
/// only by its length).
#[derive(Clone, Copy)]
pub(super) enum Found<'s> {
    Null,
    Bool(bool),
    I64(i64),
    U64(u64),
    F64(f64),
    Str(&'s str),
    Array(usize),
    Object,
}

impl Found<'_> {
    /// A short description for messages: `the number 2.5`, `the string
    /// "a"`, `an array of 3 elements`.
    pub(super) fn describe(&self) -> String {
        match *self {
            Found::Null => "null".into(),
            Found::Bool(b) => format!("{b}"),
            Found::I64(x) => format!("the number {x}"),
            Found::U64(x) => format!("the number {x}"),
            Found::F64(x) => match serde_json::Number::from_f64(x) {
                Some(n) => format!("the number {n}"),
                None => format!("the number {x}"),
            },
            Found::Str(s) => {
                let short: String = s.chars().take(40).collect();
                format!("the string {:?}{}", short, if short.len() < s.len() { "..." } else { "" })
            }
            Found::Array(n) => format!("an array of {}", plural(n, "element", "elements")),
            Found::Object => "an object".into(),
        }
    }
}

fn to_f64(j: Found<'_>) -> Result<f64, String> {
    match j {
        Found::I64(x) => Ok(x as f64),
        Found::U64(x) => Ok(x as f64),
        Found::F64(x) => Ok(x),
        Found::Str(s) => match s {
            "NaN" | "nan" => Ok(f64::NAN),
            "inf" | "+inf" | "Infinity" | "+Infinity" => Ok(f64::INFINITY),
            "-inf" | "-Infinity" => Ok(f64::NEG_INFINITY),
            _ => Err(format!("expected an f64 (a number, \"NaN\", \"inf\" or \"-inf\"), found {}", j.describe())),
        },
        _ => Err(format!("expected an f64, found {}", j.describe())),
    }
}

fn to_i64(j: Found<'_>) -> Result<i64, String> {
    match j {
        Found::I64(x) => Ok(x),
        Found::U64(x) => i64::try_from(x).map_err(|_| format!("the integer {x} is out of the i64 range")),
        Found::F64(_) => Err(format!("expected an i64 (an integer), found {}", j.describe())),
        _ => Err(format!("expected an i64, found {}", j.describe())),
    }
}

fn to_bool(j: Found<'_>) -> Result<bool, String> {
    match j {
        Found::Bool(b) => Ok(b),
        _ => Err(format!("expected a bool (true or false), found {}", j.describe())),
    }
}
