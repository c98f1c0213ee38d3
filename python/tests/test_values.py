"""Calls of compiled definitions: argument conversion, result types and
shapes, tuples, i64 and bool, empty and rank >= 2 arrays."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

import arrayad

SOURCE = """
def f(x: [n]f64, w: [n]f64) -> f64 = sum(x * w) + exp(x[0])
def scale(a: f64, v: [n]f64) -> [n]f64 = a * v
def matvec(a: [n][m]f64, v: [m]f64) -> [n]f64 = for i < n => dot(a[i], v)
def outer(u: [n]f64, v: [m]f64) -> [n][m]f64 = for i < n, j < m => u[i] * v[j]
def cube(z: [n]f64) -> [n][2][3]f64 = for i < n, j < 2, k < 3 => f64(i * 100 + j * 10 + k)
def stats(p: (f64, [n]f64), k: i64, flip: bool) -> (f64, [n]f64, (i64, bool)) =
  (p.0 * sum(p.1), if flip then -p.1 else p.1, (k * 2, !flip))
def count(xs: [n]i64, keep: [n]bool) -> i64 = sum(for i < n => if keep[i] then xs[i] else 0)
def mask(x: [n]f64, t: f64) -> [n]bool = for i < n => x[i] > t
def idx(x: [n]f64) -> [n]i64 = for i < n => i64(x[i])
def total(x: [n]f64) -> f64 = sum(x)
def total2(a: [n][m]f64) -> f64 = sum(for i < n => sum(a[i]))
def half(k: i64) -> f64 = f64(k) / 2.0
def pick(b: bool, x: f64) -> f64 = if b then x else -x
"""


@pytest.fixture(scope="module")
def mods():
    return {b: arrayad.compile(SOURCE, backend=b, name="values.arr") for b in arrayad.backends()}


@pytest.fixture
def m(mods, backend):
    return mods[backend]


def test_scalar_result_is_a_python_float(m):
    x, w = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    v = m.f(x, w)
    assert type(v) is float
    assert v == pytest.approx(x @ w + math.exp(1.0), rel=1e-15)
    # keywords, in any order
    assert m.f(w=w, x=x) == v
    assert m.f(x, w=w) == v


def test_array_results_have_the_declared_shape(m):
    a = np.arange(6.0).reshape(2, 3)
    v = np.array([1.0, -1.0, 2.0])
    out = m.matvec(a, v)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64 and out.shape == (2,)
    np.testing.assert_array_equal(out, a @ v)
    o = m.outer(np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0]))
    assert o.shape == (2, 3)
    np.testing.assert_array_equal(o, np.outer([1.0, 2.0], [3.0, 4.0, 5.0]))
    c = m.cube(np.zeros(4))
    assert c.shape == (4, 2, 3)
    assert c[3, 1, 2] == 312.0 and c.flags.c_contiguous and c.flags.writeable


def test_empty_arrays(m):
    e = np.zeros(0)
    assert m.total(e) == 0.0
    assert m.total2(np.zeros((0, 5))) == 0.0
    assert m.total2(np.zeros((3, 0))) == 0.0
    out = m.scale(2.0, e)
    assert out.shape == (0,) and out.dtype == np.float64
    o = m.outer(np.ones(3), np.zeros(0))
    assert o.shape == (3, 0)
    g = m.total.grad(e)
    assert isinstance(g, np.ndarray) and g.shape == (0,)
    assert m.total2.grad(np.zeros((2, 0))).shape == (2, 0)
    assert m.count(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)) == 0


def test_empty_outer_comprehension(m):
    # Rows of a comprehension that runs zero times keep their static shape.
    assert m.outer(np.zeros(0), np.ones(3)).shape == (0, 3)
    assert m.cube(np.zeros(0)).shape == (0, 2, 3)


def test_tuple_parameters_and_results(m):
    p = (2.0, np.array([1.0, 2.0, 3.0]))
    r = m.stats(p, 5, True)
    assert isinstance(r, tuple) and len(r) == 3
    assert r[0] == 12.0 and type(r[0]) is float
    np.testing.assert_array_equal(r[1], [-1.0, -2.0, -3.0])
    assert r[2] == (10, False)
    assert type(r[2][0]) is int and type(r[2][1]) is bool
    # a list stands for a tuple too
    assert m.stats([2.0, [1.0, 2.0, 3.0]], 5, False)[0] == 12.0


def test_i64_and_bool_parameters_and_results(m):
    xs = np.array([1, 2, 3, 4], dtype=np.int64)
    keep = np.array([True, False, True, True])
    n = m.count(xs, keep)
    assert type(n) is int and n == 8
    assert m.count([1, 2, 3], [True, True, False]) == 3
    mk = m.mask(np.array([0.5, 2.0, -1.0]), 0.0)
    assert mk.dtype == np.bool_
    np.testing.assert_array_equal(mk, [True, True, False])
    ix = m.idx(np.array([1.9, -2.5, 7.0]))
    assert ix.dtype == np.int64
    np.testing.assert_array_equal(ix, [1, -2, 7])
    assert m.half(7) == 3.5 and m.half(np.int64(7)) == 3.5 and m.half(True) == 0.5
    assert m.pick(True, 2.0) == 2.0 and m.pick(np.bool_(False), 2.0) == -2.0
    assert m.pick(np.array(True), 2.0) == 2.0


def test_python_scalars_and_numpy_scalars(m):
    v = np.array([1.0, 2.0])
    np.testing.assert_array_equal(m.scale(3, v), [3.0, 6.0])  # an int for an f64
    np.testing.assert_array_equal(m.scale(np.float32(0.5), v), [0.5, 1.0])
    np.testing.assert_array_equal(m.scale(np.array(2.0), v), [2.0, 4.0])  # rank 0


def test_conversions(m):
    a = np.arange(12.0).reshape(3, 4)
    v = np.array([1.0, 0.0, -1.0])
    expected = a.T @ v
    # strided (non-contiguous) views, Fortran order, other dtypes, lists
    np.testing.assert_array_equal(m.matvec(a.T, v), expected)
    assert not a.T.flags.c_contiguous
    np.testing.assert_array_equal(m.matvec(np.asfortranarray(a.T), v), expected)
    np.testing.assert_array_equal(m.matvec(a.T.astype(np.int64), v.astype(np.int32)), expected)
    np.testing.assert_array_equal(m.matvec(a.T.astype(np.float32), [1, 0, -1]), expected)
    np.testing.assert_array_equal(m.matvec(a.T.tolist(), v.tolist()), expected)
    big = np.arange(20.0)
    assert m.total(big[::2]) == big[::2].sum()
    assert m.total(big[::-1]) == big.sum()
    ro = np.arange(5.0)
    ro.flags.writeable = False
    assert m.total(ro) == 10.0
    # byte-swapped float64 is converted
    assert m.total(np.arange(4.0).astype(">f8")) == 6.0
    # bool arrays for i64 parameters convert (safe cast), ints do not become bools
    assert m.count(np.array([True, True]), np.array([True, True])) == 2
    # the inputs are not modified
    x = np.array([1.0, 2.0, 3.0])
    m.scale(2.0, x)
    np.testing.assert_array_equal(x, [1.0, 2.0, 3.0])


def test_results_are_fresh_arrays(m):
    v = np.array([1.0, 2.0])
    r1 = m.scale(2.0, v)
    r2 = m.scale(2.0, v)
    r1[0] = 100.0
    assert r2[0] == 2.0 and v[0] == 1.0


def test_large_array_round_trip(m):
    x = np.random.default_rng(0).standard_normal(200_000)
    assert m.total(x) == pytest.approx(x.sum(), rel=1e-12)
    np.testing.assert_array_equal(m.scale(-1.0, x), -x)


def test_module_protocol(mods):
    m = mods["cranelift"]
    assert m.names[:3] == ("f", "scale", "matvec")
    assert len(m) == len(m.names) and list(m) == list(m.names)
    assert "f" in m and "nope" not in m and 3 not in m
    assert m["f"] is m.f
    assert "matvec" in dir(m)
    assert m.file == "values.arr" and m.backend == "cranelift"
    assert repr(m).startswith("<arrayad.Module values.arr (cranelift): f, scale")
    assert m.functions[0] is m.f
    f = m.stats
    assert f.name == "stats"
    assert f.params == ("p", "k", "flip")
    assert f.signature == "def stats(p: (f64, [n]f64), k: i64, flip: bool) -> (f64, [n]f64, (i64, bool))"
    assert repr(f) == "<arrayad.Function " + f.signature + ">"
    assert f.default_wrt == ("p",)
    assert m.count.default_wrt == ()
    m.precompile()
    assert m.f(np.ones(2), np.ones(2)) == pytest.approx(2.0 + math.e)


def traced_peak(call) -> int:
    """The most bytes Python (and numpy) allocated during call()."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_zero_copy_arguments_and_results(mods):
    m = mods["cranelift"]
    n = 2_000_000  # 16 MB per array
    x = np.ones(n)
    m.total(x[:3]), m.scale(1.0, x[:3]), m.count(np.zeros(3, dtype=np.int64), np.ones(3, dtype=bool))
    # Arrays of the parameter's dtype, C-contiguous: read in place.
    assert traced_peak(lambda: m.total(x)) < 100_000
    xs, keep = np.arange(n, dtype=np.int64), np.ones(n, dtype=bool)
    assert traced_peak(lambda: m.count(xs, keep)) < 100_000
    # Others are converted, once.
    assert 8 * n <= traced_peak(lambda: m.total(xs)) < 8 * n + 100_000
    assert 4 * n <= traced_peak(lambda: m.total(x[::2])) < 4 * n + 100_000
    # Results: the numpy array owns the result's buffer (no copy into numpy memory).
    assert traced_peak(lambda: m.scale(2.0, x)) < 100_000
    assert traced_peak(lambda: m.total.grad(x)) < 100_000


def test_package_ships_type_information():
    import pathlib

    pkg = pathlib.Path(arrayad.__file__).parent
    assert (pkg / "py.typed").exists() and (pkg / "_arrayad.pyi").exists()
    assert arrayad.Function.grad.__doc__ and "wrt" in arrayad.Function.grad.__doc__
