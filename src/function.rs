//! One definition of a [`Module`]: calls of its primal, jvp, vjp, gradient
//! and Jacobian.

use crate::arg::Arg;
use crate::engine::{Engine, Kind};
use crate::error::Error;
use crate::module::Module;
use crate::shapes::{self, check_args, check_f64_like, leaf_infos, param_leaves, shape_of, zeros, Site, Sizes};
use arrayad_ir::{ArrayData, ArrayValue, ErrorKind, RuntimeError, Scalar, Signature, SrcType, Type, Value};

/// A definition of a [`Module`], found by [`Module::function`].
///
/// Every call takes the arguments as the leaves of the source parameters,
/// flattened left to right (a tuple parameter takes one [`Arg`] per
/// component, as in the C ABI), and returns the result likewise flattened.
/// Arguments are checked first: a wrong count, element type or rank is an
/// [`Error::InvalidArgument`]; extents that disagree with a literal
/// dimension or with each other (two arrays of size `n`) are a run-time
/// size-mismatch [`Error::Runtime`] at the definition.
#[derive(Clone, Copy)]
pub struct Function<'m> {
    pub(crate) module: &'m Module,
    pub(crate) index: usize,
}

/// An entry point of a definition (the functions of the C ABI, LANGUAGE.md
/// section 8): what [`Function::precompile`] prepares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    /// The primal ([`Function::call`]).
    Value,
    /// Forward mode ([`Function::jvp`]).
    Jvp,
    /// Reverse mode ([`Function::vjp`]).
    Vjp,
    /// The gradient of a function with one `f64` result ([`Function::grad`]).
    Grad,
    /// The dense Jacobian ([`Function::jacobian`]).
    Jacobian,
    /// Hessian-vector products ([`Function::hvp`], [`Function::hessian`]).
    Hvp,
}

/// The value and tangent of a function ([`Function::jvp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Jvp {
    /// The result leaves.
    pub value: Vec<Value>,
    /// One entry per result leaf: its tangent (same shape, `f64`), or
    /// `None` for a leaf without `f64` elements.
    pub tangent: Vec<Option<Value>>,
}

/// The value of a function and the cotangent of its arguments
/// ([`Function::vjp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Vjp {
    /// The result leaves.
    pub value: Vec<Value>,
    /// One entry per argument leaf: its cotangent (same shape, `f64`), or
    /// `None` for an inactive leaf or one without `f64` elements.
    pub cotangent: Vec<Option<Value>>,
}

/// The value, gradient and Hessian-vector product of a function with one
/// `f64` result ([`Function::hvp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Hvp {
    /// The result.
    pub value: f64,
    /// One entry per argument leaf: its gradient (same shape, `f64`), or
    /// `None` for an inactive leaf or one without `f64` elements.
    pub gradient: Vec<Option<Value>>,
    /// One entry per argument leaf: its part of `H t` (same shape), or
    /// `None` likewise.
    pub hvp: Vec<Option<Value>>,
}

/// A dense Jacobian ([`Function::jacobian`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Jacobian {
    /// The result leaves.
    pub value: Vec<Value>,
    /// Number of rows: the `f64` elements of the result, flattened left to
    /// right (leaves) and row-major (within an array).
    pub rows: usize,
    /// Number of columns: the `f64` elements of the active arguments,
    /// flattened likewise.
    pub cols: usize,
    /// `rows * cols` entries, row-major: `data[r * cols + c]` is
    /// d result_r / d argument_c.
    pub data: Vec<f64>,
}

impl Jacobian {
    /// Row `r` (the derivative of one result element).
    pub fn row(&self, r: usize) -> &[f64] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }
}

impl<'m> Function<'m> {
    fn ir(&self) -> &'m arrayad_ir::Function {
        &self.module.program.funcs[self.index]
    }

    fn site(&self) -> Site<'m> {
        let f = self.ir();
        Site { file: &self.module.program.file, func: &f.name, loc: f.loc }
    }

    fn engine(&self, kind: Kind) -> Result<&'m Engine, Error> {
        self.module.engine(self.index, kind)
    }

    /// The definition's name.
    pub fn name(&self) -> &'m str {
        &self.ir().name
    }

    /// The source signature (parameter names and types, result type).
    pub fn signature(&self) -> &'m Signature {
        &self.ir().signature
    }

    /// The names of the argument leaves: `x` for a parameter that is not a
    /// tuple, `p.0`, `p.1` for the components of a tuple parameter `p`.
    pub fn arg_names(&self) -> Vec<String> {
        param_leaves(self.signature()).into_iter().map(|l| l.name).collect()
    }

    /// For each argument leaf: whether it is differentiated (listed by
    /// `wrt`, or every leaf without `wrt`, and with `f64` elements).
    pub fn active(&self) -> &'m [bool] {
        &self.module.defs[self.index].active
    }

    /// Differentiates and compiles the code `entry` calls now instead of at
    /// its first call (a gradient: the vjp; a Jacobian: the many-row vjp,
    /// the jvp and the primal), so that the first call costs only the
    /// arithmetic. Other entry points compile on their first use.
    ///
    /// Errors: as the first call of `entry` would report them at compile
    /// time ([`Error::Usage`] for a Hessian of a function whose result is
    /// not one `f64`, [`Error::Internal`] for a bug of arrayad).
    pub fn precompile(&self, entry: Entry) -> Result<(), Error> {
        let kinds: &[Kind] = match entry {
            Entry::Value => &[Kind::Primal],
            Entry::Jvp => &[Kind::Jvp],
            Entry::Vjp => &[Kind::Vjp],
            Entry::Grad => {
                self.need_f64_result("the gradient")?;
                &[Kind::Vjp]
            }
            Entry::Jacobian => &[Kind::Primal, Kind::Jvp, Kind::VjpRows],
            Entry::Hvp => {
                self.need_f64_result("the Hessian")?;
                &[Kind::Hvp]
            }
        };
        for k in kinds {
            self.engine(*k)?;
        }
        Ok(())
    }

    /// The backend's IR (Cranelift IR, or optimised LLVM IR) of the primal,
    /// jvp, vjp or many-row vjp of the Jacobian (`kind` is `"primal"`,
    /// `"jvp"`, `"vjp"` or `"vjp_rows"`); `None` on the interpreter.
    pub fn backend_ir(&self, kind: &str) -> Result<Option<String>, Error> {
        let kind = match kind {
            "primal" => Kind::Primal,
            "jvp" => Kind::Jvp,
            "vjp" => Kind::Vjp,
            "vjp_rows" => Kind::VjpRows,
            other => return Err(Error::Usage(format!("unknown code kind `{other}` (primal, jvp, vjp, vjp_rows)"))),
        };
        Ok(self.engine(kind)?.backend_ir())
    }

    fn values_of(self, args: &[Arg<'_>], what: &str) -> Result<Vec<Value>, Error> {
        args.iter()
            .enumerate()
            .map(|(i, a)| {
                a.to_value().map_err(|e| Error::InvalidArgument(format!("{what} {} of `{}`: {e}", i + 1, self.name())))
            })
            .collect()
    }

    fn optional_values_of(self, args: &[Option<Arg<'_>>], what: &str) -> Result<Vec<Option<Value>>, Error> {
        args.iter()
            .enumerate()
            .map(|(i, a)| match a {
                None => Ok(None),
                Some(a) => a
                    .to_value()
                    .map(Some)
                    .map_err(|e| Error::InvalidArgument(format!("{what} {} of `{}`: {e}", i + 1, self.name()))),
            })
            .collect()
    }

    /// Calls the primal.
    ///
    /// Returns the result leaves. Errors: see [`Function`]; run-time errors
    /// of the program are [`Error::Runtime`].
    pub fn call(&self, args: &[Arg<'_>]) -> Result<Vec<Value>, Error> {
        self.call_values(&self.values_of(args, "argument")?)
    }

    /// Forward mode: the value and its tangent in the direction `tangents`.
    ///
    /// `tangents` has one entry per argument leaf: for an active leaf its
    /// tangent (an `f64` value of the argument's shape) or `None` for a
    /// zero tangent; `None` for every other leaf.
    pub fn jvp(&self, args: &[Arg<'_>], tangents: &[Option<Arg<'_>>]) -> Result<Jvp, Error> {
        let args = self.values_of(args, "argument")?;
        let tangents = self.optional_values_of(tangents, "tangent")?;
        self.jvp_values(&args, &tangents)
    }

    /// Reverse mode: the value and the cotangent of the arguments for the
    /// cotangent `cotangents` of the result.
    ///
    /// `cotangents` has one entry per result leaf: for a leaf with `f64`
    /// elements its cotangent (same shape as the result leaf) or `None` for
    /// zero; `None` for other leaves.
    pub fn vjp(&self, args: &[Arg<'_>], cotangents: &[Option<Arg<'_>>]) -> Result<Vjp, Error> {
        let args = self.values_of(args, "argument")?;
        let cotangents = self.optional_values_of(cotangents, "cotangent")?;
        self.vjp_values(&args, &cotangents)
    }

    /// The value and gradient of a function whose result is one `f64`:
    /// [`Function::vjp`] with cotangent 1.0. The gradient has one entry per
    /// argument leaf (`None` where inactive or without `f64` elements).
    ///
    /// Errors: [`Error::Usage`] when the result is not a single `f64`.
    pub fn grad(&self, args: &[Arg<'_>]) -> Result<(f64, Vec<Option<Value>>), Error> {
        self.grad_values(&self.values_of(args, "argument")?)
    }

    /// The dense Jacobian of the `f64` result elements with respect to the
    /// `f64` elements of the active arguments, by reverse mode (one forward
    /// pass, then one backward pass per row) when there are no more rows
    /// than columns, else forward mode (one jvp per column).
    pub fn jacobian(&self, args: &[Arg<'_>]) -> Result<Jacobian, Error> {
        self.jacobian_values(&self.values_of(args, "argument")?)
    }

    /// [`Function::call`] on owned values.
    pub fn call_values(&self, args: &[Value]) -> Result<Vec<Value>, Error> {
        check_args(self.site(), self.signature(), args)?;
        let out = self.engine(Kind::Primal)?.run(args)?;
        self.check_result_count(&out, 0, Kind::Primal)?;
        Ok(out)
    }

    /// The value, the gradient and the Hessian-vector product `H t` of a
    /// function whose result is one `f64`, by forward over reverse (one
    /// call: the cost of a few gradients). `tangents` as for
    /// [`Function::jvp`].
    ///
    /// Errors: [`Error::Usage`] when the result is not a single `f64`; as
    /// for [`Function::jvp`] otherwise.
    pub fn hvp(&self, args: &[Arg<'_>], tangents: &[Option<Arg<'_>>]) -> Result<Hvp, Error> {
        let args = self.values_of(args, "argument")?;
        let tangents = self.optional_values_of(tangents, "tangent")?;
        self.hvp_values(&args, &tangents)
    }

    /// The dense Hessian of a function whose result is one `f64` with
    /// respect to the `f64` elements of the active arguments (flattened as
    /// the Jacobian's columns), one Hessian-vector product per column. The
    /// result is a square [`Jacobian`] whose `value` is the function's.
    ///
    /// Errors: as for [`Function::hvp`].
    pub fn hessian(&self, args: &[Arg<'_>]) -> Result<Jacobian, Error> {
        self.hessian_values(&self.values_of(args, "argument")?)
    }

    /// [`Function::hvp`] on owned values.
    pub fn hvp_values(&self, args: &[Value], tangents: &[Option<Value>]) -> Result<Hvp, Error> {
        self.need_f64_result("the Hessian")?;
        let full = self.with_tangents(args, tangents)?;
        let mut out = self.engine(Kind::Hvp)?.run(&full)?;
        let n_active = self.active().iter().filter(|a| **a).count();
        if out.len() != 1 + 2 * n_active {
            return Err(Error::Internal(format!(
                "the Hessian-vector product of `{}` returned {} values, expected {}",
                self.name(),
                out.len(),
                1 + 2 * n_active
            )));
        }
        let hv = out.split_off(1 + n_active);
        let grads = out.split_off(1);
        let value = out[0]
            .as_f64()
            .ok_or_else(|| Error::Internal(format!("the hvp of `{}` did not return an f64 value", self.name())))?;
        let spread = |vals: Vec<Value>| {
            let mut it = vals.into_iter();
            self.active().iter().map(|&a| if a { it.next() } else { None }).collect()
        };
        Ok(Hvp { value, gradient: spread(grads), hvp: spread(hv) })
    }

    /// [`Function::hessian`] on owned values.
    pub fn hessian_values(&self, args: &[Value]) -> Result<Jacobian, Error> {
        self.need_f64_result("the Hessian")?;
        check_args(self.site(), self.signature(), args)?;
        let param_shapes: Vec<Option<&[usize]>> =
            args.iter().zip(self.active()).map(|(a, &act)| act.then(|| shape_of(a))).collect();
        let n: usize = param_shapes.iter().flatten().map(|s| s.iter().product::<usize>()).sum();
        let mut data = Vec::new();
        if n.checked_mul(n).is_none_or(|t| data.try_reserve_exact(t).is_err()) {
            return Err(self.too_large(format!("the Hessian of `{}` has {n} x {n} entries", self.name())));
        }
        data.resize(n * n, 0.0);
        let mut value = self.call_values(args)?;
        let mut buf = Vec::new();
        for (c, (leaf, elem)) in unit_positions(&param_shapes).enumerate() {
            let ts = one_hot(&param_shapes, leaf, elem);
            let h = self.hvp_values(args, &ts)?;
            value = vec![Value::F64(h.value)];
            flatten_f64(&h.hvp, &param_shapes, &mut buf)?;
            for (r, &x) in buf.iter().enumerate() {
                data[r * n + c] = x;
            }
        }
        Ok(Jacobian { value, rows: n, cols: n, data })
    }

    /// Errors with [`Error::Usage`] unless the result is one `f64`.
    fn need_f64_result(&self, what: &str) -> Result<(), Error> {
        let result = &self.signature().result;
        if *result != SrcType::Scalar(Scalar::F64) {
            return Err(Error::Usage(format!(
                "{what} needs a function whose result is one f64, but `{}` returns {}",
                self.name(),
                result
            )));
        }
        Ok(())
    }

    /// [`Function::jvp`] on owned values.
    pub fn jvp_values(&self, args: &[Value], tangents: &[Option<Value>]) -> Result<Jvp, Error> {
        let full = self.with_tangents(args, tangents)?;
        let mut out = self.engine(Kind::Jvp)?.run(&full)?;
        let result_types = self.signature().result.leaves();
        let n_tangents = result_types.iter().filter(|t| t.elem == Scalar::F64).count();
        self.check_result_count(&out, n_tangents, Kind::Jvp)?;
        let mut tangents_out = out.split_off(result_types.len()).into_iter();
        let tangent =
            result_types.iter().map(|t| if t.elem == Scalar::F64 { tangents_out.next() } else { None }).collect();
        Ok(Jvp { value: out, tangent })
    }

    /// The arguments followed by the tangents of the active leaves (zeros
    /// for `None`), after checking both.
    fn with_tangents(&self, args: &[Value], tangents: &[Option<Value>]) -> Result<Vec<Value>, Error> {
        check_args(self.site(), self.signature(), args)?;
        let leaves = param_leaves(self.signature());
        if tangents.len() != leaves.len() {
            return Err(Error::InvalidArgument(format!(
                "`{}` takes {} tangents (one per argument, `None` where not differentiated), got {}",
                self.name(),
                leaves.len(),
                tangents.len()
            )));
        }
        let mut full = args.to_vec();
        for (k, leaf) in leaves.iter().enumerate() {
            let active = self.active().get(k).copied().unwrap_or(false);
            match (&tangents[k], active) {
                (Some(t), true) => {
                    check_f64_like(&format!("the tangent of `{}`", leaf.name), t, shape_of(&args[k]))?;
                    full.push(t.clone());
                }
                (None, true) => full.push(zeros(shape_of(&args[k]))),
                (Some(_), false) => {
                    return Err(Error::InvalidArgument(format!(
                        "argument `{}` of `{}` is not differentiated ({}): its tangent must be None",
                        leaf.name,
                        self.name(),
                        if leaf.ty.leaves().iter().any(|t| t.elem == Scalar::F64) {
                            "not listed by wrt"
                        } else {
                            "it has no f64 elements"
                        }
                    )))
                }
                (None, false) => {}
            }
        }
        Ok(full)
    }

    /// [`Function::vjp`] on owned values.
    pub fn vjp_values(&self, args: &[Value], cotangents: &[Option<Value>]) -> Result<Vjp, Error> {
        let sizes = check_args(self.site(), self.signature(), args)?;
        let result = &self.signature().result;
        let leaves = leaf_infos("result", result);
        if cotangents.len() != leaves.len() {
            return Err(Error::InvalidArgument(format!(
                "the result of `{}` has {} leaves, so it takes {} cotangents, got {}",
                self.name(),
                leaves.len(),
                leaves.len(),
                cotangents.len()
            )));
        }
        let mut full = args.to_vec();
        for (k, leaf) in leaves.iter().enumerate() {
            let ty = shapes::leaf_type(leaf.ty);
            let what = if leaves.len() == 1 {
                "the cotangent of the result".to_string()
            } else {
                format!("the cotangent of result component {k}")
            };
            if ty.elem != Scalar::F64 {
                if cotangents[k].is_some() {
                    return Err(Error::InvalidArgument(format!("{what} must be None: it has no f64 elements")));
                }
                continue;
            }
            let shape = self.result_shape(&sizes, leaf.ty)?;
            match &cotangents[k] {
                Some(ct) => {
                    check_f64_like(&what, ct, &shape)?;
                    full.push(ct.clone());
                }
                None => full.push(self.zeros_within_limit(&what, &shape)?),
            }
        }
        let mut out = self.engine(Kind::Vjp)?.run(&full)?;
        let n_active = self.active().iter().filter(|a| **a).count();
        self.check_result_count(&out, n_active, Kind::Vjp)?;
        let mut cts = out.split_off(leaves.len()).into_iter();
        let cotangent = self.active().iter().map(|&a| if a { cts.next() } else { None }).collect();
        Ok(Vjp { value: out, cotangent })
    }

    /// [`Function::grad`] on owned values.
    pub fn grad_values(&self, args: &[Value]) -> Result<(f64, Vec<Option<Value>>), Error> {
        let result = &self.signature().result;
        if *result != SrcType::Scalar(Scalar::F64) {
            return Err(Error::Usage(format!(
                "the gradient needs a function whose result is one f64, but `{}` returns {}",
                self.name(),
                result
            )));
        }
        let v = self.vjp_values(args, &[Some(Value::F64(1.0))])?;
        let value = v
            .value
            .first()
            .and_then(Value::as_f64)
            .ok_or_else(|| Error::Internal(format!("the vjp of `{}` did not return an f64 value", self.name())))?;
        Ok((value, v.cotangent))
    }

    /// [`Function::jacobian`] on owned values.
    pub fn jacobian_values(&self, args: &[Value]) -> Result<Jacobian, Error> {
        let sizes = check_args(self.site(), self.signature(), args)?;
        let leaves = leaf_infos("result", &self.signature().result);
        let mut result_shapes_owned: Vec<Option<Vec<usize>>> = Vec::with_capacity(leaves.len());
        for leaf in &leaves {
            let f64_leaf = shapes::leaf_type(leaf.ty).elem == Scalar::F64;
            result_shapes_owned.push(if f64_leaf { Some(self.result_shape(&sizes, leaf.ty)?) } else { None });
        }
        let result_shapes: Vec<Option<&[usize]>> = result_shapes_owned.iter().map(|s| s.as_deref()).collect();
        let param_shapes: Vec<Option<&[usize]>> =
            args.iter().zip(self.active()).map(|(a, &act)| act.then(|| shape_of(a))).collect();
        // The rows come from the declared result shape, whose element count
        // may not even fit in a usize (`[9223372036854775807][3]f64`).
        let count = |s: &[Option<&[usize]>]| -> Option<usize> {
            s.iter()
                .flatten()
                .try_fold(0usize, |sum, s| sum.checked_add(s.iter().try_fold(1usize, |n, &d| n.checked_mul(d))?))
        };
        let Some(rows) = count(&result_shapes) else {
            return Err(self.too_large(format!(
                "the Jacobian of `{}` has more rows than can be counted (one per f64 element of its result {})",
                self.name(),
                self.signature().result
            )));
        };
        let cols = count(&param_shapes).unwrap_or(usize::MAX);
        let mut data = Vec::new();
        let limit = self.host_limit();
        let total =
            rows.checked_mul(cols).filter(|&t| (t as u128) * 8 <= limit as u128 && data.try_reserve_exact(t).is_ok());
        let Some(total) = total else {
            return Err(self.too_large(format!(
                "the Jacobian of `{}` has {rows} x {cols} entries, more than can be allocated{}",
                self.name(),
                if rows.checked_mul(cols).is_some_and(|t| (t as u128) * 8 > limit as u128) {
                    format!(" within the memory limit of {limit} bytes")
                } else {
                    String::new()
                }
            )));
        };
        data.resize(total, 0.0);
        if total > 0 && rows <= cols {
            // Reverse mode: one forward pass, then one backward pass per row.
            let value = self.jacobian_rows(args, &result_shapes, &param_shapes, rows, &mut data)?;
            return Ok(Jacobian { value, rows, cols, data });
        }
        let value = self.call_values(args)?;
        if total == 0 {
            return Ok(Jacobian { value, rows, cols, data });
        }
        // Forward mode: one jvp per column, with a one-hot tangent.
        let mut buf = Vec::new();
        for (c, (leaf, elem)) in unit_positions(&param_shapes).enumerate() {
            let ts = one_hot(&param_shapes, leaf, elem);
            let j = self.jvp_values(args, &ts)?;
            flatten_f64(&j.tangent, &result_shapes, &mut buf)?;
            for (r, &x) in buf.iter().enumerate() {
                data[r * cols + c] = x;
            }
        }
        Ok(Jacobian { value, rows, cols, data })
    }

    /// The reverse-mode Jacobian into `data` (`rows` x cols, row-major) by
    /// one call of the many-row vjp whose cotangent rows are the rows of the
    /// identity (leaf by leaf: each result leaf gets the stack of its rows
    /// of it); returns the value.
    fn jacobian_rows(
        &self,
        args: &[Value],
        result_shapes: &[Option<&[usize]>],
        param_shapes: &[Option<&[usize]>],
        rows: usize,
        data: &mut [f64],
    ) -> Result<Vec<Value>, Error> {
        let mut full = args.to_vec();
        let mut first = 0;
        for shape in result_shapes.iter().flatten() {
            let n: usize = shape.iter().product();
            let mut stack = Vec::new();
            if rows.checked_mul(n).is_none_or(|len| stack.try_reserve_exact(len).is_err()) {
                return Err(self.too_large(format!(
                    "the cotangents of the Jacobian of `{}` ({rows} rows of {n} elements)",
                    self.name()
                )));
            }
            stack.resize(rows * n, 0.0);
            for e in 0..n {
                stack[(first + e) * n + e] = 1.0;
            }
            let mut shape_r = vec![rows];
            shape_r.extend_from_slice(shape);
            full.push(Value::Array(ArrayValue { shape: shape_r, data: ArrayData::F64(stack) }));
            first += n;
        }
        let mut out = self.engine(Kind::VjpRows)?.run(&full)?;
        let n_active = self.active().iter().filter(|a| **a).count();
        self.check_result_count(&out, n_active, Kind::VjpRows)?;
        let stacks = out.split_off(result_shapes.len());
        let cols = data.len() / rows;
        let mut off = 0;
        for (stack, shape) in stacks.iter().zip(param_shapes.iter().flatten()) {
            let n: usize = shape.iter().product();
            let elems = stack
                .f64_elements()
                .filter(|e| e.len() == rows * n)
                .ok_or_else(|| Error::Internal(format!("the many-row vjp of `{}` has the wrong shape", self.name())))?;
            if n > 0 {
                for (r, g) in elems.chunks_exact(n).enumerate() {
                    data[r * cols + off..r * cols + off + n].copy_from_slice(g);
                }
            }
            off += n;
        }
        Ok(out)
    }

    /// An out-of-memory run-time error (a Jacobian too large to allocate) at
    /// the definition's location.
    fn too_large(&self, what: String) -> Error {
        let site = self.site();
        Error::Runtime(RuntimeError::at(ErrorKind::OutOfMemory, site.file, site.loc, what))
    }

    /// A zero f64 value of `shape`, the declared shape of a result, which
    /// may be too large to allocate (beyond [`Function::host_limit`]): then
    /// an out-of-memory error at the definition's location.
    fn zeros_within_limit(&self, what: &str, shape: &[usize]) -> Result<Value, Error> {
        let n = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        let fits = n.is_some_and(|n| {
            (n as u128) * 8 <= self.host_limit() as u128 && Vec::<f64>::new().try_reserve_exact(n).is_ok()
        });
        if !fits {
            let dims: String = shape.iter().map(|d| format!("[{d}]")).collect();
            return Err(self.too_large(format!("{what} (zero, {dims}f64) is too large to allocate")));
        }
        Ok(zeros(shape))
    }

    /// The most bytes the host side of a call may allocate for a value of
    /// the declared result shape (a Jacobian, a zero cotangent): the memory
    /// limit of a call of compiled code ([`crate::Options::max_memory`],
    /// else its default); the interpreter has none.
    fn host_limit(&self) -> u64 {
        let options = &self.module.options;
        match (options.backend, options.max_memory) {
            (crate::Backend::Interp, _) => u64::MAX,
            (_, Some(limit)) => limit,
            (_, None) => arrayad_runtime::OwnedCtx::default_limit(),
        }
    }

    /// The shapes of the result leaves for the arguments `args` (`[]` for
    /// a scalar), from the sizes the arguments bind: the shapes a
    /// cotangent must have.
    ///
    /// Errors: as for [`Function::call_values`] (the arguments are checked).
    pub fn result_shapes(&self, args: &[Value]) -> Result<Vec<Vec<usize>>, Error> {
        let sizes = check_args(self.site(), self.signature(), args)?;
        leaf_infos("result", &self.signature().result).iter().map(|l| self.result_shape(&sizes, l.ty)).collect()
    }

    /// The shape of result leaf type `ty` under the sizes bound by the
    /// arguments.
    fn result_shape(&self, sizes: &Sizes, ty: &SrcType) -> Result<Vec<usize>, Error> {
        sizes.shape_of_type(ty).ok_or_else(|| {
            Error::Internal(format!("the result type {ty} of `{}` has a size that no argument determines", self.name()))
        })
    }

    fn check_result_count(&self, out: &[Value], extra: usize, kind: Kind) -> Result<(), Error> {
        let want: Vec<Type> = self.signature().result.leaves();
        if out.len() != want.len() + extra {
            return Err(Error::Internal(format!(
                "the {} of `{}` returned {} values, expected {}",
                kind.describe(),
                self.name(),
                out.len(),
                want.len() + extra
            )));
        }
        Ok(())
    }
}

/// Every (leaf, element) position of the leaves that are `Some`, in order.
fn unit_positions<'a>(shapes: &'a [Option<&'a [usize]>]) -> impl Iterator<Item = (usize, usize)> + 'a {
    shapes
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.map(|s| (i, s.iter().product::<usize>())))
        .flat_map(|(i, n)| (0..n).map(move |e| (i, e)))
}

/// Zero f64 values of `shapes` (`None` stays `None`) with a 1.0 at element
/// `elem` of leaf `leaf`.
fn one_hot(shapes: &[Option<&[usize]>], leaf: usize, elem: usize) -> Vec<Option<Value>> {
    shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.map(|s| {
                let mut z = zeros(s);
                if i == leaf {
                    match &mut z {
                        Value::F64(x) => *x = 1.0,
                        Value::Array(a) => {
                            if let arrayad_ir::ArrayData::F64(d) = &mut a.data {
                                d[elem] = 1.0;
                            }
                        }
                        _ => {}
                    }
                }
                z
            })
        })
        .collect()
}

/// The f64 elements of the values at the positions where `shapes` is
/// `Some`, concatenated. A value that is missing or of another size is an
/// internal error.
fn flatten_f64(values: &[Option<Value>], shapes: &[Option<&[usize]>], out: &mut Vec<f64>) -> Result<(), Error> {
    out.clear();
    for (v, s) in values.iter().zip(shapes) {
        if let Some(s) = s {
            let n: usize = s.iter().product();
            match v.as_ref().and_then(Value::f64_elements) {
                Some(e) if e.len() == n => out.extend_from_slice(e),
                _ => return Err(Error::Internal("a derivative has the wrong shape".into())),
            }
        }
    }
    Ok(())
}

impl std::fmt::Debug for Function<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function").field("name", &self.name()).finish()
    }
}
