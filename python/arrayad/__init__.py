"""arrayad: compile ``.arr`` array programs to machine code, with their
derivatives, and call them on numpy arrays.

    >>> import numpy as np, arrayad
    >>> m = arrayad.compile("def f(x: [n]f64, w: [n]f64) -> f64 = sum(x * w) + exp(x[0])")
    >>> x, w = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 2.0])
    >>> m.f(x, w)                      # the value: a float
    7.218281828459045
    >>> gx, gw = m.f.grad(x, w)        # gradients with respect to x and w
    >>> m.f.grad(x, w, wrt="w")        # only w: an array like w
    array([1., 2., 3.])

Arguments: numpy arrays of float64, int64 or bool (read in place, without a
copy, when C-contiguous and of the parameter's dtype; anything else, such
as a list, a strided view or an int array for an f64 parameter, is
converted once), Python floats, ints and bools, and tuples for tuple
parameters. Results: float, int, bool, numpy arrays, tuples for tuple
results.

Derivatives (methods of :class:`Function`, ``wrt=`` a parameter name or
position, or a tuple of them):

- ``f.grad(*args, wrt=None)``, ``f.value_and_grad(*args, wrt=None)``
- ``f.vjp(primals, cotangent, wrt=None) -> (value, cotangents)``
- ``f.jvp(primals, tangents, wrt=None) -> (value, tangent)``
- ``f.jvp_many(primals, directions, wrt=None) -> (value, [tangent, ...])``
- ``f.jacobian(*args, wrt=None)``: a 2-D array (result elements x wrt elements)
- ``f.hvp(primals, tangents, wrt=None)``, ``f.hessian(*args, wrt=None)``

and the JAX-style transforms :func:`grad` and :func:`value_and_grad`.

The GIL is released while compiled code runs, so calls from several
threads run in parallel. Errors are exceptions derived from
:class:`Error` (see ``arrayad._errors``) whose messages carry the source
location ``FILE:LINE:COL``.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Optional, Sequence, Tuple, Union

from . import _arrayad
from ._arrayad import Function, Module
from ._errors import (
    ArgumentError,
    CompileError,
    Diagnostic,
    DivisionByZero,
    EmptyReduction,
    Error,
    ErrorKind,
    IndexOutOfBounds,
    InternalError,
    InvalidArgument,
    IrregularArray,
    NegativeSize,
    OutOfMemory,
    RuntimeError,
    SizeMismatch,
    SliceOutOfRange,
    UnknownFunctionError,
    UsageError,
)

__version__: str = _arrayad.__version__

__all__ = [
    "ArgumentError",
    "CompileError",
    "Diagnostic",
    "DivisionByZero",
    "EmptyReduction",
    "Error",
    "ErrorKind",
    "Function",
    "IndexOutOfBounds",
    "InternalError",
    "InvalidArgument",
    "IrregularArray",
    "Module",
    "NegativeSize",
    "OutOfMemory",
    "RuntimeError",
    "SizeMismatch",
    "SliceOutOfRange",
    "UnknownFunctionError",
    "UsageError",
    "backends",
    "compile",
    "grad",
    "num_threads",
    "set_num_threads",
    "value_and_grad",
]

Wrt = Union[None, int, str, Sequence[Union[int, str]]]


def backends() -> Tuple[str, ...]:
    """The backends of this build: ``("cranelift", "interp")``, plus
    ``"llvm"`` when it was built with ``--features llvm``."""
    return tuple(_arrayad.backends())


def num_threads() -> int:
    """The number of threads on which compiled code runs its parallel maps
    (``for`` comprehensions of independent iterations whose rows are
    numbers or arrays of a static shape, and reductions of long arrays,
    when their work pays for it): the last :func:`set_num_threads`, else
    the environment variable ``ARRAYAD_NUM_THREADS``, else the number of
    cores the process may run on. Results are the same bits for every
    number of threads."""
    return int(_arrayad.num_threads())


def set_num_threads(n: Optional[int] = None) -> None:
    """Sets the number of threads of parallel maps for every module of the
    process (1 to 256; 1 runs everything on the calling thread); ``None``
    restores the default (:func:`num_threads`)."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"set_num_threads: expected a positive int or None, got {n!r}")
    _arrayad.set_num_threads(n)


_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _memory(value: Union[None, int, str]) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ArgumentError(f"max_memory must be a number of bytes or a str such as '2G', got {type(value).__name__}")
    if isinstance(value, int):
        n = value
    else:
        text = value.strip().upper()
        if text.endswith("B"):
            text = text[:-1]
        suffix = text[-1] if text and text[-1] in ("K", "M", "G", "T") else ""
        try:
            n = int(text[: len(text) - len(suffix)]) * _SUFFIXES[suffix]
        except ValueError:
            raise ArgumentError(f"max_memory {value!r} is not a size such as 512M or 2G") from None
    if n <= 0:
        raise ArgumentError(f"max_memory must be positive, got {value!r}")
    return n


def _names_arr_file(s: str) -> bool:
    """Whether the str ``s`` is the name of a .arr file rather than source
    text."""
    if not s.endswith(".arr") or "\n" in s:
        return False
    if os.path.isfile(s):
        return True
    # One line ending in .arr is not a program: say that the file is
    # missing rather than report a syntax error at 1:1.
    raise FileNotFoundError(f"no such .arr file: {s!r}")


def compile(
    source_or_path: Union[str, "os.PathLike[str]"],
    backend: str = "cranelift",
    wrt: Optional[Sequence[str]] = None,
    *,
    name: Optional[str] = None,
    checkpoint: bool = False,
    max_memory: Union[None, int, str] = None,
    fast_math: bool = False,
    keep_calls_above: Optional[int] = None,
    flush_subnormals: bool = False,
) -> Module:
    """Compile an arrayad program.

    ``source_or_path`` is a ``pathlib.Path`` (or other path object), a str
    naming an existing file that ends in ``.arr`` (both read as a file), or
    the source text itself (messages call it ``name``, by default
    ``"<string>"``). A one-line str ending in ``.arr`` that names no file
    raises ``FileNotFoundError``.

    ``backend``: ``"cranelift"`` (default: compiles in milliseconds),
    ``"llvm"`` (``-O3`` for this CPU; only in a build with the ``llvm``
    feature, see :func:`backends`) or ``"interp"`` (the reference
    interpreter). ``wrt``: the parameter names differentiated by default
    (every definition's parameters of these names; default: every
    parameter with f64 parts). ``checkpoint``: reverse mode checkpoints
    counted loops (O(sqrt n) tape). ``max_memory``: the most bytes of
    working memory one call may hold (an int, or a str like ``"2G"``;
    default ``$ARRAYAD_MAX_MEMORY``, else half the physical memory); a call
    needing more raises :class:`OutOfMemory`. ``fast_math``: LLVM may
    reassociate floating-point arithmetic. ``keep_calls_above``: a
    definition of at least this many statements called from two places or
    more is compiled once, with its derivatives, and called instead of
    inlined at each call (default 2000; a huge value inlines every call).
    ``flush_subnormals``: every call flushes subnormal numbers (below
    2.2e-308 in magnitude) to zero, on all its threads, and gives Python
    back its own mode when it returns; arithmetic that meets them then runs
    at full speed (many x86-64 CPUs take a slow microcode assist for each),
    and results differ from IEEE's only where a value would be subnormal
    (the interpreter ignores it).

    Definitions are compiled on first call (each kind of code once per
    definition and ``wrt``); :meth:`Module.precompile` compiles up front.

    Raises :class:`CompileError` (with ``.diagnostics``), :class:`UsageError`
    (unknown backend, a ``wrt`` name that is no parameter), ``OSError``
    (an unreadable file).
    """
    if isinstance(wrt, str):
        wrt = [wrt]
    wrt_list = None if wrt is None else [str(w) for w in wrt]
    mem = _memory(max_memory)
    if keep_calls_above is not None and (
        isinstance(keep_calls_above, bool) or not isinstance(keep_calls_above, int) or keep_calls_above < 0
    ):
        raise ArgumentError(f"keep_calls_above must be a non-negative int, got {keep_calls_above!r}")
    keep = None if keep_calls_above is None else min(keep_calls_above, 2**64 - 1)
    if not isinstance(backend, str):
        raise ArgumentError(f"backend must be a str, got {type(backend).__name__}")
    if not isinstance(source_or_path, (str, os.PathLike)):
        raise ArgumentError(f"compile takes source text (str) or a path, got {type(source_or_path).__name__}")
    options = (backend, wrt_list, bool(checkpoint), mem, bool(fast_math), keep, bool(flush_subnormals))
    if isinstance(source_or_path, os.PathLike) or _names_arr_file(source_or_path):
        return _arrayad.compile_file(os.fspath(source_or_path), *options)
    return _arrayad.compile_source(name if name is not None else "<string>", source_or_path, *options)


def _argnums_to_wrt(argnums: Wrt) -> Any:
    if isinstance(argnums, list):
        return tuple(argnums)
    return argnums


def grad(f: Function, argnums: Wrt = 0) -> Callable[..., Any]:
    """The gradient of ``f`` as a function, like ``jax.grad``.

    ``argnums`` (positions or parameter names): an int or str gives the
    gradient with respect to that one parameter, a tuple gives a tuple of
    gradients in that order; ``None`` differentiates the module's active
    parameters (as ``f.grad`` without ``wrt``). As in JAX, the default is
    ``0``, the first parameter.

    >>> m = compile("def f(x: f64, y: f64) -> f64 = x * x * y")
    >>> grad(m.f)(3.0, 2.0)                      # d/dx
    12.0
    >>> grad(m.f, argnums=(1, 0))(3.0, 2.0)      # d/dy, d/dx
    (9.0, 12.0)
    """
    if not isinstance(f, Function):
        raise ArgumentError(f"arrayad.grad takes an arrayad Function, got {type(f).__name__}")
    wrt = _argnums_to_wrt(argnums)

    @functools.wraps(f.grad)
    def gradient(*args: Any, **kwargs: Any) -> Any:
        return f.grad(*args, wrt=wrt, **kwargs)

    gradient.__name__ = f"grad_{f.name}"
    gradient.__qualname__ = gradient.__name__
    return gradient


def value_and_grad(f: Function, argnums: Wrt = 0) -> Callable[..., Tuple[float, Any]]:
    """``(value, gradient)`` of ``f`` as a function, like
    ``jax.value_and_grad`` (``argnums`` as for :func:`grad`)."""
    if not isinstance(f, Function):
        raise ArgumentError(f"arrayad.value_and_grad takes an arrayad Function, got {type(f).__name__}")
    wrt = _argnums_to_wrt(argnums)

    @functools.wraps(f.value_and_grad)
    def value_and_gradient(*args: Any, **kwargs: Any) -> Tuple[float, Any]:
        return f.value_and_grad(*args, wrt=wrt, **kwargs)

    value_and_gradient.__name__ = f"value_and_grad_{f.name}"
    value_and_gradient.__qualname__ = value_and_gradient.__name__
    return value_and_gradient
