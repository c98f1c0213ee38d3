//! The C source of the public ABI wrappers of a shared library: for each
//! export `f`, the functions `f`, `f_jvp`, `f_vjp`, `f_grad`, `f_jacobian`
//! (LANGUAGE.md section 8) over the internal functions (primal, jvp, vjp
//! and, for the Jacobian, vjp_rows), plus
//! `MODULE_last_error`. The wrappers describe their parameters with static
//! tables and let the runtime (`arrayad_invoke`, `arrayad_jacobian`)
//! validate sizes and pointers, pack the slots and copy the results.

use super::abi::{c_ident, DimRef, Interface, Leaf, Variant};
use arrayad_ir::Scalar;
use std::fmt::Write;

/// The internal symbol of one IR function of an export.
pub(crate) fn internal_symbol(module: &str, export: &str, which: &str) -> String {
    format!("arrayad_{}__{}__{}", c_ident(module), export, which)
}

/// The name of the header the wrappers include.
pub(crate) const MODULE_HEADER_NAME: &str = "arrayad_module.h";

fn elem_macro(s: Scalar) -> &'static str {
    match s {
        Scalar::F64 => "ARRAYAD_F64",
        Scalar::I64 => "ARRAYAD_I64",
        Scalar::Bool => "ARRAYAD_BOOL",
    }
}

fn c_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            // `?` too: no trigraph (`??/`) in any C mode.
            '?' => out.push_str("\\?"),
            c if c.is_ascii_graphic() || c == ' ' => out.push(c),
            // UTF-8 (a file name) byte by byte; control characters never.
            c if !c.is_control() && !c.is_ascii() => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    let _ = write!(out, "\\{b:03o}");
                }
            }
            _ => out.push_str("\\?"),
        }
    }
    out.push('"');
    out
}

/// The checked arithmetic of size expressions (LANGUAGE.md section 11) in
/// the wrappers: `INT64_MIN` for an overflow or a division by zero, and
/// from an operand that is already `INT64_MIN` (the runtime then reports
/// that the size has no value).
const SIZE_HELPERS: &str = "\
static inline int64_t arrayad_w_size_add(int64_t a, int64_t b) {
    int64_t r;
    return (a == INT64_MIN || b == INT64_MIN || __builtin_add_overflow(a, b, &r)) ? INT64_MIN : r;
}
static inline int64_t arrayad_w_size_sub(int64_t a, int64_t b) {
    int64_t r;
    return (a == INT64_MIN || b == INT64_MIN || __builtin_sub_overflow(a, b, &r)) ? INT64_MIN : r;
}
static inline int64_t arrayad_w_size_mul(int64_t a, int64_t b) {
    int64_t r;
    return (a == INT64_MIN || b == INT64_MIN || __builtin_mul_overflow(a, b, &r)) ? INT64_MIN : r;
}
static inline int64_t arrayad_w_size_div(int64_t a, int64_t b) {
    return (a == INT64_MIN || b == INT64_MIN || b == 0 || (a == INT64_MIN && b == -1)) ? INT64_MIN : a / b;
}
";

/// Emits a static leaf table `name` for `leaves`; returns the C expression
/// for it (NULL when empty).
fn leaf_table(out: &mut String, name: &str, leaves: &[&Leaf]) -> String {
    if leaves.is_empty() {
        return "NULL".into();
    }
    for (k, l) in leaves.iter().enumerate() {
        if l.is_array() {
            let ds: Vec<String> = l
                .dims
                .iter()
                .map(|d| match d {
                    DimRef::Lit(n) => n.to_string(),
                    DimRef::Size(s) => format!("-{}", s + 1),
                })
                .collect();
            let _ = writeln!(out, "ARRAYAD_TABLE int64_t {name}_d{k}[] = {{{}}};", ds.join(", "));
        }
    }
    let _ = writeln!(out, "ARRAYAD_TABLE arrayad_leaf {name}[] = {{");
    for (k, l) in leaves.iter().enumerate() {
        let dims = if l.is_array() { format!("{name}_d{k}") } else { "NULL".into() };
        let _ = writeln!(out, "    {{{}, {}, {dims}, {}}},", elem_macro(l.elem), l.dims.len(), c_string(&l.name));
    }
    out.push_str("};\n");
    name.to_string()
}

/// Emits a signature table and returns its name. Its messages are
/// prefixed with `ARRAYAD_W_AT`, the definition's location, which
/// [`wrappers_source`] defines around each export's tables.
fn sig_table(
    out: &mut String,
    prefix: &str,
    fname: &str,
    sizes: &str,
    nsizes: usize,
    ins: &[&Leaf],
    outs: &[&Leaf],
) -> String {
    let ti = leaf_table(out, &format!("{prefix}_in"), ins);
    let to = leaf_table(out, &format!("{prefix}_out"), outs);
    sig_over(out, prefix, fname, sizes, nsizes, (&ti, ins.len()), (&to, outs.len()))
}

/// Emits a signature table `{prefix}_sig` for the function `fname` over
/// leaf tables already emitted (`(table, count)` of its arguments and of
/// its results, as [`leaf_table`] returns them); returns its name. Two
/// entry points that pass the same leaves under different names (the
/// vector jvp and the forward Jacobian's passes) share their leaf tables.
fn sig_over(
    out: &mut String,
    prefix: &str,
    fname: &str,
    sizes: &str,
    nsizes: usize,
    (ti, nin): (&str, usize),
    (to, nout): (&str, usize),
) -> String {
    let _ = writeln!(
        out,
        "ARRAYAD_TABLE arrayad_sig {prefix}_sig = {{{}, {nsizes}, {sizes}, {nin}, {ti}, {nout}, {to}, ARRAYAD_W_AT}};",
        c_string(fname),
    );
    format!("{prefix}_sig")
}

/// A C array initialiser `T name[] = {..}` or a NULL pointer when empty.
fn ptr_array(out: &mut String, ty: &str, name: &str, items: &[String]) {
    ptr_array_indented(out, ty, name, items, "    ");
}

/// Like [`ptr_array`], indented by `indent`.
fn ptr_array_indented(out: &mut String, ty: &str, name: &str, items: &[String], indent: &str) {
    if items.is_empty() {
        let _ = writeln!(out, "{indent}{ty} *{name} = NULL;");
    } else {
        let _ = writeln!(out, "{indent}{ty} {name}[] = {{{}}};", items.join(", "));
    }
}

/// The address of an input for the `in` array: scalars by address.
fn in_ref(l: &Leaf) -> String {
    if l.is_array() {
        l.name.clone()
    } else {
        format!("&{}", l.name)
    }
}

/// How many exports one C file of wrappers holds at most: a module with
/// more is split into files that the C compiler builds in parallel.
pub(crate) const EXPORTS_PER_FILE: usize = 64;

/// The wrappers' C sources for `interfaces` of module `module`, split into
/// `files` files of about equal numbers of exports (at least one file; the
/// first also defines the module's `_last_error`, `_release_memory`,
/// `_set_num_threads` and `_num_threads`):
/// static tables describing each function and thin wrappers that pass them
/// to the runtime (`arrayad_abi_call`, `arrayad_abi_jacobian` in
/// `runtime/src/arrayad_abi.c`, which keep per-thread contexts and errors).
///
/// With `flush_subnormals` ([`crate::TargetOptions::flush_subnormals`]),
/// the first file makes every call of the library flush subnormal numbers
/// to zero when the library is loaded (`arrayad_abi_flush_subnormals`).
pub(crate) fn wrappers_sources(
    interfaces: &[Interface],
    module: &str,
    file: &str,
    files: usize,
    flush_subnormals: bool,
) -> Vec<String> {
    let per_file = interfaces.len().div_ceil(files.max(1)).max(1);
    let mut chunks: Vec<&[Interface]> = interfaces.chunks(per_file).collect();
    if chunks.is_empty() {
        chunks.push(&[]);
    }
    chunks.iter().enumerate().map(|(k, chunk)| wrappers_source(chunk, module, file, k == 0, flush_subnormals)).collect()
}

/// One file of [`wrappers_sources`]; `first` adds the module functions
/// (and, with `flush_subnormals`, the constructor that sets the mode).
fn wrappers_source(interfaces: &[Interface], module: &str, file: &str, first: bool, flush_subnormals: bool) -> String {
    let m = c_ident(module);
    let mut out = String::new();
    let _ = write!(
        out,
        "/* C ABI wrappers of the arrayad module `{m}` (generated by arrayad; do not edit). */\n\
         #include <stdbool.h>\n\
         #include <stddef.h>\n\
         #include <stdint.h>\n\
         #include <string.h>\n\
         #include \"{rt}\"\n\
         #pragma GCC visibility push(default)\n\
         #include \"{MODULE_HEADER_NAME}\"\n\
         #pragma GCC visibility pop\n\
         #define ARRAYAD_HIDDEN __attribute__((visibility(\"hidden\")))\n\
         /* Tables an export may leave unused (`arrayad build --entries`). */\n\
         #define ARRAYAD_TABLE static const __attribute__((unused))\n\
         \n\
         static const double arrayad_w_one __attribute__((unused)) = 1.0;\n\
         {size_helpers}\
         \n",
        rt = arrayad_runtime::RUNTIME_C_HEADER_NAME,
        size_helpers = SIZE_HELPERS,
    );
    if first {
        let _ = write!(
            out,
            "const char *{m}_last_error(void) {{ return arrayad_abi_last_error(); }}\n\
             void {m}_release_memory(void) {{ arrayad_abi_release(); }}\n\
             void {m}_set_num_threads(int n) {{ arrayad_set_num_threads(n); }}\n\
             int {m}_num_threads(void) {{ return arrayad_num_threads(); }}\n"
        );
        if flush_subnormals {
            out.push_str(
                "/* Built with --flush-subnormals: every call flushes subnormal numbers to zero. */\n\
                 __attribute__((constructor)) static void arrayad_w_flush_subnormals(void) {\n    \
                 arrayad_abi_flush_subnormals();\n}\n",
            );
        }
    }
    for i in interfaces {
        let f = &i.name;
        // The prefix of this export's tables: its name's length in it keeps
        // the tables of `g` (`_jac_vjp`, ...) apart from those of `g_jac`.
        let p = format!("arrayad_w{}_{f}", f.len());
        let _ = writeln!(out, "\n/* ---- {} ---- */", i.signature_text);
        // The prefix of the messages of argument and result checks.
        let at = if i.loc.line > 0 { format!("{file}:{}:{}: ", i.loc.line, i.loc.col) } else { String::new() };
        let _ = writeln!(out, "#undef ARRAYAD_W_AT\n#define ARRAYAD_W_AT {}", c_string(&at));
        let variants = i.variants();
        let has = |v: Variant| variants.contains(&v);
        // The IR functions the variants call.
        // The Jacobian's forward mode and f_jvp_many run the vector jvp
        // when there is one, else the jvp.
        let lanes = i.built.jvp_lanes;
        let many = has(Variant::Jacobian) || has(Variant::JvpMany);
        let by_vjp = has(Variant::Jacobian) && i.jacobian_by_vjp();
        // Forward mode in many directions (a Jacobian of one row has none).
        let forward_many = has(Variant::JvpMany) || (has(Variant::Jacobian) && !by_vjp);
        let needs_lanes = forward_many && lanes > 0;
        let needs_jvp = has(Variant::Jvp) || (forward_many && !needs_lanes);
        let needs_vjp = has(Variant::Vjp) || has(Variant::Grad) || by_vjp;
        let needs_rows = has(Variant::Jacobian) && !by_vjp;
        let needs_hvp = has(Variant::Hvp);
        let whiches = [
            ("primal", true),
            ("jvp", needs_jvp),
            ("vjp", needs_vjp),
            ("vjp_rows", needs_rows),
            ("hvp", needs_hvp),
            ("jvp_lanes", needs_lanes),
        ];
        for (which, _) in whiches.iter().filter(|(_, needed)| *needed) {
            let _ = writeln!(
                out,
                "ARRAYAD_HIDDEN int32_t {}(arrayad_ctx *ctx, const uint64_t *args, uint64_t *results);",
                internal_symbol(module, f, which)
            );
        }
        let all_sizes = i.size_names();
        let sizes = if all_sizes.is_empty() {
            "NULL".to_string()
        } else {
            let names: Vec<String> = all_sizes.iter().map(|s| c_string(s)).collect();
            let _ = writeln!(out, "ARRAYAD_TABLE char *const {p}_size_names[] = {{{}}};", names.join(", "));
            format!("{p}_size_names")
        };
        let ns = all_sizes.len();
        let params: Vec<&Leaf> = i.params.iter().collect();
        let results: Vec<&Leaf> = i.results.iter().collect();
        let cat = |a: &[&Leaf], b: &[Leaf]| -> Vec<Leaf> {
            a.iter().map(|l| (*l).clone()).chain(b.iter().cloned()).collect()
        };
        let primal_sig = sig_table(&mut out, &format!("{p}_primal"), f, &sizes, ns, &params, &results);
        let jin = cat(&params, &i.tangents_in);
        let jout = cat(&results, &i.tangents_out);
        let jvp_sig = sig_table(
            &mut out,
            &format!("{p}_jvp"),
            &format!("{f}_jvp"),
            &sizes,
            ns,
            &jin.iter().collect::<Vec<_>>(),
            &jout.iter().collect::<Vec<_>>(),
        );
        // The vector jvp: the tangents of every lane, lane-major.
        let lane_leaves = needs_lanes.then(|| {
            let lin: Vec<&Leaf> = params.iter().copied().chain((0..lanes).flat_map(|_| i.tangents_in.iter())).collect();
            let lout: Vec<&Leaf> =
                results.iter().copied().chain((0..lanes).flat_map(|_| i.tangents_out.iter())).collect();
            (lin, lout)
        });
        let lanes_sig = lane_leaves.as_ref().map(|(lin, lout)| {
            sig_table(&mut out, &format!("{p}_jvp_lanes"), &format!("{f}_jvp_many"), &sizes, ns, lin, lout)
        });
        let vin = cat(&params, &i.cotangents_in);
        let vout = cat(&results, &i.cotangents_out);
        let vjp_sig = sig_table(
            &mut out,
            &format!("{p}_vjp"),
            &format!("{f}_vjp"),
            &sizes,
            ns,
            &vin.iter().collect::<Vec<_>>(),
            &vout.iter().collect::<Vec<_>>(),
        );
        // vjp_rows: one more size, the rows R, last; cotangents stacked.
        let rows_sizes = {
            let mut names: Vec<String> = all_sizes.iter().map(|s| c_string(s)).collect();
            names.push(c_string("rows"));
            let _ = writeln!(out, "ARRAYAD_TABLE char *const {p}_rows_size_names[] = {{{}}};", names.join(", "));
            format!("{p}_rows_size_names")
        };
        let rin: Vec<Leaf> =
            params.iter().map(|l| (*l).clone()).chain(i.cotangents_in.iter().map(|l| l.stacked(ns))).collect();
        let rout: Vec<Leaf> =
            results.iter().map(|l| (*l).clone()).chain(i.cotangents_out.iter().map(|l| l.stacked(ns))).collect();
        let rows_sig = sig_table(
            &mut out,
            &format!("{p}_vjp_rows"),
            &format!("{f}_jacobian"),
            &rows_sizes,
            ns + 1,
            &rin.iter().collect::<Vec<_>>(),
            &rout.iter().collect::<Vec<_>>(),
        );
        // The Jacobian of one row by the vjp: its layout, the Jacobian's
        // name in messages.
        let jac_vjp_sig = if by_vjp {
            let sig = sig_table(
                &mut out,
                &format!("{p}_jac_vjp"),
                &format!("{f}_jacobian"),
                &sizes,
                ns,
                &vin.iter().collect::<Vec<_>>(),
                &vout.iter().collect::<Vec<_>>(),
            );
            format!("&{sig}")
        } else {
            "NULL".to_string()
        };
        let grad_sig = if i.has_grad {
            Some(sig_table(
                &mut out,
                &format!("{p}_grad"),
                &format!("{f}_grad"),
                &sizes,
                ns,
                &vin.iter().collect::<Vec<_>>(),
                &vout.iter().collect::<Vec<_>>(),
            ))
        } else {
            None
        };
        let hvp_sig = if i.has_hvp {
            let hin = cat(&params, &i.tangents_in);
            let mut hout: Vec<Leaf> = results.iter().map(|l| (*l).clone()).collect();
            hout.extend(i.cotangents_out.iter().cloned());
            hout.extend(i.hvps_out.iter().cloned());
            Some(sig_table(
                &mut out,
                &format!("{p}_hvp"),
                &format!("{f}_hvp"),
                &sizes,
                ns,
                &hin.iter().collect::<Vec<_>>(),
                &hout.iter().collect::<Vec<_>>(),
            ))
        } else {
            None
        };
        let idx = |name: &str, v: &[usize], out: &mut String| -> String {
            if v.is_empty() {
                "NULL".into()
            } else {
                let xs: Vec<String> = v.iter().map(|k| k.to_string()).collect();
                let _ = writeln!(out, "ARRAYAD_TABLE int32_t {p}_{name}[] = {{{}}};", xs.join(", "));
                format!("{p}_{name}")
            }
        };
        let act = idx("act", &i.active, &mut out);
        let res = idx("res", &i.f64_results, &mut out);
        if many {
            let (jvp_fn, jvp_sig, lanes) = match &lanes_sig {
                Some(sig) => (internal_symbol(module, f, "jvp_lanes"), sig.as_str(), lanes),
                None if needs_jvp => (internal_symbol(module, f, "jvp"), jvp_sig.as_str(), 1),
                None => ("NULL".to_string(), jvp_sig.as_str(), 1),
            };
            let rows_fn = if needs_rows { internal_symbol(module, f, "vjp_rows") } else { "NULL".into() };
            let vjp_fn = if by_vjp { internal_symbol(module, f, "vjp") } else { "NULL".into() };
            let desc = |out: &mut String, name: &str, jvp_sig: &str| {
                let _ = writeln!(
                    out,
                    "static const arrayad_jac_desc {name} = {{{}, {jvp_fn}, {rows_fn}, &{primal_sig}, &{jvp_sig}, &{rows_sig}, {lanes}, {}, {act}, {}, {res}, {vjp_fn}, {jac_vjp_sig}}};",
                    internal_symbol(module, f, "primal"),
                    i.active.len(),
                    i.f64_results.len()
                );
            };
            // `f_jvp_many`, and the Jacobian of one row (by the vjp).
            if has(Variant::JvpMany) || by_vjp {
                desc(&mut out, &format!("{p}_jac"), jvp_sig);
            }
            // The forward Jacobian's passes (which also give its value)
            // check the arguments and results under the Jacobian's name,
            // over the leaf tables of the vector jvp (or of the jvp).
            if has(Variant::Jacobian) && !by_vjp {
                let fname = format!("{f}_jacobian");
                let (tables, ins, outs) = match &lane_leaves {
                    Some((lin, lout)) => (format!("{p}_jvp_lanes"), lin.len(), lout.len()),
                    None => (format!("{p}_jvp"), jin.len(), jout.len()),
                };
                let table = |name: String, count: usize| if count == 0 { "NULL".to_string() } else { name };
                let (ti, to) = (table(format!("{tables}_in"), ins), table(format!("{tables}_out"), outs));
                let sig = sig_over(&mut out, &format!("{p}_jac_pass"), &fname, &sizes, ns, (&ti, ins), (&to, outs));
                desc(&mut out, &format!("{p}_jacobian"), &sig);
            }
        }

        for v in variants {
            let cps = i.c_params(v);
            let ps: Vec<String> = cps.iter().map(|c| format!("{}{}", c.ty, c.name)).collect();
            let _ = writeln!(out, "\nint32_t {f}{}({}) {{", v.suffix(), ps.join(", "));
            if all_sizes.is_empty() {
                out.push_str("    const int64_t *sizes = NULL;\n");
            } else {
                // The size expressions from the size parameters (the runtime
                // reports a negative one, or INT64_MIN: no value).
                let values: Vec<String> =
                    i.sizes.iter().cloned().chain(i.derived.iter().map(|d| d.c_expr.clone())).collect();
                let _ = writeln!(out, "    const int64_t sizes[] = {{{}}};", values.join(", "));
            }
            let mut ins: Vec<String> = i.params.iter().map(in_ref).collect();
            let mut outs: Vec<String> = Vec::new();
            let call = match v {
                Variant::Primal => {
                    outs.extend(i.results.iter().map(|l| l.name.clone()));
                    format!("arrayad_abi_call({}, &{primal_sig}, sizes, in, out)", internal_symbol(module, f, "primal"))
                }
                Variant::Jvp => {
                    ins.extend(i.tangents_in.iter().map(in_ref));
                    outs.extend(i.results.iter().chain(&i.tangents_out).map(|l| l.name.clone()));
                    format!("arrayad_abi_call({}, &{jvp_sig}, sizes, in, out)", internal_symbol(module, f, "jvp"))
                }
                Variant::Vjp => {
                    ins.extend(i.cotangents_in.iter().map(in_ref));
                    outs.extend(i.results.iter().chain(&i.cotangents_out).map(|l| l.name.clone()));
                    format!("arrayad_abi_call({}, &{vjp_sig}, sizes, in, out)", internal_symbol(module, f, "vjp"))
                }
                Variant::Grad => {
                    ins.push("&arrayad_w_one".to_string());
                    outs.push(i.value_name.clone());
                    outs.extend(i.cotangents_out.iter().map(|l| l.name.clone()));
                    format!(
                        "arrayad_abi_call({}, &{}, sizes, in, out)",
                        internal_symbol(module, f, "vjp"),
                        grad_sig.as_deref().unwrap_or(&vjp_sig)
                    )
                }
                Variant::Jacobian => {
                    outs.extend(i.results.iter().map(|l| l.name.clone()));
                    let desc = if by_vjp { "jac" } else { "jacobian" };
                    format!("arrayad_abi_jacobian(&{p}_{desc}, sizes, in, out, {})", i.jac_name)
                }
                Variant::JvpMany => {
                    ins.extend(i.tangents_in.iter().map(|l| l.name.clone()));
                    outs.extend(i.results.iter().chain(&i.tangents_out).map(|l| l.name.clone()));
                    format!("arrayad_abi_jvp_many(&{p}_jac, sizes, in, out, {})", i.k_name)
                }
                Variant::Hvp => {
                    ins.extend(i.tangents_in.iter().map(in_ref));
                    outs.push(i.value_name.clone());
                    outs.extend(i.cotangents_out.iter().chain(&i.hvps_out).map(|l| l.name.clone()));
                    format!(
                        "arrayad_abi_call({}, &{}, sizes, in, out)",
                        internal_symbol(module, f, "hvp"),
                        hvp_sig.as_deref().unwrap_or(&jvp_sig)
                    )
                }
            };
            let fast = match v {
                Variant::Jacobian => fixed_jacobian(i, module),
                Variant::JvpMany => None,
                _ => {
                    let (fin, fout, which) = variant_leaves(i, v);
                    fixed_call(&fin, &fout, &internal_symbol(module, f, which))
                }
            };
            match fast {
                // The table-driven path stays for what the fast one does not
                // check (null pointers): it reports them.
                Some(body) => {
                    let _ =
                        writeln!(out, "    if ({}) {{", null_test(&ins, &outs, v == Variant::Jacobian, &i.jac_name));
                    ptr_array_indented(&mut out, "const void *", "in", &ins, "        ");
                    ptr_array_indented(&mut out, "void *", "out", &outs, "        ");
                    let _ = writeln!(out, "        return {call};\n    }}");
                    out.push_str(&body);
                    out.push_str("}\n");
                }
                None => {
                    ptr_array(&mut out, "const void *", "in", &ins);
                    ptr_array(&mut out, "void *", "out", &outs);
                    let _ = writeln!(out, "    return {call};\n}}");
                }
            }
        }
    }
    out
}

/// Leaves with a C expression each.
type Leaves = Vec<(Leaf, String)>;

/// The largest output, in bytes, of a function called by the fast path.
const FAST_STAGE_BYTES: u64 = 4096;

/// The elements of a leaf of literal extents (`None` if an extent is a
/// size variable).
fn literal_count(l: &Leaf) -> Option<u64> {
    l.dims.iter().try_fold(1u64, |n, d| match d {
        DimRef::Lit(k) => n.checked_mul(*k as u64),
        DimRef::Size(_) => None,
    })
}

fn elem_bytes(s: Scalar) -> u64 {
    if s == Scalar::Bool {
        1
    } else {
        8
    }
}

/// The input leaves (with the C expression of each: the scalar's value or
/// the array pointer), the output leaves (C pointer names) and the internal
/// function of a variant other than the Jacobian.
fn variant_leaves(i: &Interface, v: Variant) -> (Leaves, Leaves, &'static str) {
    let named = |ls: &[Leaf]| ls.iter().map(|l| (l.clone(), l.name.clone())).collect::<Vec<_>>();
    let mut ins = named(&i.params);
    let mut outs = named(&i.results);
    let which = match v {
        Variant::Primal | Variant::Jacobian | Variant::JvpMany => "primal",
        Variant::Jvp => {
            ins.extend(named(&i.tangents_in));
            outs.extend(named(&i.tangents_out));
            "jvp"
        }
        Variant::Vjp => {
            ins.extend(named(&i.cotangents_in));
            outs.extend(named(&i.cotangents_out));
            "vjp"
        }
        Variant::Grad => {
            let one = Leaf { name: "one".into(), elem: Scalar::F64, dims: vec![], src: "f64".into() };
            ins.push((one, "1.0".into()));
            let value = Leaf { name: i.value_name.clone(), elem: Scalar::F64, dims: vec![], src: "f64".into() };
            outs = vec![(value, i.value_name.clone())];
            outs.extend(named(&i.cotangents_out));
            "vjp"
        }
        Variant::Hvp => {
            ins.extend(named(&i.tangents_in));
            let value = Leaf { name: i.value_name.clone(), elem: Scalar::F64, dims: vec![], src: "f64".into() };
            outs = vec![(value, i.value_name.clone())];
            outs.extend(named(&i.cotangents_out));
            outs.extend(named(&i.hvps_out));
            "hvp"
        }
    };
    (ins, outs, which)
}

/// The C condition under which the fast path does not apply: a null array
/// pointer (with elements) or output pointer.
fn null_test(ins: &[String], outs: &[String], jacobian: bool, jac: &str) -> String {
    let mut tests: Vec<String> = ins.iter().filter(|e| !e.starts_with('&')).map(|e| format!("!{e}")).collect();
    tests.extend(outs.iter().map(|o| format!("!{o}")));
    if jacobian {
        tests.push(format!("!{jac}"));
    }
    if tests.is_empty() {
        "0".into()
    } else {
        tests.join(" || ")
    }
}

/// C statements packing `ins` into `args` (8-byte slots).
fn pack_args(out: &mut String, ins: &[(Leaf, String)]) {
    let mut k = 0;
    for (l, e) in ins {
        if l.is_array() {
            let _ = writeln!(out, "    args[{k}] = (uint64_t)(uintptr_t){e};");
            k += 1;
            for d in &l.dims {
                if let DimRef::Lit(n) = d {
                    let _ = writeln!(out, "    args[{k}] = {n};");
                }
                k += 1;
            }
        } else {
            match l.elem {
                Scalar::F64 => {
                    // (no parameter is called `arrayad_...`: see abi.rs, Namer)
                    let _ = writeln!(out, "    {{ double arrayad_d = {e}; memcpy(&args[{k}], &arrayad_d, 8); }}");
                }
                Scalar::I64 => {
                    let _ = writeln!(out, "    args[{k}] = (uint64_t)({e});");
                }
                Scalar::Bool => {
                    let _ = writeln!(out, "    args[{k}] = ({e}) ? 1 : 0;");
                }
            }
            k += 1;
        }
    }
}

/// The bytes of the array outputs of a fast call (`None` when an extent is
/// not literal or the count overflows: huge declared extents take the
/// table-driven path, which reports them).
fn stage_bytes(outs: &[(Leaf, String)]) -> Option<u64> {
    outs.iter().try_fold(0u64, |sum, (l, _)| {
        let bytes = if l.is_array() { literal_count(l)?.checked_mul(elem_bytes(l.elem))? } else { 0 };
        sum.checked_add(bytes)
    })
}

fn slots_of(ls: &[(Leaf, String)]) -> usize {
    ls.iter().map(|(l, _)| 1 + l.dims.len()).sum()
}

/// The fast path of a call of `symbol` whose leaves all have literal
/// extents: no tables, no heap, the results staged through the stack (so
/// that outputs may alias inputs) after their extents are checked. `None`
/// when the leaves are not all literal or the outputs too large.
fn fixed_call(ins: &[(Leaf, String)], outs: &[(Leaf, String)], symbol: &str) -> Option<String> {
    for (l, _) in ins.iter().chain(outs) {
        literal_count(l)?;
    }
    let stage = stage_bytes(outs)?;
    if stage > FAST_STAGE_BYTES {
        return None;
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "    uint64_t args[{}], res[{}], stage[{}];\n    int32_t st;\n    (void)stage;\n    arrayad_ctx *ctx = arrayad_abi_begin();\n    if (!ctx) return {};",
        slots_of(ins).max(1),
        slots_of(outs).max(1),
        stage.div_ceil(8).max(1),
        arrayad_ir::ErrorKind::OutOfMemory.code()
    );
    pack_args(&mut out, ins);
    let _ = writeln!(out, "    st = {symbol}(ctx, args, res);");
    stage_results(&mut out, outs, 0);
    let _ = writeln!(out, "    return arrayad_abi_end(ctx, st);");
    Some(out)
}

/// C statements that (when `st == 0`) check the extents of the array
/// results in `res` (from slot `first`), copy them into `stage`, then write
/// every output.
fn stage_results(out: &mut String, outs: &[(Leaf, String)], first: usize) {
    let _ = writeln!(out, "    if (st == 0) {{");
    let mut k = first;
    let mut off = 0u64;
    // Copies into `stage` and then the writes, in one block after the
    // checks (a compiler then sees every staged byte written before it is
    // read).
    let mut staging = String::new();
    let mut writes = String::new();
    for (l, name) in outs {
        if l.is_array() {
            let count = literal_count(l).unwrap_or(0);
            let bytes = count * elem_bytes(l.elem);
            let checks: Vec<String> = l
                .dims
                .iter()
                .enumerate()
                .map(|(a, d)| match d {
                    DimRef::Lit(n) => format!("res[{}] != {n}", k + 1 + a),
                    DimRef::Size(_) => "1".into(),
                })
                .collect();
            let _ = writeln!(
                out,
                "        if ({}) st = arrayad_fail_text(ctx, {}, \"size mismatch: result `{}` does not have its declared shape\");",
                checks.join(" || "),
                arrayad_ir::ErrorKind::SizeMismatch.code(),
                l.name
            );
            if bytes > 0 {
                let _ = writeln!(
                    staging,
                    "        memcpy((char *)stage + {off}, (const void *)(uintptr_t)res[{k}], {bytes});"
                );
                let _ = writeln!(writes, "        memcpy({name}, (char *)stage + {off}, {bytes});");
            }
            off += bytes.div_ceil(8) * 8;
            k += 1 + l.dims.len();
        } else {
            match l.elem {
                Scalar::F64 => {
                    let _ = writeln!(writes, "        memcpy({name}, &res[{k}], 8);");
                }
                Scalar::I64 => {
                    let _ = writeln!(writes, "        *{name} = (int64_t)res[{k}];");
                }
                Scalar::Bool => {
                    let _ = writeln!(writes, "        *{name} = res[{k}] != 0;");
                }
            }
            k += 1;
        }
    }
    let _ = writeln!(out, "    }}\n    if (st == 0) {{\n{staging}{writes}    }}");
}

/// The fast path of the Jacobian (reverse mode: one call of `vjp_rows` with
/// a static identity as the cotangents) when every leaf has literal
/// extents and there are at most as many rows as columns.
fn fixed_jacobian(i: &Interface, module: &str) -> Option<String> {
    if i.jacobian_by_vjp() {
        // One row: the gradient's call, each cotangent into its columns.
        let (ins, mut outs, _) = variant_leaves(i, Variant::Grad);
        outs[0].1 = i.results[0].name.clone();
        let mut off = 0u64;
        for (l, e) in outs.iter_mut().skip(1) {
            *e = format!("({} + {off})", i.jac_name);
            off = off.checked_add(literal_count(l)?)?;
        }
        return fixed_call(&ins, &outs, &internal_symbol(module, &i.name, "vjp"));
    }
    let named = |ls: &[Leaf]| ls.iter().map(|l| (l.clone(), l.name.clone())).collect::<Vec<_>>();
    let params = named(&i.params);
    let results = named(&i.results);
    for (l, _) in params.iter().chain(&results) {
        literal_count(l)?;
    }
    // Counts of huge declared extents overflow: the table-driven path
    // reports those.
    let count = |leaves: &[Leaf], which: &[usize]| {
        which.iter().try_fold(0u64, |sum, k| sum.checked_add(literal_count(&leaves[*k])?))
    };
    let rows = count(&i.results, &i.f64_results)?;
    let cols = count(&i.params, &i.active)?;
    if rows == 0 || rows > cols || rows.checked_mul(rows).is_none_or(|n| n > 4096) {
        return None;
    }
    let stage = stage_bytes(&results)?;
    if stage > FAST_STAGE_BYTES {
        return None;
    }
    let mut out = String::new();
    // One static block of the identity per f64 result leaf: rows x n, row r
    // one-hot at r - (the leaf's first row).
    let mut first = 0u64;
    let mut ins = params.clone();
    for (j, k) in i.f64_results.iter().enumerate() {
        let n = literal_count(&i.results[*k]).unwrap_or(0);
        let vals: Vec<&str> =
            (0..rows * n).map(|e| if e / n.max(1) == first + e % n.max(1) { "1.0" } else { "0.0" }).collect();
        let _ = writeln!(out, "    static const double unit{j}[{}] = {{{}}};", (rows * n).max(1), vals.join(", "));
        let mut l = i.results[*k].derived(format!("unit{j}"));
        l.dims.insert(0, DimRef::Lit(rows as i64));
        ins.push((l, format!("unit{j}")));
        first += n;
    }
    let stacks: usize = i.active.iter().map(|k| 2 + i.params[*k].dims.len()).sum();
    let _ = writeln!(
        out,
        "    uint64_t args[{}], res[{}], stage[{}];\n    int32_t st;\n    (void)stage;\n    arrayad_ctx *ctx = arrayad_abi_begin();\n    if (!ctx) return {};",
        slots_of(&ins).max(1),
        slots_of(&results) + stacks,
        stage.div_ceil(8).max(1),
        arrayad_ir::ErrorKind::OutOfMemory.code()
    );
    pack_args(&mut out, &ins);
    let _ = writeln!(out, "    st = {}(ctx, args, res);", internal_symbol(module, &i.name, "vjp_rows"));
    // The values first (as the table-driven path writes them), then the
    // stacks: [rows][leaf] each, into columns off.. of every row.
    stage_results(&mut out, &results, 0);
    let _ = writeln!(out, "    if (st == 0) {{");
    let mut k = slots_of(&results);
    let mut off = 0u64;
    for a in &i.active {
        let l = &i.params[*a];
        let n = literal_count(l).unwrap_or(0);
        let mut checks = vec![format!("res[{}] != {rows}", k + 1)];
        for (ax, d) in l.dims.iter().enumerate() {
            if let DimRef::Lit(e) = d {
                checks.push(format!("res[{}] != {e}", k + 2 + ax));
            }
        }
        let _ = writeln!(
            out,
            "        if ({}) st = arrayad_fail_text(ctx, {}, \"size mismatch: the Jacobian block of `{}` does not have its shape\");",
            checks.join(" || "),
            arrayad_ir::ErrorKind::SizeMismatch.code(),
            l.name
        );
        if n > 0 {
            let _ = writeln!(
                out,
                "        else {{ const double *src = (const double *)(uintptr_t)res[{k}]; int64_t r;\n            for (r = 0; r < {rows}; r++) memcpy({jac} + r * {cols} + {off}, src + r * {n}, {bytes}); }}",
                jac = i.jac_name,
                bytes = n * 8
            );
        }
        off += n;
        k += 2 + l.dims.len();
    }
    let _ = writeln!(out, "    }}");
    let _ = writeln!(out, "    return arrayad_abi_end(ctx, st);");
    Some(out)
}
