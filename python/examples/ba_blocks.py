"""Bundle adjustment: one small call per observation, from Python and
through the C ABI.

examples/ba.arr gives the 3 residuals of one observation (`ba_obs`: a
camera of 11 parameters, a 3-D point, a weight and a 2-D feature) and, for
a whole problem in one call, the 3 x 15 Jacobian blocks of all
observations (`ba_jacobian_blocks`). Here a synthetic problem's blocks are
computed with one Python call per observation, checked against the one-call
version, against finite differences of a numpy reprojection, and against
`ba_obs_jacobian` of a shared library built by `arrayad build` and called
with ctypes from this process; the per-call times of both are printed.

    python python/examples/ba_blocks.py
"""

from __future__ import annotations

import ctypes

import numpy as np
from _common import REPO, build_library, find_cli, out_dir, per_call_seconds

import arrayad


def rotate(r, y):
    theta = np.linalg.norm(r)
    if theta == 0.0:
        return y + np.cross(r, y)
    w = r / theta
    return y * np.cos(theta) + np.cross(w, y) * np.sin(theta) + w * (w @ y) * (1.0 - np.cos(theta))


def numpy_residuals(cam, x, w, feat):
    """ADBench's reprojection error and weight error of one observation."""
    y = rotate(cam[0:3], x - cam[3:6])
    p = y[:2] / y[2]
    rsq = p @ p
    proj = p * (1.0 + cam[9] * rsq + cam[10] * rsq * rsq) * cam[6] + cam[7:9]
    return np.array([w * (proj[0] - feat[0]), w * (proj[1] - feat[1]), 1.0 - w * w])


def synthetic_problem(n_cams, n_points, n_obs, rng):
    cams = np.zeros((n_cams, 11))
    cams[:, 0:3] = 0.1 * rng.standard_normal((n_cams, 3))  # small rotations
    cams[:, 3:6] = [0.0, 0.0, -10.0] + 0.5 * rng.standard_normal((n_cams, 3))  # in front of the points
    cams[:, 6] = 1.0 + 0.1 * rng.random(n_cams)
    cams[:, 7:9] = 0.01 * rng.standard_normal((n_cams, 2))
    cams[:, 9:11] = 0.01 * rng.standard_normal((n_cams, 2))
    points = rng.standard_normal((n_points, 3))
    cam_of = np.arange(n_obs) % n_cams  # as in ADBench: observation i sees camera i mod n
    point_of = np.arange(n_obs) % n_points
    weights = 1.0 + 0.1 * rng.standard_normal(n_obs)
    feats = np.array(
        [numpy_residuals(cams[c], points[q], 1.0, np.zeros(2))[:2] for c, q in zip(cam_of, point_of)]
    ) + 0.001 * rng.standard_normal((n_obs, 2))
    return cams, points, cam_of, point_of, weights, feats


def main() -> None:
    ba_arr = REPO / "examples" / "ba.arr"
    # The Jacobian columns: camera (11), point (3), weight (1), as the C
    # library built with --wrt cam,x,w.
    m = arrayad.compile(ba_arr, wrt=["cam", "x", "w"])
    obs = m.ba_obs
    rng = np.random.default_rng(11)
    cams, points, cam_of, point_of, weights, feats = synthetic_problem(20, 500, 4000, rng)
    p = len(weights)

    # The value of one observation against numpy.
    for i in range(5):
        args = (cams[cam_of[i]], points[point_of[i]], weights[i], feats[i])
        np.testing.assert_allclose(obs(*args), numpy_residuals(*args), rtol=1e-12, atol=1e-14)

    # One call per observation.
    blocks = np.empty((p, 3, 15))
    for i in range(p):
        blocks[i] = obs.jacobian(cams[cam_of[i]], points[point_of[i]], weights[i], feats[i])

    # The same blocks from one call over all observations.
    together = m.ba_jacobian_blocks(cams[cam_of], points[point_of], weights, feats)
    assert together.shape == (p, 3, 15)
    np.testing.assert_allclose(blocks, together, rtol=1e-12, atol=1e-14)

    # Some blocks against central differences of the numpy residuals.
    for i in rng.choice(p, 5, replace=False):
        cam, x, w, feat = cams[cam_of[i]], points[point_of[i]], weights[i], feats[i]
        params = np.concatenate([cam, x, [w]])
        eps = 1e-6
        fd = np.empty((3, 15))
        for c in range(15):
            hi, lo = params.copy(), params.copy()
            hi[c] += eps
            lo[c] -= eps
            fd[:, c] = (
                numpy_residuals(hi[:11], hi[11:14], hi[14], feat) - numpy_residuals(lo[:11], lo[11:14], lo[14], feat)
            ) / (2 * eps)
        np.testing.assert_allclose(blocks[i], fd, rtol=1e-5, atol=1e-7)

    # Per-call times from Python (arguments are rows of the problem's arrays).
    rows = [(cams[cam_of[i]], points[point_of[i]], float(weights[i]), feats[i]) for i in range(p)]
    t_jac = per_call_seconds(lambda: [obs.jacobian(*a) for a in rows], 1) / p
    t_val = per_call_seconds(lambda: [obs(*a) for a in rows], 1) / p
    print(f"{p} observations: Python ba_obs {t_val * 1e6:.2f} us/call, ba_obs.jacobian {t_jac * 1e6:.2f} us/call")

    # The C ABI: libba.so from `arrayad build`, called with ctypes.
    cli = find_cli()
    if cli is None:
        print("C ABI comparison skipped: no `arrayad` command line (cargo build --release, or set ARRAYAD_BIN)")
        return
    lib_path = build_library(
        cli, ba_arr, out_dir("ba") / "libba.so", "--export", "ba_obs", "--wrt", "cam,x,w"
    )
    lib = ctypes.CDLL(str(lib_path))
    jac_fn = lib.ba_obs_jacobian
    ptr = ctypes.c_void_p
    jac_fn.argtypes = [ptr, ptr, ctypes.c_double, ptr, ptr, ptr]
    jac_fn.restype = ctypes.c_int32
    lib.ba_last_error.restype = ctypes.c_char_p
    out = np.empty(3)
    c_blocks = np.empty((p, 3, 15))
    cam_base, point_base, feat_base = cams.ctypes.data, points.ctypes.data, feats.ctypes.data
    out_ptr = out.ctypes.data
    # Pointers worked out once: the C call alone, the cheapest way ctypes has.
    c_args = [
        (cam_base + 88 * int(cam_of[i]), point_base + 24 * int(point_of[i]), float(weights[i]), feat_base + 16 * i,
         out_ptr, c_blocks.ctypes.data + 360 * i)
        for i in range(p)
    ]
    for a in c_args:
        if jac_fn(*a) != 0:
            raise RuntimeError(lib.ba_last_error().decode())
    np.testing.assert_allclose(c_blocks, blocks, rtol=1e-13, atol=1e-15)
    t_c = per_call_seconds(lambda: [jac_fn(*a) for a in c_args], 1) / p
    print(
        f"C ABI through ctypes: ba_obs_jacobian {t_c * 1e6:.2f} us/call; "
        f"Python call overhead over it {(t_jac - t_c) * 1e6:.2f} us/call"
    )


if __name__ == "__main__":
    main()
