//! Derivative operators inside programs (LANGUAGE.md section 10):
//! `jvp(f, ARGS, TANGENTS)`, `vjp(f, ARGS, COTANGENT)` and `grad(f, ARGS)`.
//!
//! The frontend lowers each use to a call of a *derivative stub*: a
//! function of the program named `OP'f` (a name no definition can have)
//! with the operator's flattened signature and an empty body, one per
//! operator and definition. `arrayad_ad::expand_derivatives` replaces each
//! stub's body by the derivative of `f`, callees first, before anything
//! else reads the program: from then on a stub is an ordinary function
//! (inlined, interpreted and compiled like any other), and nesting is
//! derivatives of functions that contain derivative code.
//!
//! Stub signatures (IR leaves, left to right):
//! - `jvp'f`: f's params ++ one tangent per param leaf (the i64 and bool
//!   ones are ignored) -> f's results ++ one tangent per result leaf (i64
//!   and bool ones are 0 and false);
//! - `vjp'f`: f's params ++ one cotangent per result leaf -> f's results ++
//!   one cotangent per param leaf;
//! - `grad'f` (f's result is one f64): f's params -> one cotangent per
//!   param leaf.

use std::fmt;

/// A derivative operator of the language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiffOp {
    /// Forward mode: value and tangent.
    Jvp,
    /// Reverse mode: value and cotangents.
    Vjp,
    /// Reverse mode of an f64 result with cotangent 1: the gradient.
    Grad,
}

impl DiffOp {
    /// Every operator.
    pub const ALL: [DiffOp; 3] = [DiffOp::Jvp, DiffOp::Vjp, DiffOp::Grad];

    /// The operator's name in the language.
    pub fn keyword(self) -> &'static str {
        match self {
            DiffOp::Jvp => "jvp",
            DiffOp::Vjp => "vjp",
            DiffOp::Grad => "grad",
        }
    }

    /// The operator of this name.
    pub fn from_keyword(name: &str) -> Option<DiffOp> {
        DiffOp::ALL.into_iter().find(|op| op.keyword() == name)
    }

    /// The name of the stub of this operator applied to definition `f`.
    pub fn stub_name(self, f: &str) -> String {
        format!("{}'{f}", self.keyword())
    }

    /// The operator and definition of a stub name (`None` for the name of
    /// an ordinary function).
    pub fn parse_stub(name: &str) -> Option<(DiffOp, &str)> {
        let (op, f) = name.split_once('\'')?;
        Some((DiffOp::from_keyword(op)?, f))
    }
}

/// What a call kept by inlining (`passes::inline::KeptCalls`) computes of
/// its definition: code that keeps calls is compiled against one function
/// of each kind per definition, each compiled once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeptKind {
    /// The definition itself.
    Primal,
    /// Its jvp in every f64 param: params = its params ++ one tangent per
    /// f64 param; results = its results ++ one tangent per f64 result.
    Jvp,
    /// Its vjp in every f64 param: params = its params ++ one cotangent per
    /// f64 result; results = its results ++ one cotangent per f64 param.
    Vjp,
    /// The jvp of its vjp in every f64 param of the vjp, which
    /// Hessian-vector products (forward over reverse) of its callers call:
    /// params = the vjp's params ++ one tangent per f64 param of the vjp
    /// (the definition's f64 params, then the cotangents); results = the
    /// vjp's results ++ one tangent per f64 result of the vjp (the
    /// definition's f64 results, then the cotangents).
    VjpJvp,
}

impl KeptKind {
    /// Every kind.
    pub const ALL: [KeptKind; 4] = [KeptKind::Primal, KeptKind::Jvp, KeptKind::Vjp, KeptKind::VjpJvp];

    /// The id that calls of this kind of definition `def` use in derived
    /// code, in a program of `n` functions: `def` itself for the primal,
    /// `n + def` for the jvp, `2n + def` for the vjp (ids beyond the
    /// program, which only compiled code calls), `3n + def` for the jvp of
    /// the vjp.
    pub fn callee(self, n: usize, def: crate::FuncId) -> crate::FuncId {
        crate::FuncId((self as usize * n + def.0 as usize) as u32)
    }

    /// The definition and kind of a callee id ([`Self::callee`]); `None`
    /// beyond the four ranges.
    pub fn of_callee(n: usize, id: crate::FuncId) -> Option<(crate::FuncId, KeptKind)> {
        let i = id.0 as usize;
        let kind = *KeptKind::ALL.get(i.checked_div(n)?)?;
        Some((crate::FuncId((i % n) as u32), kind))
    }

    /// The kind whose calls bind the tangents of a call of this kind in
    /// forward mode (`KeptKind::Jvp` of a primal call, `KeptKind::VjpJvp`
    /// of a vjp call); `None` for the derivatives that forward mode does
    /// not differentiate again.
    pub fn jvp(self) -> Option<KeptKind> {
        match self {
            KeptKind::Primal => Some(KeptKind::Jvp),
            KeptKind::Vjp => Some(KeptKind::VjpJvp),
            KeptKind::Jvp | KeptKind::VjpJvp => None,
        }
    }
}

impl fmt::Display for DiffOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.keyword())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stub_names_round_trip() {
        for op in DiffOp::ALL {
            assert_eq!(DiffOp::parse_stub(&op.stub_name("f_1")), Some((op, "f_1")));
        }
        assert_eq!(DiffOp::parse_stub("grad_f"), None);
        assert_eq!(DiffOp::parse_stub("hess'f"), None);
    }
}
