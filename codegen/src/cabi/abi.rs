//! The C interface of exported definitions (LANGUAGE.md section 8): the
//! flattened leaves, their C names and types, and checks that the IR
//! functions of an export match its signature. Shared by the header and the
//! wrapper generators.

use crate::error::CodegenError;
use crate::ExportedFunction;
use arrayad_ir::{Scalar, SizeExpr, SizeOp, SrcDim, SrcType, Type};
use std::collections::HashSet;

/// An extent of a leaf: a literal or the index of a size variable.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum DimRef {
    Lit(i64),
    Size(usize),
}

/// One flattened parameter or result.
#[derive(Clone, Debug)]
pub(crate) struct Leaf {
    /// Its C name.
    pub name: String,
    /// Element type.
    pub elem: Scalar,
    /// Extents (empty for a scalar).
    pub dims: Vec<DimRef>,
    /// The source-level type text of the leaf (`[n][m]f64`).
    pub src: String,
}

impl Leaf {
    pub fn ty(&self) -> Type {
        Type::array(self.elem, self.dims.len() as u8)
    }
    pub fn is_f64(&self) -> bool {
        self.elem == Scalar::F64
    }
    pub fn is_array(&self) -> bool {
        !self.dims.is_empty()
    }
    /// The same shape with a different name and `f64` elements.
    pub fn derived(&self, name: String) -> Leaf {
        Leaf { name, elem: Scalar::F64, dims: self.dims.clone(), src: self.src.clone() }
    }
    /// A stack of rows of this leaf: one more leading axis, of extent size
    /// variable `rows` (the `R` of `vjp_rows`).
    pub fn stacked(&self, rows: usize) -> Leaf {
        let mut dims = vec![DimRef::Size(rows)];
        dims.extend(self.dims.iter().cloned());
        Leaf { name: self.name.clone(), elem: self.elem, dims, src: format!("[R]{}", self.src) }
    }
}

/// The C interface of one exported definition.
#[derive(Clone, Debug)]
pub(crate) struct Interface {
    /// The definition's name (the C name of the primal).
    pub name: String,
    /// The source signature text, for documentation.
    pub signature_text: String,
    /// C names of the size parameters.
    pub sizes: Vec<String>,
    /// The size expressions of the signature (`[n * m]`, LANGUAGE.md
    /// section 11), computed by the wrappers from the size parameters:
    /// [`DimRef::Size`] `sizes.len() + k` is expression `k`.
    pub derived: Vec<DerivedSize>,
    /// Parameter leaves.
    pub params: Vec<Leaf>,
    /// Result leaves (`out0`, ...).
    pub results: Vec<Leaf>,
    /// Indices into `params` of the active `f64` leaves.
    pub active: Vec<usize>,
    /// Indices into `results` of the `f64` leaves.
    pub f64_results: Vec<usize>,
    /// Tangent inputs (one per active leaf: `t_NAME`).
    pub tangents_in: Vec<Leaf>,
    /// Tangent outputs (one per f64 result: `t_outK`).
    pub tangents_out: Vec<Leaf>,
    /// Cotangent inputs (one per f64 result: `ct_outK`).
    pub cotangents_in: Vec<Leaf>,
    /// Cotangent outputs (one per active leaf: `d_NAME`).
    pub cotangents_out: Vec<Leaf>,
    /// Hessian-vector product outputs of `f_hvp` (one per active leaf:
    /// `h_NAME`).
    pub hvps_out: Vec<Leaf>,
    /// Whether `f_grad` exists (the result is one `f64`).
    pub has_grad: bool,
    /// Whether `f_hvp` exists (the result is one `f64` and the export has
    /// an hvp function).
    pub has_hvp: bool,
    /// The name of `f_grad`'s value output.
    pub value_name: String,
    /// The name of `f_jacobian`'s matrix output.
    pub jac_name: String,
    /// The name of `f_jvp_many`'s number of directions.
    pub k_name: String,
    /// The definition's location, for the messages of the C wrappers.
    pub loc: arrayad_ir::Loc,
    /// The entries asked for (`None`: all).
    pub entries: Option<Vec<Variant>>,
    /// Which derivative IR functions the export has.
    pub built: Built,
}

/// Which derivative IR functions an export has (the primal always).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Built {
    pub jvp: bool,
    pub vjp: bool,
    pub vjp_rows: bool,
    /// The number of lanes of the vector jvp (0: none).
    pub jvp_lanes: usize,
}

/// A size expression of an export's signature.
#[derive(Clone, Debug)]
pub(crate) struct DerivedSize {
    /// As written (`d * (d - 1) / 2`), for messages and documentation.
    pub text: String,
    /// The C expression computing it from the size parameters, with the
    /// wrappers' checked helpers (`INT64_MIN` on overflow or division by
    /// zero).
    pub c_expr: String,
}

impl DerivedSize {
    fn new(e: &SizeExpr, c_name: &dyn Fn(&str) -> String) -> DerivedSize {
        fn c(e: &SizeExpr, c_name: &dyn Fn(&str) -> String) -> String {
            match e {
                SizeExpr::Var(v) => c_name(v),
                SizeExpr::Lit(n) => format!("INT64_C({n})"),
                SizeExpr::Bin(op, a, b) => {
                    let f = match op {
                        SizeOp::Add => "add",
                        SizeOp::Sub => "sub",
                        SizeOp::Mul => "mul",
                        SizeOp::Div => "div",
                    };
                    format!("arrayad_w_size_{f}({}, {})", c(a, c_name), c(b, c_name))
                }
            }
        }
        DerivedSize { text: e.to_string(), c_expr: c(e, c_name) }
    }
}

/// The C functions of one export (`arrayad build --entries`): `f`,
/// `f_jvp`, `f_vjp`, `f_grad`, `f_jacobian`, `f_hvp` (LANGUAGE.md section 8).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Variant {
    /// `f`: the value (`value` on the command line).
    Primal,
    /// `f_jvp`: forward mode.
    Jvp,
    /// `f_vjp`: reverse mode.
    Vjp,
    /// `f_grad`: value and gradient (a result that is one `f64`).
    Grad,
    /// `f_jacobian`: the dense Jacobian.
    Jacobian,
    /// `f_jvp_many`: forward mode in `k` directions, the primal computed
    /// once per pass of the vector jvp.
    JvpMany,
    /// `f_hvp`: value, gradient and Hessian-vector product (a result that
    /// is one `f64`).
    Hvp,
}

/// The public name of `Variant`.
pub type Entry = Variant;

impl Variant {
    /// Every entry, in the order of the header.
    pub const ALL: [Variant; 7] =
        [Variant::Primal, Variant::Jvp, Variant::JvpMany, Variant::Vjp, Variant::Grad, Variant::Jacobian, Variant::Hvp];

    /// The name on the command line: `value`, `jvp`, `jvp_many`, `vjp`,
    /// `grad`, `jacobian`, `hvp`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Primal => "value",
            Variant::Jvp => "jvp",
            Variant::JvpMany => "jvp_many",
            Variant::Vjp => "vjp",
            Variant::Grad => "grad",
            Variant::Jacobian => "jacobian",
            Variant::Hvp => "hvp",
        }
    }

    /// The entry called `name` ([`Variant::name`]).
    pub fn from_name(name: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name() == name)
    }

    /// The C name suffix: `""`, `"_jvp"`, ...
    pub fn suffix(self) -> &'static str {
        match self {
            Variant::Primal => "",
            Variant::Jvp => "_jvp",
            Variant::JvpMany => "_jvp_many",
            Variant::Vjp => "_vjp",
            Variant::Grad => "_grad",
            Variant::Jacobian => "_jacobian",
            Variant::Hvp => "_hvp",
        }
    }
}

/// One C parameter of a public function.
pub(crate) struct CParam {
    pub ty: String,
    pub name: String,
    /// Documentation of the parameter.
    pub doc: String,
}

const C_KEYWORDS: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "_Bool",
    "_Complex",
    "_Imaginary",
    "bool",
    "true",
    "false",
    "asm",
    "catch",
    "class",
    "delete",
    "friend",
    "mutable",
    "namespace",
    "new",
    "operator",
    "private",
    "protected",
    "public",
    "template",
    "this",
    "throw",
    "try",
    "typeid",
    "typename",
    "using",
    "virtual",
    "wchar_t",
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "bitand",
    "bitor",
    "compl",
    "const_cast",
    "constexpr",
    "decltype",
    "dynamic_cast",
    "explicit",
    "export",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "or",
    "or_eq",
    "reinterpret_cast",
    "static_assert",
    "static_cast",
    "thread_local",
    "xor",
    "xor_eq",
    "char16_t",
    "char32_t",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "size_t",
    "NULL",
];

/// The names the C library, POSIX and the C compilers use as functions,
/// global variables, macros and types (glibc's standard and POSIX headers;
/// the file's comments give its format and coverage).
const C_RESERVED_NAMES: &str = include_str!("c_reserved_names.txt");

/// The section of [`C_RESERVED_NAMES`] that lists `name`: its kind
/// (`function`, `variable`, `macro`, `type`) and its description for
/// messages (`a function of the C library`).
fn c_reserved_entry(name: &str) -> Option<(&'static str, &'static str)> {
    let mut section = ("", "");
    for line in C_RESERVED_NAMES.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(head) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = head.split_once(':').map_or((head, head), |(k, d)| (k.trim(), d.trim()));
        } else if line.split_whitespace().any(|w| w == name) {
            return Some(section);
        }
    }
    None
}

/// True for the names the C language reserves for the implementation
/// (`__x`, `_X`).
fn implementation_reserved(name: &str) -> bool {
    let mut cs = name.chars();
    cs.next() == Some('_') && cs.next().is_some_and(|c| c == '_' || c.is_ascii_uppercase())
}

/// True when `name`, as any identifier of a C header (a parameter name),
/// could be replaced or misparsed after the system headers: a macro or a
/// type of the C headers, a name ending in `_t`, or one reserved for the
/// implementation.
fn c_macro_or_type(name: &str) -> bool {
    implementation_reserved(name)
        || name.ends_with("_t")
        || c_reserved_entry(name).is_some_and(|(kind, _)| kind == "macro" || kind == "type")
}

/// Functions of `<math.h>` (and GNU libm), each also with the suffixes `f`
/// and `l`.
const C_MATH_FUNCTIONS: &str = "\
    acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp \
    exp2 expm1 frexp ilogb ldexp log log10 log1p log2 logb modf scalbn scalbln \
    cbrt fabs hypot pow sqrt erf erfc lgamma tgamma ceil floor nearbyint rint \
    lrint llrint round lround llround trunc fmod remainder remquo copysign nan \
    nextafter nexttoward fdim fmax fmin fma lgamma_r gamma j0 j1 jn y0 y1 yn \
    sincos exp10 significand drem finite isinf isnan scalb";

/// Why `sym` cannot be the name of a public C function of a shared library
/// (a clash with the C library, POSIX, the runtime or the C implementation:
/// a function, global variable, macro or type of the C headers), or `None`
/// when it can. The names come from `c_reserved_names.txt` (glibc's
/// standard and POSIX headers, checked against the headers of the machine
/// by `tests/hardening.rs`) and a few rules (reserved prefixes, the suffix
/// `_t`, the `f`/`l` variants of the math functions).
///
/// ```
/// use arrayad_codegen::reserved_c_symbol;
/// assert!(reserved_c_symbol("stdin").is_some_and(|why| why.contains("global variable")));
/// assert!(reserved_c_symbol("isfinite").is_some_and(|why| why.contains("macro")));
/// assert!(reserved_c_symbol("sinf").is_some());
/// assert_eq!(reserved_c_symbol("loss"), None);
/// ```
pub fn reserved_c_symbol(sym: &str) -> Option<&'static str> {
    let lower = sym.to_ascii_lowercase();
    if lower.starts_with("arrayad_") {
        return Some("the names of the arrayad runtime (prefix `arrayad_`)");
    }
    if lower.starts_with("pthread_") {
        return Some("the POSIX threads library (prefix `pthread_`)");
    }
    if implementation_reserved(sym) {
        return Some("the names the C language reserves for the implementation (`__x`, `_X`)");
    }
    if let Some((_, what)) = c_reserved_entry(sym) {
        return Some(what);
    }
    let listed = |list: &str, s: &str| list.split_whitespace().any(|w| w == s);
    let math = |s: &str| listed(C_MATH_FUNCTIONS, s);
    let math_variant = |suffix: char| sym.strip_suffix(suffix).is_some_and(math);
    if math(sym) || math_variant('f') || math_variant('l') {
        return Some("a function of the C library");
    }
    if sym.ends_with("_t") {
        return Some("the type names POSIX reserves (suffix `_t`)");
    }
    None
}

/// `s` as a C identifier (invalid characters become `_`).
pub(crate) fn c_ident(s: &str) -> String {
    let mut out: String = s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// Hands out unique C parameter names within one function.
struct Namer(HashSet<String>);

/// The local variables of every C wrapper (c_abi.rs): no parameter may be
/// named like them.
const WRAPPER_LOCALS: &[&str] = &["sizes", "in", "out", "ctx"];

impl Namer {
    /// A namer that hands out neither the wrappers' locals nor names with
    /// the prefix of the wrappers' and the runtime's globals and macros.
    fn new() -> Namer {
        Namer(WRAPPER_LOCALS.iter().map(|s| s.to_string()).collect())
    }

    /// A unique C name for `wanted`: a valid identifier that no macro or
    /// type of the C headers can replace ([`c_macro_or_type`]) and that
    /// has not the prefix of the runtime.
    fn name(&mut self, wanted: &str) -> String {
        let mut n = c_ident(wanted);
        if n.to_ascii_lowercase().starts_with("arrayad_") || implementation_reserved(&n) {
            n.insert_str(0, "p_");
        }
        while C_KEYWORDS.contains(&n.as_str()) || self.0.contains(&n) || c_macro_or_type(&n) {
            n.push('_');
        }
        self.0.insert(n.clone());
        n
    }
}

fn src_leaves(name: &str, t: &SrcType, out: &mut Vec<(String, SrcType)>) {
    match t {
        SrcType::Tuple(ts) => {
            for (k, t) in ts.iter().enumerate() {
                src_leaves(&format!("{name}_{k}"), t, out);
            }
        }
        t => out.push((name.to_string(), t.clone())),
    }
}

/// A leaf of type `t`. Its size expressions are looked up in (or added
/// to) `exprs`, the `k`-th being [`DimRef::Size`] `sizes.len() + k`.
fn leaf(
    name: String,
    t: &SrcType,
    sizes: &[String],
    exprs: &mut Vec<SizeExpr>,
    what: &str,
) -> Result<Leaf, CodegenError> {
    Ok(match t {
        SrcType::Scalar(s) => Leaf { name, elem: *s, dims: vec![], src: t.to_string() },
        SrcType::Array { elem, dims } => {
            let dims =
                dims.iter()
                    .map(|d| match d {
                        SrcDim::Lit(n) if *n >= 0 => Ok(DimRef::Lit(*n)),
                        SrcDim::Lit(n) => Err(CodegenError::Abi(format!("{what} has the negative extent {n}"))),
                        SrcDim::Var(v) => sizes.iter().position(|s| s == v).map(DimRef::Size).ok_or_else(|| {
                            CodegenError::Abi(format!("{what}: size `{v}` is not bound by a parameter"))
                        }),
                        SrcDim::Expr(e) => {
                            let k = match exprs.iter().position(|x| x == e) {
                                Some(k) => k,
                                None => {
                                    exprs.push(e.clone());
                                    exprs.len() - 1
                                }
                            };
                            Ok(DimRef::Size(sizes.len() + k))
                        }
                    })
                    .collect::<Result<_, _>>()?;
            Leaf { name, elem: *elem, dims, src: t.to_string() }
        }
        SrcType::Tuple(_) => unreachable!("tuples are flattened"),
    })
}

fn check_types(what: &str, got: &[Type], want: &[Type]) -> Result<(), CodegenError> {
    if got != want {
        let show = |ts: &[Type]| ts.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
        return Err(CodegenError::Abi(format!(
            "{what}: IR types ({}) differ from the interface ({})",
            show(got),
            show(want)
        )));
    }
    Ok(())
}

impl Interface {
    /// The interface of an export, after checking its three IR functions.
    pub(crate) fn new(e: &ExportedFunction) -> Result<Interface, CodegenError> {
        let name = c_ident(&e.name);
        if name != e.name || C_KEYWORDS.contains(&name.as_str()) {
            return Err(CodegenError::Abi(format!("`{}` cannot be the name of a C function", e.name)));
        }
        for v in Variant::ALL {
            let sym = format!("{name}{}", v.suffix());
            if let Some(why) = reserved_c_symbol(&sym) {
                return Err(CodegenError::Abi(format!(
                    "`{}` cannot be exported: its C function `{sym}` would clash with {why}; rename it or leave it out (--export)",
                    e.name
                )));
            }
        }
        let sig = &e.signature;
        if e.active.len() != sig.params.len() {
            return Err(CodegenError::Abi(format!(
                "`{}`: {} activity flags for {} parameters",
                e.name,
                e.active.len(),
                sig.params.len()
            )));
        }
        let src_sizes = sig.size_vars();
        let mut namer = Namer::new();
        let sizes: Vec<String> = src_sizes.iter().map(|s| namer.name(s)).collect();
        let mut params = Vec::new();
        let mut active = Vec::new();
        let mut exprs = Vec::new();
        for (p, act) in sig.params.iter().zip(&e.active) {
            let mut ls = Vec::new();
            src_leaves(&p.name, &p.ty, &mut ls);
            for (n, t) in ls {
                let l = leaf(namer.name(&n), &t, &src_sizes, &mut exprs, &format!("parameter `{}`", p.name))?;
                if *act && l.is_f64() {
                    active.push(params.len());
                }
                params.push(l);
            }
        }
        let mut rs = Vec::new();
        src_leaves("out", &sig.result, &mut rs);
        let mut results = Vec::new();
        for (k, (_, t)) in rs.iter().enumerate() {
            let what = format!("result of `{}`", e.name);
            results.push(leaf(namer.name(&format!("out{k}")), t, &src_sizes, &mut exprs, &what)?);
        }
        let f64_results: Vec<usize> = (0..results.len()).filter(|k| results[*k].is_f64()).collect();
        let tangents_in: Vec<Leaf> =
            active.iter().map(|k| params[*k].derived(namer.name(&format!("t_{}", params[*k].name)))).collect();
        let tangents_out: Vec<Leaf> =
            f64_results.iter().map(|k| results[*k].derived(namer.name(&format!("t_{}", results[*k].name)))).collect();
        let cotangents_in =
            f64_results.iter().map(|k| results[*k].derived(namer.name(&format!("ct_{}", results[*k].name)))).collect();
        let cotangents_out =
            active.iter().map(|k| params[*k].derived(namer.name(&format!("d_{}", params[*k].name)))).collect();
        let hvps_out =
            active.iter().map(|k| params[*k].derived(namer.name(&format!("h_{}", params[*k].name)))).collect();
        let has_grad = results.len() == 1 && results[0].is_f64() && !results[0].is_array();
        let value_name = namer.name("value");
        let jac_name = namer.name("jac");
        let k_name = namer.name("k");
        let params_text: Vec<String> = sig.params.iter().map(|p| format!("{}: {}", p.name, p.ty)).collect();
        let c_name =
            |v: &str| src_sizes.iter().position(|s| s == v).map_or_else(|| v.to_string(), |k| sizes[k].clone());
        let derived = exprs.iter().map(|x| DerivedSize::new(x, &c_name)).collect();
        // The lanes of the vector jvp: its tangent results over the jvp's
        // (or its tangent params, without f64 results).
        let jvp_lanes = match &e.jvp_lanes {
            Some(f) if !tangents_out.is_empty() => {
                f.result_types.len().saturating_sub(results.len()) / tangents_out.len()
            }
            Some(f) if !tangents_in.is_empty() => f.params.len().saturating_sub(params.len()) / tangents_in.len(),
            Some(_) => 1,
            None => 0,
        };
        let i = Interface {
            name,
            signature_text: format!("{}({}) -> {}", e.name, params_text.join(", "), sig.result),
            sizes,
            derived,
            params,
            results,
            active,
            f64_results,
            tangents_in,
            tangents_out,
            cotangents_in,
            cotangents_out,
            hvps_out,
            has_grad,
            has_hvp: has_grad && e.hvp.is_some(),
            entries: e.entries.clone(),
            built: Built { jvp: e.jvp.is_some(), vjp: e.vjp.is_some(), vjp_rows: e.vjp_rows.is_some(), jvp_lanes },
            value_name,
            jac_name,
            k_name,
            loc: e.primal.loc,
        };
        i.check_ir(e)?;
        Ok(i)
    }

    /// The names of every size the tables refer to: the size parameters,
    /// then the size expressions as written.
    pub(crate) fn size_names(&self) -> Vec<String> {
        self.sizes.iter().cloned().chain(self.derived.iter().map(|d| d.text.clone())).collect()
    }

    /// The C parameters of a variant, in order.
    pub(crate) fn c_params(&self, v: Variant) -> Vec<CParam> {
        let names = self.size_names();
        let mut out: Vec<CParam> = self
            .sizes
            .iter()
            .map(|s| CParam { ty: "int64_t ".into(), name: s.clone(), doc: "size (extent), >= 0".into() })
            .collect();
        let ins = |ls: &[Leaf], what: &str, out: &mut Vec<CParam>| {
            for l in ls {
                let doc = if l.is_array() {
                    format!("{what}{} {}, row-major", shape_text(l, &names), l.elem)
                } else {
                    format!("{what}{}", l.elem)
                };
                out.push(CParam { ty: c_in_type(l), name: l.name.clone(), doc });
            }
        };
        let outs = |ls: &[Leaf], what: &str, out: &mut Vec<CParam>| {
            for l in ls {
                let doc = if l.is_array() {
                    format!("{what}buffer of {} {}, row-major", shape_text(l, &names), l.elem)
                } else {
                    format!("{what}{}", l.elem)
                };
                out.push(CParam { ty: c_out_type(l), name: l.name.clone(), doc });
            }
        };
        ins(&self.params, "", &mut out);
        match v {
            Variant::Primal => outs(&self.results, "out: ", &mut out),
            Variant::Jvp => {
                ins(&self.tangents_in, "tangent: ", &mut out);
                outs(&self.results, "out: ", &mut out);
                outs(&self.tangents_out, "out, tangent: ", &mut out);
            }
            Variant::JvpMany => {
                out.push(CParam {
                    ty: "int64_t ".into(),
                    name: self.k_name.clone(),
                    doc: "the number of directions, >= 0".into(),
                });
                for l in &self.tangents_in {
                    out.push(CParam {
                        ty: "const double *".into(),
                        name: l.name.clone(),
                        doc: format!(
                            "tangents: {} directions of {}, one after another",
                            self.k_name,
                            leaf_text(l, &names)
                        ),
                    });
                }
                outs(&self.results, "out: ", &mut out);
                for l in &self.tangents_out {
                    out.push(CParam {
                        ty: "double *".into(),
                        name: l.name.clone(),
                        doc: format!(
                            "out, tangents: buffer of {} tangents of {}, one per direction, one after another",
                            self.k_name,
                            leaf_text(l, &names)
                        ),
                    });
                }
            }
            Variant::Vjp => {
                ins(&self.cotangents_in, "cotangent: ", &mut out);
                outs(&self.results, "out: ", &mut out);
                outs(&self.cotangents_out, "out, cotangent: ", &mut out);
            }
            Variant::Grad => {
                out.push(CParam { ty: "double *".into(), name: self.value_name.clone(), doc: "out: the value".into() });
                outs(&self.cotangents_out, "out, gradient: ", &mut out);
            }
            Variant::Hvp => {
                ins(&self.tangents_in, "tangent t: ", &mut out);
                out.push(CParam { ty: "double *".into(), name: self.value_name.clone(), doc: "out: the value".into() });
                outs(&self.cotangents_out, "out, gradient: ", &mut out);
                outs(&self.hvps_out, "out, Hessian-vector product H t: ", &mut out);
            }
            Variant::Jacobian => {
                outs(&self.results, "out: ", &mut out);
                out.push(CParam {
                    ty: "double *".into(),
                    name: self.jac_name.clone(),
                    doc: "out: the Jacobian, [rows][cols] row-major: rows = f64 result elements, \
                          cols = active f64 parameter elements"
                        .into(),
                });
            }
        }
        out
    }

    /// The variants this export has: those asked for (all by default)
    /// that its IR functions and result type allow.
    pub(crate) fn variants(&self) -> Vec<Variant> {
        Variant::ALL
            .iter()
            .copied()
            .filter(|v| self.entries.as_ref().is_none_or(|es| es.contains(v)) && self.can_define(*v))
            .collect()
    }

    /// True when the Jacobian is one row (the result is one `f64`) computed
    /// by one call of the vjp, no many-row vjp being compiled.
    pub(crate) fn jacobian_by_vjp(&self) -> bool {
        self.has_grad && self.built.vjp && !self.built.vjp_rows
    }

    /// True if the IR functions (and the result type) allow variant `v`.
    fn can_define(&self, v: Variant) -> bool {
        match v {
            Variant::Primal => true,
            Variant::Jvp => self.built.jvp,
            Variant::JvpMany => self.built.jvp || self.built.jvp_lanes > 0,
            Variant::Vjp => self.built.vjp,
            Variant::Grad => self.has_grad && self.built.vjp,
            Variant::Jacobian => {
                self.jacobian_by_vjp() || ((self.built.jvp || self.built.jvp_lanes > 0) && self.built.vjp_rows)
            }
            Variant::Hvp => self.has_hvp,
        }
    }

    fn check_ir(&self, e: &ExportedFunction) -> Result<(), CodegenError> {
        let tys = |ls: &[Leaf]| ls.iter().map(|l| l.ty()).collect::<Vec<_>>();
        let p = tys(&self.params);
        let r = tys(&self.results);
        let ti = tys(&self.tangents_in);
        let to = tys(&self.tangents_out);
        let what = |k: &str| format!("`{}` ({k})", e.name);
        check_types(&what("primal parameters"), &e.primal.param_types(), &p)?;
        check_types(&what("primal results"), &e.primal.result_types, &r)?;
        if let Some(jvp) = &e.jvp {
            check_types(&what("jvp parameters"), &jvp.param_types(), &[p.clone(), ti.clone()].concat())?;
            check_types(&what("jvp results"), &jvp.result_types, &[r.clone(), to.clone()].concat())?;
        }
        if let Some(vjp) = &e.vjp {
            check_types(&what("vjp parameters"), &vjp.param_types(), &[p.clone(), to.clone()].concat())?;
            check_types(&what("vjp results"), &vjp.result_types, &[r.clone(), ti.clone()].concat())?;
        }
        if let Some(lanes) = &e.jvp_lanes {
            let n = self.built.jvp_lanes;
            let rep = |first: &[Type], ts: &[Type]| -> Vec<Type> {
                first.iter().chain((0..n).flat_map(|_| ts.iter())).copied().collect()
            };
            check_types(&what("jvp_lanes parameters"), &lanes.param_types(), &rep(&p, &ti))?;
            check_types(&what("jvp_lanes results"), &lanes.result_types, &rep(&r, &to))?;
        }
        let lift = |ts: &[Type]| ts.iter().map(|t| t.lift()).collect::<Vec<_>>();
        if let Some(rows) = &e.vjp_rows {
            check_types(&what("vjp_rows parameters"), &rows.param_types(), &[p.clone(), lift(&to)].concat())?;
            check_types(&what("vjp_rows results"), &rows.result_types, &[r.clone(), lift(&ti)].concat())?;
        }
        if let Some(asked) = &e.entries {
            if let Some(v) = asked.iter().find(|v| !self.can_define(**v)) {
                return Err(CodegenError::Abi(format!(
                    "`{}` cannot have `{}{}`: {}",
                    e.name,
                    e.name,
                    v.suffix(),
                    match v {
                        Variant::Grad | Variant::Hvp if !self.has_grad => "its result is not one f64",
                        _ => "the derivative it needs was not compiled",
                    }
                )));
            }
        }
        match (&e.hvp, self.has_grad) {
            (Some(h), true) => {
                check_types(&what("hvp parameters"), &h.param_types(), &[p, ti.clone()].concat())?;
                check_types(&what("hvp results"), &h.result_types, &[r, ti.clone(), ti].concat())?;
            }
            (None, _) => {}
            (Some(_), false) => {
                return Err(CodegenError::Abi(format!("`{}`: an hvp for a result that is not one f64", e.name)))
            }
        }
        Ok(())
    }
}

/// The C type of an input leaf (by value for scalars, `const T *` for arrays).
pub(crate) fn c_in_type(l: &Leaf) -> String {
    let base = c_scalar(l.elem);
    if l.is_array() {
        format!("const {base} *")
    } else {
        format!("{base} ")
    }
}

/// The C type of an output leaf (always a pointer).
pub(crate) fn c_out_type(l: &Leaf) -> String {
    format!("{} *", c_scalar(l.elem))
}

pub(crate) fn c_scalar(s: Scalar) -> &'static str {
    match s {
        Scalar::F64 => "double",
        Scalar::I64 => "int64_t",
        Scalar::Bool => "bool",
    }
}

/// `[K][D]` from the size names.
/// A leaf's shape and element type for documentation (`[n][3] f64`, or
/// `f64` for a scalar).
fn leaf_text(l: &Leaf, sizes: &[String]) -> String {
    if l.is_array() {
        format!("{} {}", shape_text(l, sizes), l.elem)
    } else {
        l.elem.to_string()
    }
}

pub(crate) fn shape_text(l: &Leaf, sizes: &[String]) -> String {
    l.dims
        .iter()
        .map(|d| match d {
            DimRef::Lit(n) => format!("[{n}]"),
            DimRef::Size(k) => format!("[{}]", sizes[*k]),
        })
        .collect()
}

/// The uppercase macro prefix of a module (`MODULE` -> `MODULE_ERR_...`).
pub(crate) fn macro_prefix(module: &str) -> String {
    c_ident(module).to_ascii_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `c_reserved_names.txt` is well formed: every name is a C identifier
    /// inside a section of a known kind, listed once.
    #[test]
    fn reserved_names_file_is_well_formed() {
        let mut kind = None;
        let mut seen = HashSet::new();
        for line in C_RESERVED_NAMES.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if let Some(head) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                let (k, what) = head.split_once(':').expect("`[kind: description]`");
                assert!(["function", "variable", "macro", "type"].contains(&k), "unknown kind `{k}`");
                assert!(!what.trim().is_empty());
                kind = Some(k);
                continue;
            }
            for w in line.split_whitespace() {
                assert!(kind.is_some(), "`{w}` before the first section");
                assert_eq!(c_ident(w), w, "`{w}` is not a C identifier");
                assert!(seen.insert((kind, w)), "`{w}` listed twice");
            }
        }
        assert!(seen.len() >= 700, "{} names", seen.len());
    }

    #[test]
    fn reserved_symbols_and_renamed_parameters() {
        let why = |s| reserved_c_symbol(s).unwrap_or("");
        assert_eq!(why("stdin"), "a global variable of the C library");
        assert_eq!(why("timezone"), "a global variable of the C library");
        assert!(why("assert").contains("macro") && why("M_PI").contains("macro") && why("unix").contains("macro"));
        assert!(why("FILE").contains("type") && why("time_t").contains("_t"));
        assert!(why("link").contains("function") && why("scalbf").contains("function"));
        assert!(why("__x").contains("implementation") && why("_Foo").contains("implementation"));
        for ok in ["f", "loss", "stdin2", "my_linux", "timezone_offset", "_x", "t"] {
            assert_eq!(reserved_c_symbol(ok), None, "{ok}");
        }
        let mut n = Namer::new();
        let names: Vec<String> = ["linux", "EOF", "FILE", "x_t", "__LINE__", "_Y", "time", "link", "x", "linux"]
            .iter()
            .map(|w| n.name(w))
            .collect();
        assert_eq!(names, ["linux_", "EOF_", "FILE_", "x_t_", "p___LINE__", "p__Y", "time", "link", "x", "linux__"]);
    }
}
