"""Logistic regression with scipy.optimize.minimize on an arrayad objective.

The loss (logreg.arr) is compiled once; scipy gets its value and gradient
in one call (jac=True) and its Hessian (trust-exact) or Hessian-vector
products (Newton-CG), all computed by compiled code. The results are
checked against numpy's closed forms and against BFGS on a numpy loss.

    python python/examples/logistic_regression.py
"""

from __future__ import annotations

import pathlib

import numpy as np
from scipy.optimize import minimize

import arrayad

HERE = pathlib.Path(__file__).resolve().parent


def numpy_loss(beta, x, y, lam):
    z = x @ beta
    return np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * lam * beta @ beta


def numpy_grad(beta, x, y, lam):
    s = 1.0 / (1.0 + np.exp(-(x @ beta)))
    return x.T @ (s - y) / len(y) + lam * beta


def numpy_hess(beta, x, y, lam):
    s = 1.0 / (1.0 + np.exp(-(x @ beta)))
    return (x.T * (s * (1 - s))) @ x / len(y) + lam * np.eye(len(beta))


def main() -> None:
    # beta is the only parameter differentiated by default: value_and_grad
    # and hessian then return the derivative with respect to beta alone.
    m = arrayad.compile(HERE / "logreg.arr", wrt=["beta"])
    loss = m.logistic_loss

    rng = np.random.default_rng(0)
    n, d, lam = 2000, 6, 1e-3
    x = np.column_stack([np.ones(n), rng.standard_normal((n, d - 1))])
    beta_true = rng.standard_normal(d)
    y = rng.random(n) < 1.0 / (1.0 + np.exp(-(x @ beta_true)))  # bool labels
    args = (x, y, lam)

    # The objective, its gradient and Hessian against the closed forms.
    b = rng.standard_normal(d)
    value, grad = loss.value_and_grad(b, *args)
    assert abs(value - numpy_loss(b, *args)) < 1e-12 * abs(value)
    np.testing.assert_allclose(grad, numpy_grad(b, *args), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(loss.hessian(b, *args), numpy_hess(b, *args), rtol=1e-10, atol=1e-13)

    # Newton's method with the exact Hessian.
    res = minimize(loss.value_and_grad, np.zeros(d), args=args, jac=True, hess=loss.hessian, method="trust-exact", options={"gtol": 1e-10})
    assert res.success, res.message
    # Newton-CG with Hessian-vector products (tangents: one per parameter).
    res_cg = minimize(
        loss.value_and_grad,
        np.zeros(d),
        args=args,
        jac=True,
        hessp=lambda b, p, *a: loss.hvp((b, *a), (p, None, None, None)),
        method="Newton-CG",
        options={"xtol": 1e-12},
    )
    assert res_cg.success, res_cg.message
    # The same optimum as BFGS on the numpy loss.
    ref = minimize(numpy_loss, np.zeros(d), args=args, jac=numpy_grad, method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(res.x, ref.x, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(res_cg.x, ref.x, rtol=1e-6, atol=1e-7)
    assert np.linalg.norm(numpy_grad(res.x, *args)) < 1e-8

    accuracy = np.mean((m.predict(res.x, x) > 0.5) == y)
    print(f"trust-exact: {res.nit} iterations, {res.nfev} evaluations, loss {res.fun:.6f}")
    print(f"Newton-CG:   {res_cg.nit} iterations, {res_cg.nhev} Hessian-vector products")
    print(f"BFGS (numpy gradient): {ref.nit} iterations")
    print(f"beta = {np.array2string(res.x, precision=3)} (true {np.array2string(beta_true, precision=3)})")
    print(f"training accuracy {accuracy:.3f}")
    assert accuracy > 0.7


if __name__ == "__main__":
    main()
