"""compile(): source text or files, options, backends."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import arrayad

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_source_text_and_files(tmp_path):
    src = "def sq(x: [n]f64) -> f64 = dot(x, x)\n"
    m = arrayad.compile(src)
    assert m.file == "<string>" and m.sq(np.array([1.0, 2.0])) == 5.0
    assert arrayad.compile(src, name="mine.arr").file == "mine.arr"
    p = tmp_path / "sq.arr"
    p.write_text(src)
    for path in (p, str(p)):
        mp = arrayad.compile(path)
        assert mp.file == str(p)
        assert mp.sq(np.array([3.0])) == 9.0
    # A file not ending in .arr is not read as one: its name is no program.
    other = tmp_path / "sq.txt"
    other.write_text(src)
    with pytest.raises(arrayad.CompileError):
        arrayad.compile(str(other))
    assert arrayad.compile(other).sq(np.array([2.0])) == 4.0  # a Path always is a file


def test_repository_examples_compile():
    m = arrayad.compile(REPO / "examples" / "quickstart.arr")
    x, w = np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.5, 0.5])
    assert m.f(x, w) == pytest.approx(3.0 + np.e)
    mean, var = m.mean_var(x)
    assert (mean, var) == (pytest.approx(2.0), pytest.approx(2.0 / 3.0))
    lse = arrayad.compile(REPO / "examples" / "logsumexp.arr")
    v = np.array([1000.0, 1001.0, 1002.0])
    s = np.exp(v - v.max()) / np.exp(v - v.max()).sum()
    assert lse.logsumexp(v) == pytest.approx(1002.0 + np.log(np.exp([-2.0, -1.0, 0.0]).sum()), rel=1e-15)
    np.testing.assert_allclose(lse.logsumexp.grad(v), s, rtol=1e-14)
    np.testing.assert_allclose(lse.softmax.jacobian(v), np.diag(s) - np.outer(s, s), rtol=1e-12, atol=1e-15)


def test_module_wrt_sets_the_default():
    src = "def f(x: [n]f64, w: [n]f64) -> f64 = dot(x, w)\ndef g(w: f64) -> f64 = w * w"
    m = arrayad.compile(src, wrt=["w"])
    assert m.f.default_wrt == ("w",) and m.g.default_wrt == ("w",)
    x, w = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    np.testing.assert_array_equal(m.f.grad(x, w), x)  # only w: the gradient itself
    gx, gw = m.f.grad(x, w, wrt=("x", "w"))  # still available per call
    np.testing.assert_array_equal(gx, w)
    assert m.f.jacobian(x, w).shape == (1, 2)
    assert arrayad.compile(src, wrt="w").f.default_wrt == ("w",)


def test_checkpoint_gives_the_same_gradient():
    src = "def run(x: [n]f64, k: i64) -> f64 = sum(loop s = x for i < k do sin(s) + 0.1 * s)"
    x = np.linspace(-1, 1, 7)
    plain = arrayad.compile(src).run.grad(x, 50)
    ck = arrayad.compile(src, checkpoint=True).run.grad(x, 50)
    np.testing.assert_allclose(ck, plain, rtol=1e-13)


def test_checkpoint_warnings_name_the_loops_left_taped():
    src = (
        "def grow(x: f64) -> f64 =\n"
        "  loop y = x while y < 100.0 do y * 1.5 + sin(y)\n"
        "def smooth(x: [n]f64, m: i64) -> f64 =\n"
        "  sum(loop h = x for s < m do h + 0.1 * sin(h))\n"
    )
    m = arrayad.compile(src, name="cp.arr", checkpoint=True)
    (w,) = m.grow.checkpoint_warnings()
    assert w.startswith("cp.arr:2:3: warning: a while loop is not checkpointed"), w
    assert m.smooth.checkpoint_warnings() == []
    assert arrayad.compile(src, name="cp.arr").grow.checkpoint_warnings() == []


def test_backends():
    assert arrayad.backends()[0] == "cranelift" and "interp" in arrayad.backends()
    src = "def f(x: [n]f64) -> f64 = sum(exp(x))"
    x = np.linspace(0, 1, 5)
    for b in arrayad.backends():
        m = arrayad.compile(src, backend=b)
        assert m.backend == b
        assert m.f(x) == pytest.approx(np.exp(x).sum(), rel=1e-14)


@pytest.mark.skipif("llvm" not in arrayad.backends(), reason="this build has no LLVM backend")
def test_llvm_fast_math():
    m = arrayad.compile("def f(x: [n]f64) -> f64 = sum(x * x)", backend="llvm", fast_math=True)
    x = np.random.default_rng(0).standard_normal(1001)
    assert m.f(x) == pytest.approx(x @ x, rel=1e-12)


def test_flush_subnormals():
    """``flush_subnormals=True``: every call flushes subnormal numbers to
    zero (on every thread: a map and a gradient), and Python's own mode is
    back after it; without it, IEEE's subnormal numbers."""
    src = (
        "def scaled(x: [n]f64) -> [n]f64 = for i < n => x[i] * 1e-300\n"
        "def energy(x: [n]f64) -> f64 = sum(for i < n => x[i] * x[i] * 1e-290) * 1e-10\n"
    )
    x = 1e-10 * (1.0 + np.arange(100_000) / 1e5)
    tiny = np.finfo(np.float64).tiny
    for b in [b for b in arrayad.backends() if b != "interp"]:
        for flush in [False, True]:
            m = arrayad.compile(src, backend=b, flush_subnormals=flush)
            for threads in [1, 2]:
                arrayad.set_num_threads(threads)
                values = np.concatenate([m.scaled(x), m.energy.grad(x)])
                if flush:
                    assert (values == 0.0).all(), (b, threads)
                else:
                    assert ((values > 0.0) & (values < tiny)).all(), (b, threads)
                # numpy, in this thread, still computes subnormal numbers.
                assert np.float64(1e-300) * np.float64(1e-10) > 0.0
    arrayad.set_num_threads(None)


def test_backend_ir():
    src = "def f(x: [n]f64) -> f64 = sum(exp(x))"
    # Cranelift IR's functions start `function u0:0(...)`, LLVM IR's `define`.
    marker = {"cranelift": "function u0:", "llvm": "define ", "interp": None}
    for b in arrayad.backends():
        ir = arrayad.compile(src, backend=b).f.backend_ir("vjp")
        if marker[b] is None:
            assert ir is None
        else:
            assert marker[b] in ir, ir
    with pytest.raises(arrayad.UsageError, match="unknown code kind `gradient`"):
        arrayad.compile(src).f.backend_ir("gradient")


@pytest.mark.skipif("llvm" not in arrayad.backends(), reason="this build has no LLVM backend")
def test_llvm_vectorises_loop_remainders():
    # As under the `arrayad` command, the remainder of a loop vectorised 4
    # or 8 lanes wide is vectorised too, 2 lanes wide: here the rows of a
    # triangle in the backward pass.
    src = ("def q(l: [n][n]f64, x: [m][n]f64) -> f64 =\n"
           "  sum(for i < m => let y = x[i] in sum(for r < n => l[r, r] * y[r] + dot(l[r][0:r], y[0:r])))\n")
    vjp = arrayad.compile(src, backend="llvm").q.backend_ir("vjp")
    assert "define" in vjp
    if "<8 x double>" in vjp or "<4 x double>" in vjp:
        assert "vec.epilog.vector.body" in vjp, vjp


def test_max_memory_forms():
    for mem in (1 << 20, "1M", "1m", "1MB", "1048576"):
        m = arrayad.compile("def f(x: [n]f64) -> f64 = sum(x)", max_memory=mem)
        assert m.f(np.ones(3)) == 3.0
    for bad in (0, -1, "1X", "", 1.5, True):
        with pytest.raises(arrayad.ArgumentError):
            arrayad.compile("def f(x: f64) -> f64 = x", max_memory=bad)


def test_keep_calls_above():
    # f_k = f_{k-1} . f_{k-1}: 2^22 applications of f0, beyond the inlining
    # limit; its large definitions are compiled once and called.
    src = "def f0(x: f64) -> f64 = x + 0.0000001 * sin(x)\n" + "".join(
        f"def f{k}(x: f64) -> f64 = f{k - 1}(f{k - 1}(x))\n" for k in range(1, 23)
    )
    x, d = 0.3, 1.0
    m = arrayad.compile(src)
    value, gradient = arrayad.value_and_grad(m.f12)(0.3)
    for _ in range(1 << 12):
        d *= 1.0 + 0.0000001 * np.cos(x)
        x += 0.0000001 * np.sin(x)
    assert value == pytest.approx(x, rel=1e-13) and gradient == pytest.approx(d, rel=1e-12)
    assert m.f22(0.3) == pytest.approx(arrayad.compile(src, keep_calls_above=1).f22(0.3), rel=1e-15)
    with pytest.raises(arrayad.UsageError, match="too large after inlining"):
        arrayad.compile(src, keep_calls_above=10**30).f22(0.3)
    for bad in (-1, 1.5, "2000", True):
        with pytest.raises(arrayad.ArgumentError):
            arrayad.compile(src, keep_calls_above=bad)


def test_version():
    assert arrayad.__version__ == "0.1.0"


def test_docstring_examples():
    import doctest

    failed, attempted = doctest.testmod(arrayad)
    assert attempted >= 8 and failed == 0
