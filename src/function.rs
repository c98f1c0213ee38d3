//! One definition of a [`Module`]: calls of its primal, jvp, vjp, gradient,
//! Jacobian and Hessian on borrowed data.

use crate::arg::{with_refs, Arg, Out};
use crate::driver::{Def, EngineRef};
use crate::engine::{to_value, Kind};
use crate::error::Error;
use crate::module::Module;
use crate::results::{copy_into, ParamValues};
use crate::shapes::{self, check_args, check_f64_like, leaf_infos, param_leaves, zeros, Site, Sizes};
use arrayad_codegen::{ArgRef, ResultRef};
use arrayad_ir::{ArrayData, ErrorKind, RuntimeError, Scalar, Signature, SrcType, Value};
use smallvec::SmallVec;
use std::sync::Arc;

/// A definition of a [`Module`], found by [`Module::function`]: an owned
/// handle (it keeps the module alive), cheap to clone, `Send + Sync`.
///
/// Every call takes the arguments as the leaves of the source parameters,
/// flattened left to right (a tuple parameter takes one [`Arg`] per
/// component, as in the C ABI), borrowed: arrays are read where they are,
/// without a copy. Results are the leaves of the result type, likewise
/// flattened. Arguments are checked first: a wrong count, element type or
/// rank, or data whose length is not the product of its shape, is an
/// [`Error::InvalidArgument`]; extents that disagree with a dimension of
/// the signature or with each other (two arrays of size `n`) are a
/// run-time [`ErrorKind::SizeMismatch`] at the definition.
///
/// A function differentiates its *active* parameters: those of
/// [`crate::Options::wrt`], or every parameter with `f64` parts;
/// [`Function::with_wrt`] makes a handle with others (its derivatives are
/// compiled on first use and kept by the module).
#[derive(Clone)]
pub struct Function {
    pub(crate) module: Module,
    pub(crate) index: usize,
    /// Which argument leaves are differentiated.
    pub(crate) active: Arc<[bool]>,
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

/// The value of a function and its tangents in many directions
/// ([`Function::jvp_many`]).
#[derive(Clone, Debug, PartialEq)]
pub struct JvpMany {
    /// The result leaves.
    pub value: Vec<Value>,
    /// For each direction, one entry per result leaf: its tangent (same
    /// shape, `f64`), or `None` for a leaf without `f64` elements.
    pub tangents: Vec<Vec<Option<Value>>>,
}

/// The value of a function and the cotangent of its arguments
/// ([`Function::vjp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Vjp {
    /// The result leaves.
    pub value: Vec<Value>,
    /// One entry per argument leaf, by position or by name: its cotangent
    /// (same shape, `f64`), or `None` for an inactive leaf or one without
    /// `f64` elements.
    pub cotangent: ParamValues,
}

/// The value and gradient of a function with one `f64` result
/// ([`Function::grad`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Grad {
    /// The result.
    pub value: f64,
    /// One entry per argument leaf, by position or by name: its gradient
    /// (same shape, `f64`), or `None` for an inactive leaf or one without
    /// `f64` elements.
    pub gradient: ParamValues,
}

/// The value, gradient and Hessian-vector product of a function with one
/// `f64` result ([`Function::hvp`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Hvp {
    /// The result.
    pub value: f64,
    /// One entry per argument leaf: its gradient (same shape, `f64`), or
    /// `None` for an inactive leaf or one without `f64` elements.
    pub gradient: ParamValues,
    /// One entry per argument leaf: its part of `H t` (same shape), or
    /// `None` likewise.
    pub hvp: ParamValues,
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
    ///
    /// Panics if `r >= rows`.
    pub fn row(&self, r: usize) -> &[f64] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }
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

impl Function {
    fn def(&self) -> &Def {
        &self.module.inner.defs[self.index]
    }

    fn ir(&self) -> &arrayad_ir::Function {
        &self.module.inner.program.funcs[self.index]
    }

    fn site(&self) -> Site<'_> {
        let f = self.ir();
        Site { file: &self.module.inner.program.file, func: &f.name, loc: f.loc }
    }

    /// The definition's name.
    pub fn name(&self) -> &str {
        &self.ir().name
    }

    /// The source signature (parameter names and types, result type).
    pub fn signature(&self) -> &Signature {
        &self.ir().signature
    }

    /// The names of the argument leaves: `x` for a parameter that is not a
    /// tuple, `p.0`, `p.1` for the components of a tuple parameter `p`.
    pub fn arg_names(&self) -> &[String] {
        &self.def().arg_names
    }

    /// For each argument leaf: whether it is differentiated (with `f64`
    /// elements, and listed by `wrt` if there is one).
    pub fn active(&self) -> &[bool] {
        &self.active
    }

    /// This function differentiating the parameters named in `wrt` (and no
    /// others): a new handle; its derivative code is compiled on first use
    /// and kept by the module for every handle with the same parameters.
    ///
    /// Errors: [`Error::Usage`] for a name that is not a parameter.
    pub fn with_wrt<S: AsRef<str>>(&self, wrt: &[S]) -> Result<Function, Error> {
        let sig = self.signature();
        let names: Vec<String> = wrt.iter().map(|s| s.as_ref().to_string()).collect();
        for n in &names {
            if !sig.params.iter().any(|p| &p.name == n) {
                let params: Vec<&str> = sig.params.iter().map(|p| p.name.as_str()).collect();
                return Err(Error::Usage(format!(
                    "`{n}` is not a parameter of `{}` (its parameters: {})",
                    self.name(),
                    params.join(", ")
                )));
            }
        }
        let active = arrayad_ad::active_leaves(sig, Some(&names));
        Ok(Function { module: self.module.clone(), index: self.index, active: active.into() })
    }

    /// Differentiates and compiles the code `entry` calls now instead of at
    /// its first call (a gradient: the vjp; a jvp: the jvp and the vector
    /// jvp of [`Function::jvp_many`]; a Jacobian: the many-row vjp, the
    /// vector jvp (or the jvp) and the primal), so that the first call costs only the
    /// arithmetic. Other entry points compile on their first use.
    ///
    /// Errors: as the first call of `entry` would report them at compile
    /// time ([`Error::Usage`] for a gradient or Hessian of a function whose
    /// result is not one `f64`, [`Error::Internal`] for a bug of arrayad).
    pub fn precompile(&self, entry: Entry) -> Result<(), Error> {
        use arrayad_ad::Which;
        // (Only asked where it matters: it prepares the primal with every
        // call inlined.)
        let lanes = matches!(entry, Entry::Jvp | Entry::Jacobian) && self.has_lanes()?;
        let kinds: &[Kind] = match entry {
            Entry::Value => &[Kind::Primal],
            // `jvp` and `jvp_many`.
            Entry::Jvp if lanes => &[Kind::Jvp, Kind::JvpLanes],
            Entry::Jvp => &[Kind::Jvp],
            Entry::Vjp => &[Kind::Vjp],
            Entry::Grad => {
                self.need_f64_result("the gradient")?;
                &[Kind::Vjp]
            }
            Entry::Jacobian if lanes => &[Kind::Primal, Kind::JvpLanes, Kind::VjpRows],
            Entry::Jacobian => &[Kind::Primal, Kind::Jvp, Kind::VjpRows],
            Entry::Hvp => {
                self.need_f64_result("the Hessian")?;
                &[Kind::Hvp]
            }
        };
        // The derivatives of the entry from one linearisation.
        let together: &[Which] = match entry {
            Entry::Jacobian if lanes => &[Which::JvpLanes, Which::VjpRows],
            Entry::Jacobian => &[Which::Jvp, Which::VjpRows],
            Entry::Jvp if lanes => &[Which::Jvp, Which::JvpLanes],
            _ => &[],
        };
        if !together.is_empty() {
            self.module.inner.derive_together(self.index, &self.active, together)?;
        }
        for k in kinds {
            self.engine(*k)?;
        }
        Ok(())
    }

    /// The backend's IR (Cranelift IR, or optimised LLVM IR) of the primal,
    /// jvp, vjp, many-row vjp or vector jvp of the Jacobian, or
    /// Hessian-vector product (`kind` is `"primal"`, `"jvp"`, `"vjp"`,
    /// `"vjp_rows"`, `"jvp_lanes"` or `"hvp"`); `None` on the interpreter.
    /// The code is compiled again with its text kept: the compiled code
    /// calls run keeps none (formatting it costs about as much as a fast
    /// compilation).
    pub fn backend_ir(&self, kind: &str) -> Result<Option<String>, Error> {
        let kind = match kind {
            "primal" => Kind::Primal,
            "jvp" => Kind::Jvp,
            "vjp" => Kind::Vjp,
            "vjp_rows" => Kind::VjpRows,
            "jvp_lanes" => Kind::JvpLanes,
            "hvp" => Kind::Hvp,
            other => {
                return Err(Error::Usage(format!(
                    "unknown code kind `{other}` (primal, jvp, vjp, vjp_rows, jvp_lanes, hvp)"
                )))
            }
        };
        self.module.inner.backend_ir(self.index, &self.active, kind)
    }

    // ---- code -------------------------------------------------------------

    /// The code of `kind`, built on first use.
    pub(crate) fn engine(&self, kind: Kind) -> Result<EngineRef<'_>, Error> {
        self.module.inner.engine(self.index, &self.active, kind)
    }

    /// The loops of this function's reverse mode that checkpointing
    /// ([`crate::Options::with_checkpoint`]) leaves taped, every iteration's
    /// residuals kept until the backward pass: while loops, loops that
    /// carry no primal state, loops with `i64` or `bool` array states. One
    /// warning per loop, located at it; none when the module does not
    /// checkpoint. Costs about one differentiation; the command line prints
    /// these under `--checkpoint`.
    ///
    /// Errors: as for [`Function::grad`] when the function cannot be
    /// differentiated.
    pub fn checkpoint_warnings(&self) -> Result<Vec<crate::Warning>, Error> {
        self.module.inner.checkpoint_warnings(self.index, &self.active)
    }

    // ---- calls ----------------------------------------------------------------

    /// Checks the arguments and returns the sizes they bind.
    fn check(&self, args: &[ArgRef<'_>]) -> Result<Sizes, Error> {
        check_args(self.site(), self.signature(), args)
    }

    /// Checks the arguments (without allocating when they are right).
    fn check_fast(&self, args: &[ArgRef<'_>]) -> Result<(), Error> {
        if self.def().plan.accepts(args) {
            return Ok(());
        }
        self.check(args).map(|_| ())
    }

    /// Calls the primal.
    ///
    /// Returns the result leaves. Errors: see [`Function`]; run-time errors
    /// of the program are [`Error::Runtime`].
    pub fn call(&self, args: &[Arg<'_>]) -> Result<Vec<Value>, Error> {
        with_refs(args, |refs| {
            self.check_fast(refs)?;
            let out = self.engine(Kind::Primal)?.get().run_values(refs)?;
            self.check_result_count(out.len(), 0, Kind::Primal)?;
            Ok(out)
        })
    }

    /// [`Function::call`] on owned values (e.g. results of earlier calls).
    pub fn call_values(&self, args: &[Value]) -> Result<Vec<Value>, Error> {
        let argv: Vec<Arg<'_>> = args.iter().map(Arg::Value).collect();
        self.call(&argv)
    }

    /// Calls the primal and writes the result leaves into `outs`, one per
    /// leaf, each of the leaf's element type and size (no allocation for
    /// the results).
    ///
    /// Errors: as [`Function::call`]; [`Error::InvalidArgument`] for an
    /// output of the wrong count, type or length.
    pub fn call_into(&self, args: &[Arg<'_>], outs: &mut [Out<'_>]) -> Result<(), Error> {
        with_refs(args, |refs| {
            self.check_fast(refs)?;
            let dest = crate::results::destinations(outs, &mut []);
            self.engine(Kind::Primal)?.get().run_into(refs, &dest, |rs| copy_into(self.name(), "result", rs, outs))?
        })
    }

    /// Forward mode: the value and its tangent in the direction `tangents`.
    ///
    /// `tangents` has one entry per argument leaf: for an active leaf its
    /// tangent (an `f64` value of the argument's shape) or `None` for a
    /// zero tangent; `None` for every other leaf.
    pub fn jvp(&self, args: &[Arg<'_>], tangents: &[Option<Arg<'_>>]) -> Result<Jvp, Error> {
        let result_types = self.signature().result.leaves();
        let n_tangents = result_types.iter().filter(|t| t.elem == Scalar::F64).count();
        let mut out = self.with_tangents(args, tangents, |full| {
            let out = self.engine(Kind::Jvp)?.get().run_values(full)?;
            self.check_result_count(out.len(), n_tangents, Kind::Jvp)?;
            Ok(out)
        })?;
        let mut tangents_out = out.split_off(result_types.len()).into_iter();
        let tangent =
            result_types.iter().map(|t| if t.elem == Scalar::F64 { tangents_out.next() } else { None }).collect();
        Ok(Jvp { value: out, tangent })
    }

    /// Forward mode in many directions: the value once and its tangent in
    /// each direction of `directions` (each as the `tangents` of
    /// [`Function::jvp`]). With a vector forward mode (every function whose
    /// body runs no `grad` or `vjp`) one pass computes the primal once and
    /// the tangents of [`arrayad_ad::jvp_lane_count`] directions, their
    /// arithmetic side by side; each tangent is bitwise what
    /// [`Function::jvp`] returns for its direction.
    ///
    /// Errors: as [`Function::jvp`], for the first direction that is
    /// wrong; with no direction, as [`Function::call`].
    pub fn jvp_many(&self, args: &[Arg<'_>], directions: &[Vec<Option<Arg<'_>>>]) -> Result<JvpMany, Error> {
        let n_args = param_leaves(self.signature()).len();
        let mut dirs: Vec<Vec<Value>> = Vec::with_capacity(directions.len());
        for d in directions {
            dirs.push(self.with_tangents(args, d, |full| Ok(full[n_args..].iter().map(to_value).collect()))?);
        }
        if dirs.is_empty() {
            return Ok(JvpMany { value: self.call(args)?, tangents: Vec::new() });
        }
        let result_types = self.signature().result.leaves();
        let mut tangents = Vec::with_capacity(dirs.len());
        let value = with_refs(args, |refs| {
            self.jvp_directions(
                refs,
                dirs.len(),
                |d| Ok(std::mem::take(&mut dirs[d])),
                |_, ts| {
                    let mut next = ts.iter();
                    tangents.push(
                        result_types
                            .iter()
                            .map(|t| (t.elem == Scalar::F64).then(|| next.next().cloned()).flatten())
                            .collect(),
                    );
                    Ok(())
                },
            )
        })?;
        Ok(JvpMany { value, tangents })
    }

    /// Checks `args` and `tangents` and calls `f` with the arguments
    /// followed by the tangents of the active leaves (zeros for `None`).
    fn with_tangents<R>(
        &self,
        args: &[Arg<'_>],
        tangents: &[Option<Arg<'_>>],
        f: impl FnOnce(&[ArgRef<'_>]) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let leaves = param_leaves(self.signature());
        if tangents.len() != leaves.len() {
            return Err(Error::InvalidArgument(format!(
                "`{}` takes {} tangents (one per argument, `None` where not differentiated), got {}",
                self.name(),
                leaves.len(),
                tangents.len()
            )));
        }
        let given: Vec<Arg<'_>> = tangents.iter().flatten().copied().collect();
        with_refs(args, |refs| {
            self.check_fast(refs)?;
            with_refs(&given, |trefs| {
                let mut zeros_owned: Vec<Value> = Vec::new();
                let mut next = trefs.iter();
                let mut picks: Vec<Option<ArgRef<'_>>> = Vec::new();
                for (k, leaf) in leaves.iter().enumerate() {
                    let active = self.active.get(k).copied().unwrap_or(false);
                    match (&tangents[k], active) {
                        (Some(_), true) => {
                            let t = next.next().copied().ok_or_else(|| Error::Internal("tangent count".into()))?;
                            check_f64_like(&format!("the tangent of `{}`", leaf.name), &t, refs[k].shape())?;
                            picks.push(Some(t));
                        }
                        (None, true) => {
                            zeros_owned.push(zeros(refs[k].shape()));
                            picks.push(None);
                        }
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
                let mut zs = zeros_owned.iter();
                let mut full: Vec<ArgRef<'_>> = refs.to_vec();
                for p in picks {
                    match p {
                        Some(t) => full.push(t),
                        None => full.push(ArgRef::of(zs.next().ok_or_else(|| Error::Internal("zero count".into()))?)),
                    }
                }
                f(&full)
            })
        })
    }

    /// Checks `args` and `cotangents` and calls `f` with the arguments
    /// followed by the cotangents of the `f64` result leaves (zeros for
    /// `None`).
    fn with_cotangents<R>(
        &self,
        args: &[Arg<'_>],
        cotangents: &[Option<Arg<'_>>],
        f: impl FnOnce(&[ArgRef<'_>]) -> Result<R, Error>,
    ) -> Result<R, Error> {
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
        let given: Vec<Arg<'_>> = cotangents.iter().flatten().copied().collect();
        with_refs(args, |refs| {
            let sizes = self.check(refs)?;
            with_refs(&given, |crefs| {
                let mut zeros_owned: Vec<Value> = Vec::new();
                let mut picks: Vec<Option<ArgRef<'_>>> = Vec::new();
                let mut next = crefs.iter();
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
                        Some(_) => {
                            let c = next.next().copied().ok_or_else(|| Error::Internal("cotangent count".into()))?;
                            check_f64_like(&what, &c, &shape)?;
                            picks.push(Some(c));
                        }
                        None => {
                            zeros_owned.push(self.zeros_within_limit(&what, &shape)?);
                            picks.push(None);
                        }
                    }
                }
                let mut zs = zeros_owned.iter();
                let mut full: Vec<ArgRef<'_>> = refs.to_vec();
                for p in picks {
                    match p {
                        Some(c) => full.push(c),
                        None => full.push(ArgRef::of(zs.next().ok_or_else(|| Error::Internal("zero count".into()))?)),
                    }
                }
                f(&full)
            })
        })
    }

    /// Reverse mode: the value and the cotangent of the arguments for the
    /// cotangent `cotangents` of the result.
    ///
    /// `cotangents` has one entry per result leaf: for a leaf with `f64`
    /// elements its cotangent (same shape as the result leaf) or `None` for
    /// zero; `None` for other leaves.
    pub fn vjp(&self, args: &[Arg<'_>], cotangents: &[Option<Arg<'_>>]) -> Result<Vjp, Error> {
        let n_results = leaf_infos("result", &self.signature().result).len();
        let n_active = self.active.iter().filter(|a| **a).count();
        let mut out = self.with_cotangents(args, cotangents, |full| {
            let out = self.engine(Kind::Vjp)?.get().run_values(full)?;
            self.check_result_count(out.len(), n_active, Kind::Vjp)?;
            Ok(out)
        })?;
        let cts = out.split_off(n_results);
        Ok(Vjp { value: out, cotangent: self.by_param(cts) })
    }

    /// Reverse mode into caller buffers: the result leaves go to `outs` (as
    /// for [`Function::call_into`]) and the cotangent of each active
    /// argument leaf to `cotangents_out` (one buffer per active leaf, in
    /// order, of its element count: 1 for a scalar), overwritten.
    ///
    /// Errors: as [`Function::vjp`]; [`Error::InvalidArgument`] for a buffer
    /// of the wrong count or length.
    pub fn vjp_into(
        &self,
        args: &[Arg<'_>],
        cotangents: &[Option<Arg<'_>>],
        outs: &mut [Out<'_>],
        cotangents_out: &mut [&mut [f64]],
    ) -> Result<(), Error> {
        let n_results = leaf_infos("result", &self.signature().result).len();
        self.with_cotangents(args, cotangents, |full| {
            // (Buffers offered by position: only when the counts are right.)
            let dest = if outs.len() == n_results {
                crate::results::destinations(outs, cotangents_out)
            } else {
                SmallVec::new()
            };
            self.engine(Kind::Vjp)?.get().run_into(full, &dest, |rs| {
                if rs.len() < n_results {
                    return Err(Error::Internal(format!("the vjp of `{}` returned too few values", self.name())));
                }
                copy_into(self.name(), "result", &rs[..n_results], outs)?;
                copy_f64s(self.name(), &rs[n_results..], cotangents_out)
            })?
        })
    }

    /// The value and gradient of a function whose result is one `f64`:
    /// [`Function::vjp`] with cotangent 1.0. The gradient has one entry per
    /// argument leaf (`None` where inactive or without `f64` elements),
    /// reachable by position or name (`g.gradient.f64s("x")`).
    ///
    /// Errors: [`Error::Usage`] when the result is not a single `f64`.
    pub fn grad(&self, args: &[Arg<'_>]) -> Result<Grad, Error> {
        self.need_f64_result("the gradient")?;
        let n_active = self.active.iter().filter(|a| **a).count();
        let mut out = with_refs(args, |refs| {
            self.check_fast(refs)?;
            let mut full: smallvec::SmallVec<[ArgRef<'_>; 8]> = refs.iter().copied().collect();
            full.push(ArgRef::F64(1.0));
            let out = self.engine(Kind::Vjp)?.get().run_values(&full)?;
            self.check_result_count(out.len(), n_active, Kind::Vjp)?;
            Ok::<_, Error>(out)
        })?;
        let grads = out.split_off(1);
        let value = out[0]
            .as_f64()
            .ok_or_else(|| Error::Internal(format!("the vjp of `{}` did not return an f64 value", self.name())))?;
        Ok(Grad { value, gradient: self.by_param(grads) })
    }

    /// The gradient into caller buffers: one per active argument leaf, in
    /// order, of its element count (1 for a scalar), overwritten. Returns
    /// the value. No allocation beyond the call's own working memory.
    ///
    /// Errors: as [`Function::grad`]; [`Error::InvalidArgument`] for a
    /// buffer of the wrong count or length.
    pub fn grad_into(&self, args: &[Arg<'_>], gradient: &mut [&mut [f64]]) -> Result<f64, Error> {
        self.need_f64_result("the gradient")?;
        with_refs(args, |refs| {
            self.check_fast(refs)?;
            let mut full: smallvec::SmallVec<[ArgRef<'_>; 8]> = refs.iter().copied().collect();
            full.push(ArgRef::F64(1.0));
            // The value (a scalar: no buffer), then the gradient.
            let dest = crate::results::destinations(&mut [], gradient);
            let dest: SmallVec<[Option<arrayad_codegen::Dest>; 8]> = [None].into_iter().chain(dest).collect();
            self.engine(Kind::Vjp)?.get().run_into(&full, &dest, |rs| {
                let value = match rs.first() {
                    Some(ResultRef::F64(v)) => *v,
                    _ => return Err(Error::Internal(format!("the vjp of `{}` did not return an f64", self.name()))),
                };
                copy_f64s(self.name(), &rs[1..], gradient)?;
                Ok(value)
            })?
        })
    }

    /// The dense Jacobian of the `f64` result elements with respect to the
    /// `f64` elements of the active arguments, by reverse mode (one forward
    /// pass, then one backward pass per row) when there are no more rows
    /// than columns, else forward mode (passes of the vector jvp,
    /// [`arrayad_ad::jvp_lane_count`] columns side by side in each, or one
    /// jvp per column where there is no vector jvp).
    pub fn jacobian(&self, args: &[Arg<'_>]) -> Result<Jacobian, Error> {
        with_refs(args, |refs| {
            let mut result_tys: SmallVec<[&SrcType; 4]> = SmallVec::new();
            result_leaf_types(&self.signature().result, &mut result_tys);
            let is_f64 = |ty: &SrcType| shapes::leaf_type(ty).elem == Scalar::F64;
            let plan = &self.def().plan;
            // Arguments that pass the plan's checks and a result of literal
            // shapes need no sizes (a Jacobian block per call: no allocation
            // for them).
            let literal = plan.literal_results().filter(|_| plan.accepts(refs));
            let result_shapes_owned: SmallVec<[Option<Vec<usize>>; 4]> = match literal {
                Some(_) => SmallVec::new(),
                None => {
                    let sizes = self.check(refs)?;
                    result_tys
                        .iter()
                        .map(|ty| is_f64(ty).then(|| self.result_shape(&sizes, ty)).transpose())
                        .collect::<Result<_, _>>()?
                }
            };
            let result_shapes: SmallVec<[Option<&[usize]>; 4]> = match literal {
                Some(shapes) => {
                    shapes.iter().zip(&result_tys).map(|(s, ty)| is_f64(ty).then_some(s.as_slice())).collect()
                }
                None => result_shapes_owned.iter().map(|s| s.as_deref()).collect(),
            };
            let param_shapes: SmallVec<[Option<&[usize]>; 8]> =
                refs.iter().zip(self.active.iter()).map(|(a, &act)| act.then(|| a.shape())).collect();
            self.jacobian_of(args, refs, &result_shapes, &param_shapes)
        })
    }

    /// [`Function::jacobian`] once the shapes of its rows (`f64` result
    /// leaves) and columns (active argument leaves) are known.
    fn jacobian_of(
        &self,
        args: &[Arg<'_>],
        refs: &[ArgRef<'_>],
        result_shapes: &[Option<&[usize]>],
        param_shapes: &[Option<&[usize]>],
    ) -> Result<Jacobian, Error> {
        // The rows come from the declared result shape, whose element count
        // may not even fit in a usize (`[9223372036854775807][3]f64`).
        let count = |s: &[Option<&[usize]>]| -> Option<usize> {
            s.iter()
                .flatten()
                .try_fold(0usize, |sum, s| sum.checked_add(s.iter().try_fold(1usize, |n, &d| n.checked_mul(d))?))
        };
        let Some(rows) = count(result_shapes) else {
            return Err(self.too_large(format!(
                "the Jacobian of `{}` has more rows than can be counted (one per f64 element of its result {})",
                self.name(),
                self.signature().result
            )));
        };
        let cols = count(param_shapes).unwrap_or(usize::MAX);
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
            let value = self.jacobian_rows(refs, result_shapes, param_shapes, rows, &mut data)?;
            return Ok(Jacobian { value, rows, cols, data });
        }
        if total == 0 {
            let value = self.call(args)?;
            return Ok(Jacobian { value, rows, cols, data });
        }
        // Forward mode: the tangents of one-hot directions, one per column,
        // several per pass when there is a vector forward mode.
        let units: Vec<(usize, usize)> = unit_positions(param_shapes).collect();
        let mut buf = Vec::new();
        let value = self.jvp_directions(
            refs,
            units.len(),
            |c| Ok(one_hot(param_shapes, units[c].0, units[c].1).into_iter().flatten().collect()),
            |c, tangents| {
                flatten_f64_leaves(tangents, result_shapes, &mut buf)?;
                for (r, &x) in buf.iter().enumerate() {
                    data[r * cols + c] = x;
                }
                Ok(())
            },
        )?;
        Ok(Jacobian { value, rows, cols, data })
    }

    /// True when this function's `jvp_many` and forward Jacobian run its
    /// vector forward mode ([`Kind::JvpLanes`]): its body runs no reverse
    /// mode inside and its active params are more than one scalar
    /// (`arrayad_ad::lanes_pay`).
    fn has_lanes(&self) -> Result<bool, Error> {
        self.module.inner.has_lanes(self.index, &self.active)
    }

    /// Forward mode in `n` directions from one set of checked arguments
    /// `refs`: `direction(d)` gives direction `d` (one `f64` value per
    /// active argument leaf, shaped like it), `sink(d, tangents)` receives
    /// its tangents (one per `f64` result leaf). With a vector forward mode
    /// the directions go [`arrayad_ad::jvp_lane_count`] to a pass (the last
    /// pass padded with zero directions), else one jvp each. Returns the
    /// value (`n` must be at least 1).
    fn jvp_directions(
        &self,
        refs: &[ArgRef<'_>],
        n: usize,
        mut direction: impl FnMut(usize) -> Result<Vec<Value>, Error>,
        mut sink: impl FnMut(usize, &[Value]) -> Result<(), Error>,
    ) -> Result<Vec<Value>, Error> {
        let result_leaves = self.signature().result.leaves();
        let n_results = result_leaves.len();
        let n_tangents = result_leaves.iter().filter(|t| t.elem == Scalar::F64).count();
        let (kind, lanes) = match self.has_lanes()? {
            true => (Kind::JvpLanes, arrayad_ad::jvp_lane_count(self.signature(), &self.active)),
            false => (Kind::Jvp, 1),
        };
        let engine = self.engine(kind)?;
        let mut value = None;
        let mut first = 0;
        while first < n {
            let block: Vec<Vec<Value>> = (first..n.min(first + lanes)).map(&mut direction).collect::<Result<_, _>>()?;
            let padding: Vec<Value> = match block.len() < lanes {
                true => block[0].iter().map(|t| zeros(ArgRef::of(t).shape())).collect(),
                false => Vec::new(),
            };
            let mut full: Vec<ArgRef<'_>> = refs.to_vec();
            for l in 0..lanes {
                full.extend(block.get(l).unwrap_or(&padding).iter().map(ArgRef::of));
            }
            let mut out = engine.get().run_values(&full)?;
            self.check_result_count(out.len(), lanes * n_tangents, kind)?;
            let tangents = out.split_off(n_results);
            for l in 0..block.len() {
                sink(first + l, &tangents[l * n_tangents..(l + 1) * n_tangents])?;
            }
            value.get_or_insert(out);
            first += lanes;
        }
        value.ok_or_else(|| Error::Internal("forward mode in no direction".into()))
    }

    /// The reverse-mode Jacobian into `data` (`rows` x cols, row-major) by
    /// one call of the many-row vjp whose cotangent rows are the rows of the
    /// identity (leaf by leaf: each result leaf gets the stack of its rows
    /// of it, all in one buffer); the cotangent stacks it returns are
    /// copied into `data` from the call's memory. Returns the value.
    fn jacobian_rows(
        &self,
        refs: &[ArgRef<'_>],
        result_shapes: &[Option<&[usize]>],
        param_shapes: &[Option<&[usize]>],
        rows: usize,
        data: &mut [f64],
    ) -> Result<Vec<Value>, Error> {
        // Every f64 result leaf of n elements gets `rows` rows of n: the
        // identity's columns of that leaf.
        let mut identity = Vec::new();
        if rows.checked_mul(rows).is_none_or(|len| identity.try_reserve_exact(len).is_err()) {
            return Err(self.too_large(format!("the cotangents of the Jacobian of `{}` ({rows} rows)", self.name())));
        }
        identity.resize(rows * rows, 0.0);
        let mut stack_shapes: SmallVec<[SmallVec<[usize; 4]>; 4]> = SmallVec::new();
        let mut first = 0;
        for shape in result_shapes.iter().flatten() {
            let n: usize = shape.iter().product();
            for e in 0..n {
                identity[first * rows + (first + e) * n + e] = 1.0;
            }
            let mut shape_r = SmallVec::new();
            shape_r.push(rows);
            shape_r.extend_from_slice(shape);
            stack_shapes.push(shape_r);
            first += n;
        }
        let mut full: SmallVec<[ArgRef<'_>; 12]> = refs.iter().copied().collect();
        let mut offset = 0;
        for shape in &stack_shapes {
            let len = shape.iter().product::<usize>();
            full.push(ArgRef::F64s { data: &identity[offset..offset + len], shape });
            offset += len;
        }
        let n_results = result_shapes.len();
        let n_active = param_shapes.iter().flatten().count();
        let cols = data.len() / rows;
        self.engine(Kind::VjpRows)?.get().run(&full, |rs| {
            self.check_result_count(rs.len(), n_active, Kind::VjpRows)?;
            let mut off = 0;
            for (stack, shape) in rs[n_results..].iter().zip(param_shapes.iter().flatten()) {
                let n: usize = shape.iter().product();
                let elems = stack.f64s().filter(|e| e.len() == rows * n).ok_or_else(|| {
                    Error::Internal(format!("the many-row vjp of `{}` has the wrong shape", self.name()))
                })?;
                if n > 0 {
                    for (r, g) in elems.chunks_exact(n).enumerate() {
                        data[r * cols + off..r * cols + off + n].copy_from_slice(g);
                    }
                }
                off += n;
            }
            Ok(rs[..n_results].iter().map(ResultRef::to_value).collect())
        })?
    }

    /// The value, the gradient and the Hessian-vector product `H t` of a
    /// function whose result is one `f64`, by forward over reverse (one
    /// call: the cost of a few gradients). `tangents` as for
    /// [`Function::jvp`].
    ///
    /// Errors: [`Error::Usage`] when the result is not a single `f64`; as
    /// for [`Function::jvp`] otherwise.
    pub fn hvp(&self, args: &[Arg<'_>], tangents: &[Option<Arg<'_>>]) -> Result<Hvp, Error> {
        self.need_f64_result("the Hessian")?;
        let n_active = self.active.iter().filter(|a| **a).count();
        let mut out = self.with_tangents(args, tangents, |full| self.engine(Kind::Hvp)?.get().run_values(full))?;
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
        Ok(Hvp { value, gradient: self.by_param(grads), hvp: self.by_param(hv) })
    }

    /// The dense Hessian of a function whose result is one `f64` with
    /// respect to the `f64` elements of the active arguments (flattened as
    /// the Jacobian's columns), one Hessian-vector product per column. The
    /// result is a square [`Jacobian`] whose `value` is the function's.
    ///
    /// Errors: as for [`Function::hvp`].
    pub fn hessian(&self, args: &[Arg<'_>]) -> Result<Jacobian, Error> {
        self.need_f64_result("the Hessian")?;
        let param_shapes_owned = with_refs(args, |refs| {
            self.check(refs)?;
            Ok::<_, Error>(
                refs.iter()
                    .zip(self.active.iter())
                    .map(|(a, &act)| act.then(|| a.shape().to_vec()))
                    .collect::<Vec<_>>(),
            )
        })?;
        let param_shapes: Vec<Option<&[usize]>> = param_shapes_owned.iter().map(|s| s.as_deref()).collect();
        let n: usize = param_shapes.iter().flatten().map(|s| s.iter().product::<usize>()).sum();
        let mut data = Vec::new();
        if n.checked_mul(n).is_none_or(|t| data.try_reserve_exact(t).is_err()) {
            return Err(self.too_large(format!("the Hessian of `{}` has {n} x {n} entries", self.name())));
        }
        data.resize(n * n, 0.0);
        let mut value = self.call(args)?;
        let mut buf = Vec::new();
        for (c, (leaf, elem)) in unit_positions(&param_shapes).enumerate() {
            let ts = one_hot(&param_shapes, leaf, elem);
            let targs: Vec<Option<Arg<'_>>> = ts.iter().map(|t| t.as_ref().map(Arg::Value)).collect();
            let h = self.hvp(args, &targs)?;
            value = vec![Value::F64(h.value)];
            flatten_f64(h.hvp.as_slice(), &param_shapes, &mut buf)?;
            for (r, &x) in buf.iter().enumerate() {
                data[r * n + c] = x;
            }
        }
        Ok(Jacobian { value, rows: n, cols: n, data })
    }

    // ---- helpers ------------------------------------------------------------

    /// The cotangents of the active leaves spread over all argument leaves.
    fn by_param(&self, values: Vec<Value>) -> ParamValues {
        let mut it = values.into_iter();
        let values = self.active.iter().map(|&a| if a { it.next() } else { None }).collect();
        ParamValues::new(self.def().arg_names.clone(), values)
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
    /// limit of a call ([`crate::Options::max_memory`], else its default),
    /// on every backend.
    fn host_limit(&self) -> u64 {
        let options = &self.module.inner.options;
        options.max_memory.unwrap_or_else(arrayad_runtime::OwnedCtx::default_limit)
    }

    /// The shapes of the result leaves for the arguments `args` (`[]` for
    /// a scalar), from the sizes the arguments bind: the shapes a
    /// cotangent must have.
    ///
    /// Errors: as for [`Function::call`] (the arguments are checked).
    pub fn result_shapes(&self, args: &[Arg<'_>]) -> Result<Vec<Vec<usize>>, Error> {
        let sizes = with_refs(args, |refs| self.check(refs))?;
        leaf_infos("result", &self.signature().result).iter().map(|l| self.result_shape(&sizes, l.ty)).collect()
    }

    /// The shape of result leaf type `ty` under the sizes bound by the
    /// arguments.
    fn result_shape(&self, sizes: &Sizes, ty: &SrcType) -> Result<Vec<usize>, Error> {
        sizes.shape_of_type(ty).ok_or_else(|| {
            Error::Internal(format!("the result type {ty} of `{}` has a size that no argument determines", self.name()))
        })
    }

    fn check_result_count(&self, got: usize, extra: usize, kind: Kind) -> Result<(), Error> {
        let mut leaves: SmallVec<[&SrcType; 4]> = SmallVec::new();
        result_leaf_types(&self.signature().result, &mut leaves);
        if got != leaves.len() + extra {
            return Err(Error::Internal(format!(
                "the {} of `{}` returned {} values, expected {}",
                kind.describe(),
                self.name(),
                got,
                leaves.len() + extra
            )));
        }
        Ok(())
    }
}

/// The leaf types of a result type, left to right (tuples flattened; their
/// nesting is that of the source type, which the parser bounds).
fn result_leaf_types<'t>(ty: &'t SrcType, out: &mut SmallVec<[&'t SrcType; 4]>) {
    match ty {
        SrcType::Tuple(ts) => ts.iter().for_each(|t| result_leaf_types(t, out)),
        _ => out.push(ty),
    }
}

/// Copies `f64` results (scalars or arrays) into caller buffers, one each,
/// of matching length.
fn copy_f64s(func: &str, rs: &[ResultRef<'_>], outs: &mut [&mut [f64]]) -> Result<(), Error> {
    if rs.len() != outs.len() {
        return Err(Error::InvalidArgument(format!(
            "`{func}` has {} differentiated argument leaves, so it needs {} gradient buffers, got {}",
            rs.len(),
            rs.len(),
            outs.len()
        )));
    }
    for (k, (r, out)) in rs.iter().zip(outs.iter_mut()).enumerate() {
        let src = r.f64s().ok_or_else(|| Error::Internal(format!("a derivative of `{func}` is not f64")))?;
        if src.len() != out.len() {
            return Err(Error::InvalidArgument(format!(
                "gradient buffer {k} of `{func}` has {} elements, but the argument has {}",
                out.len(),
                src.len()
            )));
        }
        if !crate::results::in_place(src, out) {
            out.copy_from_slice(src);
        }
    }
    Ok(())
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
                            if let ArrayData::F64(d) = &mut a.data {
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

/// The f64 elements of `values`, the tangents of the leaves where
/// `shapes` is `Some` (one value each, in order), concatenated; as
/// [`flatten_f64`].
fn flatten_f64_leaves(values: &[Value], shapes: &[Option<&[usize]>], out: &mut Vec<f64>) -> Result<(), Error> {
    out.clear();
    let wrong = || Error::Internal("a derivative has the wrong shape".into());
    if shapes.iter().flatten().count() != values.len() {
        return Err(wrong());
    }
    for (v, s) in values.iter().zip(shapes.iter().flatten()) {
        match v.f64_elements() {
            Some(e) if e.len() == s.iter().product::<usize>() => out.extend_from_slice(e),
            _ => return Err(wrong()),
        }
    }
    Ok(())
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function").field("name", &self.name()).field("active", &self.active).finish()
    }
}
