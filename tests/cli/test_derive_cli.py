"""``lake derive`` through the CLI on both stores: create, ls, refresh after a load and after
a delete, ``lake query`` answered from the derived pool (``--stats`` ``answered_from``,
``--explain``) with the same output as ``--no-derived``, a stale derived pool not used, and
refused input (one ``error:`` line, nothing created or changed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_index_cli import ndjson, ok, records, run

DEFINITION = (
    "SELECT date_trunc('hour', ts) AS hour, carrier, count(*) AS n, sum(delay) AS delay_sum, "
    "min(delay) AS lo, max(delay) AS hi FROM flights GROUP BY ALL"
)
QUERY = (
    "SELECT date_trunc('day', ts) AS d, carrier, count(*) AS n, avg(delay) AS a, max(delay) AS m "
    "FROM flights WHERE ts >= '2026-01-02' GROUP BY ALL ORDER BY ALL"
)


def _rows(start: int, n: int) -> list[dict[str, object]]:
    return [
        {
            "ts": f"2026-01-0{1 + (i % 3)}T{(i * 7) % 24:02d}:{i % 60:02d}:00Z",
            "carrier": "abc"[i % 3],
            "delay": None if i % 11 == 0 else (i * 37) % 90 - 10,
            "id": start + i,
        }
        for i in range(n)
    ]


@pytest.fixture
def L(lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    L = ["--lake", lake_uri]
    ok(capsys, *L, "init")
    ok(capsys, *L, "create", "flights", "--orderby", "ts:asc")
    ok(capsys, *L, "load", "-p", "flights", ndjson(tmp_path / "a.json", _rows(0, 300)))
    return L


def _query(capsys: pytest.CaptureFixture[str], L: list[str], *extra: str) -> tuple[str, dict]:
    code, out, err = run(capsys, *L, "query", QUERY, "-f", "json", "--stats", *extra)
    assert code == 0, err
    stats = json.loads([line for line in err.splitlines() if line.startswith("{")][-1])
    return out, stats


def test_derive_create_query_refresh_drop(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = ok(capsys, *L, "derive", "create", "hourly", "--from", "flights", "--as", DEFINITION)
    assert out.startswith("derived pool hourly created from flights: ")
    [row] = records(ok(capsys, *L, "derive", "ls", "-f", "json"))
    assert (row["name"], row["source"], row["current"], row["sql"]) == (
        "hourly",
        "flights",
        True,
        DEFINITION,
    )
    derived, stats = _query(capsys, L)
    assert stats["answered_from"] == ["hourly"]
    raw, raw_stats = _query(capsys, L, "--no-derived")
    assert raw_stats["answered_from"] == ["flights"] and derived == raw and derived
    code, _, err = run(capsys, *L, "query", QUERY, "--explain")
    assert code == 0 and "derived: hourly: answers it" in err
    # A load the derived pool does not reflect: the query reads the source, and says why.
    ok(capsys, *L, "load", "-p", "flights", ndjson(tmp_path / "b.json", _rows(300, 120)))
    stale, stats = _query(capsys, L)
    assert stats["answered_from"] == ["flights"]
    code, _, err = run(capsys, *L, "query", QUERY, "--explain")
    assert "does not reflect" in err and "lake derive refresh hourly" in err
    [done] = records(ok(capsys, *L, "derive", "refresh", "hourly", "-f", "json"))
    assert done["mode"] == "incremental" and done["source_rows_read"] == 120
    fresh, stats = _query(capsys, L)
    assert stats["answered_from"] == ["hourly"] and fresh == stale
    out = ok(capsys, *L, "derive", "refresh", "hourly")
    assert out.startswith("hourly is current (reflects ")
    # A delete: its buckets are recomputed.
    ok(capsys, *L, "delete", "-p", "flights", "--where", "carrier = 'b' AND delay > 40")
    out = ok(capsys, *L, "derive", "refresh", "hourly")
    assert "committed: hourly reflects" in out and "(recomputed;" in out
    after, stats = _query(capsys, L)
    raw, _ = _query(capsys, L, "--no-derived")
    assert stats["answered_from"] == ["hourly"] and after == raw and after != fresh
    # The derived pool is an ordinary pool: its log says what each commit reflects.
    log = records(ok(capsys, *L, "log", "-p", "hourly", "-f", "json"))
    assert [c["meta"]["lake.derived"]["mode"] for c in log] == [
        "recomputed",
        "incremental",
        "initial",
    ]
    assert ok(capsys, *L, "derive", "drop", "hourly").strip() == "derived pool hourly dropped"
    assert records(ok(capsys, *L, "derive", "ls", "-f", "json")) == []
    _, stats = _query(capsys, L)
    assert stats["answered_from"] == ["flights"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "nope", "--as", DEFINITION], "nope: pool not found"),
        (["--from", "flights", "--as", DEFINITION.replace("delay)", "x)", 1)], "no column x"),
        (["--from", "flights", "--as", "SELECT count(*) AS n FROM flights"], "time bucket"),
        (
            [
                "--from",
                "flights",
                "--as",
                DEFINITION.replace("GROUP BY ALL", "WHERE delay > 0 GROUP BY ALL"),
            ],
            "cannot filter",
        ),
        (["--from", "flights", "--as", DEFINITION.replace("FROM flights", "FROM other")], "reads"),
        (
            ["--from", "flights", "--as", DEFINITION.replace("'hour'", "'fortnight'")],
            "unknown time unit 'fortnight': date_trunc takes second, minute, hour, day, week, "
            "month, quarter, year",
        ),
    ],
)
def test_derive_create_refuses(
    L: list[str], capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    before = ok(capsys, *L, "ls", "-f", "json")
    code, out, err = run(capsys, *L, "derive", "create", "hourly", *args)
    # A missing pool exits 1; a definition the lake cannot keep is a usage error: 2.
    assert code == (1 if "not found" in message else 2) and out == ""
    assert err.startswith("error: ") and message in err and len(err.splitlines()) == 1, err
    assert ok(capsys, *L, "ls", "-f", "json") == before  # nothing created


def test_derive_refresh_after_the_source_is_dropped(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(capsys, *L, "derive", "create", "hourly", "--from", "flights", "--as", DEFINITION)
    [row] = records(ok(capsys, *L, "derive", "ls", "-f", "json"))
    assert (row["source"], row["source_live"]) == ("flights", True)
    ok(capsys, *L, "drop", "flights", "--force")
    # Still named, as the definition reads it, and marked as gone.
    [row] = records(ok(capsys, *L, "derive", "ls", "-f", "json"))
    assert (row["source"], row["source_live"], row["current"]) == ("flights", False, False)
    before = ok(capsys, *L, "log", "-p", "hourly", "-f", "json")
    code, out, err = run(capsys, *L, "derive", "refresh", "hourly")
    # The missing source is named, with the way out; nothing is committed.
    assert code == 1 and out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("error: flights: source pool of derived pool hourly not found (dropped")
    assert "lake derive drop hourly, then create it again" in err
    assert "lake catalog rollback" in err
    # A new pool of the same name is another pool: the derived pool does not follow it.
    ok(capsys, *L, "create", "flights", "--orderby", "ts:asc")
    ok(capsys, *L, "load", "-p", "flights", ndjson(tmp_path / "c.json", _rows(0, 10)))
    code, out, err = run(capsys, *L, "derive", "refresh", "hourly")
    assert code == 1 and out == "" and len(err.splitlines()) == 1, err
    assert "the pool now named flights is another pool, id " in err
    assert "lake derive drop hourly, then lake derive create hourly --from flights" in err
    assert ok(capsys, *L, "log", "-p", "hourly", "-f", "json") == before
    # The way out works.
    ok(capsys, *L, "derive", "drop", "hourly")
    out = ok(capsys, *L, "derive", "create", "hourly", "--from", "flights", "--as", DEFINITION)
    assert out.startswith("derived pool hourly created from flights: ")


def test_derive_on_plain_pools_and_flags(L: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["refresh", "flights"], ["drop", "flights"]):
        code, _, err = run(capsys, *L, "derive", *command)
        assert code == 2 and "is not a derived pool" in err
    code, _, err = run(capsys, *L, "query", "-p", "flights", "--explain")
    assert code == 2 and "go with a SQL query" in err


def test_histogram(L: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["histogram", "-p", "flights", "--by", "carrier", "--every", "1d"]
    raw = records(ok(capsys, *L, *args, "-f", "json"))
    assert sum(r["n"] for r in raw) == 300 and {r["carrier"] for r in raw} == {"a", "b", "c"}
    ok(capsys, *L, "derive", "create", "hourly", "--from", "flights", "--as", DEFINITION)
    code, out, err = run(capsys, *L, *args, "-f", "json", "--stats")
    assert code == 0 and records(out) == raw
    assert json.loads(err.splitlines()[-1]) == {"answered_from": ["hourly"]}
    chart = ok(capsys, *L, *args).splitlines()
    assert chart[0].startswith("carrier: ") and len(chart) == 1 + 3  # legend, three days
    assert chart[1].startswith("2026-01-01 ") and chart[1].endswith(" 100")
    for bad, message in (
        (["--every", "fortnight"], "--every 'fortnight'"),
        (["--every", "1d", "--by", "nope"], "no column nope"),
        (["--every", "1d", "--time", "carrier"], "not a timestamp"),
    ):
        code, _, err = run(capsys, *L, "histogram", "-p", "flights", *bad)
        assert code == 2 and message in err, err


def test_histogram_where(L: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """``--where`` is the lake's predicate language: the counts are ``lake count``'s, from
    the rows or from a derived pool."""
    args = ["histogram", "-p", "flights", "--by", "carrier", "--every", "1d", "-f", "json"]
    wheres = [
        "carrier = 'a'",
        "ts >= '2026-01-02' AND carrier <> 'c'",
        "carrier IN ('a', 'b') OR delay IS NULL",
        "delay BETWEEN 0 AND 30 AND NOT carrier LIKE 'b%'",
    ]
    raw = {w: records(ok(capsys, *L, *args, "--where", w)) for w in wheres}
    for where, rows in raw.items():
        count = int(ok(capsys, *L, "count", "-p", "flights", "--where", where))
        assert sum(r["n"] for r in rows) == count > 0, where
    ok(capsys, *L, "derive", "create", "hourly", "--from", "flights", "--as", DEFINITION)
    for where, rows in raw.items():
        code, out, err = run(capsys, *L, *args, "--where", where, "--stats")
        assert code == 0 and records(out) == rows, where
        # Conditions on its group columns and bucket bounds the derived pool answers.
        source = ["flights"] if "delay" in where else ["hourly"]
        assert json.loads(err.splitlines()[-1]) == {"answered_from": source}, where


@pytest.mark.parametrize("derived", [False, True])
@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("carrier = 1", "column 'carrier' (string) cannot be compared with integer literal 1"),
        ("error('x')", "expected an operator after column error at position 6, found '('"),
        ("bad =", "expected a value after '=' at position 6, found end of input"),
        ("nosuch = 1", "unknown column 'nosuch' in --where"),
        # Injections are refused, not run: the text must be one predicate.
        ("carrier = 'a') OR (1=1", "at position 14, found ')' (it closes no '(')"),
        ("carrier = 'a' -- c", "at position 15, found '-'"),
        ("carrier = 'a'; SELECT 1", "unexpected character ';' at position 14"),
    ],
)
def test_histogram_refuses_a_bad_where(
    L: list[str], capsys: pytest.CaptureFixture[str], where: str, message: str, derived: bool
) -> None:
    if derived:
        ok(capsys, *L, "derive", "create", "hourly", "--from", "flights", "--as", DEFINITION)
    before = ok(capsys, *L, "ls", "-f", "json")
    code, out, err = run(
        capsys, *L, "histogram", "-p", "flights", "--every", "1d", "--where", where
    )
    # A usage error (2), one line, positions in the user's text, no internal SQL.
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and message in err, err
    assert "GROUP" not in err and "date_trunc" not in err
    # The very message of lake query -p POOL --where.
    assert run(capsys, *L, "query", "-p", "flights", "--where", where) == (2, "", err)
    assert ok(capsys, *L, "ls", "-f", "json") == before


@pytest.mark.parametrize("derived", [False, True])
@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ('CAST("carrier" AS INTEGER) = 1', "error: Conversion Error: Could not convert string "),
        ("error('boom')", "error: Invalid Input Error: boom"),
    ],
)
def test_histogram_query_failing_as_it_runs(
    L: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    condition: str,
    message: str,
    derived: bool,
) -> None:
    """An error DuckDB raises while the histogram's query runs is one ``error:`` line (exit
    1), as ``lake query`` gives it. No ``--where`` reaches DuckDB unchecked any more, so the
    checked condition is replaced by SQL that fails on the rows."""
    import lake_core.derived.histogram as histogram

    if derived:
        ok(capsys, *L, "derive", "create", "hourly", "--from", "flights", "--as", DEFINITION)
    monkeypatch.setattr(histogram, "_condition", lambda where, schema: condition)
    args = ["histogram", "-p", "flights", "--every", "1d", "--where", "carrier = 'a'", "--stats"]
    code, out, err = run(capsys, *L, *args)
    assert code == 1 and out == "" and len(err.splitlines()) == 1, err
    assert err.startswith(message) and "Traceback" not in err and "SELECT" not in err, err
    # The same SQL error through lake query reads the same.
    sql = f"SELECT count(*) FROM flights WHERE {condition}"
    assert run(capsys, *L, "query", sql, "--no-derived")[2] == err
