//! The pipeline's IR of one definition, for tests that look at the IR or
//! run it on the interpreter: `arrayad::driver`'s steps (size check and
//! prepared primal, derivatives from one linearisation) without a module's
//! caches.

#![allow(dead_code)]

use arrayad::driver;
use arrayad_ad::{AdOptions, Which};
use arrayad_ir::{FuncId, Function, Program};

/// A definition's prepared primal and its derivatives.
pub struct Ir {
    pub primal: Function,
    pub jvp: Function,
    pub vjp: Function,
    pub vjp_rows: Function,
}

/// The prepared primal of `id` (its size checked first).
pub fn prepare(program: &Program, id: FuncId) -> Result<Function, String> {
    driver::prepare(program, id).map_err(|e| e.to_string())
}

/// The derivatives `wanted` of `id` with `active` differentiated.
fn derive(
    program: &Program,
    id: FuncId,
    active: &[bool],
    opts: AdOptions,
    wanted: &[Which],
) -> Result<(Function, arrayad_ad::Derivatives), String> {
    let primal = prepare(program, id)?;
    let d = driver::derive(program, id, &primal, active, opts, wanted).map_err(|e| e.to_string())?;
    Ok((primal, d))
}

/// Every IR function of `id` with `active` differentiated.
pub fn derive_with(program: &Program, id: FuncId, active: &[bool], opts: AdOptions) -> Result<Ir, String> {
    let (primal, mut d) = derive(program, id, active, opts, &[Which::Jvp, Which::Vjp, Which::VjpRows])?;
    let mut take = |w| d.take(w).ok_or_else(|| format!("{w:?} not derived"));
    Ok(Ir { jvp: take(Which::Jvp)?, vjp: take(Which::Vjp)?, vjp_rows: take(Which::VjpRows)?, primal })
}

/// [`derive_with`] with the default options.
pub fn derive_all(program: &Program, id: FuncId, active: &[bool]) -> Result<Ir, String> {
    derive_with(program, id, active, AdOptions::default())
}

/// One derivative of `id`, derived alone.
pub fn one(program: &Program, id: FuncId, active: &[bool], which: Which) -> Result<Function, String> {
    let (_, mut d) = derive(program, id, active, AdOptions::default(), &[which])?;
    d.take(which).ok_or_else(|| format!("{which:?} not derived"))
}

/// Forward mode of `id`.
pub fn jvp(program: &Program, id: FuncId, active: &[bool]) -> Result<Function, String> {
    one(program, id, active, Which::Jvp)
}

/// Reverse mode of `id`.
pub fn vjp(program: &Program, id: FuncId, active: &[bool]) -> Result<Function, String> {
    one(program, id, active, Which::Vjp)
}

/// The many-row vjp of `id`.
pub fn vjp_rows(program: &Program, id: FuncId, active: &[bool]) -> Result<Function, String> {
    one(program, id, active, Which::VjpRows)
}
