"""grad, value_and_grad, vjp, jvp, jacobian, hvp and hessian against closed
forms and finite differences; wrt by name, position and tuple; the
JAX-style transforms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import finite_difference

import arrayad

SOURCE = """
def f(x: [n]f64, w: [n]f64) -> f64 = sum(x * w) + exp(x[0])
def quad(a: [n][n]f64, x: [n]f64) -> f64 = dot(x, for i < n => dot(a[i], x))
def rosen(x: [n]f64) -> f64 =
  sum(for i < n - 1 => 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2)
def mixed(s: f64, p: (f64, [n]f64), k: i64, x: [n]f64) -> f64 =
  s * p.0 * sum(p.1 * x) * f64(k) + sin(s)
def vecfun(a: f64, x: [n]f64) -> (f64, [n]f64) = (a * sum(x * x), sin(x) * a)
def soft(x: [n][m]f64) -> [n][m]f64 = log1p(exp(x))
def counted(x: [n]f64, k: i64) -> (f64, i64) = (sum(x) * f64(k), k + 1)
"""

RNG = np.random.default_rng(42)


@pytest.fixture(scope="module")
def mods():
    return {b: arrayad.compile(SOURCE, backend=b, name="deriv.arr") for b in arrayad.backends()}


@pytest.fixture
def m(mods, backend):
    return mods[backend]


def test_grad_default_wrt_and_by_name_position_tuple(m):
    x, w = np.array([0.3, -1.2, 2.0]), np.array([0.5, -1.0, 2.0])
    gx_expected = w + np.array([math.exp(0.3), 0.0, 0.0])
    gx, gw = m.f.grad(x, w)  # default: every f64 parameter, a tuple
    np.testing.assert_allclose(gx, gx_expected, rtol=1e-14)
    np.testing.assert_array_equal(gw, x)
    np.testing.assert_allclose(m.f.grad(x, w, wrt="x"), gx_expected, rtol=1e-14)
    np.testing.assert_allclose(m.f.grad(x, w, wrt=0), gx_expected, rtol=1e-14)
    np.testing.assert_array_equal(m.f.grad(x, w, wrt=-1), x)
    gw2, gx2 = m.f.grad(x, w, wrt=("w", "x"))  # in the order asked for
    np.testing.assert_array_equal(gw2, x)
    np.testing.assert_allclose(gx2, gx_expected, rtol=1e-14)
    (only,) = m.f.grad(x, w, wrt=[1])  # a tuple (list) of one: a 1-tuple
    np.testing.assert_array_equal(only, x)
    assert m.f.grad(x, w, wrt=()) == ()
    v, (gx3, gw3) = m.f.value_and_grad(x, w)
    assert v == pytest.approx(x @ w + math.exp(0.3), rel=1e-14)
    np.testing.assert_allclose(gx3, gx_expected, rtol=1e-14)
    v, gw4 = m.f.value_and_grad(x, w=w, wrt="w")
    np.testing.assert_array_equal(gw4, x)


def test_jax_style_transforms(m):
    x, w = np.array([0.3, -1.2, 2.0]), np.array([0.5, -1.0, 2.0])
    gx_expected = w + np.array([math.exp(0.3), 0.0, 0.0])
    np.testing.assert_allclose(arrayad.grad(m.f)(x, w), gx_expected, rtol=1e-14)  # argnums=0
    np.testing.assert_array_equal(arrayad.grad(m.f, argnums=1)(x, w), x)
    np.testing.assert_array_equal(arrayad.grad(m.f, argnums="w")(x, w), x)
    gx, gw = arrayad.grad(m.f, argnums=(0, 1))(x, w)
    np.testing.assert_allclose(gx, gx_expected, rtol=1e-14)
    gx, gw = arrayad.grad(m.f, argnums=None)(x, w)
    np.testing.assert_array_equal(gw, x)
    v, g = arrayad.value_and_grad(m.f)(x, w)
    assert v == m.f(x, w)
    np.testing.assert_allclose(g, gx_expected, rtol=1e-14)
    assert arrayad.grad(m.f).__name__ == "grad_f"
    with pytest.raises(arrayad.ArgumentError):
        arrayad.grad(lambda x: x)


def test_quadratic_form_closed_forms(m):
    n = 4
    a = RNG.standard_normal((n, n))
    x = RNG.standard_normal(n)
    ga, gx = m.quad.grad(a, x)
    np.testing.assert_allclose(gx, (a + a.T) @ x, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ga, np.outer(x, x), rtol=1e-12, atol=1e-14)
    h = m.quad.hessian(a, x, wrt="x")
    assert h.shape == (n, n)
    np.testing.assert_allclose(h, a + a.T, rtol=1e-12, atol=1e-14)
    v = RNG.standard_normal(n)
    hv = m.quad.hvp((a, x), (None, v), wrt="x")
    np.testing.assert_allclose(hv, (a + a.T) @ v, rtol=1e-12, atol=1e-14)
    # The full Hessian over (a, x) against finite differences of the gradient.
    full = m.quad.hessian(a, x)
    assert full.shape == (n * n + n, n * n + n)

    def flat_grad(a_, x_):
        ga_, gx_ = m.quad.grad(a_, x_)
        return np.concatenate([ga_.ravel(), gx_])

    fd = np.concatenate([finite_difference(flat_grad, [a, x], 0), finite_difference(flat_grad, [a, x], 1)], axis=1)
    np.testing.assert_allclose(full, fd, rtol=1e-6, atol=1e-6)
    # Columns in the order of wrt.
    swapped = m.quad.hessian(a, x, wrt=("x", "a"))
    order = np.r_[n * n : n * n + n, 0 : n * n]
    np.testing.assert_allclose(swapped, full[np.ix_(order, order)], rtol=1e-14)


def rosen_grad(x):
    g = np.zeros_like(x)
    g[:-1] += -400.0 * x[:-1] * (x[1:] - x[:-1] ** 2) - 2.0 * (1.0 - x[:-1])
    g[1:] += 200.0 * (x[1:] - x[:-1] ** 2)
    return g


def rosen_hess(x):
    n = len(x)
    h = np.zeros((n, n))
    for i in range(n - 1):
        h[i, i] += 1200.0 * x[i] ** 2 - 400.0 * x[i + 1] + 2.0
        h[i, i + 1] += -400.0 * x[i]
        h[i + 1, i] += -400.0 * x[i]
        h[i + 1, i + 1] += 200.0
    return h


def test_rosenbrock_gradient_hessian_hvp(m):
    x = RNG.uniform(-1.5, 1.5, 6)
    g = m.rosen.grad(x)  # one active parameter: the gradient itself
    assert isinstance(g, np.ndarray) and g.shape == (6,)
    np.testing.assert_allclose(g, rosen_grad(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(m.rosen.hessian(x), rosen_hess(x), rtol=1e-12, atol=1e-10)
    t = RNG.standard_normal(6)
    np.testing.assert_allclose(m.rosen.hvp((x,), (t,)), rosen_hess(x) @ t, rtol=1e-12, atol=1e-10)
    assert m.rosen.jacobian(x).shape == (1, 6)
    np.testing.assert_allclose(m.rosen.jacobian(x)[0], rosen_grad(x), rtol=1e-12, atol=1e-12)


PENALTY = """
def rosen(x: [n]f64) -> f64 =
  sum(for i < n - 1 => 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2)
def penalty(x: [n]f64) -> f64 = sum(grad(rosen, x) ** 2)
def drosen(x: [n]f64) -> [n]f64 = grad(rosen, x)
def hvp_by_vjp(x: [n]f64, v: [n]f64) -> [n]f64 = vjp(drosen, x, v).1
"""


def test_reverse_over_reverse_gradient_penalty(backend):
    # The gradient of sum(grad(rosen, x) ** 2) is 2 H g, and the vjp of the
    # gradient is H v: reverse over reverse, by the operators' own rule.
    m = arrayad.compile(PENALTY, backend=backend, name="penalty.arr")
    x = RNG.uniform(-1.5, 1.5, 7)
    v = RNG.standard_normal(7)
    h, g = rosen_hess(x), rosen_grad(x)
    np.testing.assert_allclose(m.penalty.grad(x), 2.0 * h @ g, rtol=1e-11, atol=1e-9)
    np.testing.assert_allclose(m.hvp_by_vjp(x, v), h @ v, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(m.hvp_by_vjp.vjp((x, v), np.ones(7))[1][1], h @ np.ones(7), rtol=1e-12, atol=1e-10)


def test_tuple_parameters_against_finite_differences(m):
    s, p0, p1, k, x = 0.7, -1.3, RNG.standard_normal(3), 3, RNG.standard_normal(3)
    args = [s, (p0, p1), k, x]
    gs, (gp0, gp1), gx = m.mixed.grad(*args)  # k (i64) is not differentiated
    assert type(gs) is float and type(gp0) is float
    c = sum(p1 * x) * k
    assert gs == pytest.approx(p0 * c + math.cos(s), rel=1e-13)
    assert gp0 == pytest.approx(s * c, rel=1e-13)
    np.testing.assert_allclose(gp1, s * p0 * k * x, rtol=1e-13)
    np.testing.assert_allclose(gx, s * p0 * k * p1, rtol=1e-13)
    gp = m.mixed.grad(*args, wrt="p")
    assert isinstance(gp, tuple) and gp[0] == gp0
    gx_fd = finite_difference(lambda *a: m.mixed(a[0], a[1], a[2], a[3]), args, 3)
    np.testing.assert_allclose(gx, gx_fd[0], rtol=1e-7)
    assert m.mixed.default_wrt == ("s", "p", "x")
    # The Jacobian (one row) over s, p and x, and hvp with tuple tangents.
    j = m.mixed.jacobian(*args)
    np.testing.assert_allclose(j[0], np.concatenate([[gs, gp0], gp1, gx]), rtol=1e-13)
    hv = m.mixed.hvp(args, (0.0, (1.0, None), None, None), wrt=("s", "p"))
    # d/ds of the gradient along p0: [d2f/ds dp0, (d2f/dp0^2 = 0, d2f/dp1 dp0)]
    assert hv[0] == pytest.approx(c, rel=1e-13)
    assert hv[1][0] == 0.0
    np.testing.assert_allclose(hv[1][1], s * k * x, rtol=1e-13)


def test_tuple_result_jacobian_vjp_jvp(m):
    a, x = 1.7, RNG.standard_normal(4)
    value = m.vecfun(a, x)
    assert value[0] == pytest.approx(a * x @ x) and value[1].shape == (4,)
    j = m.vecfun.jacobian(a, x)
    assert j.shape == (5, 5)
    fd = np.concatenate(
        [
            finite_difference(lambda *q: np.concatenate([[m.vecfun(*q)[0]], m.vecfun(*q)[1]]), [a, x], 0),
            finite_difference(lambda *q: np.concatenate([[m.vecfun(*q)[0]], m.vecfun(*q)[1]]), [a, x], 1),
        ],
        axis=1,
    )
    np.testing.assert_allclose(j, fd, rtol=1e-6, atol=1e-8)
    ct = (0.5, RNG.standard_normal(4))
    v, (ca, cx) = m.vecfun.vjp((a, x), ct)
    assert v[0] == value[0]
    expected = j.T @ np.concatenate([[ct[0]], ct[1]])
    assert ca == pytest.approx(expected[0], rel=1e-12)
    np.testing.assert_allclose(cx, expected[1:], rtol=1e-12)
    # None for a zero cotangent component
    _, (ca0, cx0) = m.vecfun.vjp((a, x), (None, ct[1]))
    np.testing.assert_allclose(cx0, j[1:, 1:].T @ ct[1], rtol=1e-12)
    t = (0.25, RNG.standard_normal(4))
    v, (ta, tx) = m.vecfun.jvp((a, x), t)
    expected = j @ np.concatenate([[t[0]], t[1]])
    assert ta == pytest.approx(expected[0], rel=1e-12)
    np.testing.assert_allclose(tx, expected[1:], rtol=1e-12)
    v, (ta, tx) = m.vecfun.jvp((a, x), (None, t[1]))
    np.testing.assert_allclose(tx, j[1:, 1:] @ t[1], rtol=1e-12)
    # wrt restricts the columns and the cotangents
    np.testing.assert_allclose(m.vecfun.jacobian(a, x, wrt="x"), j[:, 1:], rtol=1e-14)
    np.testing.assert_allclose(m.vecfun.jacobian(a, x, wrt=("x", "a")), j[:, [1, 2, 3, 4, 0]], rtol=1e-14)
    _, cx_only = m.vecfun.vjp((a, x), ct, wrt="x")
    np.testing.assert_allclose(cx_only, cx, rtol=1e-14)


def test_jvp_many_equals_jvp_per_direction(m):
    a, x = 0.7, RNG.standard_normal(4)
    # 0, 1, 8 (one full pass) and 11 (a padded second pass) directions,
    # some with a zero (None) part
    for k in (0, 1, 8, 11):
        dirs = [(float(d) - 3.5, RNG.standard_normal(4) if d % 3 else None) for d in range(k)]
        value, tangents = m.vecfun.jvp_many((a, x), dirs)
        expected = m.vecfun(a, x)
        assert value[0] == expected[0]
        np.testing.assert_array_equal(value[1], expected[1])
        assert len(tangents) == k
        for d, (ta, tx) in zip(dirs, tangents):
            _, (ea, ex) = m.vecfun.jvp((a, x), d)
            assert ta == ea
            np.testing.assert_array_equal(tx, ex)
    _, ts = m.counted.jvp_many((np.array([1.0, 2.0]), 4), [(np.ones(2), None)])
    assert ts == [(8.0, None)]
    with pytest.raises(arrayad.ArgumentError, match="tangent"):
        m.vecfun.jvp_many((a, x), [(1.0, np.ones(4)), (1.0, np.ones(3))])


def test_rank_two_elementwise(m):
    x = RNG.standard_normal((2, 3))
    np.testing.assert_allclose(m.soft(x), np.log1p(np.exp(x)), rtol=1e-14)
    j = m.soft.jacobian(x)
    assert j.shape == (6, 6)
    np.testing.assert_allclose(j, np.diag((1 / (1 + np.exp(-x))).ravel()), rtol=1e-12, atol=1e-15)
    _, ct = m.soft.vjp((x,), np.ones((2, 3)))
    assert ct.shape == (2, 3)
    np.testing.assert_allclose(ct, 1 / (1 + np.exp(-x)), rtol=1e-12)


def test_integer_results_and_parameters(m):
    x = np.array([1.0, 2.0])
    assert m.counted(x, 4) == (12.0, 5)
    v, t = m.counted.jvp((x, 4), (np.ones(2), None))
    assert v == (12.0, 5) and t == (8.0, None)
    v, cx = m.counted.vjp((x, 4), (1.0, None))
    np.testing.assert_array_equal(cx, [4.0, 4.0])
    assert m.counted.jacobian(x, 4).shape == (1, 2)


def test_large_gradient(m, backend):
    if backend == "interp":
        pytest.skip("the interpreter is slow on large arrays")
    n = 100_000
    x, w = RNG.standard_normal(n), RNG.standard_normal(n)
    gx, gw = m.f.grad(x, w)
    np.testing.assert_array_equal(gw, x)
    assert gx[0] == pytest.approx(w[0] + math.exp(x[0]), rel=1e-14)
    np.testing.assert_array_equal(gx[1:], w[1:])


def test_backends_agree(mods):
    x = RNG.uniform(-1, 1, 5)
    ref = mods["interp"].rosen.value_and_grad(x)
    for b, mod in mods.items():
        v, g = mod.rosen.value_and_grad(x)
        assert v == ref[0], b  # bit for bit (no fast-math)
        np.testing.assert_array_equal(g, ref[1])
