"""JAX's times on the ADBench problems, for `bench/run.sh --jax PYTHON`.

Each problem is written the way a JAX user writes it (array operations,
`vmap`, `lax.scan`), in 64-bit floats, from the mathematics in
shared/data/adbench/README.md, and compiled with `jax.jit`:

- gmm: the objective and `jax.value_and_grad` with respect to alphas,
  means and icf (x, gamma and m constant);
- ba: the 3p residuals and the sparse Jacobian's blocks: the 2 x 15 block
  of every observation (`vmap(jacfwd)` over the observations) and the
  weight errors' derivatives -2 w (the blocks, not assembled into CSR);
- lstm: the loss and `jax.value_and_grad` with respect to the main and
  extra parameters.

The objective's value is checked against `--expect` (the C objective's
value printed by the problem's C driver in the same run) to a relative
1e-10, and each timed call waits for its result (`block_until_ready`).
The number of threads is the caller's business: `bench/run.sh` pins the
one-thread run to one core with `taskset` and XLA's flags.

usage: jax_bench.py PROBLEM FILE [--min-time SECONDS] [--expect VALUE]
prints, besides a readable report, one line
    jax times primal_s=SECONDS derivative_s=SECONDS
of median times (exit status 1 when the value differs from --expect).
"""

import argparse
import statistics
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.scipy.special import gammaln, logsumexp  # noqa: E402


class Tokens:
    """The whitespace-separated numbers of an ADBench file, read in order."""

    def __init__(self, path):
        with open(path) as f:
            self.t = f.read().split()
        self.pos = 0

    def ints(self, count):
        out = [int(x) for x in self.t[self.pos:self.pos + count]]
        self.pos += count
        return out

    def floats(self, shape):
        count = int(np.prod(shape))
        a = np.array(self.t[self.pos:self.pos + count], dtype=np.float64).reshape(shape)
        self.pos += count
        return a


# ---------------------------------------------------------------- GMM


def read_gmm(path):
    t = Tokens(path)
    d, k, n = t.ints(3)
    tri = d * (d + 1) // 2
    alphas = t.floats((k,))
    means = t.floats((k, d))
    icf = t.floats((k, tri))
    x = t.floats((n, d))
    gamma = float(t.floats((1,))[0])
    (m,) = t.ints(1)
    return (alphas, means, icf), (x, gamma, m)


def gmm_objective(d):
    # The strictly lower entries of Q_k, column by column (README.md).
    rows = np.array([r for c in range(d) for r in range(c + 1, d)], dtype=np.int64)
    cols = np.array([c for c in range(d) for r in range(c + 1, d)], dtype=np.int64)

    def f(alphas, means, icf, x, gamma, m):
        n = x.shape[0]
        k = alphas.shape[0]
        logdiag = icf[:, :d]
        sum_q = jnp.sum(logdiag, axis=1)
        qdiag = jnp.exp(logdiag)
        lower = jnp.zeros((k, d, d)).at[:, rows, cols].set(icf[:, d:])
        qs = lower + jax.vmap(jnp.diag)(qdiag)
        xc = x[:, None, :] - means[None, :, :]  # n x K x d
        qx = jnp.einsum("kij,nkj->nki", qs, xc)
        terms = alphas + sum_q - 0.5 * jnp.sum(qx * qx, axis=2)
        slse = jnp.sum(logsumexp(terms, axis=1))
        constant = -n * d * 0.5 * jnp.log(2 * jnp.pi)
        nw = d + m + 1
        log_gamma_d = 0.25 * d * (d - 1) * jnp.log(jnp.pi) + jnp.sum(
            gammaln(0.5 * nw + 0.5 * (1 - jnp.arange(1, d + 1))))
        c = nw * d * (jnp.log(gamma) - 0.5 * jnp.log(2.0)) - log_gamma_d
        fro = jnp.sum(qdiag * qdiag) + jnp.sum(icf[:, d:] * icf[:, d:])
        prior = 0.5 * gamma * gamma * fro - m * jnp.sum(sum_q) - k * c
        return constant + slse - n * logsumexp(alphas) + prior

    return f


def gmm(path):
    params, (x, gamma, m) = read_gmm(path)
    f = gmm_objective(x.shape[1])
    primal = jax.jit(lambda a, mu, q: f(a, mu, q, x, gamma, m))
    deriv = jax.jit(jax.value_and_grad(lambda a, mu, q: f(a, mu, q, x, gamma, m), argnums=(0, 1, 2)))
    args = tuple(jnp.asarray(p) for p in params)
    return primal, deriv, args, lambda v: float(v)


# ---------------------------------------------------------------- BA


def read_ba(path):
    t = Tokens(path)
    n, m, p = t.ints(3)
    v = t.floats((17,))
    cam, point, w, feat = v[0:11], v[11:14], v[14], v[15:17]
    obs = np.arange(p)
    cams = np.tile(cam, (n, 1))
    points = np.tile(point, (m, 1))
    return cams, points, np.full(p, w), np.tile(feat, (p, 1)), obs % n, obs % m


def rodrigues(r, y):
    th2 = jnp.dot(r, r)
    safe = jnp.where(th2 != 0.0, th2, 1.0)
    th = jnp.sqrt(safe)
    c, s = jnp.cos(th), jnp.sin(th)
    w = r / th
    full = y * c + jnp.cross(w, y) * s + w * (jnp.dot(w, y) * (1.0 - c))
    return jnp.where(th2 != 0.0, full, y + jnp.cross(r, y))


def reproj_err(cam, point, w, feat):
    y = rodrigues(cam[0:3], point - cam[3:6])
    p = y[0:2] / y[2]
    rsq = jnp.dot(p, p)
    p = p * (1.0 + cam[9] * rsq + cam[10] * rsq * rsq)
    return w * (p * cam[6] + cam[7:9] - feat)


def ba(path):
    cams, points, w, feats, oc, op = read_ba(path)

    def residuals(cams, points, w):
        e = jax.vmap(reproj_err)(cams[oc], points[op], w, feats)
        return e, 1.0 - w * w

    def blocks(cams, points, w):
        jac = jax.vmap(jax.jacfwd(reproj_err, argnums=(0, 1, 2)))(cams[oc], points[op], w, feats)
        return jac, -2.0 * w

    args = (jnp.asarray(cams), jnp.asarray(points), jnp.asarray(w))
    check_ba_block(args[0][oc[0]], args[1][op[0]], args[2][0], jnp.asarray(feats[0]))
    return jax.jit(residuals), jax.jit(blocks), args, None


def check_ba_block(cam, point, w, feat):
    """Checks the first observation's 2 x 15 block against central
    differences of the residual (relative 1e-6 of the block's largest entry):
    the inputs replicate one observation, so every block is this one."""
    jac = jnp.concatenate([j.reshape(2, -1) for j in jax.jacfwd(reproj_err, argnums=(0, 1, 2))(cam, point, w, feat)], 1)
    x0 = np.concatenate([np.asarray(cam), np.asarray(point), [float(w)]])

    def e(x):
        return np.asarray(reproj_err(jnp.asarray(x[:11]), jnp.asarray(x[11:14]), x[14], feat))

    cols = []
    for i in range(15):
        h = 1e-6 * max(1.0, abs(x0[i]))
        up, down = x0.copy(), x0.copy()
        up[i] += h
        down[i] -= h
        cols.append((e(up) - e(down)) / (2 * h))
    fd = np.stack(cols, 1)
    err = np.max(np.abs(fd - np.asarray(jac))) / np.max(np.abs(fd))
    print(f"first Jacobian block against central differences: relative {err:.3e} (tolerance 1e-6)")
    if not err <= 1e-6:
        raise SystemExit("MISMATCH: JAX's Jacobian block differs from central differences")


# ---------------------------------------------------------------- LSTM


def read_lstm(path):
    t = Tokens(path)
    l, c, b = t.ints(3)
    main = t.floats((l, 2, 4, b))
    extra = t.floats((3, b))
    state = t.floats((l, 2, b))
    seq = t.floats((c, b))
    return main, extra, state, seq


def lstm_loss(main, extra, state, seq):
    layers = main.shape[0]

    def step(st, xs):
        x, gold = xs
        z = x * extra[0]
        hs = []
        for li in range(layers):
            (wf, wi, wo, wc), (bf, bi, bo, bc) = main[li, 0], main[li, 1]
            h, s = st[li, 0], st[li, 1]
            f = jax.nn.sigmoid(z * wf + bf)
            i = jax.nn.sigmoid(h * wi + bi)
            o = jax.nn.sigmoid(z * wo + bo)
            g = jnp.tanh(h * wc + bc)
            s = s * f + i * g
            h = o * jnp.tanh(s)
            hs.append(jnp.stack([h, s]))
            z = h
        y = z * extra[1] + extra[2]
        lse = jnp.log(jnp.sum(jnp.exp(y)) + 2.0)
        return jnp.stack(hs), jnp.sum(gold * (y - lse))

    _, totals = jax.lax.scan(step, state, (seq[:-1], seq[1:]))
    c, b = seq.shape
    return -jnp.sum(totals) / ((c - 1) * b)


def lstm(path):
    main, extra, state, seq = read_lstm(path)
    state, seq = jnp.asarray(state), jnp.asarray(seq)
    primal = jax.jit(lambda mp, ep: lstm_loss(mp, ep, state, seq))
    deriv = jax.jit(jax.value_and_grad(lambda mp, ep: lstm_loss(mp, ep, state, seq), argnums=(0, 1)))
    return primal, deriv, (jnp.asarray(main), jnp.asarray(extra)), lambda v: float(v)


# ---------------------------------------------------------------- timing


def measure(f, args, min_time):
    """Median and minimum seconds of `f(*args)` over at least three calls
    and `min_time` seconds, after one call that compiles it."""
    jax.block_until_ready(f(*args))
    times = []
    start = time.perf_counter()
    while len(times) < 3 or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times), len(times)


def show(label, t):
    med, lo, reps = t
    print(f"{label:<22} median {1e3 * med:10.3f} ms   (min {1e3 * lo:10.3f} ms, {reps} reps)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("problem", choices=["gmm", "ba", "lstm"])
    ap.add_argument("file")
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--expect", type=float, help="the C objective's value, checked to a relative 1e-10")
    a = ap.parse_args()
    primal, deriv, args, value_of = {"gmm": gmm, "ba": ba, "lstm": lstm}[a.problem](a.file)
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, input {a.file}")
    if a.expect is not None and value_of is not None:
        v = value_of(primal(*args))
        g = value_of(deriv(*args)[0])
        rel = max(abs(v - a.expect), abs(g - a.expect)) / max(abs(a.expect), 1e-300)
        print(f"objective: C {a.expect:.17g}, jax {v:.17g}, value_and_grad {g:.17g} (relative {rel:.3e})")
        if not rel <= 1e-10:
            print("MISMATCH: JAX's objective differs from the C objective")
            return 1
    tp = measure(primal, args, a.min_time)
    show("jax primal", tp)
    td = measure(deriv, args, a.min_time)
    show("jax derivative", td)
    print(f"jax times primal_s={tp[0]:.9g} derivative_s={td[0]:.9g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
