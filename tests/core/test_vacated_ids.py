"""After a vacate, a commit id is "history was vacated" only if vacate cut it; an id that never
existed is "not found", whatever time its KSUID carries (issue 10 item 7). Both stores."""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pytest
from ksuid import Ksuid

from lake_cli import main
from lake_core import Lake
from lake_core.errors import HistoryVacatedError, NotFoundError
from lake_core.loading import load
from lake_core.maintenance import cleanup, vacate
from lake_core.pool import Pool


def _history(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> tuple[Pool, list[str]]:
    """Six commits on main, a dev branch with one more, vacated at the sixth, and cleaned up
    so the cut commits' objects are gone."""
    monkeypatch.setattr("lake_core.committing.SNAPSHOT_INTERVAL", 2)
    pool = lake.create_pool("v", "ts:asc")
    old = [load(pool, [pa.table({"ts": [i]})]) for i in range(6)]
    pool.create_branch("dev")
    load(pool, [pa.table({"ts": [10]})], "dev")
    vacate(pool, old[-1].date)
    cleanup(pool, timedelta(0), now=old[-1].date + timedelta(days=2))
    assert not lake.store.exists(f"pools/{pool.id}/commits/{old[0].id}.json")
    return Lake.open(lake.config).pool("v"), [c.id for c in old]


def test_reclaimed_ids_are_vacated_and_unknown_ids_not_found(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, old = _history(lake, monkeypatch)
    for commit_id in old[:-1]:
        with pytest.raises(HistoryVacatedError, match=commit_id):
            pool.resolve(commit_id)
    assert pool.resolve(old[-1]) == old[-1]  # the tail stays
    # Valid KSUIDs minted inside the vacated time range, and after it: never commits.
    first = Ksuid.from_base62(old[0]).datetime
    for t in (first, first + timedelta(seconds=1), first + timedelta(days=3)):
        stranger = str(Ksuid(datetime=t))
        with pytest.raises(NotFoundError, match=f"{stranger}: commit not found") as err:
            pool.resolve(stranger)
        assert not isinstance(err.value, HistoryVacatedError)


def test_vacate_records_only_new_cuts_and_survives_a_second_vacate(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, old = _history(lake, monkeypatch)
    c7 = load(pool, [pa.table({"ts": [7]})])
    c8 = load(pool, [pa.table({"ts": [8]})])
    vacate(pool, c7.date)
    cleanup(pool, timedelta(0), now=c8.date + timedelta(days=2))
    fresh = Lake.open(lake.config).pool("v")
    # The first vacate's tail and everything before it, then the second's cut: all vacated.
    for commit_id in old:
        with pytest.raises(HistoryVacatedError):
            fresh.resolve(commit_id)
    assert fresh.resolve(c7.id) == c7.id
    assert fresh.read()["ts"].to_pylist() == [0, 1, 2, 3, 4, 5, 7, 8]
    records = list(lake.store.list(f"pools/{pool.id}/history/vacated-"))
    assert len(records) == 2
    ids = [lake.store.get(r.key).decode().split() for r in records]
    assert sorted(len(x) for x in ids) == [1, 5]  # each cut recorded once: old[5], then old[:5]


def test_lakes_vacated_without_records_fall_back_to_ksuid_time(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, old = _history(lake, monkeypatch)
    for r in list(lake.store.list(f"pools/{pool.id}/history/")):
        lake.store.delete(r.key)
    fresh = Lake.open(lake.config).pool("v")
    with pytest.raises(HistoryVacatedError):
        fresh.resolve(old[0])
    later = str(Ksuid(datetime=Ksuid.from_base62(old[-1]).datetime + timedelta(days=3)))
    with pytest.raises(NotFoundError) as err:
        fresh.resolve(later)
    assert not isinstance(err.value, HistoryVacatedError)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_reports_vacated_and_unknown_ids(
    lake: Lake, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pool, old = _history(lake, monkeypatch)
    L = ["--lake", lake.config.uri]
    stranger = str(Ksuid(datetime=Ksuid.from_base62(old[0]).datetime))
    code, out, err = _cli(capsys, *L, "query", "-p", f"v@{old[1]}")
    assert (code, out) == (1, "") and err.startswith("error: history was vacated: ")
    assert len(err.splitlines()) == 1
    code, out, err = _cli(capsys, *L, "log", "-p", f"v@{stranger}")
    assert (code, out, err) == (1, "", f"error: {stranger}: commit not found (in pool v)\n")
    code, out, err = _cli(capsys, *L, "branch", "-p", "v", "x", "--from", stranger)
    assert code == 1 and err == f"error: {stranger}: commit not found (in pool v)\n"
    assert "x" not in pool.branches()


def test_revert_of_a_vacated_commit_is_refused(
    lake: Lake, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before cleanup reclaims it, the cut commit is still readable: revert refuses it."""
    monkeypatch.setattr("lake_core.committing.SNAPSHOT_INTERVAL", 2)
    pool = lake.create_pool("r", "ts:asc")
    old = [load(pool, [pa.table({"ts": [i]})]) for i in range(3)]
    vacate(pool, old[-1].date)
    tip = pool.tip()
    code, out, err = _cli(capsys, "--lake", lake.config.uri, "revert", "-p", "r", old[0].id)
    assert (code, out) == (1, "") and err.startswith("error: history was vacated: ")
    assert pool.tip() == tip


def test_revert_of_a_reclaimed_commit_says_vacated(
    lake: Lake, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pool, old = _history(lake, monkeypatch)
    code, out, err = _cli(capsys, "--lake", lake.config.uri, "revert", "-p", "v", old[0])
    assert (code, out) == (1, "") and err.startswith("error: history was vacated: ")
