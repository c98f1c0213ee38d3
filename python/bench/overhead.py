"""What calling compiled arrayad code from Python costs, against the same
code through the C ABI (a library built by `arrayad build`, called with
ctypes from this process):

1. small calls: the value and the gradient of a 3-element dot product, and
   the 3 x 15 Jacobian block of one bundle-adjustment observation;
2. the GMM gradient at d=20, K=50, n=1000 (ADBench's gmm_d20_K50 from
   ../shared/data/adbench when present, else generated data of that size);
3. the same gradient from 1 and 2 Python threads (the GIL is released
   during compiled calls).

    python python/bench/overhead.py [--quick] [--backend cranelift|llvm]

Needs the `arrayad` command line ($ARRAYAD_BIN, on the PATH, or the
repository's target/release/arrayad: `cargo build --release`); with
`--backend llvm`, one built with `--features llvm` and a Python package
built with it. Times are the best of several batches (small calls) or
medians (the GMM gradient), per call.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pathlib
import platform
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
from _common import REPO, SHARED, build_library, find_cli, out_dir, per_call_seconds  # noqa: E402

import arrayad  # noqa: E402

P = ctypes.c_void_p
I64 = ctypes.c_int64
F64 = ctypes.c_double


def us(seconds: float) -> str:
    return f"{seconds * 1e6:8.2f} us"


def small_calls(cli: str, backend: str, calls: int) -> None:
    src = out_dir("bench") / "dot.arr"
    src.write_text("def f(x: [n]f64, w: [n]f64) -> f64 = dot(x, w)\n")
    lib = ctypes.CDLL(str(build_library(cli, src, out_dir("bench") / f"libdot_{backend}.so", "--backend", backend)))
    f = arrayad.compile(src, backend=backend).f
    x, w = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    out, dx, dw = np.zeros(1), np.zeros(3), np.zeros(3)

    c_f, c_grad = lib.f, lib.f_grad
    c_f.argtypes, c_f.restype = [I64, P, P, P], ctypes.c_int32
    c_grad.argtypes, c_grad.restype = [I64, P, P, P, P, P], ctypes.c_int32
    px, pw, po, pdx, pdw = (a.ctypes.data for a in (x, w, out, dx, dw))
    assert c_f(3, px, pw, po) == 0 and out[0] == f(x, w)
    assert c_grad(3, px, pw, po, pdx, pdw) == 0
    gx, gw = f.grad(x, w)
    assert np.array_equal(gx, dx) and np.array_equal(gw, dw)

    rows = [
        ("value, C ABI (ctypes, pointers worked out once)", lambda: c_f(3, px, pw, po)),
        ("value, C ABI (ctypes, x.ctypes.data per call)", lambda: c_f(3, x.ctypes.data, w.ctypes.data, out.ctypes.data)),
        ("value, Python f(x, w)", lambda: f(x, w)),
        ("gradient, C ABI (ctypes, pointers once)", lambda: c_grad(3, px, pw, po, pdx, pdw)),
        ("gradient, Python f.grad(x, w)", lambda: f.grad(x, w)),
        ("gradient, Python f.value_and_grad(x, w)", lambda: f.value_and_grad(x, w)),
    ]
    times = {}
    print(f"\n## Small calls ({backend}): f(x, w) = dot(x, w), n = 3, {calls} calls per batch")
    for name, call in rows:
        times[name] = per_call_seconds(call, calls, repeats=7)
        print(f"  {name:52s} {us(times[name])}")
    print(
        f"  Python overhead over the C ABI: value {us(times[rows[2][0]] - times[rows[0][0]])}, "
        f"gradient {us(times[rows[4][0]] - times[rows[3][0]])}"
    )

    # One bundle-adjustment observation: its 3 x 15 Jacobian block.
    ba_arr = REPO / "examples" / "ba.arr"
    ba_lib = ctypes.CDLL(
        str(
            build_library(
                cli, ba_arr, out_dir("bench") / f"libba_{backend}.so", "--export", "ba_obs", "--wrt", "cam,x,w",
                "--backend", backend,
            )
        )
    )
    obs = arrayad.compile(ba_arr, backend=backend, wrt=["cam", "x", "w"]).ba_obs
    cam = np.array([0.01, -0.02, 0.03, 0.1, -0.2, -10.0, 1.05, 0.01, -0.01, 0.001, 0.0001])
    xp, wt, feat = np.array([0.3, -0.4, 0.5]), 1.1, np.array([0.02, -0.03])
    res, jac = np.zeros(3), np.zeros((3, 15))
    c_jac = ba_lib.ba_obs_jacobian
    c_jac.argtypes, c_jac.restype = [P, P, F64, P, P, P], ctypes.c_int32
    ptrs = (cam.ctypes.data, xp.ctypes.data, wt, feat.ctypes.data, res.ctypes.data, jac.ctypes.data)
    assert c_jac(*ptrs) == 0
    assert np.allclose(obs.jacobian(cam, xp, wt, feat), jac, rtol=1e-13, atol=1e-15)
    t_c = per_call_seconds(lambda: c_jac(*ptrs), calls, repeats=7)
    t_py = per_call_seconds(lambda: obs.jacobian(cam, xp, wt, feat), calls, repeats=7)
    t_val = per_call_seconds(lambda: obs(cam, xp, wt, feat), calls, repeats=7)
    print(f"\n## One BA observation ({backend}): ba_obs and its 3 x 15 Jacobian block")
    print(f"  {'Jacobian, C ABI (ctypes, pointers once)':52s} {us(t_c)}")
    print(f"  {'Jacobian, Python ba_obs.jacobian(cam, x, w, feat)':52s} {us(t_py)}")
    print(f"  {'value, Python ba_obs(cam, x, w, feat)':52s} {us(t_val)}")
    print(f"  Python overhead over the C ABI: Jacobian {us(t_py - t_c)}")


def read_gmm(path: pathlib.Path):
    tokens = path.read_text().split()
    d, k, n = (int(t) for t in tokens[:3])
    t = d * (d + 1) // 2
    vals = np.array(tokens[3 : 3 + k + k * d + k * t + n * d], dtype=np.float64)
    alphas, rest = vals[:k], vals[k:]
    means, rest = rest[: k * d].reshape(k, d), rest[k * d :]
    icf, rest = rest[: k * t].reshape(k, t), rest[k * t :]
    x = rest.reshape(n, d)
    gamma, m = float(tokens[-2]), int(tokens[-1])
    return alphas, means, icf, x, gamma, m


def gmm_inputs():
    path = SHARED / "data" / "adbench" / "gmm" / "gmm_d20_K50.txt"
    if path.exists():
        return read_gmm(path), str(path)
    rng = np.random.default_rng(0)
    d, k, n = 20, 50, 1000
    t = d * (d + 1) // 2
    return (
        (rng.standard_normal(k), rng.random((k, d)), rng.standard_normal((k, t)), rng.random((n, d)), 1.0, 0),
        "generated (d=20, K=50, n=1000)",
    )


def paired_medians(calls, seconds: float):
    """The median time of each of `calls`, run in turn (so that a load on
    the machine slows them alike) for about `seconds` in all."""
    for call in calls:
        call()
    times = [[] for _ in calls]
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times[0]) < 5:
        for k, call in enumerate(calls):
            t0 = time.perf_counter()
            call()
            times[k].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def gmm(cli: str, backend: str, seconds: float) -> None:
    (alphas, means, icf, x, gamma, wm), origin = gmm_inputs()
    k, d = means.shape
    t, n = icf.shape[1], x.shape[0]
    gmm_arr = REPO / "examples" / "gmm.arr"
    lib = ctypes.CDLL(
        str(
            build_library(
                cli, gmm_arr, out_dir("bench") / f"libgmm_{backend}.so", "--export", "gmm",
                "--wrt", "alphas,means,icf", "--backend", backend,
            )
        )
    )
    c_grad = lib.gmm_grad
    c_grad.argtypes = [I64, I64, I64, I64, P, P, P, P, F64, I64, P, P, P, P]
    c_grad.restype = ctypes.c_int32
    value = np.zeros(1)
    ga, gm, gi = np.zeros_like(alphas), np.zeros_like(means), np.zeros_like(icf)
    c_args = (k, d, t, n, alphas.ctypes.data, means.ctypes.data, icf.ctypes.data, x.ctypes.data, gamma, wm,
              value.ctypes.data, ga.ctypes.data, gm.ctypes.data, gi.ctypes.data)
    f = arrayad.compile(gmm_arr, backend=backend, wrt=["alphas", "means", "icf"]).gmm
    v, (pa, pm, pi) = f.value_and_grad(alphas, means, icf, x, gamma, wm)
    assert c_grad(*c_args) == 0
    assert v == value[0] and np.array_equal(pa, ga) and np.array_equal(pm, gm) and np.array_equal(pi, gi)

    t_c, t_py, t_val = paired_medians(
        [
            lambda: c_grad(*c_args),
            lambda: f.value_and_grad(alphas, means, icf, x, gamma, wm),
            lambda: f(alphas, means, icf, x, gamma, wm),
        ],
        seconds,
    )
    print(f"\n## GMM gradient ({backend}), d={d} K={k} n={n}, {origin}")
    print(f"  {'objective, Python f(...)':52s} {t_val * 1e3:8.3f} ms")
    print(f"  {'gradient, C ABI (ctypes)':52s} {t_c * 1e3:8.3f} ms")
    print(f"  {'gradient, Python f.value_and_grad(...)':52s} {t_py * 1e3:8.3f} ms   ({t_py / t_c:.3f} x the C ABI)")

    # Threads: the same gradients from 1 and from 2 threads (best of 3 each,
    # in turn).
    calls = 16
    call = lambda _=None: f.value_and_grad(alphas, means, icf, x, gamma, wm)  # noqa: E731
    serial, parallel = float("inf"), float("inf")
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(call, range(2)))
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(calls):
                call()
            serial = min(serial, time.perf_counter() - t0)
            t0 = time.perf_counter()
            list(pool.map(call, range(calls)))
            parallel = min(parallel, time.perf_counter() - t0)
    print(
        f"  {calls} gradients: 1 thread {serial:.3f} s, 2 threads {parallel:.3f} s "
        f"(speedup {serial / parallel:.2f} on {os.cpu_count()} cores)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short runs")
    ap.add_argument("--backend", default="cranelift", choices=["cranelift", "llvm"])
    opts = ap.parse_args()
    if opts.backend not in arrayad.backends():
        sys.exit(f"this build of the Python package has no {opts.backend} backend")
    cli = find_cli()
    if cli is None:
        sys.exit("no `arrayad` command line: cargo build --release (or set ARRAYAD_BIN)")
    print(f"# arrayad {arrayad.__version__} from Python {platform.python_version()}, numpy {np.__version__}, "
          f"{platform.machine()}, {os.cpu_count()} cores; CLI {cli}")
    small_calls(cli, opts.backend, 20_000 if opts.quick else 100_000)
    gmm(cli, opts.backend, 0.5 if opts.quick else 3.0)


if __name__ == "__main__":
    main()
