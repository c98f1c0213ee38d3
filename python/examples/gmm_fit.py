"""Fitting a Gaussian mixture with scipy on the repository's GMM program.

examples/gmm.arr is ADBench's GMM objective: the mixture log-likelihood
plus a Wishart prior term on the inverse-covariance factors. Its value and
gradient are checked against numpy here; then two definitions appended to
its source give a negative log-posterior, which scipy minimises with
gradients (value_and_grad, jac=True) and Hessian-vector products (hvp) of
compiled code:

    python python/examples/gmm_fit.py
"""

from __future__ import annotations

import numpy as np
from _common import REPO
from scipy.optimize import minimize
from scipy.special import gammaln, logsumexp

import arrayad

# -(log-likelihood) + prior: gmm = loglik + prior - K C, so
# 2 prior - gmm = -loglik + prior + K C (C a constant).
EXTRA = """
def gmm_prior(means: [K][D]f64, icf: [K][T]f64, wishart_gamma: f64, wishart_m: i64) -> f64 =
  sum(for k < K =>
    let q = exp(icf[k][0:D])
    let lower = icf[k][D:T]
    in 0.5 * wishart_gamma * wishart_gamma * (dot(q, q) + dot(lower, lower))
       - f64(wishart_m) * sum(icf[k][0:D]))

def neg_log_posterior(alphas: [K]f64, means: [K][D]f64, icf: [K][T]f64, x: [N][D]f64,
                      wishart_gamma: f64, wishart_m: i64) -> f64 =
  2.0 * gmm_prior(means, icf, wishart_gamma, wishart_m) - gmm(alphas, means, icf, x, wishart_gamma, wishart_m)
"""


def q_factor(icf_k, d):
    """The lower-triangular Q_k of ADBench's packing (diagonal logs, then the
    strictly lower entries column by column)."""
    q = np.diag(np.exp(icf_k[:d]))
    rows, cols = np.tril_indices(d, -1)
    order = np.lexsort((rows, cols))  # column by column
    q[rows[order], cols[order]] = icf_k[d:]
    return q


def numpy_gmm(alphas, means, icf, x, gamma, m):
    """The ADBench GMM objective (shared/data/adbench/README.md) in numpy."""
    n, d = x.shape
    k = len(alphas)
    qs = [q_factor(icf[j], d) for j in range(k)]
    terms = np.stack(
        [alphas[j] + icf[j, :d].sum() - 0.5 * np.sum(((x - means[j]) @ qs[j].T) ** 2, axis=1) for j in range(k)],
        axis=1,
    )
    loglik = -n * d * 0.5 * np.log(2 * np.pi) + logsumexp(terms, axis=1).sum() - n * logsumexp(alphas)
    prior = sum(0.5 * gamma**2 * np.sum(q**2) - m * icf[j, :d].sum() for j, q in enumerate(qs))
    nw = d + m + 1
    log_gamma_d = 0.25 * d * (d - 1) * np.log(np.pi) + sum(gammaln(0.5 * nw - 0.5 * j) for j in range(d))
    c = nw * d * (np.log(gamma) - 0.5 * np.log(2.0)) - log_gamma_d
    return loglik + prior - k * c


def main() -> None:
    source = (REPO / "examples" / "gmm.arr").read_text() + EXTRA
    m = arrayad.compile(source, name="gmm.arr", wrt=["alphas", "means", "icf"])

    rng = np.random.default_rng(7)
    d, k, n = 2, 3, 600
    centers = np.array([[-4.0, 0.0], [0.0, 4.0], [4.0, -1.0]])
    x = np.concatenate([c + rng.standard_normal((n // k, d)) * 0.7 for c in centers])
    t = d * (d + 1) // 2
    gamma, wm = 1.0, 0

    # ADBench's objective against numpy, its gradient against finite
    # differences along random directions.
    alphas, means, icf = rng.standard_normal(k), rng.standard_normal((k, d)), 0.3 * rng.standard_normal((k, t))
    value, (ga, gm, gi) = m.gmm.value_and_grad(alphas, means, icf, x, gamma, wm)
    expected = numpy_gmm(alphas, means, icf, x, gamma, wm)
    assert abs(value - expected) < 1e-10 * abs(expected), (value, expected)
    for _ in range(3):
        da, dm, di = rng.standard_normal(k), rng.standard_normal((k, d)), rng.standard_normal((k, t))
        eps = 1e-6
        fd = (
            numpy_gmm(alphas + eps * da, means + eps * dm, icf + eps * di, x, gamma, wm)
            - numpy_gmm(alphas - eps * da, means - eps * dm, icf - eps * di, x, gamma, wm)
        ) / (2 * eps)
        directional = ga @ da + np.sum(gm * dm) + np.sum(gi * di)
        assert abs(directional - fd) < 1e-6 * max(1.0, abs(fd)), (directional, fd)
        # The same directional derivative by forward mode.
        _, tangent = m.gmm.jvp((alphas, means, icf, x, gamma, wm), (da, dm, di, None, None, None))
        assert abs(tangent - directional) < 1e-9 * max(1.0, abs(directional))

    # Fit: minimise the negative log-posterior over theta = (alphas, means, icf).
    nlp = m.neg_log_posterior
    sizes = [k, k * d, k * t]

    def unpack(theta):
        a, mu, q = np.split(theta, np.cumsum(sizes)[:-1])
        return a, mu.reshape(k, d), q.reshape(k, t)

    def fun(theta):
        v, grads = nlp.value_and_grad(*unpack(theta), x, gamma, wm)
        return v, np.concatenate([g.ravel() for g in grads])

    def hessp(theta, p):
        hv = nlp.hvp((*unpack(theta), x, gamma, wm), (*unpack(p), None, None, None))
        return np.concatenate([h.ravel() for h in hv])

    theta0 = np.concatenate([np.zeros(k), x[rng.choice(len(x), k, replace=False)].ravel(), np.zeros(k * t)])
    res = minimize(fun, theta0, jac=True, hessp=hessp, method="trust-krylov", options={"gtol": 1e-5})
    assert res.success, res.message
    _, g_end = fun(res.x)
    assert np.linalg.norm(g_end) < 1e-5
    assert res.fun < fun(theta0)[0]
    # The Hessian at the optimum, by hessian() and by Hessian-vector products.
    a_opt, mu_opt, icf_opt = unpack(res.x)
    h = nlp.hessian(a_opt, mu_opt, icf_opt, x, gamma, wm)
    p = rng.standard_normal(len(res.x))
    np.testing.assert_allclose(h @ p, hessp(res.x, p), rtol=1e-9, atol=1e-9)
    # The fitted means are the clusters' centres.
    found = mu_opt[np.argsort(mu_opt[:, 0])]
    assert np.max(np.abs(found - centers)) < 0.3, found
    weights = np.exp(a_opt - logsumexp(a_opt))
    print(f"trust-krylov: {res.nit} iterations, {res.nhev} Hessian-vector products, objective {res.fun:.4f}")
    print("means:", np.array2string(found, precision=3).replace("\n", ""), "weights:", np.round(weights, 3))


if __name__ == "__main__":
    main()
