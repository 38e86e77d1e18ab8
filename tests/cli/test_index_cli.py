"""``lake index create|ls|drop|apply`` on both stores: rules in the catalog, indexing existing
objects in one commit (and removing the entries), ``lake index ls -p`` with unindexed objects,
``POOL$indexes`` in SQL, index commits in ``lake log``, and a query the index prunes (where
min/max stats cannot) giving exactly the rows of the same query on an unindexed pool. Refused
input: one ``error:`` line, exit 1 (2 for usage), nothing changed in the lake."""

from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lake_cli import main
from lake_core.stores.base import ObjectStore

#: Two objects whose ``user`` ranges (and ``ts`` ranges) overlap: min/max stats cannot tell
#: which holds ``n``; only an index can.
BATCH_A = [{"ts": 1, "user": "a"}, {"ts": 2, "user": "m"}, {"ts": 3, "user": "z"}]
BATCH_B = [{"ts": 2, "user": "b"}, {"ts": 3, "user": "n"}, {"ts": 4, "user": "y"}]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as e:  # usage errors exit as argparse did
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def ok(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = run(capsys, *args)
    assert code == 0, (args, err)
    return out


def records(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def ndjson(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def L(lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """A lake with pools ``logs`` and ``plain`` holding the same two objects, and ``nested``
    (a struct column)."""
    L = ["--lake", lake_uri]
    ok(capsys, *L, "init")
    a, b = ndjson(tmp_path / "a.ndjson", BATCH_A), ndjson(tmp_path / "b.ndjson", BATCH_B)
    for pool in ("logs", "plain"):
        ok(capsys, *L, "create", pool, "--orderby", "ts")
        ok(capsys, *L, "load", "-p", pool, a)
        ok(capsys, *L, "load", "-p", pool, b)
    ok(capsys, *L, "create", "nested", "--orderby", "ts")
    ok(
        capsys,
        *L,
        "load",
        "-p",
        "nested",
        ndjson(tmp_path / "n.ndjson", [{"ts": 1, "s": {"x": 1}}]),
    )
    return L


def object_ids(capsys: pytest.CaptureFixture[str], L: list[str], pool: str) -> list[str]:
    return sorted(r["id"] for r in records(ok(capsys, *L, "objects", "-p", pool, "-f", "json")))


def test_create_apply_query_remove_drop(
    L: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(
        capsys, *L, "index", "create", "by_user", "--field", "user", "--pool", "logs"
    )
    assert (code, err) == (0, "")
    assert out == "index rule by_user created (catalog version 4)\n"
    (rule,) = records(ok(capsys, *L, "index", "ls", "-f", "json"))
    assert {k: rule[k] for k in ("name", "field", "kind", "fpp", "pools")} == {
        "name": "by_user",
        "field": "user",
        "kind": "exact",
        "fpp": None,
        "pools": ["logs"],
    }
    table = ok(capsys, *L, "index", "ls").splitlines()
    assert table[0].split() == ["name", "field", "kind", "fpp", "pools", "created"]
    assert table[1].split()[:5] == ["by_user", "user", "exact", "null", "logs"]

    # The two objects loaded before the rule are unindexed; plain is not covered.
    ids = object_ids(capsys, L, "logs")
    rows = records(ok(capsys, *L, "index", "ls", "-p", "logs", "-f", "json"))
    assert [(r["object"], r["rule"], r["status"], r["index_id"]) for r in rows] == [
        (i, "by_user", "unindexed", None) for i in ids
    ]
    assert ok(capsys, *L, "index", "ls", "-p", "plain", "-f", "json") == ""

    code, out, err = run(capsys, *L, "index", "apply", "-p", "logs", "by_user")
    assert (code, err) == (0, "")  # no terminal: no progress
    assert out.startswith("indexed 2 object(s) by by_user (") and " bytes) in commit " in out
    commit = out.split()[-1]
    log = records(ok(capsys, *L, "log", "-p", "logs", "-f", "json"))
    assert log[0]["id"] == commit
    assert {a["op"] for a in log[0]["actions"]} == {"add_index"}
    text_log = ok(capsys, *L, "log", "-p", "logs")
    assert "index 2 object(s) by rule by_user" in text_log
    assert "(objects 0 added, 0 deleted; rows +0 -0, layout only; index entries +2 -0)" in text_log

    rows = records(ok(capsys, *L, "index", "ls", "-p", "logs", "-f", "json"))
    assert [(r["object"], r["status"], r["kind"], r["field"]) for r in rows] == [
        (i, "indexed", "exact", "user") for i in ids
    ]
    assert all(r["size"] > 0 and r["index_id"] for r in rows)
    assert run(capsys, *L, "index", "apply", "-p", "logs", "by_user")[1] == "nothing to index\n"

    # POOL$indexes: the same entries, with the data objects' sizes.
    sql = 'SELECT * FROM "logs$indexes" ORDER BY object'
    meta = records(ok(capsys, *L, "query", sql, "-f", "json"))
    assert [m["object"] for m in meta] == ids
    assert [m["index_id"] for m in meta] == [r["index_id"] for r in rows]
    assert [m["size"] for m in meta] == [r["size"] for r in rows]
    assert all(m["rule"] == "by_user" and m["rule_id"] == rule["id"] for m in meta)
    assert all(m["object_rows"] == 3 and m["object_bytes"] > 0 for m in meta)

    # A lookup inside both objects' user ranges: stats keep both, the index prunes one.
    for where in ("user = 'n'", "user IN ('n', 'm')", "user = 'q'"):
        code, out, err = run(
            capsys, *L, "query", "-p", "logs", "--where", where, "-f", "json", "--stats"
        )
        assert code == 0, err
        stats = json.loads(err)
        _, plain, plain_err = run(
            capsys, *L, "query", "-p", "plain", "--where", where, "-f", "json", "--stats"
        )
        assert sorted(out.splitlines()) == sorted(plain.splitlines()), where
        assert "index_objects_pruned" not in json.loads(plain_err)
        expected = {"user = 'n'": 1, "user IN ('n', 'm')": 0, "user = 'q'": 2}[where]
        assert stats["index_objects_pruned"] == expected, (where, stats)
        assert stats["objects_read"] == 2 - expected
    assert [
        r["user"]
        for r in records(
            ok(capsys, *L, "query", "-p", "logs", "--where", "user = 'n'", "-f", "json")
        )
    ] == ["n"]

    # The SQL path plans with the same rules.
    code, out, err = run(
        capsys, *L, "query", "SELECT ts, user FROM logs WHERE user = 'n'", "-f", "json", "--stats"
    )
    assert code == 0, err
    assert records(out) == [{"ts": 3, "user": "n"}]
    assert json.loads(err)["logs"]["index_objects_pruned"] == 1

    # A new load into the covered pool is indexed in its own commit.
    ok(capsys, *L, "load", "-p", "logs", ndjson(tmp_path / "c.ndjson", [{"ts": 9, "user": "k"}]))
    assert "rows +1 -0; index entries +1 -0" in ok(capsys, *L, "log", "-p", "logs")
    statuses = [
        r["status"] for r in records(ok(capsys, *L, "index", "ls", "-p", "logs", "-f", "json"))
    ]
    assert statuses == ["indexed"] * 3

    # Drop: the entries stay (stale) until --remove takes them out.
    assert ok(capsys, *L, "index", "drop", "by_user") == (
        "index rule by_user dropped (catalog version 5)\n"
    )
    assert ok(capsys, *L, "index", "ls").splitlines()[1:] == []
    statuses = [
        r["status"] for r in records(ok(capsys, *L, "index", "ls", "-p", "logs", "-f", "json"))
    ]
    assert statuses == ["stale"] * 3
    # Stale entries are still correct, so reads still use them (docs/cli.md says so).
    code, out, err = run(capsys, *L, "query", "-p", "logs", "--where", "user = 'n'", "--stats")
    # The third object (user k only) is pruned by its stats first; the index prunes one more.
    assert code == 0 and json.loads(err)["index_objects_pruned"] == 1, err
    code, out, err = run(
        capsys, *L, "index", "apply", "-p", "logs", "by_user", "--remove", "-f", "json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert (result["removed"], result["rule"]) == (3, "by_user") and result["commit"]
    assert ok(capsys, *L, "index", "ls", "-p", "logs").splitlines()[1:] == []
    assert "index entries +0 -3" in ok(capsys, *L, "log", "-p", "logs")
    assert (
        ok(capsys, *L, "query", 'SELECT count(*) AS n FROM "logs$indexes"', "-f", "json")
        == '{"n":0}\n'
    )
    # The rows are what they were.
    assert len(records(ok(capsys, *L, "query", "-p", "logs", "-f", "json"))) == 7


def test_apply_objects_on_a_branch_and_bloom(
    L: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        *L,
        "index",
        "create",
        "default.by_user",
        "--field",
        "user",
        "--kind",
        "bloom",
        "--fpp",
        "0.05",
        "-f",
        "json",
    )
    assert code == 0
    created = json.loads(out)
    assert (created["name"], created["kind"], created["fpp"], created["pools"]) == (
        "by_user",
        "bloom",
        0.05,
        [],
    )
    assert created["catalog_version"] == 4
    ok(capsys, *L, "branch", "-p", "logs", "dev")
    first, second = object_ids(capsys, L, "logs")
    code, out, err = run(
        capsys, *L, "index", "apply", "-p", "logs@dev", "by_user", first, "-f", "json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert (result["indexed"], result["removed"], result["pool"]) == (1, 0, "logs")
    assert result["bytes"] > 0
    dev = records(ok(capsys, *L, "index", "ls", "-p", "logs@dev", "-f", "json"))
    assert [(r["object"], r["status"], r["kind"]) for r in dev] == [
        (first, "indexed", "bloom"),
        (second, "unindexed", "bloom"),
    ]
    # main is untouched; the rule covers every pool of the namespace (plain too).
    main_rows = records(ok(capsys, *L, "index", "ls", "-p", "logs", "-f", "json"))
    assert {r["status"] for r in main_rows} == {"unindexed"}
    csv = ok(capsys, *L, "index", "ls", "-p", "plain", "-f", "csv").splitlines()
    assert csv[0] == "object,rule,kind,field,index_id,size,status"
    assert [line.split(",")[-1] for line in csv[1:]] == ["unindexed", "unindexed"]
    # The struct-only pool has no user field: nothing to index there, and nothing unindexed.
    assert records(ok(capsys, *L, "index", "ls", "-p", "nested", "-f", "json")) == []
    assert ok(capsys, *L, "index", "apply", "-p", "nested", "by_user") == "nothing to index\n"


def test_progress_bar_counts_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal ``apply`` draws a bar of objects indexed on stderr (shown at once here:
    the delay that hides short runs is set to zero)."""
    import lake_cli.progress as progress

    err = io.StringIO()
    monkeypatch.setattr(progress, "_DELAY_SECONDS", 0.0)
    monkeypatch.setattr(progress.sys, "stderr", err)
    with progress.count_progress("indexing objects", True) as advance:
        advance(16, 40)
        advance(40, 40)
    assert "indexing objects" in err.getvalue() and "40/40" in err.getvalue()
    quiet = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", quiet)
    with progress.count_progress("indexing objects", False) as advance:
        advance(1, 2)
    assert quiet.getvalue() == ""


def lake_state(capsys: pytest.CaptureFixture[str], L: list[str], store: ObjectStore) -> Any:
    """The catalog version, and every key of the store with its size."""
    version = json.loads(ok(capsys, *L, "catalog", "log", "-n", "1", "-f", "json"))["version"]
    return version, sorted((o.key, o.size) for o in store.list(""))


def test_refused(L: list[str], capsys: pytest.CaptureFixture[str], store: ObjectStore) -> None:
    ok(capsys, *L, "index", "create", "by_user", "--field", "user", "--pool", "logs")
    ok(capsys, *L, "create", "ops.events", "--orderby", "ts")  # an empty pool: any field
    ok(capsys, *L, "index", "create", "ops.by_user", "--field", "user")
    logs = object_ids(capsys, L, "logs")
    plain = object_ids(capsys, L, "plain")
    refused: list[tuple[list[str], int, str]] = [
        (["index", "create", "a b", "--field", "user"], 2, "error: invalid name 'a b'"),
        (["index", "create", "r"], 2, "error: the following arguments are required: --field"),
        (
            ["index", "create", "r", "--field", "user", "--kind", "fuzzy"],
            2,
            "error: argument --kind",
        ),
        (
            ["index", "create", "r", "--field", "user", "--kind", "bloom", "--fpp", "0.7"],
            2,
            "error: --fpp must be a rate from 1e-06 to 0.5",
        ),
        (
            ["index", "create", "r", "--field", "user", "--kind", "bloom", "--fpp", "x"],
            2,
            "error: argument --fpp",
        ),
        (
            ["index", "create", "r", "--field", "user", "--fpp", "0.1"],
            2,
            "error: --fpp applies to --kind bloom only",
        ),
        (["index", "create", "r", "--field", "s"], 2, "error: field 's' is of type struct"),
        (
            ["index", "create", "r", "--field", "nosuch"],
            2,
            "error: no pool that index rule r covers has a field 'nosuch'",
        ),
        (
            ["index", "create", "nons.r", "--field", "user"],
            2,
            "error: namespace nons does not exist",
        ),
        (
            ["index", "create", "r", "--field", "a.b"],
            2,
            "error: an index rule names one top-level field",
        ),
        (
            ["index", "create", "r", "--field", "user", "--pool", "nope"],
            1,
            "error: default.nope: pool not found",
        ),
        (
            ["index", "create", "r", "--field", "user", "--pool", "ops.logs"],
            2,
            "error: --pool ops.logs: index rule r covers pools of namespace default only",
        ),
        (
            ["index", "create", "by_user", "--field", "user"],
            1,
            "error: index rule 'by_user' already exists",
        ),
        (["index", "drop", "nope"], 1, "error: nope: index rule not found"),
        (["index", "drop", "a@b"], 2, "error: invalid name"),
        (["index", "apply", "-p", "logs", "nope"], 1, "error: nope: index rule not found"),
        (["index", "apply", "-p", "nope", "by_user"], 1, "error: nope: pool not found"),
        (
            ["index", "apply", "-p", "logs@nobranch", "by_user"],
            1,
            "error: nobranch: branch not found",
        ),
        (
            ["index", "apply", "-p", "logs", "by_user", plain[0]],
            1,
            f"error: {plain[0]}: object not found (not live on logs@main)",
        ),
        (
            ["index", "apply", "-p", "logs", "by_user", logs[0], "2zzz"],
            1,
            "error: 2zzz: object not found (not live on logs@main)",
        ),
        (
            ["index", "apply", "-p", "plain", "by_user"],
            2,
            "error: index rule by_user does not cover pool plain",
        ),
        (
            ["index", "apply", "-p", "logs", "ops.by_user"],
            2,
            "error: index rule ops.by_user does not cover pool logs",
        ),
        (
            ["index", "apply", "-p", "logs", "ops.by_user", "--remove"],
            2,
            "error: index rule ops.by_user does not cover pool logs",
        ),
        (
            ["index", "apply", "-p", "logs", "gone", "--remove"],
            1,
            "error: gone: index rule not found",
        ),
        (["index", "apply", "-p", "logs"], 2, "error: the following arguments are required: RULE"),
        (["index", "ls", "-p", "nope"], 1, "error: nope: pool not found"),
        (["index", "ls", "-f", "parquet"], 2, "error: argument -f"),
    ]
    before = lake_state(capsys, L, store)
    for args, status, message in refused:
        code, out, err = run(capsys, *L, *args)
        assert (code, out) == (status, ""), (args, err)
        assert len(err.splitlines()) == 1 and err.startswith(message), (args, err)
        assert lake_state(capsys, L, store) == before, args


README = Path(__file__).resolve().parents[2] / "README.md"


def readme_lines() -> list[str]:
    """The shell lines of the README's "Search indexes" block, comment-only lines left out."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n### Search indexes\n") :]
    block = re.search(r"^```sh\n(.*?)^```$", section, flags=re.S | re.M)
    assert block, "the README's search-index section has no sh block"
    return [x for x in block.group(1).splitlines() if x.strip() and not x.startswith("#")]


def test_readme_example_runs_and_says_what_it_shows(
    lake_uri: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    L = ["--lake", lake_uri]
    ok(capsys, *L, "init")
    monkeypatch.chdir(tmp_path)
    said: dict[str, tuple[str, str]] = {}
    for line in readme_lines():
        if not line.startswith("lake "):
            subprocess.run(["bash", "-c", line], check=True, cwd=tmp_path)
            continue
        code, out, err = run(capsys, *L, *shlex.split(line, comments=True)[1:])
        assert code == 0, (line, err)
        said[line.split("#")[0].strip()] = (out, err)
    assert said["lake index create by_user --field user"][0].startswith(
        "index rule by_user created (catalog version "
    )
    assert said["lake index apply -p events by_user"][0].startswith(
        "indexed 2 object(s) by by_user ("
    )
    listed = said["lake index ls -p events"][0].splitlines()
    assert [row.split()[-1] for row in listed[1:]] == ["unindexed", "unindexed"]
    out, err = said["""lake query -p events --where "user = 'kim'" --stats"""]
    assert json.loads(err)["index_objects_pruned"] == 1 and "kim" in out and "zoe" not in out
    indexes = said["""lake query 'SELECT object, rule, size FROM "events$indexes"'"""][0]
    assert len(indexes.splitlines()) == 3  # a header and two entries


def test_a_bare_rule_name_is_the_pools_namespaces(
    L: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``lake index ls -p ns2.other`` lists rule ``onlyid``; ``apply -p ns2.other onlyid``
    finds it (a bare NAME is resolved in the pool's namespace, not in ``default``)."""
    ok(capsys, *L, "create", "ns2.other", "--orderby", "ts")
    ok(capsys, *L, "index", "create", "ns2.onlyid", "--field", "user")
    out = ok(capsys, *L, "index", "apply", "-p", "ns2.other", "onlyid", "-f", "json")
    assert json.loads(out)["rule"] == "ns2.onlyid"
