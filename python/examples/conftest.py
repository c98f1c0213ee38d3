"""pytest runs every example script (python/examples/*.py but those whose
name starts with `_`) as a test: in this process, as `__main__`; the
scripts check their own results with assertions."""

from __future__ import annotations

import runpy
import sys

import pytest


def pytest_collect_file(parent, file_path):
    if file_path.suffix == ".py" and not file_path.name.startswith(("_", "conftest")):
        return ExampleFile.from_parent(parent, path=file_path)
    return None


class ExampleFile(pytest.File):
    def collect(self):
        yield ExampleItem.from_parent(self, name=self.path.stem)


class ExampleItem(pytest.Item):
    def runtest(self):
        here = str(self.path.parent)
        sys.path.insert(0, here)
        try:
            runpy.run_path(str(self.path), run_name="__main__")
        finally:
            sys.path.remove(here)

    def reportinfo(self):
        return self.path, 0, f"example {self.path.name}"
