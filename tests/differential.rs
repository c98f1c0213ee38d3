//! Differential tests over the corpus in `tests/programs/` and over
//! generated programs: for every test case,
//!
//! - reference interpreter on the source program == interpreter on the
//!   optimised program == Cranelift JIT (values);
//! - compiled vjp (interpreter and JIT) == the runtime Delta oracle
//!   (Krawiec et al. Figs. 9-11) == finite differences;
//! - compiled jvp == the dual-number oracle, and `<ct, J t> == <J^T ct, t>`.
//!
//! A corpus file names its cases in comments: `// test: FUNC [ARGS...]`
//! (JSON, one entry per flattened parameter); `// nofd` skips finite
//! differences (programs evaluated at non-differentiable points).

mod common;

use common::{check_case, Case};
use std::path::Path;

#[test]
fn corpus_programs_agree_across_backends_and_oracles() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let mut entries: Vec<_> = std::fs::read_dir(&dir).expect("tests/programs").flatten().map(|e| e.path()).collect();
    entries.sort();
    let mut n = 0;
    for path in entries.iter().filter(|p| p.extension().is_some_and(|e| e == "arr")) {
        let source = std::fs::read_to_string(path).expect("readable corpus file");
        let fd = !source.contains("// nofd");
        for line in source.lines() {
            if let Some(rest) = line.trim().strip_prefix("// test:") {
                let rest = rest.trim();
                let (func, args) = rest.split_once(' ').expect("// test: FUNC ARGS");
                let case = Case {
                    file: path.file_name().unwrap().to_string_lossy().into_owned(),
                    source: source.clone(),
                    func: func.to_string(),
                    args: serde_json::from_str(args).expect("JSON args"),
                    finite_differences: fd,
                };
                check_case(&case);
                n += 1;
            }
        }
    }
    assert!(n >= 15, "only {n} corpus cases found");
}

#[test]
fn gmm_example_agrees_across_backends_and_oracles() {
    let source = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gmm.arr")).unwrap();
    let case = Case {
        file: "gmm.arr".into(),
        source,
        func: "gmm".into(),
        args: serde_json::json!([
            [0.1, -0.3, 0.25],
            [[0.5, -0.2], [1.0, 0.3], [-0.7, 0.1]],
            [[0.1, -0.2, 0.3], [0.05, 0.2, -0.1], [-0.3, 0.1, 0.2]],
            [[0.3, 0.1], [-0.5, 0.9], [1.2, -0.4], [0.0, 0.2]],
            1.0,
            0
        ]),
        finite_differences: true,
    };
    check_case(&case);
}

#[test]
fn generated_programs_agree_across_backends_and_oracles() {
    for seed in 0..40u64 {
        let case = common::generate::program(seed);
        check_case(&case);
    }
}

#[test]
fn sharing_chain_gradient_is_instant() {
    // let x1 = x + x in let x2 = x1 + x1 in ... x60: 2^60 paths, 60 bindings.
    let mut src = String::from("def f(x: f64) -> f64 =\n  let x0 = x\n");
    for k in 1..=60 {
        src.push_str(&format!("  let x{k} = x{p} + x{p}\n", p = k - 1));
    }
    src.push_str("  in x60\n");
    let start = std::time::Instant::now();
    let case = Case {
        file: "chain.arr".into(),
        source: src,
        func: "f".into(),
        args: serde_json::json!([1.0]),
        finite_differences: false,
    };
    let grad = check_case(&case);
    assert_eq!(grad[0], 2f64.powi(60));
    assert!(start.elapsed().as_secs_f64() < 5.0, "took {:?}", start.elapsed());
}
