//! The ADBench bundle-adjustment residuals (`examples/ba.arr`, function
//! `ba_obs`) against an independent plain-Rust implementation of the
//! mathematics of `../shared/data/adbench/README.md` ("BA": Rodrigues
//! rotation as a rotation matrix, perspective division, radial distortion,
//! projection, weighted reprojection error and weight error), on every
//! compiled backend (Cranelift; LLVM in a build with the `llvm` feature):
//!
//! - the 3 residuals equal the reference to ~1e-12 (relative to the size of
//!   the terms they are computed from);
//! - the 3 x 15 Jacobian with respect to `cam` (11), `x` (3) and `w` (1) by
//!   reverse mode (`Function::jacobian`) agrees with central finite
//!   differences of the reference (Richardson-extrapolated, ~1e-6
//!   relative); forward mode (one `jvp` per column) and reverse mode agree
//!   to ~1e-12; a `vjp` with a random cotangent and a `jvp` in a random
//!   direction agree with the Jacobian; the weight-error row is exactly
//!   `[0, ..., 0, -2w]` and the `w` column of the reprojection rows is the
//!   unweighted reprojection error;
//! - `feat` is not differentiated (no cotangent).
//!
//! Inputs: generated observations (a deterministic LCG; points in front of
//! the camera, including a camera whose rotation vector is exactly zero,
//! which takes the first-order branch of the rotation), and, when
//! `../shared/data/adbench/ba` exists, the first observations of every
//! `ba*.txt` file there, replicated as ADBench does.

use arrayad::{Arg, Backend, Module, Options, Value};
use std::path::{Path, PathBuf};

/// Number of parameters of one observation: camera (11), point (3), weight.
const NP: usize = 15;

// ---------------------------------------------------------------------------
// The independent reference (README "BA", written from the mathematics).

/// The rotation matrix of the angle-axis vector `r`:
/// `R = cos(t) I + sin(t) [w]x + (1 - cos(t)) w w^T` with `t = |r|`,
/// `w = r / t`; for `r` exactly zero the first-order form `I + [r]x`.
fn rotation_matrix(r: [f64; 3]) -> [[f64; 3]; 3] {
    let t2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
    if t2 == 0.0 {
        // I + [r]x
        return [[1.0, -r[2], r[1]], [r[2], 1.0, -r[0]], [-r[1], r[0], 1.0]];
    }
    let t = t2.sqrt();
    let (c, s) = (t.cos(), t.sin());
    let w = [r[0] / t, r[1] / t, r[2] / t];
    // [w]x, the matrix of y -> w x y
    let k = [[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]];
    let mut m = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            let id = if i == j { 1.0 } else { 0.0 };
            m[i][j] = c * id + s * k[i][j] + (1.0 - c) * w[i] * w[j];
        }
    }
    m
}

fn mat_vec(m: &[[f64; 3]; 3], v: [f64; 3]) -> [f64; 3] {
    [0, 1, 2].map(|i| m[i][0] * v[0] + m[i][1] * v[1] + m[i][2] * v[2])
}

/// The projection of point `x` by camera `cam` (README steps 1-4).
fn project(cam: &[f64], x: &[f64]) -> [f64; 2] {
    let rot = rotation_matrix([cam[0], cam[1], cam[2]]);
    let rel = [x[0] - cam[3], x[1] - cam[4], x[2] - cam[5]];
    let y = mat_vec(&rot, rel);
    let (p0, p1) = (y[0] / y[2], y[1] / y[2]);
    let s = p0 * p0 + p1 * p1;
    let distortion = 1.0 + cam[9] * s + cam[10] * s * s;
    let focal = cam[6];
    [focal * (p0 * distortion) + cam[7], focal * (p1 * distortion) + cam[8]]
}

/// The three residuals of one observation from its 15 parameters `p`
/// (camera, point, weight) and its feature (README steps 5-6).
fn residuals(p: &[f64; NP], feat: [f64; 2]) -> [f64; 3] {
    let proj = project(&p[0..11], &p[11..14]);
    let w = p[14];
    [w * (proj[0] - feat[0]), w * (proj[1] - feat[1]), 1.0 - w * w]
}

/// The size of the terms each residual is computed from (for relative
/// comparisons of values that may cancel).
fn residual_scales(p: &[f64; NP], feat: [f64; 2]) -> [f64; 3] {
    let proj = project(&p[0..11], &p[11..14]);
    let w = p[14].abs();
    [w * (proj[0].abs() + feat[0].abs()), w * (proj[1].abs() + feat[1].abs()), 1.0 + w * w]
}

/// The Jacobian (3 x 15) of `residuals` by central differences, with one
/// Richardson step (error O(h^4)), step `1e-3 * max(1, |p_k|)`.
fn fd_jacobian(p: &[f64; NP], feat: [f64; 2]) -> [[f64; NP]; 3] {
    let mut jac = [[0.0; NP]; 3];
    for k in 0..NP {
        let h = 1e-3 * p[k].abs().max(1.0);
        let central = |h: f64| -> [f64; 3] {
            let (mut plus, mut minus) = (*p, *p);
            plus[k] += h;
            minus[k] -= h;
            let (fp, fm) = (residuals(&plus, feat), residuals(&minus, feat));
            let width = plus[k] - minus[k];
            [0, 1, 2].map(|r| (fp[r] - fm[r]) / width)
        };
        let (d1, d2) = (central(h), central(h / 2.0));
        for r in 0..3 {
            jac[r][k] = (4.0 * d2[r] - d1[r]) / 3.0;
        }
    }
    jac
}

// ---------------------------------------------------------------------------
// Inputs.

/// One observation: camera, point, weight, feature.
#[derive(Clone, Debug)]
struct Obs {
    p: [f64; NP],
    feat: [f64; 2],
}

impl Obs {
    fn cam(&self) -> &[f64] {
        &self.p[0..11]
    }
    fn x(&self) -> &[f64] {
        &self.p[11..14]
    }
    fn w(&self) -> f64 {
        self.p[14]
    }
}

/// A 64-bit LCG (Knuth's MMIX constants); uniform numbers from the high bits.
struct Lcg(u64);

impl Lcg {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next_f64()
    }
}

/// A random observation: the point is placed in front of the camera (depth
/// 2..6 in the camera frame, within a cone) and the feature near its
/// projection. `zero_rotation` makes the rotation vector exactly zero.
fn generate_obs(rng: &mut Lcg, zero_rotation: bool) -> Obs {
    let mut p = [0.0; NP];
    for rk in &mut p[0..3] {
        *rk = if zero_rotation { 0.0 } else { rng.uniform(-1.0, 1.0) };
    }
    for ck in &mut p[3..6] {
        *ck = rng.uniform(-2.0, 2.0); // centre
    }
    p[6] = rng.uniform(300.0, 900.0); // focal length
    p[7] = rng.uniform(-20.0, 20.0); // principal point
    p[8] = rng.uniform(-20.0, 20.0);
    p[9] = rng.uniform(-0.2, 0.2); // radial distortion
    p[10] = rng.uniform(-0.05, 0.05);
    // Y in the camera frame, X = R^T Y + C.
    let depth = rng.uniform(2.0, 6.0);
    let y = [rng.uniform(-0.5, 0.5) * depth, rng.uniform(-0.5, 0.5) * depth, depth];
    let rot = rotation_matrix([p[0], p[1], p[2]]);
    for i in 0..3 {
        p[11 + i] = rot[0][i] * y[0] + rot[1][i] * y[1] + rot[2][i] * y[2] + p[3 + i];
    }
    p[14] = rng.uniform(0.2, 1.5); // weight
    let proj = project(&p[0..11], &p[11..14]);
    let feat = [proj[0] + rng.uniform(-5.0, 5.0), proj[1] + rng.uniform(-5.0, 5.0)];
    Obs { p, feat }
}

/// An ADBench BA file (README "BA", file layout): `n m p`, one camera (11),
/// one point (3), one weight, one feature (2), replicated to n cameras, m
/// points, p weights and features; observation i links camera `i mod n`
/// with point `i mod m`. Returns the first `count` observations.
fn read_adbench_ba(path: &Path, count: usize) -> Vec<Obs> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut tokens = text.split_whitespace();
    let mut size = |what: &str| -> usize {
        tokens.next().and_then(|t| t.parse().ok()).unwrap_or_else(|| panic!("{}: no {what}", path.display()))
    };
    let (n, m, p) = (size("n"), size("m"), size("p"));
    let values: Vec<f64> =
        tokens.map(|t| t.parse().unwrap_or_else(|e| panic!("{}: bad number {t:?}: {e}", path.display()))).collect();
    assert_eq!(values.len(), 11 + 3 + 1 + 2, "{}: expected 17 numbers after n m p", path.display());
    assert!(n > 0 && m > 0 && p >= count, "{}: n={n} m={m} p={p}", path.display());
    let cams: Vec<f64> = (0..n).flat_map(|_| values[0..11].to_vec()).collect();
    let points: Vec<f64> = (0..m).flat_map(|_| values[11..14].to_vec()).collect();
    let weights = vec![values[14]; p];
    let feats: Vec<f64> = (0..p).flat_map(|_| values[15..17].to_vec()).collect();
    (0..count)
        .map(|i| {
            let (c, j) = (i % n, i % m);
            let mut obs = [0.0; NP];
            obs[0..11].copy_from_slice(&cams[11 * c..11 * c + 11]);
            obs[11..14].copy_from_slice(&points[3 * j..3 * j + 3]);
            obs[14] = weights[i];
            Obs { p: obs, feat: [feats[2 * i], feats[2 * i + 1]] }
        })
        .collect()
}

// ---------------------------------------------------------------------------
// arrayad.

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The compiling backends of this build.
fn compiled() -> Vec<Backend> {
    if cfg!(feature = "llvm") {
        vec![Backend::Cranelift, Backend::Llvm]
    } else {
        vec![Backend::Cranelift]
    }
}

fn compile(backend: Backend) -> Module {
    let source = std::fs::read_to_string(manifest_dir().join("examples/ba.arr")).expect("examples/ba.arr");
    let opts = Options::backend(backend).with_wrt(&["cam", "x", "w"]);
    Module::compile_with("examples/ba.arr", &source, opts).unwrap_or_else(|e| panic!("ba.arr ({backend:?}): {e}"))
}

fn f64s(v: &Value) -> Vec<f64> {
    v.f64_elements().expect("f64 data").to_vec()
}

/// The worst relative errors seen by the checks (for the report).
#[derive(Default)]
struct Worst {
    value: f64,
    fd: f64,
    fwd_rev: f64,
}

/// Checks one observation on `module`.
fn check_obs(module: &Module, label: &str, obs: &Obs, rng: &mut Lcg, worst: &mut Worst) {
    let f = module.function("ba_obs").expect("ba_obs is defined");
    assert_eq!(f.active(), [true, true, true, false], "{label}: cam, x, w active; feat not");
    let args = [Arg::Vector(obs.cam()), Arg::Vector(obs.x()), Arg::F64(obs.w()), Arg::Vector(&obs.feat)];

    // Values.
    let want = residuals(&obs.p, obs.feat);
    let scales = residual_scales(&obs.p, obs.feat);
    let out = f.call(&args).unwrap_or_else(|e| panic!("{label}: ba_obs failed: {e}"));
    assert_eq!(out.len(), 1, "{label}: one result leaf");
    let got = f64s(&out[0]);
    assert_eq!(got.len(), 3, "{label}: three residuals");
    for r in 0..3 {
        let err = (got[r] - want[r]).abs() / scales[r].max(want[r].abs());
        assert!(err <= 1e-12, "{label}: residual {r}: arrayad {:e} vs reference {:e} (error {err:e})", got[r], want[r]);
        worst.value = worst.value.max(err);
    }

    // Reverse-mode Jacobian (3 rows <= 15 columns) against finite
    // differences of the reference.
    let jac = f.jacobian(&args).unwrap_or_else(|e| panic!("{label}: jacobian failed: {e}"));
    assert_eq!((jac.rows, jac.cols), (3, NP), "{label}: the Jacobian is 3 x 15");
    assert_eq!(f64s(&jac.value[0]), got, "{label}: the Jacobian's value is the primal's");
    let fd = fd_jacobian(&obs.p, obs.feat);
    for (r, fd_row) in fd.iter().enumerate() {
        // Relative error, except that an entry a million times below the
        // row's largest is compared against 1e-6 of that (finite
        // differences carry the rounding error of the row's large terms).
        let row_max = fd_row.iter().fold(0.0f64, |a, b| a.max(b.abs()));
        for (k, &want) in fd_row.iter().enumerate() {
            let got = jac.row(r)[k];
            let err = (got - want).abs() / want.abs().max(1e-6 * row_max).max(1e-300);
            assert!(
                err <= 1e-6,
                "{label}: d residual {r} / d param {k}: arrayad {got:e} vs finite differences {want:e} (error {err:e})"
            );
            worst.fd = worst.fd.max(err);
        }
    }

    // Exact structure: the weight error 1 - w^2 depends on w only, and the
    // w column of the reprojection rows is proj - feat.
    for k in 0..NP - 1 {
        assert_eq!(jac.row(2)[k], 0.0, "{label}: d(1 - w^2)/d param {k} must be 0");
    }
    assert_eq!(jac.row(2)[NP - 1], -2.0 * obs.w(), "{label}: d(1 - w^2)/dw = -2w");
    let proj = project(obs.cam(), obs.x());
    for (r, (&pr, &fr)) in proj.iter().zip(&obs.feat).enumerate() {
        let want = pr - fr;
        let got = jac.row(r)[NP - 1];
        let err = (got - want).abs() / (pr.abs() + fr.abs());
        assert!(err <= 1e-12, "{label}: d residual {r} / dw: {got:e} vs proj - feat {want:e}");
    }

    // Forward mode, one column at a time, against reverse mode.
    let leaf_of = |k: usize| match k {
        0..=10 => (0, k),
        11..=13 => (1, k - 11),
        _ => (2, 0),
    };
    for k in 0..NP {
        let (leaf, e) = leaf_of(k);
        let mut tcam = [0.0; 11];
        let mut tx = [0.0; 3];
        let mut tw = 0.0;
        match leaf {
            0 => tcam[e] = 1.0,
            1 => tx[e] = 1.0,
            _ => tw = 1.0,
        }
        let tangents = [Some(Arg::Vector(&tcam)), Some(Arg::Vector(&tx)), Some(Arg::F64(tw)), None];
        let j = f.jvp(&args, &tangents).unwrap_or_else(|e| panic!("{label}: jvp failed: {e}"));
        assert_eq!(f64s(&j.value[0]), got, "{label}: the jvp's value is the primal's");
        let col = f64s(j.tangent[0].as_ref().expect("a tangent of the result"));
        assert_eq!(col.len(), 3, "{label}: the tangent has 3 entries");
        for (r, &fwd) in col.iter().enumerate() {
            let rev = jac.row(r)[k];
            let err = if fwd == rev { 0.0 } else { (fwd - rev).abs() / rev.abs() };
            assert!(err <= 1e-12, "{label}: d residual {r} / d param {k}: forward {fwd:e} vs reverse {rev:e}");
            worst.fwd_rev = worst.fwd_rev.max(err);
        }
    }

    // A random cotangent (vjp) and a random direction (jvp) against the
    // Jacobian.
    let u = [rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0)];
    let v = f.vjp(&args, &[Some(Arg::Vector(&u))]).unwrap_or_else(|e| panic!("{label}: vjp failed: {e}"));
    assert!(v.cotangent[3].is_none(), "{label}: feat is not differentiated");
    let mut ct = f64s(v.cotangent[0].as_ref().expect("d cam"));
    ct.extend(f64s(v.cotangent[1].as_ref().expect("d x")));
    ct.extend(f64s(v.cotangent[2].as_ref().expect("d w")));
    assert_eq!(ct.len(), NP, "{label}: 15 cotangent entries");
    for (k, &c) in ct.iter().enumerate() {
        let terms: Vec<f64> = (0..3).map(|r| u[r] * jac.row(r)[k]).collect();
        let want: f64 = terms.iter().sum();
        let scale: f64 = terms.iter().map(|t| t.abs()).sum();
        assert!((c - want).abs() <= 1e-12 * scale.max(1e-300), "{label}: vjp entry {k}: {c:e} vs u^T J {want:e}");
    }
    let dir: Vec<f64> = (0..NP).map(|_| rng.uniform(-1.0, 1.0)).collect();
    let j = f
        .jvp(&args, &[Some(Arg::Vector(&dir[0..11])), Some(Arg::Vector(&dir[11..14])), Some(Arg::F64(dir[14])), None])
        .unwrap_or_else(|e| panic!("{label}: jvp failed: {e}"));
    let t = f64s(j.tangent[0].as_ref().expect("a tangent"));
    for r in 0..3 {
        let terms: Vec<f64> = (0..NP).map(|k| jac.row(r)[k] * dir[k]).collect();
        let want: f64 = terms.iter().sum();
        let scale: f64 = terms.iter().map(|t| t.abs()).sum();
        assert!((t[r] - want).abs() <= 1e-12 * scale.max(1e-300), "{label}: jvp row {r}: {:e} vs J v {want:e}", t[r]);
    }
}

fn report(label: &str, count: usize, w: &Worst) {
    eprintln!(
        "{label}: {count} observations; worst relative errors: value {:e}, vs finite differences {:e}, forward vs reverse {:e}",
        w.value, w.fd, w.fwd_rev
    );
}

// ---------------------------------------------------------------------------
// Tests.

#[test]
fn reference_rotation_is_a_rotation() {
    // The reference itself: R(r) is orthogonal with determinant 1, fixes
    // the axis r, and turns by |r| (a quarter turn about z maps e_x to e_y).
    let mut rng = Lcg(3);
    for _ in 0..20 {
        let r = [rng.uniform(-2.0, 2.0), rng.uniform(-2.0, 2.0), rng.uniform(-2.0, 2.0)];
        let m = rotation_matrix(r);
        for i in 0..3 {
            for j in 0..3 {
                let dot: f64 = (0..3).map(|k| m[k][i] * m[k][j]).sum();
                let id = if i == j { 1.0 } else { 0.0 };
                assert!((dot - id).abs() < 1e-14, "R^T R [{i}][{j}] = {dot}");
            }
        }
        let det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
        assert!((det - 1.0).abs() < 1e-14, "det R = {det}");
        let rr = mat_vec(&m, r);
        for i in 0..3 {
            assert!((rr[i] - r[i]).abs() < 1e-14, "R r != r");
        }
    }
    let q = mat_vec(&rotation_matrix([0.0, 0.0, std::f64::consts::FRAC_PI_2]), [1.0, 0.0, 0.0]);
    assert!(q[0].abs() < 1e-15 && (q[1] - 1.0).abs() < 1e-15 && q[2].abs() < 1e-15, "quarter turn: {q:?}");
}

#[test]
fn ba_generated_observations() {
    let mut gen = Lcg(20240601);
    let mut cases: Vec<(String, Obs)> =
        (0..12).map(|i| (format!("generated {i}"), generate_obs(&mut gen, false))).collect();
    cases.push(("zero rotation".into(), generate_obs(&mut gen, true)));
    cases.push(("zero rotation 2".into(), generate_obs(&mut gen, true)));
    // A small but nonzero rotation (the Rodrigues branch near 0).
    let mut small = generate_obs(&mut gen, false);
    small.p[0..3].copy_from_slice(&[1e-4, -2e-4, 5e-5]);
    cases.push(("small rotation".into(), small));
    for b in compiled() {
        let module = compile(b);
        let mut rng = Lcg(99);
        let mut worst = Worst::default();
        for (label, obs) in &cases {
            check_obs(&module, &format!("{label} ({b:?})"), obs, &mut rng, &mut worst);
        }
        report(&format!("generated ({b:?})"), cases.len(), &worst);
    }
}

#[test]
fn ba_adbench_files() {
    let dir = manifest_dir().join("../shared/data/adbench/ba");
    if !dir.is_dir() {
        eprintln!("note: {} not found: skipping the ADBench BA files", dir.display());
        return;
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("readable directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("ba") && name.ends_with(".txt")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no ba*.txt in {}", dir.display());
    let modules: Vec<(Backend, Module)> = compiled().into_iter().map(|b| (b, compile(b))).collect();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let observations = read_adbench_ba(path, 4);
        for (b, module) in &modules {
            let mut rng = Lcg(7);
            let mut worst = Worst::default();
            for (i, obs) in observations.iter().enumerate() {
                check_obs(module, &format!("{name} observation {i} ({b:?})"), obs, &mut rng, &mut worst);
            }
            report(&format!("{name} ({b:?})"), observations.len(), &worst);
        }
    }
}
