"""The README's walk-through runs as a new user types it: every ``lake`` line of its ``sh``
block, top to bottom, on a fresh lake (local and S3), exits 0.

Only the placeholders are filled in, as a reader would: ``<commit-id>`` with the id the last
committing command printed, ``<staged-id>`` with the one ``lake add`` printed, ``<iso-time>``
with the current time. Shell lines that are not ``lake`` (the ``printf`` that writes the
input) run in bash; ``export LAKE_ROOT`` and ``alias`` are replaced by the test's lake.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lake_cli import main

README = Path(__file__).resolve().parents[2] / "README.md"


def walkthrough_lines() -> list[str]:
    """The walk-through's shell lines, backslash continuations joined, comments kept."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n## Walk-through\n") :]
    block = re.search(r"^```sh\n(.*?)^```$", section, flags=re.S | re.M)
    assert block, "the README's walk-through has no sh block"
    joined = re.sub(r"\\\n\s*", " ", block.group(1))
    return [
        line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]


def test_walkthrough_has_the_commands_it_shows() -> None:
    commands = [
        shlex.split(line, comments=True)[1]
        for line in walkthrough_lines()
        if line.startswith("lake ")
    ]
    for name in (
        "init",
        "create",
        "load",
        "query",
        "branch",
        "diff",
        "merge",
        "delete",
        "revert",
        "compact",
        "cleanup",
        "catalog",
    ):
        assert name in commands


def test_readme_walkthrough_runs_line_by_line(
    lake_uri: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LAKE_ROOT", lake_uri)
    last_commit = last_staged = None
    for line in walkthrough_lines():
        if line.startswith(("export LAKE_ROOT=", "alias lake=")):
            continue
        if not line.startswith("lake "):
            subprocess.run(["bash", "-c", line], check=True, cwd=tmp_path)
            continue
        words = shlex.split(line, comments=True)[1:]
        filled = []
        for word in words:
            if "<commit-id>" in word:
                assert last_commit, f"{line!r}: no commit printed before it"
                word = word.replace("<commit-id>", last_commit)
            if "<staged-id>" in word:
                assert last_staged, f"{line!r}: nothing staged before it"
                word = word.replace("<staged-id>", last_staged)
            if "<iso-time>" in word:
                now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                word = word.replace("<iso-time>", now)
            filled.append(word)
        code = main(filled)
        out, err = capsys.readouterr()
        assert code == 0, f"README line {line!r} exited {code}: {err.strip()}"
        for printed in out.splitlines():
            if m := re.fullmatch(r"(\S{27}) committed", printed):
                last_commit = m.group(1)
            if m := re.fullmatch(r"(\S{27}) staged", printed):
                last_staged = m.group(1)
