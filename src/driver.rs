//! The compilation pipeline, in one place: source -> program (derivative
//! operators expanded) -> prepared primal per definition -> derivatives ->
//! code. [`crate::Module`] (and through it `arrayad run` and the Python
//! package), `arrayad build` and `arrayad emit` all go through these
//! functions, so every step has one implementation, one set of checks and
//! one wording of its errors.
//!
//! - [`load`]: the frontend, then `arrayad_ad::expand_derivatives`.
//! - [`prepare`]: the size check (`passes::inline::check_inlining`) and
//!   `arrayad_ir::passes::prepare` (calls inlined, optimised).
//! - [`Primals`]: a definition's code (kept calls stay calls) and, when a
//!   derivative needs it, the definition with every call inlined.
//! - [`derive()`], [`hvp`]: the AD transformations on a prepared primal.
//! - [`export`]: what a shared library needs of one definition.
//!
//! The command line is built on this module (it is public for such tools);
//! a program that calls compiled functions wants [`crate::Module`].
//!
//! - `Def` and `Derived`: the lazy caches of a module (prepared primal,
//!   derivatives per active set, compiled code per kind), filled on first
//!   use by `Inner::engine`.
//! - `compiling`: the big-stack runner that differentiation and code
//!   generation run on; `guard`: panics (bugs) as [`Error::Internal`].

use crate::engine::{Engine, Kind};
use crate::error::{Error, Warning};
use crate::module::Inner;
use arrayad_ad::{AdOptions, Derivatives, Which};
use arrayad_codegen::{Entry, ExportedFunction};
use arrayad_ir::passes::inline::KeptCalls;
use arrayad_ir::timing::time;
use arrayad_ir::{passes, FuncId, Function, KeptKind, Program, Scalar, SrcType};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

// ---- source to program ------------------------------------------------------

/// Reads a source file; the name in messages is the path as given.
///
/// Errors: [`Error::Io`] when it cannot be read; a file that is not valid
/// UTF-8 is an [`Error::Compile`] at its first invalid byte, rendered like
/// every diagnostic (from the lossily decoded text).
pub fn read_source(path: &Path) -> Result<(String, String), Error> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| Error::Io(format!("cannot read {name}: {e}")))?;
    match String::from_utf8(bytes) {
        Ok(s) => Ok((name, s)),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(e.as_bytes());
            let bad = text.get(at..).and_then(|t| t.chars().next()).map_or(0, char::len_utf8);
            let d = arrayad_frontend::Diagnostics::single(
                &name,
                &text,
                arrayad_frontend::codes::Code::NotUtf8,
                at..at + bad,
                "the file is not valid UTF-8",
            );
            Err(d.into())
        }
    }
}

/// The program of `source` (a file called `name` in messages), its
/// derivative operators expanded ([`expand`]).
///
/// Errors: [`Error::Compile`] with the diagnostics.
pub fn load(name: &str, source: &str) -> Result<Program, Error> {
    let program = time("frontend", || guard(|| arrayad_frontend::compile(name, source).map_err(Error::from)))?;
    time("expand derivatives", || expand(program))
}

/// `program` with each `grad`, `vjp` and `jvp` inside a definition turned
/// into a definition of its own (`arrayad_ad::expand_derivatives`), and
/// each huge definition split into parts that it calls
/// (`passes::outline`), which are compiled, and differentiated, on their
/// own.
pub fn expand(program: Program) -> Result<Program, Error> {
    compiling(|| {
        let mut expanded = arrayad_ad::expand_derivatives(program)?;
        time("outline", || passes::outline::outline(&mut expanded));
        Ok(expanded)
    })
}

/// The definition called `name`.
///
/// Errors: [`Error::Usage`] naming the definitions there are.
pub fn find(program: &Program, name: &str) -> Result<FuncId, Error> {
    program.find(name).filter(|id| !passes::outline::is_part(&program.func(*id).name)).ok_or_else(|| {
        let names: Vec<&str> = program.definitions().map(|id| program.func(id).name.as_str()).collect();
        Error::Usage(format!(
            "no definition `{name}` in {} (it defines: {})",
            program.file,
            if names.is_empty() { "nothing".into() } else { names.join(", ") }
        ))
    })
}

/// Checks that every `wrt` name is a parameter of one of `funcs` (`None`:
/// of any definition).
///
/// Errors: [`Error::Usage`] for the first name that is none.
pub fn check_wrt(program: &Program, funcs: Option<&[FuncId]>, wrt: Option<&[String]>) -> Result<(), Error> {
    let has = |id: FuncId, name: &String| program.func(id).signature.params.iter().any(|p| &p.name == name);
    for name in wrt.unwrap_or(&[]) {
        let (known, which) = match funcs {
            None => (program.definitions().any(|id| has(id, name)), format!("any definition in {}", program.file)),
            Some(ids) => {
                let names: Vec<&str> = ids.iter().map(|&id| program.func(id).name.as_str()).collect();
                let which = match names.as_slice() {
                    [one] => format!("`{one}`"),
                    _ => format!("the definitions {}", names.join(", ")),
                };
                (ids.iter().any(|&id| has(id, name)), which)
            }
        };
        if !known {
            return Err(Error::Usage(format!("--wrt `{name}` matches no parameter of {which}")));
        }
    }
    Ok(())
}

// ---- program to IR ----------------------------------------------------------

/// The primal of definition `id` ready for differentiation and code
/// generation (`arrayad_ir::passes::prepare`: calls inlined, optimised),
/// its size checked first.
///
/// Errors: [`Error::Usage`] naming the call that crosses an inlining
/// limit.
pub fn prepare(program: &Program, id: FuncId) -> Result<Function, Error> {
    compiling(|| {
        time("check inlining", || passes::inline::check_inlining(program, id))
            .map_err(|e| Error::Usage(e.located(program)))?;
        Ok(time("prepare primal", || passes::prepare(program, id)))
    })
}

/// The primal of definition `id` ready for code generation: as
/// [`prepare`], except that the calls of the definitions `kept` keeps stay
/// calls (`passes::inline::KeptCalls`; compiled once,
/// [`called_definitions`]); its size with those calls kept checked first.
/// The same function as [`prepare`]'s when it reaches no such definition.
///
/// Errors: [`Error::Usage`] naming the call that crosses an inlining
/// limit.
pub fn prepare_code(program: &Program, id: FuncId, kept: &KeptCalls) -> Result<Function, Error> {
    compiling(|| {
        time("check inlining", || kept.check(program, id)).map_err(|e| Error::Usage(e.located(program)))?;
        Ok(time("prepare primal", || passes::prepare_keeping(program, id, kept)))
    })
}

/// The definitions kept as calls in the code of `roots` and of the
/// functions they call: those of at least `keep_above` statements
/// (`passes::inline::KeptCalls`), decided once.
pub fn kept_calls(program: &Program, roots: &[FuncId], keep_above: u64) -> KeptCalls {
    time("kept calls", || KeptCalls::new(program, roots, keep_above))
}

/// The jvp and vjp of definition `id` in every f64 param, for the
/// derivatives of callers that keep its calls ([`KeptKind`]), from its
/// primal prepared for code ([`prepare_code`]: they keep its own kept
/// calls).
///
/// Errors: as [`prepare_code`] and [`derive()`].
pub fn kept_derivatives(
    program: &Program,
    id: FuncId,
    kept: &KeptCalls,
    opts: AdOptions,
) -> Result<(Function, Function), Error> {
    kept_derivatives_of(program, id, &prepare_code(program, id, kept)?, opts)
}

/// [`kept_derivatives`] from the primal of `id` prepared for code.
///
/// Errors: as [`derive()`].
pub fn kept_derivatives_of(
    program: &Program,
    id: FuncId,
    primal: &Function,
    opts: AdOptions,
) -> Result<(Function, Function), Error> {
    let leaves = arrayad_ad::active_leaves(&program.func(id).signature, None);
    let mut d = derive(program, id, primal, &leaves, opts, &[Which::Jvp, Which::Vjp])?;
    match (d.take(Which::Jvp), d.take(Which::Vjp)) {
        (Some(jvp), Some(vjp)) => Ok((jvp, vjp)),
        _ => Err(Error::Internal(format!("the derivatives of `{}` were not derived", primal.name))),
    }
}

/// The jvp of the vjp of a definition kept as a call, from that vjp
/// ([`kept_derivatives`]; `arrayad_ad::vjp_jvp`).
///
/// Errors: [`Error::Internal`] for a bug.
pub fn vjp_jvp(program: &Program, vjp: &Function) -> Result<Function, Error> {
    compiling(|| Ok(time("derive", || arrayad_ad::vjp_jvp(vjp, program))?))
}

/// The callees that the calls in `funcs` reach (directly, or through other
/// callees): kept definitions' primals ([`prepare_code`]), their jvps and
/// vjps ([`kept_derivatives`]) and the jvps of their vjps ([`vjp_jvp`]),
/// each made once, under its callee id ([`KeptKind::callee`]).
///
/// Errors: as [`prepare_code`] and [`kept_derivatives`].
pub fn called_definitions(
    program: &Program,
    funcs: &[&Function],
    kept: &KeptCalls,
    opts: AdOptions,
) -> Result<Vec<arrayad_codegen::CalledDefinition>, Error> {
    // One big-stack thread for all of them, not one per step.
    compiling(|| called_definitions_here(program, funcs, kept, opts))
}

/// [`called_definitions`] on the calling thread (a big-stack one). The
/// callees are found in waves (those the functions of the last wave call
/// and no earlier wave made), and their functions listed wave by wave, by
/// definition id within a wave (a definition's kinds in the order its
/// calls were met), so that the list is the same for any number of
/// threads. The first error in that order is the one reported.
///
/// A wave may hold a single definition (a library of helpers each calling
/// the next ten is as many waves deep as it has helpers), so the waves do
/// not make the functions: before them, every kept definition that the
/// program reaches from the first wave's definitions is made, on every
/// core, in the kinds the first wave asks of the definitions that reach
/// it (a kind's functions call the same kind of their callees, the vjp's
/// and its jvp's the primal too). A wave only takes them, making what the
/// first one did not foresee; what is made and never called is dropped.
fn called_definitions_here(
    program: &Program,
    funcs: &[&Function],
    kept: &KeptCalls,
    opts: AdOptions,
) -> Result<Vec<arrayad_codegen::CalledDefinition>, Error> {
    let n = program.funcs.len();
    let kind_of =
        |c: FuncId| KeptKind::of_callee(n, c).ok_or_else(|| Error::Internal(format!("a call of function {}", c.0)));
    let mut wave: Vec<FuncId> = funcs.iter().flat_map(|f| called_by(f)).collect();
    let mut made: HashMap<FuncId, Made> = HashMap::new();
    {
        // The definitions the first wave asks each kind of, and the kinds
        // each definition they reach is made in.
        let mut roots: std::collections::BTreeMap<KeptKind, Vec<FuncId>> = Default::default();
        for &c in &wave {
            let (def, kind) = kind_of(c)?;
            roots.entry(kind).or_default().push(def);
        }
        let mut kinds: std::collections::BTreeMap<u32, Vec<KeptKind>> = Default::default();
        for (kind, defs) in &roots {
            let with = match kind {
                KeptKind::Vjp | KeptKind::VjpJvp => vec![*kind, KeptKind::Primal],
                _ => vec![*kind],
            };
            for d in kept_reached(program, defs, kept) {
                let ks = kinds.entry(d.0).or_default();
                for k in &with {
                    if !ks.contains(k) {
                        ks.push(*k);
                    }
                }
            }
        }
        let mut tasks: Vec<MakeTask> = kinds.into_iter().map(|(d, ks)| (FuncId(d), ks, None)).collect();
        arrayad_ir::timing::time("derive the called definitions", || {
            arrayad_ir::stack::for_each_parallel(tasks.iter_mut().collect(), COMPILE_STACK, |t: &mut (FuncId, _, _)| {
                let mut m = Made::default();
                t.2 = Some(on_compile_stack(|| guard(|| m.make(program, t.0, &t.1, kept, opts).map(|()| m))));
            })
        });
        // An error is reported when a wave asks for the function.
        made.extend(tasks.into_iter().filter_map(|(d, _, r)| Some((d, r?.ok()?))));
    }
    let mut out = Vec::new();
    let mut seen: std::collections::HashSet<FuncId> = std::collections::HashSet::new();
    while !wave.is_empty() {
        wave.retain(|&c| seen.insert(c));
        let mut groups: std::collections::BTreeMap<u32, Vec<(FuncId, KeptKind)>> = Default::default();
        for &c in &wave {
            let (def, kind) = kind_of(c)?;
            groups.entry(def.0).or_default().push((c, kind));
        }
        let mut tasks: Vec<CalleeTask> = groups
            .into_iter()
            .map(|(def, kinds)| (FuncId(def), kinds, made.remove(&FuncId(def)).unwrap_or_default(), None))
            .collect();
        arrayad_ir::stack::for_each_parallel(tasks.iter_mut().collect(), COMPILE_STACK, |t: &mut CalleeTask| {
            let (def, wanted, m, result) = t;
            *result = Some(on_compile_stack(|| guard(|| m.take(program, *def, wanted, kept, opts))));
        });
        let mut next = Vec::new();
        for (def, _, m, result) in tasks {
            let functions = result.unwrap_or_else(|| Err(Error::Internal("a callee was not made".into())))?;
            made.insert(def, m);
            for (id, primal) in functions {
                next.extend(called_by(&primal));
                out.push(arrayad_codegen::CalledDefinition { id, primal });
            }
        }
        wave = next;
    }
    Ok(out)
}

/// The kept definitions among `roots` and the definitions they call,
/// directly or through others (calls at any depth of the program's
/// definitions, kept or inlined), in order of id.
fn kept_reached(program: &Program, roots: &[FuncId], kept: &KeptCalls) -> Vec<FuncId> {
    let n = program.funcs.len();
    let mut seen = vec![false; n];
    let mut stack: Vec<FuncId> = Vec::new();
    for &r in roots {
        if (r.0 as usize) < n && !std::mem::replace(&mut seen[r.0 as usize], true) {
            stack.push(r);
        }
    }
    while let Some(d) = stack.pop() {
        for c in called_by(program.func(d)) {
            if (c.0 as usize) < n && !std::mem::replace(&mut seen[c.0 as usize], true) {
                stack.push(c);
            }
        }
    }
    (0..n).filter(|&i| seen[i] && kept.keeps(FuncId(i as u32))).map(|i| FuncId(i as u32)).collect()
}

/// One definition made before the waves of [`called_definitions_here`]:
/// the definition, the kinds to make, and what [`Made::make`] made.
type MakeTask = (FuncId, Vec<KeptKind>, Option<Result<Made, Error>>);

/// One definition of a wave of [`called_definitions_here`]: the
/// definition, the callee ids and kinds wanted of it, its functions made
/// so far, and the functions taken for the wave.
type CalleeTask = (FuncId, Vec<(FuncId, KeptKind)>, Made, Option<Result<Vec<(FuncId, Function)>, Error>>);

/// The functions of one kept definition made and not yet taken
/// ([`called_definitions_here`]).
#[derive(Default)]
struct Made {
    /// Its primal prepared for code ([`prepare_code`]).
    primal: Option<Function>,
    /// Its jvp and vjp ([`kept_derivatives_of`]).
    jvp: Option<Function>,
    vjp: Option<Function>,
    /// The jvp of its vjp ([`vjp_jvp`]).
    vjp_jvp: Option<Function>,
}

impl Made {
    /// Makes the functions of `kinds` of definition `def` that are not
    /// made, each function shrunk ([`Function::shrink_to_fit`]): they are
    /// kept until every callee is compiled.
    ///
    /// Errors: as [`prepare_code`], [`kept_derivatives_of`] and [`vjp_jvp`].
    fn make(
        &mut self,
        program: &Program,
        def: FuncId,
        kinds: &[KeptKind],
        kept: &KeptCalls,
        opts: AdOptions,
    ) -> Result<(), Error> {
        let wants = |k: KeptKind| kinds.contains(&k);
        let pair = wants(KeptKind::Jvp) && self.jvp.is_none()
            || wants(KeptKind::Vjp) && self.vjp.is_none()
            || wants(KeptKind::VjpJvp) && self.vjp_jvp.is_none() && self.vjp.is_none();
        if wants(KeptKind::Primal) && self.primal.is_none() || pair {
            // A primal made before and not yet taken is kept for its wave.
            let kept_primal = self.primal.is_some();
            let primal = match self.primal.take() {
                Some(p) => p,
                None => prepare_code(program, def, kept)?,
            };
            if pair {
                let (jvp, vjp) = kept_derivatives_of(program, def, &primal, opts)?;
                self.jvp = self.jvp.take().or(Some(jvp));
                self.vjp = self.vjp.take().or(Some(vjp));
            }
            if wants(KeptKind::Primal) || kept_primal {
                self.primal = Some(primal);
            }
        }
        if wants(KeptKind::VjpJvp) && self.vjp_jvp.is_none() {
            let vjp = self.vjp.as_ref().ok_or_else(|| Error::Internal("a vjp was not made".into()))?;
            self.vjp_jvp = Some(vjp_jvp(program, vjp)?);
        }
        for f in [&mut self.primal, &mut self.jvp, &mut self.vjp, &mut self.vjp_jvp].into_iter().flatten() {
            f.shrink_to_fit();
        }
        Ok(())
    }

    /// The functions of the callee ids and kinds `wanted` of definition
    /// `def`, made first when they are not ([`Self::make`]). A jvp or vjp
    /// is moved out once the kinds that need it are taken, else copied.
    ///
    /// Errors: as [`Self::make`].
    fn take(
        &mut self,
        program: &Program,
        def: FuncId,
        wanted: &[(FuncId, KeptKind)],
        kept: &KeptCalls,
        opts: AdOptions,
    ) -> Result<Vec<(FuncId, Function)>, Error> {
        let kinds: Vec<KeptKind> = wanted.iter().map(|w| w.1).collect();
        self.make(program, def, &kinds, kept, opts)?;
        let missing = || Error::Internal(format!("the {:?} of function {} was not made", kinds, def.0));
        // A later wave may ask for the vjp's jvp (made from the vjp) or the
        // other of the pair: copied, unless this wave takes them all.
        let all = kinds.contains(&KeptKind::Jvp) && kinds.contains(&KeptKind::Vjp) && kinds.contains(&KeptKind::VjpJvp);
        let mut out = Vec::with_capacity(wanted.len());
        for &(id, kind) in wanted {
            let slot = match kind {
                KeptKind::Primal => self.primal.take(),
                KeptKind::VjpJvp => self.vjp_jvp.take(),
                KeptKind::Jvp if all => self.jvp.take(),
                KeptKind::Vjp if all => self.vjp.take(),
                KeptKind::Jvp => self.jvp.clone(),
                KeptKind::Vjp => self.vjp.clone(),
            };
            out.push((id, slot.ok_or_else(missing)?));
        }
        Ok(out)
    }
}

/// The definitions `f` calls (`Expr::Call`, at any depth), each once.
pub fn called_by(f: &Function) -> Vec<FuncId> {
    arrayad_ir::visit::called_functions(&f.body)
}

/// Checks that the definitions `ids` stay within the compiler's limits
/// each and, together, within those of one shared library, in time linear
/// in the program: the calls `kept` keeps count as kept ([`prepare_code`]),
/// and the total counts each kept definition once.
///
/// Errors: [`Error::Usage`] naming the call that crosses a limit.
pub fn check_sizes(program: &Program, ids: &[FuncId], kept: &KeptCalls) -> Result<(), Error> {
    let located = |e: passes::inline::InlineLimitError| Error::Usage(e.located(program));
    let mut total = 0u64;
    for &id in ids {
        kept.check(program, id).map_err(located)?;
        total = total.saturating_add(kept.size(id));
    }
    for k in kept.kept() {
        kept.check(program, k).map_err(located)?;
        total = total.saturating_add(kept.size(k));
    }
    if total > passes::inline::MAX_INLINED_TOTAL {
        return Err(Error::Usage(format!(
            "{}: program too large after inlining: the {} definitions exported and the {} they call have {total} \
             statements with their large calls kept (limit {} statements together); export fewer (--export)",
            program.file,
            ids.len(),
            kept.kept().count(),
            passes::inline::MAX_INLINED_TOTAL
        )));
    }
    Ok(())
}

/// The derivatives `wanted` of definition `id` of `program`, whose
/// prepared primal is `primal` ([`prepare`] or [`prepare_code`]), with the IR params marked in
/// `active` differentiated, from one linearisation (`arrayad_ad::derive`).
///
/// Errors: [`Error::Usage`] for a derivative arrayad does not compute;
/// [`Error::Internal`] for a bug.
pub fn derive(
    program: &Program,
    id: FuncId,
    primal: &Function,
    active: &[bool],
    opts: AdOptions,
    wanted: &[Which],
) -> Result<Derivatives, Error> {
    compiling(|| Ok(time("derive", || arrayad_ad::derive(primal, active, opts, wanted, Some((program, id))))?))
}

/// True when the derivative `which` of the primal `code` prepared for code
/// ([`prepare_code`]) is derived from it, its kept calls becoming calls of
/// their definitions' derivatives ([`KeptKind`]); false when it is derived
/// from the primal with every call inlined ([`prepare`], whose size check
/// names the call that crosses a limit): the reverse mode (vjp, many-row
/// vjp, hvp) of a primal that runs reverse mode inside, which the rule of
/// the `grad`/`vjp` operators (or forward columns) derives from the
/// program with every call but the operators' inlined. `vector_forward`:
/// whether the primal has a vector forward mode
/// (`arrayad_ad::has_vector_forward`, a walk of its IR, which [`Primals`]
/// does once), false exactly when it runs reverse mode inside.
pub fn keeps_calls(which: Which, vector_forward: bool) -> bool {
    which == Which::Jvp || vector_forward
}

/// The primals the derivatives of one definition are taken from: its code
/// ([`prepare_code`], kept calls staying calls) and, on first need, the
/// definition with every call inlined ([`prepare`]); [`keeps_calls`]
/// decides which each derivative starts from. `Module`, `build` and `emit`
/// all choose through it.
pub struct Primals {
    id: FuncId,
    code: Function,
    /// Whether `code` calls kept definitions.
    keeps: bool,
    /// Whether `code` has a vector forward mode
    /// (`arrayad_ad::has_vector_forward`, false exactly when it runs
    /// reverse mode inside).
    vector_forward: bool,
    /// The definition with every call inlined, when `keeps`.
    inlined: OnceLock<Result<Function, Error>>,
}

impl Primals {
    /// The primals of definition `id`, its code prepared with the calls of
    /// `kept` kept.
    ///
    /// Errors: as [`prepare_code`].
    pub fn new(program: &Program, id: FuncId, kept: &KeptCalls) -> Result<Primals, Error> {
        let code = prepare_code(program, id, kept)?;
        let keeps = !called_by(&code).is_empty();
        let vector_forward = arrayad_ad::has_vector_forward(&code);
        Ok(Primals { id, code, keeps, vector_forward, inlined: OnceLock::new() })
    }

    /// The code of the primal ([`prepare_code`]).
    pub fn code(&self) -> &Function {
        &self.code
    }

    /// Whether the primal has a vector forward mode ([`Which::JvpLanes`]).
    pub fn vector_forward(&self) -> bool {
        self.vector_forward
    }

    /// Whether `jvp_many` and the forward Jacobian in the IR params marked
    /// in `active` run the vector jvp: when the primal has one and it pays
    /// (`arrayad_ad::lanes_pay`: unless the active params are at most one
    /// scalar); else they call the jvp once per direction.
    pub fn uses_lanes(&self, active: &[bool]) -> bool {
        self.vector_forward && arrayad_ad::lanes_pay(&self.code, active)
    }

    /// The primal with every call inlined ([`prepare`]): the code itself
    /// when it keeps no call.
    ///
    /// Errors: as [`prepare`] (a call crossing an inlining limit).
    pub fn inlined(&self, program: &Program) -> Result<&Function, Error> {
        if !self.keeps {
            return Ok(&self.code);
        }
        self.inlined.get_or_init(|| prepare(program, self.id)).as_ref().map_err(Error::clone)
    }

    /// Whether the derivative `which` starts from the code, its kept calls
    /// becoming calls of their definitions' derivatives ([`keeps_calls`]).
    pub fn keeps_calls(&self, which: Which) -> bool {
        self.keeps && keeps_calls(which, self.vector_forward)
    }

    /// The primal the derivative `which` is derived from.
    ///
    /// Errors: as [`Self::inlined`].
    fn for_derivative(&self, program: &Program, which: Which) -> Result<&Function, Error> {
        match self.keeps_calls(which) {
            true => Ok(&self.code),
            false => self.inlined(program),
        }
    }

    /// The derivatives `wanted` for the IR params marked in `active`,
    /// those taken from the same primal derived together ([`derive()`]: one
    /// linearisation each), with the checkpointing warnings of both.
    ///
    /// Errors: as [`Self::inlined`] and [`derive()`].
    pub fn derive(
        &self,
        program: &Program,
        active: &[bool],
        opts: AdOptions,
        wanted: &[Which],
    ) -> Result<Derivatives, Error> {
        let (kept, rest): (Vec<Which>, Vec<Which>) = wanted.iter().partition(|w| self.keeps_calls(**w));
        // The size check of the inlined primal before any derivation.
        if !rest.is_empty() {
            self.inlined(program)?;
        }
        let mut d = Derivatives::default();
        for group in [kept, rest] {
            let Some(&first) = group.first() else { continue };
            let primal = self.for_derivative(program, first)?;
            let mut part = derive(program, self.id, primal, active, opts, &group)?;
            d.uncheckpointed.append(&mut part.uncheckpointed);
            for w in group {
                if let Some(f) = part.take(w) {
                    d.set(w, f);
                }
            }
        }
        Ok(d)
    }

    /// The derivative `which` alone ([`Self::derive`]).
    ///
    /// Errors: as [`Self::derive`].
    pub fn derive_one(
        &self,
        program: &Program,
        active: &[bool],
        opts: AdOptions,
        which: Which,
    ) -> Result<Function, Error> {
        let mut d = self.derive(program, active, opts, &[which])?;
        d.take(which).ok_or_else(|| Error::Internal(format!("the {which:?} was not derived")))
    }

    /// The code of the primal, owned.
    pub fn into_code(self) -> Function {
        self.code
    }
}

/// The Hessian-vector product of a prepared primal with one f64 result,
/// from its vjp (`arrayad_ad::hvp`).
///
/// Errors: [`Error::Usage`] when the result is not one f64.
pub fn hvp(program: &Program, primal: &Function, vjp: &Function, active: &[bool]) -> Result<Function, Error> {
    compiling(|| Ok(arrayad_ad::hvp(primal, vjp, active, Some(program))?))
}

/// The warnings of checkpointing for a primal of `program` prepared for
/// code ([`prepare_code`]): one per loop its vjp leaves taped
/// (`arrayad_ad::uncheckpointed_loops_in`; not those of kept callees),
/// located in the program's file.
pub fn checkpoint_warnings(program: &Program, primal: &Function, active: &[bool]) -> Result<Vec<Warning>, Error> {
    let file = &program.file;
    let loops = compiling(|| Ok(arrayad_ad::uncheckpointed_loops_in(primal, active, Some(program))?))?;
    Ok(loops.into_iter().map(|u| warning(file, u)).collect())
}

/// A loop left taped as a warning located in `file`.
fn warning(file: &str, u: arrayad_ad::Uncheckpointed) -> Warning {
    Warning { file: file.to_string(), line: u.loc.line, col: u.loc.col, message: u.reason }
}

/// What `arrayad build` asks of each exported definition.
pub struct ExportRequest<'a> {
    /// The parameters differentiated (`None`: every one with f64 parts).
    pub wrt: Option<&'a [String]>,
    /// The C functions to define (`None`: every one the definition has).
    pub entries: Option<&'a [Entry]>,
    /// How reverse mode is compiled.
    pub opts: AdOptions,
    /// The definitions whose calls the code keeps ([`prepare_code`]).
    pub kept: &'a KeptCalls,
}

/// The IR a shared library needs of definition `id`: the prepared primal
/// and the derivatives its entries need, from one linearisation; with the
/// checkpointing warnings of its reverse mode (from that derivation).
///
/// Errors: as [`prepare`] and [`derive()`].
pub fn export(
    program: &Program,
    id: FuncId,
    request: &ExportRequest<'_>,
) -> Result<(ExportedFunction, Vec<Warning>), Error> {
    let f = program.func(id);
    let f64_result = f.signature.result == SrcType::Scalar(Scalar::F64);
    let asked = |e: Entry| request.entries.is_none_or(|es| es.contains(&e));
    let needed = |es: &[Entry]| es.iter().any(|e| asked(*e));
    let hvp_wanted = f64_result && asked(Entry::Hvp);
    let vjp_entry = needed(&[Entry::Vjp, Entry::Grad]);
    let primals = Primals::new(program, id, request.kept)?;
    let leaves = arrayad_ad::active_leaves(&f.signature, request.wrt);
    // The forward-mode Jacobian and `f_jvp_many` by the vector jvp when
    // it is used, else by the jvp (the Jacobian of one f64 is one row, by
    // the vjp).
    let many = asked(Entry::JvpMany) || (asked(Entry::Jacobian) && !f64_result);
    let lanes = many && primals.uses_lanes(&leaves);
    let mut wanted = Vec::new();
    if asked(Entry::Jvp) || (many && !lanes) {
        wanted.push(Which::Jvp);
    }
    if lanes {
        wanted.push(Which::JvpLanes);
    }
    // The Jacobian of a result that is one f64 is one row: the vjp's
    // (no many-row vjp to compile).
    if vjp_entry || (asked(Entry::Jacobian) && f64_result) {
        wanted.push(Which::Vjp);
    }
    if hvp_wanted {
        wanted.push(Which::Hvp);
    }
    if asked(Entry::Jacobian) && !f64_result {
        wanted.push(Which::VjpRows);
    }
    let mut d = primals.derive(program, &leaves, request.opts, &wanted)?;
    let warnings = std::mem::take(&mut d.uncheckpointed).into_iter().map(|u| warning(&program.file, u)).collect();
    let entries = request
        .entries
        .map(|es| es.iter().copied().filter(|e| f64_result || !matches!(e, Entry::Grad | Entry::Hvp)).collect());
    let export = ExportedFunction {
        name: f.name.clone(),
        signature: f.signature.clone(),
        active: arrayad_ad::active_params(&f.signature, request.wrt),
        entries,
        primal: primals.into_code(),
        jvp: d.take(Which::Jvp),
        vjp: d.take(Which::Vjp),
        vjp_rows: d.take(Which::VjpRows),
        jvp_lanes: d.take(Which::JvpLanes),
        hvp: d.take(Which::Hvp),
    };
    Ok((export, warnings))
}

// ---- the environment ---------------------------------------------------------

/// A memory size: bytes, or a number with a suffix K, M, G or T (powers of
/// 1024), as `--max-memory`, `$ARRAYAD_MAX_MEMORY` and
/// `$ARRAYAD_KEEP_MEMORY` take it.
///
/// Errors: the reason, quoting `s`.
pub fn parse_memory_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let not_a_size = || format!("`{s}` is not a size (bytes, or a number with K, M, G or T)");
    let digits = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let shift = match &t[digits.len()..] {
        "" => 0,
        "k" | "K" => 10,
        "m" | "M" => 20,
        "g" | "G" => 30,
        "t" | "T" => 40,
        _ if digits.is_empty() => return Err(not_a_size()),
        _ => return Err(format!("`{s}`: the suffix must be K, M, G or T")),
    };
    let n: u64 = digits.parse().map_err(|_| not_a_size())?;
    n.checked_mul(1u64 << shift).ok_or_else(|| format!("`{s}` is too large"))
}

/// Checks the memory settings of the environment that compiled calls read
/// (`$ARRAYAD_MAX_MEMORY`, positive, and `$ARRAYAD_KEEP_MEMORY`), so that a
/// mistyped value is an error rather than silently the default.
///
/// Errors: [`Error::Usage`] naming the variable.
pub fn check_memory_environment() -> Result<(), Error> {
    for (var, positive) in [("ARRAYAD_MAX_MEMORY", true), ("ARRAYAD_KEEP_MEMORY", false)] {
        let Some(value) = std::env::var_os(var) else { continue };
        let value = value.to_string_lossy();
        if value.is_empty() {
            continue;
        }
        // The runtime reads the value as written: no spaces around it.
        if value.trim() != value {
            return Err(Error::Usage(format!("${var}: `{value}` has spaces around the size")));
        }
        match parse_memory_size(&value) {
            Ok(0) if positive => return Err(Error::Usage(format!("${var}: the memory limit must be positive"))),
            Ok(_) => {}
            Err(e) => return Err(Error::Usage(format!("${var}: {e}"))),
        }
    }
    Ok(())
}

// ---- the caches of a module -------------------------------------------------

/// One definition of a module and its lazily built IR and code.
pub(crate) struct Def {
    /// Its id in the program.
    pub id: FuncId,
    /// Which IR params (flattened leaves) are differentiated by default
    /// ([`crate::Options::wrt`]).
    pub default_active: Arc<[bool]>,
    /// How its arguments are checked ([`crate::shapes::ArgPlan`]).
    pub plan: crate::shapes::ArgPlan,
    /// The names of its argument leaves ([`crate::Function::arg_names`]).
    pub arg_names: Arc<[String]>,
    /// Its primals ([`Primals`]: the code, large callees kept as calls,
    /// and every call inlined), shared by every active set.
    pub primals: OnceLock<Result<Primals, Error>>,
    /// The primal's code.
    pub primal_code: OnceLock<Result<Engine, Error>>,
    /// Its jvp and vjp in every f64 param, for the derivatives of callers
    /// that keep its calls ([`kept_derivatives`]).
    pub kept_ir: OnceLock<Result<(Function, Function), Error>>,
    /// The jvp of that vjp, for the Hessian-vector products of those
    /// callers ([`KeptKind::VjpJvp`]).
    pub kept_vjp_jvp: OnceLock<Result<Function, Error>>,
    /// Their code (jvp, vjp, jvp of the vjp).
    pub kept_code: [OnceLock<Result<Engine, Error>>; 3],
    /// The derivatives for the default active set.
    pub default: Derived,
    /// The derivatives for other active sets ([`crate::Function::with_wrt`]).
    pub others: Mutex<HashMap<Arc<[bool]>, Arc<Derived>>>,
}

/// The derivatives of a definition for one set of active parameters, each
/// derived and compiled on first use.
#[derive(Default)]
pub(crate) struct Derived {
    /// The jvp, vjp, many-row vjp and vector jvp IR, indexed by [`Which`]; those asked
    /// for together ([`Inner::derive_together`]) come from one
    /// linearisation.
    pub ir: [OnceLock<Result<Function, Error>>; 4],
    /// The Hessian-vector product IR, from the vjp.
    pub hvp: OnceLock<Result<Function, Error>>,
    /// The code of each [`Kind`] (the primal's slot unused: see
    /// [`Def::primal_code`]).
    pub code: [OnceLock<Result<Engine, Error>>; 6],
}

impl Def {
    /// A definition of `program` with `default_active` differentiated.
    pub(crate) fn new(program: &Program, id: FuncId, default_active: Vec<bool>) -> Def {
        let sig = &program.func(id).signature;
        Def {
            id,
            plan: crate::shapes::ArgPlan::new(sig),
            arg_names: crate::shapes::param_leaves(sig).into_iter().map(|l| l.name).collect(),
            default_active: default_active.into(),
            primals: OnceLock::new(),
            primal_code: OnceLock::new(),
            kept_ir: OnceLock::new(),
            kept_vjp_jvp: OnceLock::new(),
            kept_code: [OnceLock::new(), OnceLock::new(), OnceLock::new()],
            default: Derived::default(),
            others: Mutex::new(HashMap::new()),
        }
    }

    /// The derivatives of the active set `active`.
    fn derived(&self, active: &Arc<[bool]>) -> DerivedRef<'_> {
        if Arc::ptr_eq(active, &self.default_active) || **active == *self.default_active {
            return DerivedRef::Default(&self.default);
        }
        // A poisoned lock only means another thread panicked while
        // inserting; the map is still consistent.
        let mut others = self.others.lock().unwrap_or_else(|p| p.into_inner());
        DerivedRef::Other(others.entry(active.clone()).or_default().clone())
    }
}

/// A kept call's callee in a module: the index of its definition and
/// what it computes of it ([`KeptKind::callee`]).
type KeptNode = (usize, KeptKind);

impl Inner {
    fn ad_options(&self) -> AdOptions {
        AdOptions { checkpoint: self.options.checkpoint }
    }

    /// The definitions kept as calls ([`kept_calls`] of every definition
    /// of the program), decided on first use.
    fn kept_calls(&self) -> &KeptCalls {
        self.kept.get_or_init(|| {
            // The interpreter runs one function at a time: it inlines.
            if self.options.backend == crate::Backend::Interp {
                return KeptCalls::none();
            }
            let keep_above = self.options.keep_calls_above.unwrap_or(passes::inline::KEEP_CALLS_ABOVE);
            let all: Vec<FuncId> = self.defs.iter().map(|d| d.id).collect();
            kept_calls(&self.program, &all, keep_above)
        })
    }

    /// The primals of definition `index` ([`Primals`]), prepared on first
    /// use.
    fn primals(&self, index: usize) -> Result<&Primals, Error> {
        let def = &self.defs[index];
        let primals = def.primals.get_or_init(|| Primals::new(&self.program, def.id, self.kept_calls()));
        primals.as_ref().map_err(Error::clone)
    }

    /// The primal of definition `index` prepared for its own code
    /// ([`prepare_code`]).
    pub(crate) fn prepared_code(&self, index: usize) -> Result<&Function, Error> {
        self.primals(index).map(Primals::code)
    }

    /// The definition and kind a kept call's callee id names
    /// ([`KeptKind::callee`]), if it names one of this module's.
    fn kept_node(&self, id: FuncId) -> Option<KeptNode> {
        let (def, kind) = KeptKind::of_callee(self.defs.len(), id)?;
        Some((def.0 as usize, kind))
    }

    /// The IR of a kept call's callee: the definition's primal prepared
    /// for code, its jvp or vjp in every f64 param, or the jvp of that vjp.
    fn kept_ir(&self, (index, kind): KeptNode) -> Result<&Function, Error> {
        let def = &self.defs[index];
        let both = || {
            let kept = self.kept_calls();
            let both = def.kept_ir.get_or_init(|| kept_derivatives(&self.program, def.id, kept, self.ad_options()));
            both.as_ref().map_err(Error::clone)
        };
        match kind {
            KeptKind::Primal => self.prepared_code(index),
            KeptKind::Jvp => Ok(&both()?.0),
            KeptKind::Vjp => Ok(&both()?.1),
            KeptKind::VjpJvp => {
                let vjp = &both()?.1;
                let f = def.kept_vjp_jvp.get_or_init(|| vjp_jvp(&self.program, vjp));
                f.as_ref().map_err(Error::clone)
            }
        }
    }

    /// Where the code of a kept call's callee lives.
    fn kept_slot(&self, (index, kind): KeptNode) -> &OnceLock<Result<Engine, Error>> {
        let def = &self.defs[index];
        match kind {
            KeptKind::Primal => &def.primal_code,
            KeptKind::Jvp => &def.kept_code[0],
            KeptKind::Vjp => &def.kept_code[1],
            KeptKind::VjpJvp => &def.kept_code[2],
        }
    }

    /// The targets of the calls `f` makes, the code of each callee (and
    /// of theirs) built first, once: an iterative post-order, since call
    /// chains may be long.
    fn callees(&self, f: &Function) -> Result<arrayad_codegen::Callees, Error> {
        let node =
            |id: FuncId| self.kept_node(id).ok_or_else(|| Error::Internal(format!("a call of function {}", id.0)));
        // The function itself is the root, without code of its own here.
        let mut stack: Vec<(Option<KeptNode>, Vec<FuncId>)> = vec![(None, called_by(f))];
        while let Some((n, calls)) = stack.last_mut() {
            if let Some(c) = calls.pop() {
                let cn = node(c)?;
                if self.kept_slot(cn).get().is_none() {
                    stack.push((Some(cn), called_by(self.kept_ir(cn)?)));
                }
                continue;
            }
            let n = *n;
            stack.pop();
            let Some(n) = n else { continue };
            let e = self.kept_slot(n).get_or_init(|| {
                let ir = self.kept_ir(n)?;
                let callees = self.addresses(ir)?;
                compiling(|| Engine::build(&self.program, self.defs[n.0].id, Some(ir), &self.options, &callees))
            });
            e.as_ref().map_err(Error::clone)?;
        }
        self.addresses(f)
    }

    /// The addresses of the code of the callees of `f`, built before.
    fn addresses(&self, f: &Function) -> Result<arrayad_codegen::Callees, Error> {
        let mut callees = arrayad_codegen::Callees::none();
        let called = self.called.get_or_init(|| arrayad_codegen::CalledProgram::new(self.program.clone()));
        callees.set_program(called.clone());
        for c in called_by(f) {
            let engine = self.kept_node(c).and_then(|n| self.kept_slot(n).get());
            let address = match engine {
                Some(Ok(e)) => e.entry_address(),
                Some(Err(e)) => return Err(e.clone()),
                None => None,
            };
            let address = address.ok_or_else(|| Error::Internal(format!("callee {} was not compiled first", c.0)))?;
            callees.insert(c, arrayad_codegen::CallTarget::Address(address));
        }
        Ok(callees)
    }

    /// The code of the primal of definition `index` ([`prepare_code`]),
    /// its callees' built first.
    fn primal_engine(&self, index: usize) -> Result<&Engine, Error> {
        let slot = &self.defs[index].primal_code;
        if let Some(e) = slot.get() {
            return e.as_ref().map_err(Error::clone);
        }
        let f = self.prepared_code(index)?;
        let callees = self.callees(f)?;
        let e = slot.get_or_init(|| {
            compiling(|| Engine::build(&self.program, self.defs[index].id, Some(f), &self.options, &callees))
        });
        e.as_ref().map_err(Error::clone)
    }

    /// True when `jvp_many` and the forward Jacobian of definition `index`
    /// in the IR params marked in `active` run its vector forward mode
    /// ([`Kind::JvpLanes`]; [`Primals::uses_lanes`]).
    pub(crate) fn has_lanes(&self, index: usize, active: &[bool]) -> Result<bool, Error> {
        self.primals(index).map(|p| p.uses_lanes(active))
    }

    /// Derives the derivatives `wanted` of definition `index` for `active`
    /// that are not derived yet, together (one linearisation).
    pub(crate) fn derive_together(&self, index: usize, active: &Arc<[bool]>, wanted: &[Which]) -> Result<(), Error> {
        let derived = self.defs[index].derived(active);
        let d = derived.get();
        let missing: Vec<Which> = wanted.iter().copied().filter(|w| d.ir[*w as usize].get().is_none()).collect();
        if missing.is_empty() {
            return Ok(());
        }
        let mut all = self.primals(index)?.derive(&self.program, active, self.ad_options(), &missing)?;
        for w in missing {
            if let Some(f) = all.take(w) {
                // Another thread may have derived it meanwhile: the same IR.
                let _ = d.ir[w as usize].set(Ok(f));
            }
        }
        Ok(())
    }

    /// The IR of `kind` of definition `index` for `active` (`None`: the
    /// primal on the interpreter, which runs the program as written).
    fn ir(&self, index: usize, active: &Arc<[bool]>, kind: Kind, derived: &Derived) -> Result<Option<Function>, Error> {
        let which = match kind {
            Kind::Primal if self.options.backend == crate::Backend::Interp => return Ok(None),
            Kind::Primal => return self.prepared_code(index).map(|p| Some(p.clone())),
            Kind::Jvp => Which::Jvp,
            Kind::Vjp | Kind::Hvp => Which::Vjp,
            Kind::VjpRows => Which::VjpRows,
            Kind::JvpLanes => Which::JvpLanes,
        };
        let one = derived.ir[which as usize]
            .get_or_init(|| self.primals(index)?.derive_one(&self.program, active, self.ad_options(), which));
        let f = one.as_ref().map_err(Error::clone)?;
        if kind != Kind::Hvp {
            return Ok(Some(f.clone()));
        }
        let h = derived.hvp.get_or_init(|| {
            let primals = self.primals(index)?;
            if called_by(f).is_empty() || primals.keeps_calls(Which::Hvp) {
                return hvp(&self.program, primals.code(), f, active);
            }
            // Forward over a vjp of reverse-mode code that keeps calls:
            // from the primal with every call inlined.
            primals.derive_one(&self.program, active, self.ad_options(), Which::Hvp)
        });
        h.as_ref().map(|f| Some(f.clone())).map_err(Error::clone)
    }

    /// The code of `kind` of definition `index` for `active`, built on
    /// first use.
    pub(crate) fn engine(&self, index: usize, active: &Arc<[bool]>, kind: Kind) -> Result<EngineRef<'_>, Error> {
        let def = &self.defs[index];
        let build = |derived: &Derived| -> Result<Engine, Error> {
            compiling(|| {
                let ir = self.ir(index, active, kind, derived)?;
                let callees = match &ir {
                    Some(f) => self.callees(f)?,
                    None => arrayad_codegen::Callees::none(),
                };
                Engine::build(&self.program, def.id, ir.as_ref(), &self.options, &callees)
            })
        };
        if kind == Kind::Primal && self.options.backend == crate::Backend::Interp {
            let e = def.primal_code.get_or_init(|| build(&Derived::default()));
            return e.as_ref().map(EngineRef::Borrowed).map_err(Error::clone);
        }
        if kind == Kind::Primal {
            return self.primal_engine(index).map(EngineRef::Borrowed);
        }
        match def.derived(active) {
            DerivedRef::Default(d) => {
                let e = d.code[kind as usize].get_or_init(|| build(d));
                e.as_ref().map(EngineRef::Borrowed).map_err(Error::clone)
            }
            DerivedRef::Other(d) => {
                d.code[kind as usize].get_or_init(|| build(&d)).as_ref().map_err(Error::clone)?;
                Ok(EngineRef::Shared(d, kind))
            }
        }
    }

    /// The backend IR of the code of `kind` of definition `index` for
    /// `active`: that code compiled again, its text kept (the compiled code
    /// of [`Self::engine`] keeps none); `None` on the interpreter.
    pub(crate) fn backend_ir(&self, index: usize, active: &Arc<[bool]>, kind: Kind) -> Result<Option<String>, Error> {
        let Some(cg) = self.options.backend.codegen() else { return Ok(None) };
        compiling(|| {
            let derived = self.defs[index].derived(active);
            let Some(f) = self.ir(index, active, kind, derived.get())? else { return Ok(None) };
            let callees = self.callees(&f)?;
            let file = &self.program.file;
            let funcs = std::slice::from_ref(&f);
            let m = arrayad_codegen::JitModule::compile_keeping_ir(cg, &self.options.target, file, funcs, &callees)?;
            Ok(m.backend_ir(&f.name))
        })
    }

    /// The checkpointing warnings of definition `index` for `active` (none
    /// when the module does not checkpoint).
    pub(crate) fn checkpoint_warnings(&self, index: usize, active: &[bool]) -> Result<Vec<Warning>, Error> {
        if !self.options.checkpoint {
            return Ok(Vec::new());
        }
        checkpoint_warnings(&self.program, self.prepared_code(index)?, active)
    }
}

/// The derivatives of one active set: the default ones in the definition,
/// or shared ones kept by the module for other sets.
enum DerivedRef<'a> {
    Default(&'a Derived),
    Other(Arc<Derived>),
}

impl DerivedRef<'_> {
    fn get(&self) -> &Derived {
        match self {
            DerivedRef::Default(d) => d,
            DerivedRef::Other(d) => d,
        }
    }
}

/// Compiled code, borrowed from the definition or from a shared set.
pub(crate) enum EngineRef<'a> {
    Borrowed(&'a Engine),
    Shared(Arc<Derived>, Kind),
}

impl EngineRef<'_> {
    pub(crate) fn get(&self) -> &Engine {
        match self {
            EngineRef::Borrowed(e) => e,
            EngineRef::Shared(d, k) => match d.code[*k as usize].get() {
                Some(Ok(e)) => e,
                // `Inner::engine` built it before making this reference.
                _ => unreachable!("an engine reference to code that was not built"),
            },
        }
    }
}

// ---- where the work runs ----------------------------------------------------

/// The stack of the thread that compiles: differentiation and code
/// generation recurse over the nesting of blocks, which inlining bounds
/// (`arrayad_ir::passes::inline::MAX_INLINED_DEPTH`) but which may exceed
/// what the caller's thread has (2 MiB for a spawned Rust thread).
const COMPILE_STACK: usize = arrayad_ir::stack::COMPILER_STACK;

/// Runs `f` (differentiation and compilation) on a thread with a large
/// stack (`COMPILE_STACK`, `arrayad_ir::stack::on_big_stack`), or here if
/// no thread can be made, turning a panic into [`Error::Internal`]. A step
/// already on such a thread (`Inner::engine` preparing and deriving before
/// it compiles) runs where it is.
pub fn compiling<T: Send>(f: impl FnOnce() -> Result<T, Error> + Send) -> Result<T, Error> {
    if ON_COMPILE_STACK.with(std::cell::Cell::get) {
        return guard(f);
    }
    arrayad_ir::stack::on_big_stack("arrayad-compile", COMPILE_STACK, move || on_compile_stack(f))
        .unwrap_or_else(|p| Err(internal_panic(p)))
}

thread_local! {
    /// Whether this thread has a stack of [`COMPILE_STACK`] bytes, on which
    /// [`compiling`] runs its work where it is.
    static ON_COMPILE_STACK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with this thread marked as one with a stack of
/// [`COMPILE_STACK`] bytes (`ON_COMPILE_STACK`): [`compiling`]'s thread,
/// or a helper thread of `arrayad_ir::stack::for_each_parallel` given that
/// stack.
fn on_compile_stack<T>(f: impl FnOnce() -> T) -> T {
    arrayad_ir::stack::with_thread_flag(&ON_COMPILE_STACK, f)
}

/// Runs `f`, turning a panic (a bug in arrayad) into [`Error::Internal`].
pub(crate) fn guard<T>(f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(internal_panic(p)))
}

/// A caught panic as an [`Error::Internal`].
fn internal_panic(payload: arrayad_ir::stack::Panic) -> Error {
    Error::Internal(format!("panic: {}", arrayad_ir::stack::panic_message(&*payload)))
}
