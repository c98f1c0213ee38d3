"""Finite differences for the tests."""

from __future__ import annotations

import numpy as np


def finite_difference(fun, args, k, eps=1e-6):
    """The derivative of the f64 elements of fun(*args) (flattened) with
    respect to the elements of float64 argument k (flattened), by central
    differences: an array of shape (result size, argument size)."""
    base = np.asarray(args[k], dtype=np.float64)
    columns = []
    for e in range(base.size):
        hi = [np.array(a, dtype=np.float64, copy=True) if i == k else a for i, a in enumerate(args)]
        lo = [np.array(a, dtype=np.float64, copy=True) if i == k else a for i, a in enumerate(args)]
        hi[k].reshape(-1)[e] += eps
        lo[k].reshape(-1)[e] -= eps
        if base.ndim == 0:
            hi[k], lo[k] = float(hi[k]), float(lo[k])
        columns.append((np.ravel(fun(*hi)) - np.ravel(fun(*lo))) / (2 * eps))
    return np.stack(columns, axis=-1)
