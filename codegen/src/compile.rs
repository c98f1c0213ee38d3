//! Compiling IR functions into a Cranelift module (JIT or object file).

use crate::error::CodegenError;
use crate::lower::{self, imports::Imports};
use cranelift_codegen::ir::{self as clif, UserFuncName};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_module::{FuncId, Linkage, Module};

/// The host ISA (`opt_level=none`, see below); `pic` for shared-library objects.
pub(crate) fn host_isa(pic: bool) -> Result<OwnedTargetIsa, CodegenError> {
    let mut fb = settings::builder();
    let set = |fb: &mut settings::Builder, k: &str, v: &str| {
        fb.set(k, v).map_err(|e| CodegenError::Target(format!("setting {k}={v}: {e}")))
    };
    // Measured on the ADBench GMM (d=20, K=50): Cranelift's e-graph
    // optimiser (`speed`) sinks address arithmetic of loop-invariant views
    // into inner loops, which made the primal 19% and the gradient 33% slower
    // than `none`. The IR reaching codegen is already simplified, CSE'd and
    // fused, so `none` loses nothing measurable.
    set(&mut fb, "opt_level", "none")?;
    set(&mut fb, "is_pic", if pic { "true" } else { "false" })?;
    set(&mut fb, "use_colocated_libcalls", "false")?;
    set(&mut fb, "enable_verifier", if cfg!(debug_assertions) { "true" } else { "false" })?;
    let isa_builder = cranelift_native::builder().map_err(|e| CodegenError::Target(e.to_string()))?;
    let isa = isa_builder.finish(settings::Flags::new(fb)).map_err(|e| CodegenError::Target(e.to_string()))?;
    if isa.pointer_bits() != 64 {
        return Err(CodegenError::Target("only 64-bit targets are supported".into()));
    }
    Ok(isa)
}

/// One compiled function: its id in the module and its Cranelift IR as
/// generated (before optimisation).
pub(crate) struct Defined {
    pub id: FuncId,
    pub clif: clif::Function,
}

/// Declares and defines `funcs` (symbol name, linkage, IR) in `m`.
pub(crate) fn define_functions<M: Module>(
    m: &mut M,
    file: &str,
    funcs: &[(String, Linkage, &arrayad_ir::Function)],
) -> Result<Vec<Defined>, CodegenError> {
    let sig = lower::internal_signature(m);
    let mut ids = Vec::new();
    for (sym, linkage, f) in funcs {
        if m.get_name(sym).is_some() {
            return Err(CodegenError::Malformed { func: f.name.clone(), message: format!("duplicate symbol `{sym}`") });
        }
        ids.push(m.declare_function(sym, *linkage, &sig)?);
    }
    let mut imports = Imports::default();
    let mut fbc = FunctionBuilderContext::new();
    let mut ctx = m.make_context();
    let mut out = Vec::new();
    for ((_, _, f), id) in funcs.iter().zip(ids) {
        m.clear_context(&mut ctx);
        ctx.func.signature = sig.clone();
        ctx.func.name = UserFuncName::user(0, id.as_u32());
        lower::lower_function(m, &mut imports, file, f, &mut ctx.func, &mut fbc)?;
        let clif = ctx.func.clone();
        m.define_function(id, &mut ctx).map_err(|e| match e {
            cranelift_module::ModuleError::Compilation(err) => CodegenError::Cranelift(format!(
                "compiling `{}`: {}",
                f.name,
                cranelift_codegen::print_errors::pretty_error(&ctx.func, err)
            )),
            e => CodegenError::Cranelift(format!("compiling `{}`: {e:?}", f.name)),
        })?;
        out.push(Defined { id, clif });
    }
    Ok(out)
}
