"""The README's Python section and ``lake_core``'s docstring run exactly as shown, so they
cannot rot: the README's ``python`` blocks are executed in a temp directory and what they print
must equal their ``# =>`` comments; the package docstring runs as a doctest."""

from __future__ import annotations

import contextlib
import doctest
import io
import re
from pathlib import Path

import pytest

import lake_core

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n## Python\n") :]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"^```python\n(.*?)^```$", section, flags=re.S | re.M)
    assert blocks, "the README's Python section has no python block"
    return blocks


def expected_output(block: str) -> list[str]:
    """The ``# => …`` comments, one printed line each (a continuation is a line of only
    ``# => …``)."""
    return [m.group(1) for m in re.finditer(r"#\s*=>\s?(.*)$", block, flags=re.M)]


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_python_block_runs_and_prints_what_it_says(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    block = python_blocks()[index]
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, f"README.md python block {index + 1}", "exec"), {})
    assert out.getvalue().splitlines() == expected_output(block)


def test_package_docstring_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = doctest.testmod(lake_core, optionflags=doctest.ELLIPSIS, raise_on_error=False)
    assert result.attempted >= 8 and result.failed == 0
