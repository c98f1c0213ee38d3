"""The Python snippets of the book (``docs/src/**/*.md``) run as written.

For every chapter with ```` ```python ```` blocks: the blocks marked
``file=NAME`` (any language) are written to a scratch directory, which
becomes the working directory, and the Python blocks run in order in one
namespace. A Python block followed by a ```` ```text,output ```` block
must print exactly that text. Tracebacks point into the Markdown file
(``docs/src/CHAPTER.md``, its line numbers).
"""

from __future__ import annotations

import contextlib
import io
import pathlib
from typing import List, NamedTuple

import pytest

BOOK = pathlib.Path(__file__).resolve().parents[2] / "docs" / "src"


class Block(NamedTuple):
    line: int  # 1-based line of the first line of the block's text
    lang: str
    attrs: List[str]
    text: str


def blocks(path: pathlib.Path) -> List[Block]:
    """The fenced blocks of a Markdown file (fences of three or more
    backticks, closed by as many or more)."""
    out: List[Block] = []
    fence = 0
    lang, start = "", 0
    attrs: List[str] = []
    lines: List[str] = []
    for k, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        stripped = raw.lstrip()
        ticks = len(stripped) - len(stripped.lstrip("`"))
        if not fence and ticks >= 3:
            words = [w.strip() for w in stripped[ticks:].strip().split(",")]
            fence, lang, attrs, start, lines = ticks, words[0], words[1:], k + 1, []
        elif fence and ticks >= fence and not stripped[ticks:].strip():
            out.append(Block(start, lang, attrs, "\n".join(lines) + "\n"))
            fence = 0
        elif fence:
            lines.append(raw)
    assert not fence, f"{path}: a block is not closed"
    return out


def chapters() -> List[pathlib.Path]:
    if not BOOK.is_dir():
        return []
    return sorted(p for p in BOOK.rglob("*.md") if any(b.lang == "python" for b in blocks(p)))


def test_the_book_has_python_snippets():
    if not BOOK.is_dir():
        pytest.skip("the book (docs/src) is not beside this package")
    names = {p.relative_to(BOOK).as_posix() for p in chapters()}
    assert {"tutorial/from-python.md", "python.md"} <= names, names


@pytest.mark.parametrize("chapter", chapters(), ids=lambda p: p.relative_to(BOOK).as_posix())
def test_chapter(chapter: pathlib.Path, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bs = blocks(chapter)
    for b in bs:
        for a in b.attrs:
            if a.startswith("file="):
                (tmp_path / a[len("file=") :]).write_text(b.text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    shown = f"docs/src/{chapter.relative_to(BOOK).as_posix()}"
    namespace = {"__name__": "__book__"}
    for k, b in enumerate(bs):
        if b.lang != "python":
            continue
        # Leading newlines make the line numbers of tracebacks those of the
        # Markdown file.
        code = compile("\n" * (b.line - 1) + b.text, shown, "exec")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(code, namespace)
        following = bs[k + 1] if k + 1 < len(bs) else None
        if following is not None and following.lang == "text" and "output" in following.attrs:
            got = [line.rstrip() for line in printed.getvalue().rstrip().splitlines()]
            want = [line.rstrip() for line in following.text.rstrip().splitlines()]
            assert got == want, f"{shown}:{b.line}: the block printed\n" + "\n".join(got)
