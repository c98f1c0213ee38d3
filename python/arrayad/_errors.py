"""The exceptions of arrayad.

Every exception the package raises on purpose derives from :class:`Error`,
and also from the built-in exception a Python user would expect for it, so
that ``except ValueError`` (or ``TypeError``, ``KeyError``, ``IndexError``,
``ZeroDivisionError``, ``MemoryError``, ``RuntimeError``) keeps working::

    Error
    ├── CompileError                 the source does not compile (.diagnostics)
    ├── UsageError (ValueError)      a wrong request: bad wrt, grad of a non-f64 result, ...
    │   └── UnknownFunctionError (KeyError, AttributeError)
    ├── ArgumentError (TypeError, ValueError)
    │                                an argument of the wrong type, dtype, rank or count
    ├── InternalError                a bug of arrayad
    └── RuntimeError (builtins.RuntimeError)
        │                            a run-time error of the program (.kind, .file, .line, .column)
        ├── IndexOutOfBounds (IndexError)
        ├── SliceOutOfRange (IndexError)
        ├── SizeMismatch (ValueError)
        ├── IrregularArray (ValueError)
        ├── NegativeSize (ValueError)
        ├── DivisionByZero (ZeroDivisionError)
        ├── EmptyReduction (ValueError)
        ├── OutOfMemory (MemoryError)
        └── InvalidArgument (ArgumentError)

Files that cannot be read raise the built-in ``OSError`` (``FileNotFoundError``).
"""

from __future__ import annotations

import builtins
import enum
import re
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

__all__ = [
    "ArgumentError",
    "CompileError",
    "Diagnostic",
    "DivisionByZero",
    "EmptyReduction",
    "Error",
    "ErrorKind",
    "IndexOutOfBounds",
    "InternalError",
    "InvalidArgument",
    "IrregularArray",
    "NegativeSize",
    "OutOfMemory",
    "RuntimeError",
    "SizeMismatch",
    "SliceOutOfRange",
    "UnknownFunctionError",
    "UsageError",
]


class Error(Exception):
    """Base class of the exceptions of arrayad; ``str(e)`` is the message."""

    def __str__(self) -> str:
        # KeyError would show the repr of its argument; every arrayad error
        # shows its message as it is.
        return str(self.args[0]) if self.args else ""


class Diagnostic(NamedTuple):
    """One compile error: where it is, its code, its message and its notes."""

    file: str
    line: int
    column: int
    code: str
    message: str
    notes: Tuple[str, ...]


class CompileError(Error):
    """The source does not compile.

    ``str(e)`` is the rendered report (for each error an ``error:`` line,
    ``FILE:LINE:COL``, the source line and a caret); ``e.diagnostics`` lists
    the errors as :class:`Diagnostic` tuples, in source order.
    """

    diagnostics: List[Diagnostic]

    def __init__(self, message: str, diagnostics: Sequence[Tuple[Any, ...]] = ()) -> None:
        super().__init__(message)
        self.diagnostics = [
            Diagnostic(str(d[0]), int(d[1]), int(d[2]), str(d[3]), str(d[4]), tuple(d[5])) for d in diagnostics
        ]


class UsageError(Error, ValueError):
    """The request itself is wrong: a ``wrt`` that names no parameter, the
    gradient of a function whose result is not one f64, an unknown backend."""


class UnknownFunctionError(UsageError, KeyError, AttributeError):
    """``module["g"]`` or ``module.g`` for a module that defines no ``g``."""


class ArgumentError(Error, TypeError, ValueError):
    """An argument, tangent or cotangent does not fit the signature: wrong
    count, type, dtype or rank (checked before the call; the message names
    the parameter)."""


class InternalError(Error):
    """A bug of arrayad (please report it with the program)."""


class ErrorKind(enum.IntEnum):
    """The kinds of run-time errors (LANGUAGE.md section 5); the values are
    the error codes of the C ABI."""

    INDEX_OUT_OF_BOUNDS = 1
    SLICE_OUT_OF_RANGE = 2
    SIZE_MISMATCH = 3
    IRREGULAR_ARRAY = 4
    NEGATIVE_SIZE = 5
    DIVISION_BY_ZERO = 6
    EMPTY_REDUCTION = 7
    OUT_OF_MEMORY = 8
    INVALID_ARGUMENT = 9

    @property
    def description(self) -> str:
        """The words that start the message of an error of this kind."""
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    ErrorKind.INDEX_OUT_OF_BOUNDS: "index out of bounds",
    ErrorKind.SLICE_OUT_OF_RANGE: "slice out of range",
    ErrorKind.SIZE_MISMATCH: "size mismatch",
    ErrorKind.IRREGULAR_ARRAY: "irregular array",
    ErrorKind.NEGATIVE_SIZE: "negative size",
    ErrorKind.DIVISION_BY_ZERO: "division by zero",
    ErrorKind.EMPTY_REDUCTION: "empty array",
    ErrorKind.OUT_OF_MEMORY: "out of memory",
    ErrorKind.INVALID_ARGUMENT: "invalid argument",
}


class RuntimeError(Error, builtins.RuntimeError):
    """A run-time error of the program (index out of bounds, size mismatch,
    ...), raised by a call; the subclass tells the kind.

    Attributes: ``kind`` (:class:`ErrorKind`), ``message`` (the whole
    message, ``FILE:LINE:COL: kind: detail``), and ``file``, ``line``,
    ``column`` (the source location, ``None`` when the error has none).
    """

    kind: Optional[ErrorKind] = None
    message: str
    file: Optional[str]
    line: Optional[int]
    column: Optional[int]

    def __init__(
        self,
        message: str,
        file: Optional[str] = None,
        line: Optional[int] = None,
        column: Optional[int] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.column = column


class IndexOutOfBounds(RuntimeError, IndexError):
    """An index outside ``0..n``."""

    kind = ErrorKind.INDEX_OUT_OF_BOUNDS


class SliceOutOfRange(RuntimeError, IndexError):
    """A slice ``lo:hi`` outside ``0 <= lo <= hi <= n``."""

    kind = ErrorKind.SLICE_OUT_OF_RANGE


class SizeMismatch(RuntimeError, ValueError):
    """Sizes that must agree do not (arguments, elementwise operands, the
    declared result shape)."""

    kind = ErrorKind.SIZE_MISMATCH


class IrregularArray(RuntimeError, ValueError):
    """Rows of an array literal or ``for`` body of different shapes."""

    kind = ErrorKind.IRREGULAR_ARRAY


class NegativeSize(RuntimeError, ValueError):
    """A negative trip count or size."""

    kind = ErrorKind.NEGATIVE_SIZE


class DivisionByZero(RuntimeError, ZeroDivisionError):
    """Integer division or remainder by zero."""

    kind = ErrorKind.DIVISION_BY_ZERO


class EmptyReduction(RuntimeError, ValueError):
    """``maximum``, ``minimum``, ``argmin`` or ``argmax`` of an empty array."""

    kind = ErrorKind.EMPTY_REDUCTION


class OutOfMemory(RuntimeError, MemoryError):
    """A call would need more memory than its limit (``compile(...,
    max_memory=...)``, ``$ARRAYAD_MAX_MEMORY``, by default half of the
    physical memory), or a result too large to allocate."""

    kind = ErrorKind.OUT_OF_MEMORY


class InvalidArgument(RuntimeError, ArgumentError):
    """A bad argument found by the compiled code itself."""

    kind = ErrorKind.INVALID_ARGUMENT


_BY_KIND = {
    cls.kind: cls
    for cls in (
        IndexOutOfBounds,
        SliceOutOfRange,
        SizeMismatch,
        IrregularArray,
        NegativeSize,
        DivisionByZero,
        EmptyReduction,
        OutOfMemory,
        InvalidArgument,
    )
}


def _runtime_error(code: int, message: str) -> RuntimeError:
    """The exception for a run-time error of C ABI code ``code`` whose
    message is ``message`` (``FILE:LINE:COL: kind: detail`` or ``kind:
    detail``). Called by the native module."""
    try:
        kind = ErrorKind(code)
    except ValueError:
        return RuntimeError(message)
    cls = _BY_KIND[kind]
    # The file name may contain colons: the location is the last
    # `:LINE:COL: ` before the kind's own words.
    m = re.match(r"(.*):(\d+):(\d+): " + re.escape(kind.description) + ": ", message, re.S)
    if m is None:
        return cls(message)
    return cls(message, m.group(1), int(m.group(2)), int(m.group(3)))
