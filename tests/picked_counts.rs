//! Comprehensions over a count picked by a branch (`if c then n else 0`,
//! as `ir::passes::gather` writes the two versions of a loop of packed
//! index arithmetic). Their chunk functions compute the count again
//! (`codegen/src/parallel`), and a loop over it knows its points in the
//! bounds of the extent the count picks (codegen's `Lower::zero_or`), but
//! of no other: a count beyond the rows a comprehension reads keeps its
//! checks and fails at the first row out of bounds, with the interpreter's
//! message, on every backend and on one thread or two. Values and
//! derivatives: `tests/programs/picked_counts.arr`.

use arrayad::{ErrorKind, Module};
use arrayad_ir::{ArrayData, ArrayValue, Value};

fn backends() -> Vec<arrayad::Backend> {
    let mut out = vec![arrayad::Backend::Interp, arrayad::Backend::Cranelift];
    if cfg!(feature = "llvm") {
        out.push(arrayad::Backend::Llvm);
    }
    out
}

#[test]
fn a_picked_count_beyond_the_rows_read_fails_at_the_first_row_out_of_bounds() {
    // `w` has `p` rows, the count: its reads need no check; `x` has fewer.
    let src = "def f(x: [n][m]f64, w: [p]f64, s: f64) -> f64 =
  let c = if s > 0.0 then p else 0
  let rows = for i < c => sum(for j < m => x[i, j] * w[i] * s)
  in sum(rows)";
    let matrix = |rows: usize, cols: usize| {
        Value::Array(ArrayValue {
            shape: vec![rows, cols],
            data: ArrayData::F64((0..rows * cols).map(|k| k as f64 * 0.25).collect()),
        })
    };
    let w = Value::Array(ArrayValue { shape: vec![9], data: ArrayData::F64((0..9).map(|k| 1.0 + k as f64).collect()) });
    arrayad_runtime::set_parallel_grain(Some(0));
    let mut messages = Vec::new();
    for backend in backends() {
        let m = Module::compile_with("t.arr", src, arrayad::Options::backend(backend)).unwrap();
        let f = m.function("f").unwrap();
        for threads in [1, 2] {
            arrayad_runtime::set_num_threads(Some(threads));
            let e = f.call_values(&[matrix(5, 3), w.clone(), Value::F64(1.0)]).unwrap_err();
            assert_eq!(e.runtime_kind(), Some(ErrorKind::IndexOutOfBounds), "{backend:?}: {e}");
            messages.push((backend, e.to_string()));
            // Rows enough: the sum; the other branch: no rows.
            let all = f.call_values(&[matrix(9, 3), w.clone(), Value::F64(1.0)]).unwrap();
            let want: f64 =
                (0..9).map(|i| (0..3).map(|j| (i * 3 + j) as f64 * 0.25 * (1.0 + i as f64)).sum::<f64>()).sum();
            assert!(matches!(all[..], [Value::F64(v)] if (v - want).abs() <= 1e-12 * want), "{backend:?}: {all:?}");
            let none = f.call_values(&[matrix(5, 3), w.clone(), Value::F64(-1.0)]).unwrap();
            assert_eq!(none, vec![Value::F64(0.0)], "{backend:?}");
        }
    }
    arrayad_runtime::set_num_threads(None);
    arrayad_runtime::set_parallel_grain(None);
    let (_, first) = &messages[0];
    assert!(
        first.contains("t.arr:3:") && first.contains("index 5 is out of bounds for axis 0 of `x`, of extent 5"),
        "{first}"
    );
    for (backend, m) in &messages {
        assert_eq!(m, first, "{backend:?}");
    }
}
