"""Helpers shared by the examples and python/bench: the repository's
paths, and the `arrayad` command line for building C libraries."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time
from typing import Callable, Optional

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
SHARED = REPO.parent / "shared"


def find_cli() -> Optional[str]:
    """The `arrayad` command line: $ARRAYAD_BIN, `arrayad` on the PATH, or
    the repository's target/release or target/debug build (cargo build
    --release); None when there is none."""
    env = os.environ.get("ARRAYAD_BIN")
    if env and os.access(env, os.X_OK):
        return env
    found = shutil.which("arrayad")
    if found:
        return found
    for profile in ("release", "debug"):
        candidate = REPO / "target" / profile / "arrayad"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def build_library(cli: str, source: pathlib.Path, out: pathlib.Path, *flags: str) -> pathlib.Path:
    """`arrayad build SOURCE -o OUT FLAGS...`: a shared library and its
    header beside it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([cli, "build", str(source), "-o", str(out), *flags], check=True)
    return out


def out_dir(name: str) -> pathlib.Path:
    """A scratch directory of the repository for built libraries."""
    d = REPO / "target" / "python-examples" / name
    d.mkdir(parents=True, exist_ok=True)
    return d


def per_call_seconds(call: Callable[[], object], calls: int, repeats: int = 5) -> float:
    """The best over `repeats` batches of the mean time of one call."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best
