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
    ok(capsys, *L, "drop", "flights", "--force")
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
