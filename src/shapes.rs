//! Checking argument values against a definition's source signature: leaf
//! types, literal dimensions and the agreement of size variables; the shapes
//! that tangents and cotangents must have.

use crate::error::Error;
use arrayad_codegen::ArgRef;
use arrayad_ir::{ErrorKind, Loc, RuntimeError, Scalar, Signature, SrcDim, SrcType, Type, Value};

/// One leaf of a source parameter (or of the result): its display name and
/// its source type (a scalar or an array, never a tuple).
#[derive(Clone, Debug)]
pub(crate) struct LeafInfo<'s> {
    /// `x` for a parameter that is not a tuple, `p.1.0` for a component.
    pub name: String,
    /// The source type of the leaf.
    pub ty: &'s SrcType,
}

/// The leaves of `ty`, named after `base`.
pub(crate) fn leaf_infos<'s>(base: &str, ty: &'s SrcType) -> Vec<LeafInfo<'s>> {
    fn go<'s>(name: String, ty: &'s SrcType, out: &mut Vec<LeafInfo<'s>>) {
        match ty {
            SrcType::Tuple(ts) => {
                for (i, t) in ts.iter().enumerate() {
                    go(format!("{name}.{i}"), t, out);
                }
            }
            _ => out.push(LeafInfo { name, ty }),
        }
    }
    let mut out = Vec::new();
    go(base.to_string(), ty, &mut out);
    out
}

/// The leaves of all parameters of `sig`, flattened left to right.
pub(crate) fn param_leaves(sig: &Signature) -> Vec<LeafInfo<'_>> {
    sig.params.iter().flat_map(|p| leaf_infos(&p.name, &p.ty)).collect()
}

/// The element type and rank of a (non-tuple) source type.
pub(crate) fn leaf_type(ty: &SrcType) -> Type {
    match ty {
        SrcType::Scalar(s) => Type::scalar(*s),
        SrcType::Array { elem, dims } => Type::array(*elem, dims.len() as u8),
        // Not a leaf; callers only pass leaves.
        SrcType::Tuple(_) => Type::scalar(Scalar::F64),
    }
}

/// A short description of an argument's type for messages: `an f64`,
/// `a [2][3]f64 array`.
pub(crate) fn describe_arg(v: &ArgRef<'_>) -> String {
    let t = v.ty();
    if t.is_scalar() {
        match t.elem {
            Scalar::F64 => "an f64".into(),
            Scalar::I64 => "an i64".into(),
            Scalar::Bool => "a bool".into(),
        }
    } else {
        let dims: String = v.shape().iter().map(|d| format!("[{d}]")).collect();
        format!("a {dims}{} array", t.elem)
    }
}

/// The shape of a value (`[]` for a scalar).
#[cfg(feature = "json")]
pub(crate) fn shape_of(v: &Value) -> &[usize] {
    match v {
        Value::Array(a) => &a.shape,
        _ => &[],
    }
}

/// The values of the size variables of a signature, bound by the
/// arguments of one call, in order of first appearance.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Sizes(pub Vec<(String, usize)>);

impl Sizes {
    /// The value of size variable `name`, if bound.
    pub fn get(&self, name: &str) -> Option<usize> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// The shape that a value of the leaf type `ty` has under these sizes
    /// (`[]` for a scalar); `None` if a size variable is unbound or a
    /// literal dimension is negative.
    pub fn shape_of_type(&self, ty: &SrcType) -> Option<Vec<usize>> {
        match ty {
            SrcType::Array { dims, .. } => dims
                .iter()
                .map(|d| match d {
                    SrcDim::Lit(n) => usize::try_from(*n).ok(),
                    SrcDim::Var(v) => self.get(v),
                    SrcDim::Expr(e) => e
                        .eval(&|v| self.get(v).and_then(|x| i64::try_from(x).ok()))
                        .ok()
                        .and_then(|x| usize::try_from(x).ok()),
                })
                .collect(),
            _ => Some(Vec::new()),
        }
    }
}

/// Where a definition is, for the messages of size mismatches.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Site<'a> {
    /// The source file name.
    pub file: &'a str,
    /// The definition's name.
    pub func: &'a str,
    /// The definition's location.
    pub loc: Loc,
}

impl Site<'_> {
    fn size_mismatch(&self, detail: String) -> Error {
        Error::Runtime(RuntimeError::at(ErrorKind::SizeMismatch, self.file, self.loc, detail))
    }
}

/// Checks the argument leaves `args` of a call of `site.func` against its
/// signature and returns the sizes they bind.
///
/// Errors: a wrong count, element type or rank is
/// [`Error::InvalidArgument`]; an extent that differs from a literal
/// dimension or from another extent bound to the same size variable is a
/// run-time [`ErrorKind::SizeMismatch`] at the definition's location.
pub(crate) fn check_args(site: Site<'_>, sig: &Signature, args: &[ArgRef<'_>]) -> Result<Sizes, Error> {
    let leaves = param_leaves(sig);
    if args.len() != leaves.len() {
        let expected: Vec<String> = leaves.iter().map(|l| format!("{}: {}", l.name, l.ty)).collect();
        return Err(Error::InvalidArgument(format!(
            "`{}` takes {} argument{} ({}), got {}",
            site.func,
            leaves.len(),
            if leaves.len() == 1 { "" } else { "s" },
            expected.join(", "),
            args.len()
        )));
    }
    let mut sizes = Sizes::default();
    // For each bound size variable: the leaf and axis that bound it.
    let mut origin: Vec<(String, usize)> = Vec::new();
    // Size expressions, checked once every size variable is bound.
    let mut deferred = Vec::new();
    for (leaf, arg) in leaves.iter().zip(args) {
        let want = leaf_type(leaf.ty);
        if arg.ty() != want {
            return Err(Error::InvalidArgument(format!(
                "argument `{}` of `{}` must be {}, got {}",
                leaf.name,
                site.func,
                describe_type(leaf.ty),
                describe_arg(arg)
            )));
        }
        let SrcType::Array { dims, .. } = leaf.ty else { continue };
        let shape = arg.shape();
        let count = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if count != Some(arg_len(arg)) {
            return Err(Error::InvalidArgument(format!(
                "argument `{}` of `{}`: the array has {} elements but its shape {:?} needs {}",
                leaf.name,
                site.func,
                arg_len(arg),
                shape,
                count.map_or_else(|| "more than fit in memory".to_string(), |c| c.to_string())
            )));
        }
        for (axis, (dim, &extent)) in dims.iter().zip(shape).enumerate() {
            match dim {
                SrcDim::Lit(n) => {
                    if usize::try_from(*n).ok() != Some(extent) {
                        return Err(site.size_mismatch(format!(
                            "argument `{}` of `{}` has type {} but extent {} in axis {}",
                            leaf.name, site.func, leaf.ty, extent, axis
                        )));
                    }
                }
                SrcDim::Expr(e) => deferred.push((leaf, e, extent, axis)),
                SrcDim::Var(v) => match sizes.get(v) {
                    None => {
                        sizes.0.push((v.clone(), extent));
                        origin.push((leaf.name.clone(), axis));
                    }
                    Some(bound) if bound == extent => {}
                    Some(bound) => {
                        let i = sizes.0.iter().position(|(n, _)| n == v).unwrap_or(0);
                        let (first, first_axis) = &origin[i];
                        return Err(site.size_mismatch(format!(
                            "size `{v}` of `{}` is {bound} in argument `{first}` (axis {first_axis}) \
                             but {extent} in argument `{}` (axis {axis})",
                            site.func, leaf.name
                        )));
                    }
                },
            }
        }
    }
    for (leaf, e, extent, axis) in deferred {
        let value = e.eval(&|v| sizes.get(v).and_then(|x| i64::try_from(x).ok()));
        match value {
            Ok(x) if usize::try_from(x).ok() == Some(extent) => {}
            Ok(x) => {
                return Err(site.size_mismatch(format!(
                    "argument `{}` of `{}` has type {} but extent {} in axis {} where {e} is {x}",
                    leaf.name, site.func, leaf.ty, extent, axis
                )))
            }
            Err(why) => {
                return Err(site.size_mismatch(format!(
                    "argument `{}` of `{}` has type {}: the size {e} has no value ({why})",
                    leaf.name, site.func, leaf.ty
                )))
            }
        }
    }
    Ok(sizes)
}

/// How the arguments of one signature are checked, worked out once per
/// definition so that a call checks them without allocating: per argument
/// leaf its type and, per axis, whether it binds a size variable, must
/// equal one bound before or a literal; size expressions are checked last.
/// [`ArgPlan::accepts`] only answers yes or no: on no, [`check_args`] says
/// why.
pub(crate) struct ArgPlan {
    leaves: Vec<(Type, Vec<Axis>)>,
    /// The size variables, in binding order (for size expressions).
    names: Vec<String>,
    /// `(leaf, axis, expression)` of each dimension that is an expression.
    exprs: Vec<(usize, usize, arrayad_ir::SizeExpr)>,
    /// The shape of every result leaf (`[]` for a scalar) when the result
    /// type has only literal dimensions: then no argument is needed to know
    /// them.
    literal_results: Option<Vec<Vec<usize>>>,
}

/// The check of one axis of an argument.
#[derive(Clone, Copy)]
enum Axis {
    /// Binds size variable k.
    Bind(usize),
    /// Equals size variable k.
    Same(usize),
    /// Equals a literal.
    Lit(usize),
    /// Checked by a size expression ([`ArgPlan::exprs`]).
    Expr,
}

impl ArgPlan {
    pub(crate) fn new(sig: &Signature) -> ArgPlan {
        let mut names: Vec<String> = Vec::new();
        let mut exprs = Vec::new();
        let mut leaves = Vec::new();
        for (k, leaf) in param_leaves(sig).iter().enumerate() {
            let mut axes = Vec::new();
            if let SrcType::Array { dims, .. } = leaf.ty {
                for (axis, d) in dims.iter().enumerate() {
                    axes.push(match d {
                        SrcDim::Lit(n) => usize::try_from(*n).map_or(Axis::Lit(usize::MAX), Axis::Lit),
                        SrcDim::Var(v) => match names.iter().position(|n| n == v) {
                            Some(i) => Axis::Same(i),
                            None => {
                                names.push(v.clone());
                                Axis::Bind(names.len() - 1)
                            }
                        },
                        SrcDim::Expr(e) => {
                            exprs.push((k, axis, e.clone()));
                            Axis::Expr
                        }
                    });
                }
            }
            leaves.push((leaf_type(leaf.ty), axes));
        }
        let literal_results = leaf_infos("result", &sig.result)
            .iter()
            .map(|leaf| match leaf.ty {
                SrcType::Array { dims, .. } => dims
                    .iter()
                    .map(|d| match d {
                        SrcDim::Lit(n) => usize::try_from(*n).ok(),
                        _ => None,
                    })
                    .collect(),
                _ => Some(Vec::new()),
            })
            .collect();
        ArgPlan { leaves, names, exprs, literal_results }
    }

    /// The shapes of the result leaves when every dimension of the result
    /// type is a literal (`[]` for a scalar leaf).
    pub(crate) fn literal_results(&self) -> Option<&[Vec<usize>]> {
        self.literal_results.as_deref()
    }

    /// True when `args` pass every check of [`check_args`].
    pub(crate) fn accepts(&self, args: &[ArgRef<'_>]) -> bool {
        if args.len() != self.leaves.len() {
            return false;
        }
        let mut sizes: smallvec::SmallVec<[usize; 8]> = smallvec::smallvec![0; self.names.len()];
        for (arg, (ty, axes)) in args.iter().zip(&self.leaves) {
            if arg.ty() != *ty {
                return false;
            }
            let shape = arg.shape();
            if ty.is_array() {
                let count = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
                if count != Some(arg_len(arg)) {
                    return false;
                }
            }
            for (axis, &extent) in axes.iter().zip(shape) {
                match *axis {
                    Axis::Bind(k) => sizes[k] = extent,
                    Axis::Same(k) if sizes[k] != extent => return false,
                    Axis::Lit(n) if n != extent => return false,
                    Axis::Same(_) | Axis::Lit(_) | Axis::Expr => {}
                }
            }
        }
        self.exprs.iter().all(|(leaf, axis, e)| {
            let lookup = |v: &str| self.names.iter().position(|n| n == v).and_then(|k| i64::try_from(sizes[k]).ok());
            let extent = args[*leaf].shape().get(*axis).copied();
            matches!(e.eval(&lookup), Ok(x) if usize::try_from(x).ok() == extent)
        })
    }
}

/// `an f64`, `a [n][3]f64 array`.
pub(crate) fn describe_type(ty: &SrcType) -> String {
    match ty {
        SrcType::Scalar(Scalar::F64) => "an f64".into(),
        SrcType::Scalar(Scalar::I64) => "an i64".into(),
        SrcType::Scalar(Scalar::Bool) => "a bool".into(),
        SrcType::Array { .. } => format!("a {ty} array"),
        SrcType::Tuple(_) => format!("a tuple {ty}"),
    }
}

/// The number of elements of an argument (1 for a scalar).
pub(crate) fn arg_len(a: &ArgRef<'_>) -> usize {
    match a {
        ArgRef::F64(_) | ArgRef::I64(_) | ArgRef::Bool(_) => 1,
        ArgRef::F64s { data, .. } => data.len(),
        ArgRef::I64s { data, .. } => data.len(),
        ArgRef::Bools { data, .. } => data.len(),
    }
}

/// Checks a tangent or cotangent `v` (described by `what`) against the
/// shape `shape` it must have (`[]`: an f64 scalar). Mismatches are
/// [`Error::InvalidArgument`].
pub(crate) fn check_f64_like(what: &str, v: &ArgRef<'_>, shape: &[usize]) -> Result<(), Error> {
    let ok = match v {
        ArgRef::F64(_) => shape.is_empty(),
        ArgRef::F64s { data, shape: s } => {
            *s == shape && s.iter().try_fold(1usize, |n, &d| n.checked_mul(d)) == Some(data.len())
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("{what} must be {}, got {}", describe_f64_shape(shape), describe_arg(v))))
    }
}

/// `an f64` or `a [2][3]f64 array`.
pub(crate) fn describe_f64_shape(shape: &[usize]) -> String {
    if shape.is_empty() {
        "an f64".into()
    } else {
        let dims: String = shape.iter().map(|d| format!("[{d}]")).collect();
        format!("a {dims}f64 array")
    }
}

/// A zero f64 value of the given shape (`[]`: the scalar 0.0).
pub(crate) fn zeros(shape: &[usize]) -> Value {
    if shape.is_empty() {
        Value::F64(0.0)
    } else {
        let n = shape.iter().product();
        Value::Array(arrayad_ir::ArrayValue { shape: shape.to_vec(), data: arrayad_ir::ArrayData::F64(vec![0.0; n]) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrayad_ir::{ArrayValue, SrcParam};

    fn check(site: Site<'_>, sig: &Signature, vals: &[Value]) -> Result<Sizes, Error> {
        let refs: Vec<ArgRef<'_>> = vals.iter().map(ArgRef::of).collect();
        check_args(site, sig, &refs)
    }

    fn arr(shape: &[usize]) -> Value {
        zeros(shape)
    }

    fn sig() -> Signature {
        let v = |s: &str| SrcDim::Var(s.into());
        Signature {
            params: vec![
                SrcParam { name: "x".into(), ty: SrcType::Array { elem: Scalar::F64, dims: vec![v("n")] } },
                SrcParam {
                    name: "p".into(),
                    ty: SrcType::Tuple(vec![
                        SrcType::Scalar(Scalar::I64),
                        SrcType::Array { elem: Scalar::F64, dims: vec![v("n"), SrcDim::Lit(2)] },
                    ]),
                },
            ],
            result: SrcType::Scalar(Scalar::F64),
        }
    }

    const SITE: Site<'static> = Site { file: "t.arr", func: "f", loc: Loc { line: 1, col: 1 } };

    #[test]
    fn binds_and_checks_sizes() {
        let s = check(SITE, &sig(), &[arr(&[3]), Value::I64(1), arr(&[3, 2])]).unwrap();
        assert_eq!(s.get("n"), Some(3));
        let e = check(SITE, &sig(), &[arr(&[3]), Value::I64(1), arr(&[4, 2])]).unwrap_err();
        assert_eq!(e.runtime_kind(), Some(ErrorKind::SizeMismatch));
        let msg = e.to_string();
        assert!(msg.starts_with("t.arr:1:1: size mismatch"), "{msg}");
        assert!(msg.contains("`x`") && msg.contains("`p.1`"), "{msg}");
        let e = check(SITE, &sig(), &[arr(&[3]), Value::I64(1), arr(&[3, 3])]).unwrap_err();
        assert_eq!(e.runtime_kind(), Some(ErrorKind::SizeMismatch));
    }

    #[test]
    fn rejects_wrong_count_and_types() {
        let e = check(SITE, &sig(), &[arr(&[3])]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        let e = check(SITE, &sig(), &[arr(&[3]), Value::F64(1.0), arr(&[3, 2])]).unwrap_err();
        assert!(e.to_string().contains("`p.0`"), "{e}");
        let ints = Value::Array(ArrayValue { shape: vec![3], data: arrayad_ir::ArrayData::I64(vec![0; 3]) });
        let e = check(SITE, &sig(), &[ints, Value::I64(1), arr(&[3, 2])]).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }

    #[test]
    fn tangent_shapes() {
        assert!(check_f64_like("t", &ArgRef::of(&arr(&[2])), &[2]).is_ok());
        assert!(check_f64_like("t", &ArgRef::of(&arr(&[2])), &[3]).is_err());
        assert!(check_f64_like("t", &ArgRef::of(&Value::F64(1.0)), &[]).is_ok());
        assert!(check_f64_like("t", &ArgRef::of(&Value::I64(1)), &[]).is_err());
    }
}
