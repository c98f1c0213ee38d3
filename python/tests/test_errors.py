"""Every error is an exception of its own class, with the message and the
source location; nothing crashes the interpreter."""

from __future__ import annotations

import builtins

import numpy as np
import pytest

import arrayad

SOURCE = """def at(x: [n]f64, i: i64) -> f64 = x[i]
def sl(x: [n]f64, lo: i64, hi: i64) -> f64 = sum(x[lo:hi])
def dot2(x: [n]f64, w: [n]f64) -> f64 = dot(x, w)
def ragged(n: i64) -> [2][2]f64 = for i < 2 => if i == 0 then [1.0, 2.0] else [1.0, 2.0, 3.0]
def count(k: i64) -> f64 = sum(for i < k => 1.0)
def div(a: i64, b: i64) -> i64 = a / b
def top(x: [n]f64) -> f64 = maximum(x)
def fill(k: i64) -> f64 = let a = for i < k => f64(i) * 2.0 in a[k - 1] + a[k / 2]
def lit(x: [3]f64) -> f64 = sum(x)
def pair(x: [n]f64) -> (f64, [n]f64) = (sum(x), x)
def flag(b: bool) -> i64 = if b then 1 else 0
"""


@pytest.fixture(scope="module")
def mods():
    return {b: arrayad.compile(SOURCE, backend=b, name="err.arr") for b in arrayad.backends()}


@pytest.fixture
def m(mods, backend):
    return mods[backend]


def check_runtime(exc_info, cls, kind, line, builtin):
    e = exc_info.value
    assert type(e) is cls
    assert isinstance(e, arrayad.RuntimeError) and isinstance(e, builtins.RuntimeError)
    assert isinstance(e, arrayad.Error) and isinstance(e, builtin)
    assert e.kind is kind
    assert (e.file, e.line) == ("err.arr", line)
    assert isinstance(e.column, int) and e.column >= 1
    assert str(e) == e.message
    assert str(e).startswith(f"err.arr:{line}:{e.column}: {kind.description}: ")


def test_index_out_of_bounds(m):
    with pytest.raises(arrayad.IndexOutOfBounds) as ei:
        m.at(np.zeros(3), 5)
    check_runtime(ei, arrayad.IndexOutOfBounds, arrayad.ErrorKind.INDEX_OUT_OF_BOUNDS, 1, IndexError)
    assert "index 5" in str(ei.value) and (ei.value.line, ei.value.column) == (1, 36)
    with pytest.raises(arrayad.IndexOutOfBounds):
        m.at.grad(np.zeros(3), -1)  # in the gradient too


def test_slice_out_of_range(m):
    with pytest.raises(arrayad.SliceOutOfRange) as ei:
        m.sl(np.zeros(3), 2, 5)
    check_runtime(ei, arrayad.SliceOutOfRange, arrayad.ErrorKind.SLICE_OUT_OF_RANGE, 2, IndexError)


def test_size_mismatch(m):
    with pytest.raises(arrayad.SizeMismatch) as ei:
        m.dot2(np.zeros(3), np.zeros(2))
    check_runtime(ei, arrayad.SizeMismatch, arrayad.ErrorKind.SIZE_MISMATCH, 3, ValueError)
    assert "argument `x`" in str(ei.value) and "argument `w`" in str(ei.value)
    with pytest.raises(arrayad.SizeMismatch):
        m.lit(np.zeros(4))  # a literal dimension
    with pytest.raises(arrayad.SizeMismatch):
        m.dot2.vjp((np.zeros(3), np.zeros(2)), 1.0)


def test_irregular_array(m):
    with pytest.raises(arrayad.IrregularArray) as ei:
        m.ragged(0)
    check_runtime(ei, arrayad.IrregularArray, arrayad.ErrorKind.IRREGULAR_ARRAY, 4, ValueError)


def test_negative_size(m):
    with pytest.raises(arrayad.NegativeSize) as ei:
        m.count(-1)
    check_runtime(ei, arrayad.NegativeSize, arrayad.ErrorKind.NEGATIVE_SIZE, 5, ValueError)


def test_division_by_zero(m):
    with pytest.raises(arrayad.DivisionByZero) as ei:
        m.div(7, 0)
    check_runtime(ei, arrayad.DivisionByZero, arrayad.ErrorKind.DIVISION_BY_ZERO, 6, ZeroDivisionError)
    assert m.div(7, 2) == 3


def test_empty_reduction(m):
    with pytest.raises(arrayad.EmptyReduction) as ei:
        m.top(np.zeros(0))
    check_runtime(ei, arrayad.EmptyReduction, arrayad.ErrorKind.EMPTY_REDUCTION, 7, ValueError)


def test_out_of_memory(backend):
    if backend == "interp":
        pytest.skip("the interpreter has no memory limit")
    m = arrayad.compile(SOURCE, backend=backend, name="err.arr", max_memory="1M")
    assert m.fill(1000) == 2998.0
    with pytest.raises(arrayad.OutOfMemory) as ei:
        m.fill(10_000_000)  # 80 MB
    check_runtime(ei, arrayad.OutOfMemory, arrayad.ErrorKind.OUT_OF_MEMORY, 8, MemoryError)
    # The Jacobian on the host side too: 10^6 x 10^6 entries.
    with pytest.raises(arrayad.OutOfMemory):
        m.top.hessian(np.zeros(1_000_000))


def test_compile_error_diagnostics():
    with pytest.raises(arrayad.CompileError) as ei:
        arrayad.compile("def f(x: f64) -> f64 = y\ndef g(x: f64) -> i64 = x + 1.0\n", name="bad.arr")
    e = ei.value
    assert isinstance(e, arrayad.Error) and not isinstance(e, builtins.RuntimeError)
    assert len(e.diagnostics) >= 1
    d = e.diagnostics[0]
    assert isinstance(d, arrayad.Diagnostic)
    assert (d.file, d.line, d.column) == ("bad.arr", 1, 24)
    assert d.message == "unknown variable `y`"
    assert d.code.startswith("E") and len(d.code) == 5
    assert isinstance(d.notes, tuple)
    assert "bad.arr:1:24" in str(e) and "^" in str(e)
    with pytest.raises(arrayad.CompileError) as ei:
        arrayad.compile("def f(x: f64) -> f64 = x +", name="eof.arr")
    assert ei.value.diagnostics[0].line == 1
    with pytest.raises(arrayad.CompileError):
        arrayad.compile("def f(x: f64) -> f64 = f(x)")  # recursion


def test_argument_errors_name_the_parameter(m):
    with pytest.raises(arrayad.ArgumentError) as ei:
        m.at(np.zeros((3, 2), dtype=np.int64), 1)
    assert str(ei.value) == "argument `x` of `at`: expected a float64 array of rank 1, got int64 rank 2"
    assert isinstance(ei.value, TypeError) and isinstance(ei.value, ValueError)
    cases = [
        (lambda: m.at(np.zeros(3), 1.5), "argument `i` of `at`: expected an int64 scalar, got float"),
        (lambda: m.at("abc", 1), "argument `x` of `at`: expected a float64 array of rank 1, got str"),
        (lambda: m.at(None, 1), "argument `x` of `at`: expected a float64 array of rank 1, got NoneType"),
        (lambda: m.at(3.0, 1), "argument `x` of `at`: expected a float64 array of rank 1, got float"),
        (lambda: m.at(np.zeros(3, dtype=complex), 1), "got complex128 rank 1"),
        (lambda: m.at([[1.0], [2.0, 3.0]], 1), "argument `x` of `at`"),
        (lambda: m.at(np.zeros(3)), "`at` takes 2 arguments (x: [n]f64, i: i64), got 1"),
        (lambda: m.at(np.zeros(3), 1, 2), "`at` takes 2 arguments"),
        (lambda: m.at(np.zeros(3), j=1), "`at` has no parameter `j`"),
        (lambda: m.at(np.zeros(3), 1, i=1), "`at` got two values for argument `i`"),
        (lambda: m.at(x=np.zeros(3)), "`at` is missing argument `i`"),
        (lambda: m.at(np.zeros(3), 2**70), "does not fit in 64 bits"),
        (lambda: m.flag(1), "argument `b` of `flag`: expected a bool scalar, got int"),
        (lambda: m.pair.vjp((np.zeros(2),), (1.0, np.zeros((2, 2)))), "cotangent"),
        (lambda: m.pair.vjp(np.zeros(2), 1.0), "the primals of `pair` must be a tuple"),
        (lambda: m.pair.jvp((np.zeros(2),), (1.0,)), "the tangent of `x` of `pair`"),
        (lambda: m.dot2.jvp((np.zeros(3), np.zeros(3)), (np.zeros(2), None)), "the tangent of `x` must be a [3]f64"),
        (lambda: m.pair.jvp((np.zeros(2), 1.0), (None,)), "one entry per parameter"),
        (lambda: m.at.jvp((np.zeros(2), 1), (None, 1.0)), "must be None"),
        (lambda: m.top.grad(np.zeros(2), wrt=1.5), "wrt must be a parameter name or position"),
        (lambda: m["f" if False else 3], "looked up by name"),
    ]
    for call, text in cases:
        with pytest.raises(arrayad.ArgumentError) as ei:
            call()
        assert text in str(ei.value), (text, str(ei.value))


def test_usage_errors(m):
    with pytest.raises(arrayad.UsageError) as ei:
        m.dot2.grad(np.zeros(2), np.zeros(2), wrt="q")
    assert isinstance(ei.value, ValueError)
    assert "`q` is not a parameter of `dot2`" in str(ei.value)
    with pytest.raises(arrayad.UsageError, match="out of range"):
        m.dot2.grad(np.zeros(2), np.zeros(2), wrt=2)
    with pytest.raises(arrayad.UsageError, match="twice"):
        m.dot2.grad(np.zeros(2), np.zeros(2), wrt=("x", 0))
    with pytest.raises(arrayad.UsageError, match="no f64 parts"):
        m.at.grad(np.zeros(2), 0, wrt="i")
    with pytest.raises(arrayad.UsageError, match="result is one f64"):
        m.pair.grad(np.zeros(2))
    with pytest.raises(arrayad.UsageError, match="result is one f64"):
        m.pair.hessian(np.zeros(2))
    with pytest.raises(arrayad.UsageError, match="unknown backend"):
        arrayad.compile("def f(x: f64) -> f64 = x", backend="gcc")
    if "llvm" not in arrayad.backends():
        with pytest.raises(arrayad.UsageError, match="no LLVM backend"):
            arrayad.compile("def f(x: f64) -> f64 = x", backend="llvm")
    with pytest.raises(arrayad.UsageError, match="matches no parameter"):
        arrayad.compile("def f(x: f64) -> f64 = x", wrt=["y"])


def test_unknown_function(m):
    with pytest.raises(arrayad.UnknownFunctionError) as ei:
        m["nope"]
    e = ei.value
    assert isinstance(e, KeyError) and isinstance(e, AttributeError) and isinstance(e, arrayad.UsageError)
    assert str(e) == "no definition `nope` in err.arr (it defines: at, sl, dot2, ragged, count, div, top, fill, lit, pair, flag)"
    with pytest.raises(AttributeError):
        m.nope
    assert not hasattr(m, "nope") and hasattr(m, "at")
    assert getattr(m, "nope", None) is None


def test_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        arrayad.compile("missing.arr")
    with pytest.raises(OSError):
        arrayad.compile(tmp_path / "missing.arr")
    bad = tmp_path / "latin1.arr"
    bad.write_bytes(b"def f(x: f64) -> f64 = x // caf\xe9\n")
    with pytest.raises(arrayad.CompileError, match="not valid UTF-8"):
        arrayad.compile(bad)
    with pytest.raises(arrayad.ArgumentError):
        arrayad.compile(b"def f(x: f64) -> f64 = x")  # type: ignore[arg-type]
    with pytest.raises(arrayad.ArgumentError):
        arrayad.compile("def f(x: f64) -> f64 = x", max_memory="lots")


def test_every_error_is_catchable_as_arrayad_error(m):
    """Garbage of every kind gives an arrayad.Error, never a crash."""
    values = [None, 1, -1, 2**63, 1.5, float("nan"), "x", b"x", [], [[]], [1, [2]], (), {}, object(),
              np.zeros(0), np.zeros((0, 0)), np.zeros((2, 2, 2)), np.array(["a"]), np.array([None]),
              np.zeros(3, dtype=np.float16), np.zeros(2, dtype=np.uint64), np.ones(3)[::2], True]
    for f in (m.at, m.dot2, m.pair, m.flag, m.top):
        for a in values:
            for b in values[:6]:
                for call in (lambda: f(a, b), lambda: f(a), lambda: f.grad(a, b), lambda: f.jacobian(a),
                             lambda: f.vjp((a,), b), lambda: f.jvp((a, b), (b, a))):
                    try:
                        call()
                    except arrayad.Error:
                        pass
