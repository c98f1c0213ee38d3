//! Self-test of the plain-Rust GMM reference (`tests/gmm_reference/mod.rs`): the
//! hand-derived gradient against central finite differences of the objective, and the
//! reader on the ADBench data when `../shared/data/adbench/` is present. Std only.

mod gmm_reference;

use gmm_reference::{format_gmm, generate_gmm, gmm_gradient, gmm_objective, lower_index, read_gmm, GmmInput};
use std::path::PathBuf;

/// Mutable view of parameter `idx` of the concatenated (alphas, means, icf) vector.
fn param_mut(inp: &mut GmmInput, idx: usize) -> &mut f64 {
    let (na, nm) = (inp.alphas.len(), inp.means.len());
    if idx < na {
        &mut inp.alphas[idx]
    } else if idx < na + nm {
        &mut inp.means[idx - na]
    } else {
        &mut inp.icf[idx - na - nm]
    }
}

/// Central difference `(f(p + h) - f(p - h)) / 2h` with `h = 1e-6 * max(1, |p|)`.
fn central_difference(inp: &GmmInput, idx: usize) -> f64 {
    let mut work = inp.clone();
    let p = *param_mut(&mut work, idx);
    let h = 1e-6 * p.abs().max(1.0);
    *param_mut(&mut work, idx) = p + h;
    let fp = gmm_objective(&work);
    *param_mut(&mut work, idx) = p - h;
    let fm = gmm_objective(&work);
    (fp - fm) / (2.0 * h)
}

/// Relative error, with the denominator floored at 1 (so that entries near zero are
/// compared in absolute terms: finite differences cannot resolve them better).
fn rel_err(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(1.0)
}

fn check_against_finite_differences(inp: &GmmInput, tol: f64) {
    let (f, grad) = gmm_gradient(inp);
    let f0 = gmm_objective(inp);
    assert!(f0.is_finite(), "objective is not finite: {}", f0);
    assert!((f - f0).abs() <= 1e-12 * f0.abs().max(1.0), "gmm_gradient value {} differs from gmm_objective {}", f, f0);
    assert_eq!(grad.len(), inp.gradient_len());
    let mut worst = (0.0f64, 0usize);
    for (idx, &g) in grad.iter().enumerate() {
        let fd = central_difference(inp, idx);
        let e = rel_err(g, fd);
        assert!(
            e < tol,
            "gradient entry {} (of {}): analytic {} vs finite difference {} (rel err {:e})",
            idx,
            grad.len(),
            g,
            fd,
            e
        );
        if e > worst.0 {
            worst = (e, idx);
        }
    }
    eprintln!(
        "d={} K={} n={} m={} gamma={}: worst relative error {:e} at entry {}",
        inp.d, inp.k, inp.n, inp.m, inp.gamma, worst.0, worst.1
    );
}

#[test]
fn gradient_matches_finite_differences() {
    let inp = generate_gmm(3, 4, 20, 42);
    check_against_finite_differences(&inp, 1e-6);
}

#[test]
fn gradient_matches_finite_differences_with_wishart_m_and_gamma() {
    // exercise the m and gamma terms of the prior (the ADBench files all have 1, 0)
    let mut inp = generate_gmm(4, 3, 15, 7);
    inp.gamma = 0.7;
    inp.m = 2;
    check_against_finite_differences(&inp, 1e-6);
}

#[test]
fn gradient_matches_finite_differences_d1() {
    // d = 1: no strictly lower entries
    let inp = generate_gmm(1, 3, 10, 1);
    check_against_finite_differences(&inp, 1e-6);
}

#[test]
fn generator_is_deterministic_and_sized() {
    let a = generate_gmm(3, 4, 20, 42);
    let b = generate_gmm(3, 4, 20, 42);
    assert_eq!(a, b);
    assert_ne!(a, generate_gmm(3, 4, 20, 43));
    assert_eq!(a.alphas.len(), 4);
    assert_eq!(a.means.len(), 12);
    assert_eq!(a.icf.len(), 24);
    assert_eq!(a.x.len(), 60);
    assert!(a.means.iter().all(|&v| v > 0.0 && v < 1.0));
    assert_eq!((a.gamma, a.m), (1.0, 0));
}

#[test]
fn lower_index_is_column_by_column() {
    // d = 4: Q[1,0] Q[2,0] Q[3,0] Q[2,1] Q[3,1] Q[3,2] at 4..10
    let order = [(1, 0), (2, 0), (3, 0), (2, 1), (3, 1), (3, 2)];
    for (i, &(r, c)) in order.iter().enumerate() {
        assert_eq!(lower_index(4, r, c), 4 + i);
    }
}

#[test]
fn write_then_read_round_trips() {
    let inp = generate_gmm(3, 2, 5, 9);
    let dir = std::env::temp_dir().join(format!("gmm_reference_selftest_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("roundtrip.txt");
    std::fs::write(&path, format_gmm(&inp)).unwrap();
    let back = read_gmm(&path);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(back.unwrap(), inp);
}

#[test]
fn reader_rejects_malformed_files() {
    let dir = std::env::temp_dir().join(format!("gmm_reference_bad_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        ("empty", ""),
        ("zero_k", "2 0 1\n"),
        ("truncated", "1 1 1\n0.5\n0.1\n"),
        ("not_a_number", "1 1 1\n0.5\n0.1\nabc\n0.2\n1 0\n"),
        ("trailing", "1 1 1\n0.5\n0.1\n0.3\n0.2\n1 0\n7\n"),
    ];
    for (name, text) in cases {
        let path = dir.join(format!("{}.txt", name));
        std::fs::write(&path, text).unwrap();
        assert!(read_gmm(&path).is_err(), "case {} should fail", name);
    }
    let ok = dir.join("ok.txt");
    std::fs::write(&ok, "1 1 1\n0.5\n0.1\n0.3\n0.2\n1 0\n").unwrap();
    let inp = read_gmm(&ok).unwrap();
    assert_eq!((inp.d, inp.k, inp.n, inp.m), (1, 1, 1, 0));
    assert_eq!(inp.icf, vec![0.3]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reads_adbench_d2_k5_when_present() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/adbench/gmm/gmm_d2_K5.txt");
    if !path.exists() {
        eprintln!("skipping: {} not found", path.display());
        return;
    }
    let inp = read_gmm(&path).unwrap_or_else(|e| panic!("{}", e));
    assert_eq!((inp.d, inp.k, inp.n), (2, 5, 1000));
    assert_eq!((inp.gamma, inp.m), (1.0, 0));
    let f = gmm_objective(&inp);
    assert!(f.is_finite(), "objective is not finite: {}", f);
    let (fg, grad) = gmm_gradient(&inp);
    assert!((fg - f).abs() <= 1e-10 * f.abs().max(1.0), "{} vs {}", fg, f);
    assert_eq!(grad.len(), 5 * (1 + 2 + 3));
    assert!(grad.iter().all(|g| g.is_finite()));
}
