"""Shell completion, which comes with click: the script a shell sources, and what it offers
(commands, subcommands, options, an option's choices). In-process: click answers a
completion request and exits before any command runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from lake_cli import main


def complete(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], words: str
) -> list[str]:
    """What bash would be offered after ``words`` (the last word is the one being typed)."""
    parts = words.split(" ")
    monkeypatch.setenv("_LAKE_COMPLETE", "bash_complete")
    monkeypatch.setenv("COMP_WORDS", words)
    monkeypatch.setenv("COMP_CWORD", str(len(parts) - 1))
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 0
    out, err = capsys.readouterr()
    assert err == ""
    return [line for line in out.splitlines() if line]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script_for_each_shell(
    shell: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("_LAKE_COMPLETE", f"{shell}_source")
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "_LAKE_COMPLETE" in out
    if shell == "bash":
        assert "complete -o nosort -F _lake_completion lake" in out


def test_completion_offers_commands_options_and_choices(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert complete(monkeypatch, capsys, "lake lo") == ["plain,load", "plain,log"]
    assert complete(monkeypatch, capsys, "lake catalog ") == [
        "plain,log",
        "plain,rollback",
        "plain,export",
    ]
    assert "plain,--where" in complete(monkeypatch, capsys, "lake query --w")
    assert complete(monkeypatch, capsys, "lake query -p logs -f ") == [
        "plain,table",
        "plain,json",
        "plain,csv",
        "plain,parquet",
    ]
    assert complete(monkeypatch, capsys, "lake load -p logs -i nd") == ["plain,ndjson"]
    # Files to load complete as file names (the shell lists them).
    assert complete(monkeypatch, capsys, "lake load -p logs ") == ["file,"]


def test_pool_names_complete_from_the_lake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(tmp_path / "lake")
    assert main(["--lake", uri, "init"]) == 0
    for name in ("logs", "ns.events", "metrics"):
        assert main(["--lake", uri, "create", name]) == 0
    capsys.readouterr()
    got = complete(monkeypatch, capsys, f"lake --lake {uri} query -p ")
    assert got == ["plain,logs", "plain,metrics", "plain,ns.events"]
    assert complete(monkeypatch, capsys, f"lake --lake {uri} load -p n") == ["plain,ns.events"]
    monkeypatch.setenv("LAKE_ROOT", uri)
    assert complete(monkeypatch, capsys, "lake log -p m") == ["plain,metrics"]
    # No lake there: no suggestions, and nothing on stderr (complete() checks it).
    assert complete(monkeypatch, capsys, f"lake --lake {tmp_path / 'none'} log -p ") == []
    assert not (tmp_path / "none").exists()
