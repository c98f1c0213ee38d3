//! Reverse mode by the monadic Delta translation, at run time (Krawiec et
//! al. 2022, Figures 9-11 and 15): every `f64` is paired with a Delta, each
//! primitive binds its Delta with `deltaLet`, and `eval` runs the bindings
//! from last to first.

use super::delta::{eval, eval_binds, run_delta, Delta, DeltaId, DeltaMap, DeltaState};
use super::evaluator::{Evaluator, Mode};
use super::shapes::{check_like, f64_value_like};
use super::values::DVal;
use arrayad_ir::interp::{checks, stack};
use arrayad_ir::{ErrorKind, FuncId, Program, RuntimeError, Value};

/// Deltas in the state monad `M` (Fig. 10): values carry `Zero` or `Var id`
/// only, and every primitive's Delta is bound by `deltaLet`.
pub(crate) struct Reverse<'s> {
    state: &'s mut DeltaState,
}

impl Mode for Reverse<'_> {
    type D = Delta;

    /// `D{r} = pure (r, Zero)` (Fig. 9).
    fn zero(&self) -> Delta {
        Delta::Zero
    }

    fn is_zero(&self, d: &Delta) -> bool {
        matches!(d, Delta::Zero)
    }

    /// `do {u <- deltaLet (Add (Scale c1 u1) (Scale c2 u2)); pure (Var u)}`,
    /// the translation of the primitives (Fig. 9 for `+R` and `xR`), with
    /// `Scale 1 u` written `u` and `Add^n` for n > 2 operands.
    fn linear(&mut self, terms: Vec<(f64, Delta)>) -> Delta {
        let mut parts: Vec<Delta> =
            terms.into_iter().map(|(c, u)| if c == 1.0 { u } else { Delta::Scale(c, Box::new(u)) }).collect();
        let sum = match parts.len() {
            1 => parts.remove(0),
            2 => {
                let u2 = parts.remove(1);
                let u1 = parts.remove(0);
                Delta::Add(Box::new(u1), Box::new(u2))
            }
            _ => Delta::AddN(parts),
        };
        Delta::Var(self.state.delta_let(sum))
    }
}

/// Reverse mode, the runtime monadic Delta translation of Krawiec et al.
/// (POPL 2022), Figures 9-11 (with the wrapper of Figure 15 for structured
/// inputs and outputs): evaluates function `func` of `program` (the original
/// IR, with its calls) on `args` where every `f64` scalar is paired with a
/// Delta, one `deltaLet`-bound Delta node per primitive in a Delta store;
/// then `eval` walks the bindings from last to first, accumulating
/// cotangents in a mutable array indexed by id.
///
/// `active[i]` says whether IR parameter `i` is differentiated (its `f64`
/// elements are the input slots `Var 0 .. Var a-1`, Fig. 11); `cotangents[j]`
/// is the cotangent of result `j` (`Some` for `f64` results, of the result's
/// shape; `None` counts as zero). Returns the results and, per parameter,
/// `Some` cotangent for active `f64` parameters, `None` otherwise.
///
/// Only the pure forms of the IR are supported; the imperative forms give an
/// [`ErrorKind::InvalidArgument`] error, as do arguments, `active` flags or
/// cotangents that do not match. Run-time errors are the interpreter's.
pub fn vjp(
    program: &Program,
    func: FuncId,
    args: &[Value],
    active: &[bool],
    cotangents: &[Option<Value>],
) -> Result<(Vec<Value>, Vec<Option<Value>>), RuntimeError> {
    checks::check_calls(program, func)?;
    checks::check_args(program, func, args)?;
    let invalid = |what: String| RuntimeError::new(ErrorKind::InvalidArgument, what);
    if active.len() != args.len() {
        return Err(invalid(format!("{} activity flags for {} arguments", active.len(), args.len())));
    }
    let n_results = program.func(func).result_types.len();
    if cotangents.len() != n_results {
        return Err(invalid(format!("{} cotangents for {} results", cotangents.len(), n_results)));
    }
    stack::with_deep_stack(|| {
        // Fig. 11: s0 pairs each input real of an active parameter with its
        // own input slot `Var i`; the rest are constants (`Zero`).
        let mut next = 0usize;
        let mut slots = Vec::with_capacity(args.len());
        let mut duals = Vec::with_capacity(args.len());
        for (a, &act) in args.iter().zip(active) {
            let differentiated = act && a.f64_elements().is_some();
            let start = next;
            duals.push(DVal::from_value(a, |_| {
                if differentiated {
                    next += 1;
                    Delta::Var(DeltaId(next - 1))
                } else {
                    Delta::Zero
                }
            }));
            slots.push(differentiated.then_some(start..next));
        }
        // runDelta (a + 1) (D{e} s0): the supply starts after the inputs.
        let loc = program.func(func).loc;
        let (out, state) =
            run_delta(DeltaId(next), |st| Evaluator::new(program, Reverse { state: st }).call(func, duals, loc));
        let out = out?;
        let values: Vec<Value> = out.iter().map(DVal::primal).collect();
        // finalMap = eval dt u emptyMap: first the result's Delta ...
        let mut um = DeltaMap::new(state.next_id());
        for (j, (o, ct)) in out.iter().zip(cotangents).enumerate() {
            let Some(ct) = ct else { continue };
            check_like(ct, &values[j], &format!("cotangent {j}"))?;
            let (Some(cts), Some(ds)) = (ct.f64_elements(), o.derivs()) else { continue };
            for (c, d) in cts.iter().zip(&ds) {
                eval(*c, d, &mut um);
            }
        }
        // ... then the Let nest of the bindings, from last to first.
        eval_binds(&state, &mut um);
        // lookupOrZero i finalMap for each input slot.
        let grads = args
            .iter()
            .zip(slots)
            .map(|(a, slot)| {
                let ids = slot?;
                f64_value_like(a, ids.map(|id| um.lookup_or_zero(DeltaId(id))).collect())
            })
            .collect();
        Ok((values, grads))
    })
}
