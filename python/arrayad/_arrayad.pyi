"""Type stubs of the native module ``arrayad._arrayad`` (PyO3).

Shapes in the docstrings use the sizes of the ``.arr`` signature: for
``def f(x: [n]f64, a: [n][m]f64) -> [m]f64``, ``x`` is a float64 array of
shape ``(n,)``, ``a`` one of shape ``(n, m)`` and the result one of shape
``(m,)``.
"""

from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union, final

import numpy as np
import numpy.typing as npt

__version__: str

#: A value of an .arr type: float/int/bool for f64/i64/bool scalars, a
#: numpy array (float64, int64 or bool) for an array, a tuple for a tuple
#: type. Arguments may also be lists (converted once) and arrays of other
#: dtypes that convert safely (int64 -> float64, ...).
_Value = Union[float, int, bool, npt.NDArray[Any], Tuple[Any, ...]]
#: A parameter name or position, or a tuple (list) of them; None: the
#: module's default active parameters.
_Wrt = Union[None, int, str, Sequence[Union[int, str]]]

@final
class Function:
    """One definition of a compiled :class:`Module`; call it like a Python
    function. Every call checks the arguments' types, dtypes and ranks
    first (``ArgumentError`` naming the parameter), runs compiled code with
    the GIL released, and raises a subclass of ``arrayad.RuntimeError`` for
    a run-time error of the program."""

    @property
    def name(self) -> str:
        """The definition's name."""
    @property
    def params(self) -> Tuple[str, ...]:
        """The parameter names, in order."""
    @property
    def signature(self) -> str:
        """The source signature, ``def f(x: [n]f64, w: [n]f64) -> f64``."""
    @property
    def default_wrt(self) -> Tuple[str, ...]:
        """The parameters differentiated when no ``wrt`` is given."""
    def checkpoint_warnings(self) -> List[str]:
        """The loops that checkpointing (``compile(..., checkpoint=True)``)
        leaves taped, as ``FILE:LINE:COL: warning: ...`` strings: while
        loops, loops without a primal state, loops with ``i64`` or ``bool``
        array states. Empty without checkpointing."""
    def backend_ir(self, kind: str) -> Optional[str]:
        """The backend's code of ``kind`` (``"primal"``, ``"jvp"``,
        ``"vjp"``, ``"vjp_rows"``, ``"jvp_lanes"`` or ``"hvp"``) as text:
        Cranelift IR, or optimised LLVM IR; None on the interpreter. The
        code is compiled again with its text kept, which costs about one
        compilation. ``UsageError`` for another kind."""
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The value: one result leaf as itself (f64 -> float, i64 -> int,
        bool -> bool, ``[n][m]f64`` -> float64 array of shape ``(n, m)``), a
        tuple result as a tuple."""
    def grad(self, *args: Any, wrt: _Wrt = None, **kwargs: Any) -> Any:
        """The gradient of an f64-result function.

        ``wrt`` a name or position: that parameter's gradient, shaped like
        it (float for f64, array of its shape, tuple for a tuple
        parameter with None for its i64/bool parts). ``wrt`` a tuple: a
        tuple of those, in that order. ``wrt=None``: the default active
        parameters, the gradient itself if there is one, else a tuple in
        parameter order."""
    def value_and_grad(self, *args: Any, wrt: _Wrt = None, **kwargs: Any) -> Tuple[float, Any]:
        """``(value, gradient)``, the gradient as :meth:`grad` returns it."""
    def vjp(self, primals: Sequence[Any], cotangent: Any, wrt: _Wrt = None) -> Tuple[Any, Any]:
        """Reverse mode: ``(value, cotangents)``.

        ``primals``: one argument per parameter. ``cotangent``: shaped like
        the result (``None`` for zero and for i64/bool parts).
        ``cotangents``: as :meth:`grad` returns gradients."""
    def jvp(self, primals: Sequence[Any], tangents: Sequence[Any], wrt: _Wrt = None) -> Tuple[Any, Any]:
        """Forward mode: ``(value, tangent)`` as ``jax.jvp``.

        ``tangents``: one entry per parameter, shaped like it (f64 parts;
        ``None`` for zero and for parameters or parts not differentiated).
        ``tangent``: shaped like the result (None for i64/bool parts)."""
    def jvp_many(
        self, primals: Sequence[Any], directions: Sequence[Sequence[Any]], wrt: _Wrt = None
    ) -> Tuple[Any, List[Any]]:
        """Forward mode in many directions: ``(value, tangents)``, one
        tangent per direction (each direction as the ``tangents`` of
        :meth:`jvp`); the primal once per pass of several directions (when
        the active parameters' extents are literals, one per Jacobian
        column up to 32, more columns split evenly over the fewest passes
        of at most 32; else eight; per direction
        when the only active parameter is one scalar, or the function runs
        ``grad``/``vjp`` inside), each tangent bitwise :meth:`jvp`'s."""
    def jacobian(self, *args: Any, wrt: _Wrt = None, **kwargs: Any) -> npt.NDArray[np.float64]:
        """The dense Jacobian, shape ``(m, k)``: ``m`` f64 elements of the
        result (flattened left to right, row-major), ``k`` f64 elements of
        the ``wrt`` parameters (in ``wrt`` order, flattened likewise)."""
    def hvp(self, primals: Sequence[Any], tangents: Sequence[Any], wrt: _Wrt = None) -> Any:
        """The Hessian-vector product ``H t`` of an f64-result function
        (forward over reverse), shaped as :meth:`grad` returns gradients;
        ``primals`` and ``tangents`` as for :meth:`jvp`."""
    def hessian(self, *args: Any, wrt: _Wrt = None, **kwargs: Any) -> npt.NDArray[np.float64]:
        """The dense Hessian of an f64-result function, shape ``(k, k)``
        over the f64 elements of the ``wrt`` parameters."""

@final
class Module:
    """A compiled ``.arr`` program: its definitions by name (``m.f``,
    ``m["f"]``)."""

    @property
    def names(self) -> Tuple[str, ...]:
        """The names of the definitions, in source order."""
    @property
    def functions(self) -> Tuple[Function, ...]:
        """The definitions, in source order."""
    @property
    def file(self) -> str:
        """The source file's name as messages show it."""
    @property
    def backend(self) -> str:
        """``"cranelift"``, ``"llvm"`` or ``"interp"``."""
    def precompile(self) -> None:
        """Compile every definition's value and derivatives now."""
    def __getitem__(self, name: str, /) -> Function: ...
    # (PyO3's getattr hook, so that `m.f` type-checks as a Function.)
    def __getattr__(self, name: str, /) -> Function: ...
    def __contains__(self, name: object, /) -> bool: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[str]: ...
    def __dir__(self) -> List[str]: ...

def backends() -> List[str]:
    """The backends of this build."""

def num_threads() -> int:
    """The threads of parallel maps."""

def set_num_threads(n: Optional[int] = None) -> None:
    """Sets the threads of parallel maps (None: the default)."""

def compile_source(
    name: str,
    source: str,
    backend: str,
    wrt: Optional[List[str]],
    checkpoint: bool,
    max_memory: Optional[int],
    fast_math: bool,
    keep_calls_above: Optional[int],
    flush_subnormals: bool,
) -> Module: ...
def compile_file(
    path: str,
    backend: str,
    wrt: Optional[List[str]],
    checkpoint: bool,
    max_memory: Optional[int],
    fast_math: bool,
    keep_calls_above: Optional[int],
    flush_subnormals: bool,
) -> Module: ...
