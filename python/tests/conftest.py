"""Shared fixtures: the backends of this build."""

from __future__ import annotations

import pytest

import arrayad

BACKENDS = [b for b in ("cranelift", "llvm", "interp") if b in arrayad.backends()]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Every backend of this build (LLVM only in a build with it)."""
    return str(request.param)
