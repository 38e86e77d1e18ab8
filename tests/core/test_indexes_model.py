"""Property test: a pool with search indexes answers every lookup exactly as a plain row-level
model does, over random sequences of loads, compactions, deletes, index applies and removals,
on local disk and on moto S3 (issue 15: "results with and without indexes are identical")."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lake_core import Lake
from lake_core.indexes.apply import apply_rule, remove_rule
from tests.core.test_indexes import check_index_invariant

USERS = [f"u{i}" for i in range(12)]
_names = itertools.count()

load_op = st.tuples(
    st.just("load"),
    st.lists(st.tuples(st.sampled_from(USERS), st.integers(-3, 3)), min_size=1, max_size=40),
)
op = st.one_of(
    load_op,
    st.tuples(st.just("compact"), st.none()),
    st.tuples(st.just("delete"), st.sampled_from(USERS)),
    st.tuples(st.just("apply"), st.none()),
    st.tuples(st.just("remove"), st.none()),
)
lookups = st.lists(
    st.one_of(
        st.sampled_from(USERS).map(lambda u: f"user = '{u}'"),
        st.lists(st.sampled_from([*USERS, "u99"]), min_size=1, max_size=3).map(
            lambda us: "user IN (" + ", ".join(f"'{u}'" for u in us) + ")"
        ),
        st.tuples(st.sampled_from(USERS), st.integers(-3, 3)).map(
            lambda t: f"user = '{t[0]}' AND n = {t[1]}"
        ),
        st.integers(-3, 3).map(lambda n: f"n = {n}"),  # pins no indexed field
    ),
    min_size=1,
    max_size=4,
)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["exact", "bloom"])
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(op, min_size=1, max_size=7), queries=lookups, rule_late=st.booleans())
def test_lookups_match_the_model(
    lake: Lake, kind: str, ops: list[tuple[str, object]], queries: list[str], rule_late: bool
) -> None:
    name = f"p{next(_names)}"
    lake.create_pool(name, "ts:asc", seek_stride=256)
    rule_name = f"r{name}"
    if not rule_late:
        lake.create_index_rule(rule_name, "user", kind, pools=[name])
    pool = lake.pool(name)
    model: list[tuple[int, str, int]] = []
    ts = itertools.count()
    for step, (what, arg) in enumerate(ops):
        if rule_late and step == len(ops) // 2:
            lake.create_index_rule(rule_name, "user", kind, pools=[name])
            pool = lake.pool(name)
        if what == "load":
            rows = [(next(ts), u, n) for u, n in arg]  # type: ignore[attr-defined]
            pool.load(
                pa.table(
                    {
                        "ts": pa.array([r[0] for r in rows], pa.int64()),
                        "user": [r[1] for r in rows],
                        "n": pa.array([r[2] for r in rows], pa.int64()),
                    }
                )
            )
            model.extend(rows)
        elif what == "compact" and pool.tip() is not None:
            pool.compact()
        elif what == "delete" and any(r[1] == arg for r in model):
            pool.delete(where=f"user = '{arg}'")
            model = [r for r in model if r[1] != arg]
        elif what == "apply" and pool.index_rules and pool.tip() is not None:
            apply_rule(pool, pool.index_rules[0])
        elif what == "remove" and pool.tip() is not None:
            remove_rule(pool, rule_name)
    if pool.tip() is None:
        return
    check_index_invariant(pool, complete=False)
    for where in queries:
        scan = pool.scan(where=where)
        table = pa.Table.from_batches(list(scan.batches()), schema=scan.out_schema)
        got = sorted(
            zip(
                table["ts"].to_pylist(),
                table["user"].to_pylist(),
                table["n"].to_pylist(),
                strict=True,
            )
        )
        want = sorted(r for r in model if model_matches(r, where))
        assert got == want, where


def model_matches(row: tuple[int, str, int], where: str) -> bool:
    _, user, n = row
    clauses = where.split(" AND ")
    for clause in clauses:
        if clause.startswith("user = "):
            ok = user == clause.split("'")[1]
        elif clause.startswith("user IN"):
            ok = user in clause[clause.index("(") + 1 : -1].replace("'", "").split(", ")
        else:
            ok = n == int(clause.split("= ")[1])
        if not ok:
            return False
    return True
