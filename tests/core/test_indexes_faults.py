"""S3 faults (tests/faultproxy.py between boto3 and moto's server) while a load of an indexed
pool writes its index objects, and while ``index apply`` commits: a lost answer is success, a
failed write commits nothing, an unknown outcome keeps everything; afterwards the rows are
exact, every index entry names a live object whose file is there, lookups return exactly their
rows, and a cleanup that takes everything it may changes none of that."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.errors import CommitStateUnknownError, LakeError
from lake_core.indexes.apply import apply_rule
from lake_core.loading import load
from lake_core.pool import Pool
from tests.core.test_indexes import check_index_invariant
from tests.faultproxy import JOURNAL, FaultProxy, Rule, proxied
from tests.lakecheck import assert_journal_dense, assert_objects_intact
from tests.workers import rows_for

INDEX = r"/index/.*\.parquet$"
TRIES = "3"


@pytest.fixture
def proxy(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    with proxied(s3_endpoint, monkeypatch, seed=15, tries=int(TRIES)) as px:
        yield px


def _rows(pool: Pool) -> list[tuple[int, int, int]]:
    t = pool.read()
    return sorted(zip(t["w"].to_pylist(), t["i"].to_pylist(), t["j"].to_pylist(), strict=True))


def _load(pool: Pool) -> object:
    return load(pool, [rows_for(7, 0)])


def _apply(pool: Pool) -> object:
    lake = Lake.open(LakeConfig(uri=pool.lake_config.uri))
    return apply_rule(pool, lake.index_rule("by_i")).commit


CASES = {
    # (operation, fault rules, expected outcome, whether it lands when unknown)
    "load-index-put-lost": (_load, lambda: [Rule("lost", method="PUT", key=INDEX)], "ok", None),
    "load-index-put-fails": (
        _load,
        lambda: [Rule("error", method="PUT", key=INDEX, times=int(TRIES), status=500)],
        "failed",
        None,
    ),
    "load-journal-lost-then-down": (
        _load,
        lambda: [
            put := Rule("lost", method="PUT", key=JOURNAL),
            Rule("error", key=JOURNAL, times=None, after=put),
        ],
        "unknown",
        True,
    ),
    "apply-index-put-lost": (_apply, lambda: [Rule("lost", method="PUT", key=INDEX)], "ok", None),
    "apply-journal-lost-then-down": (
        _apply,
        lambda: [
            put := Rule("lost", method="PUT", key=JOURNAL),
            Rule("error", key=JOURNAL, times=None, after=put),
        ],
        "unknown",
        True,
    ),
    "apply-journal-unreachable": (
        _apply,
        lambda: [Rule("error", method="PUT", key=JOURNAL, times=int(TRIES))],
        "unknown",
        False,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_index_writes_under_faults(proxy: FaultProxy, s3_bucket: str, case: str) -> None:
    op, rules, expect, lands = CASES[case]
    uri = f"s3://{s3_bucket}/lake"
    lake = Lake.init(LakeConfig(uri=uri, user="t"))
    lake.create_pool("p", "ts:asc")
    pool = lake.pool("p")
    for i in range(2):
        load(pool, [rows_for(0, i)])  # before the rule: unindexed, work for apply
    lake.create_index_rule("by_i", "i")
    pool = Lake.open(LakeConfig(uri=uri, user="op")).pool("p")
    before = _rows(pool)
    log_before = [c.id for c in pool.log()]

    fired = [proxy.add(r) for r in rules()]
    try:
        op(pool)
        outcome, commit_id = "ok", None
    except CommitStateUnknownError as e:
        outcome, commit_id = "unknown", e.commit_id
    except LakeError:
        outcome, commit_id = "failed", None
    proxy.clear()
    assert fired[0].fired
    assert outcome == expect

    check = Lake.open(LakeConfig(uri=uri)).pool("p")
    log = [c.id for c in check.log()]
    loads = op is _load
    if outcome == "failed" or (outcome == "unknown" and not lands):
        assert log == log_before
        want = before
    else:
        if commit_id is not None:
            assert log[0] == commit_id
        assert len(log) == len(log_before) + 1
        want = sorted(before + [(7, 0, j) for j in range(3)]) if loads else before
    for _ in range(2):  # before and after a cleanup that takes all it may
        assert _rows(check) == want
        assert_objects_intact(check)
        assert_journal_dense(check)
        check_index_invariant(check, complete=False)
        for i in (0, 1):
            scan = check.scan(where=f"i = {i}")
            got = pa.Table.from_batches(list(scan.batches()), schema=scan.out_schema)
            assert sorted(got["w"].to_pylist()) == sorted(r[0] for r in want if r[1] == i)
        check.cleanup(timedelta(0), now=check.clock.now() + timedelta(days=2))
        check = Lake.open(LakeConfig(uri=uri)).pool("p")
