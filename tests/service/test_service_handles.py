"""The service keeps each pool's handle across requests (lake_service/handles.py) and, with
``--group-commit``, lets loads that arrive together share a commit. A real server process on
local disk and moto S3; exact rows checked afterwards."""

from __future__ import annotations

import dataclasses
import io
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lake_core import Lake, LakeConfig
from lake_core.commit import Add
from lake_core.pool import Pool
from tests.service.conftest import Server, start_server, stop_server


def post_load(c: httpx.Client, pool: str, rows: str) -> dict:  # type: ignore[type-arg]
    r = c.post(f"/v1/pools/{pool}/load", files=[("file", ("rows.json", rows.encode()))])
    assert r.status_code == 200, r.text
    # The objects this load wrote, whatever else its commit holds.
    assert [o["count"] for o in r.json()["objects"]] == [rows.count("\n")], r.text
    return r.json()["commit"]  # type: ignore[no-any-return]


def ts_of(pool: Pool) -> list[int]:
    return sorted(pool.read()["ts"].to_pylist())


@pytest.fixture
def grouping_server(served_lake: Lake, tmp_path: Path) -> Iterator[Server]:
    srv = start_server(served_lake.config.uri, tmp_path, "--group-commit")
    yield srv
    stop_server(srv)


def test_a_pool_made_again_under_its_name_gets_a_new_handle(
    server: Server, served_lake: Lake
) -> None:
    """The handle held for ``logs`` serves loads and reads until the pool is dropped and made
    again under the same name, and then the new pool's: never the old one's data or journal."""
    with server.client("write") as c:
        post_load(c, "logs", '{"ts": 10, "msg": "x"}\n')
        post_load(c, "logs", '{"ts": 11, "msg": "y"}\n')  # the held handle
        assert ts_of(Lake.open(LakeConfig(uri=server.lake_uri)).pool("logs")) == [1, 2, 3, 10, 11]
        served_lake.drop_pool("logs")
        served_lake.create_pool("logs", "ts:desc")
        post_load(c, "logs", '{"ts": 20, "msg": "new"}\n')
        r = c.get("/v1/pools/logs")
        assert r.status_code == 200 and r.json()["pool"]["order"] == "desc", r.text
    fresh = Lake.open(LakeConfig(uri=server.lake_uri)).pool("logs")
    assert ts_of(fresh) == [20] and len(list(fresh.log())) == 1


def burst_of_loads(server: Server, burst: int) -> list[str]:
    """12 threads load one row each at once; the commit ids they are told."""
    acks: list[str] = []
    barrier = threading.Barrier(12)

    def load(i: int) -> None:
        with server.client("write") as c:
            barrier.wait()
            ts = 1000 * (burst + 1) + i
            acks.append(post_load(c, "logs", f'{{"ts": {ts}, "msg": "m"}}\n')["id"])

    threads = [threading.Thread(target=load, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return acks


def test_group_commit_shares_commits_and_loses_no_row(grouping_server: Server) -> None:
    """Bursts of 12 loads at once: every load acknowledged, every row there once, and the
    loads of a burst land in fewer commits than loads (retried up to 3 bursts, since which
    loads overlap is up to the scheduler)."""
    want = [1, 2, 3]
    grouped = False
    for burst in range(3):
        acks = burst_of_loads(grouping_server, burst)
        assert len(acks) == 12
        want += [1000 * (burst + 1) + i for i in range(12)]
        pool = Lake.open(LakeConfig(uri=grouping_server.lake_uri)).pool("logs")
        log = {c.id: c for c in pool.log()}
        assert set(acks) <= set(log)
        assert ts_of(pool) == sorted(want)
        if len(set(acks)) < len(acks):
            grouped = True
            shared = next(i for i in acks if acks.count(i) > 1)
            assert "grouped loads" in log[shared].message
            break
    assert grouped, "no two loads of three bursts shared a commit"


def test_the_cli_reports_its_own_rows_of_a_shared_commit(grouping_server: Server) -> None:
    """``lake load`` through a --group-commit server says how many rows it loaded, and that
    the commit it landed in held more (the report line, from the objects the server says the
    load wrote)."""
    from lake_cli import report
    from lake_core.objects import ObjectMeta

    lake = Lake.open(grouping_server.url, token=grouping_server.tokens["write"])
    remote = lake.pool("logs")
    stream = io.BytesIO(b'{"ts": 70, "msg": "a"}\n{"ts": 71, "msg": "b"}\n')
    stream.name = "two.json"
    written: list[ObjectMeta] = []
    commit = remote.load([stream], on_object=written.append)
    assert [o.count for o in written] == [2] and {o.id for o in written} <= {
        o.id for o in commit.adds()
    }
    assert report.loaded(commit, written) == "loaded 2 rows in 1 object"
    # A commit that also holds another load's object (as a grouped one does):
    other = ObjectMeta("x" * 27, [0], [0], 5, 10, {})
    shared = dataclasses.replace(
        commit, actions=(*commit.actions, Add(other)), extra={**commit.extra, "rows": {"added": 7}}
    )
    assert report.loaded(shared, written) == (
        "loaded 2 rows in 1 object (in a commit of 2 grouped objects, 7 rows)"
    )


def test_a_started_server_has_imported_what_loads_and_scans_use(tmp_path: Path) -> None:
    """``build`` warms the process up (lake_service.server.WARM_MODULES): a load and a scan
    after it import nothing more, so the first requests are not the slow ones. In a fresh
    interpreter, since this one has imported everything already."""
    import subprocess
    import sys

    uri = str(tmp_path / "lake")
    Lake.init(LakeConfig(uri=uri, user="t")).create_pool("logs", "ts:asc")
    script = f"""
import io, sys
from lake_core import Lake, LakeConfig
from lake_service.server import build
from lake_service.settings import ServiceSettings
build(LakeConfig(uri={uri!r}, user="t"), ServiceSettings())
before = set(sys.modules)
pool = Lake.open({uri!r}).pool("logs")
for i in range(33):  # past a snapshot's encode (every 32 commits)
    src = io.BytesIO(b'{{"ts": %d}}\\n' % i)
    src.name = "rows.ndjson"
    pool.load([src])
assert sum(b.num_rows for b in pool.scan(where="ts > 3").batches()) == 29
print(sorted(set(sys.modules) - before))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


def test_a_server_starts_without_pandas(tmp_path: Path) -> None:
    """pandas is optional (only the ``spark`` extra installs it): the warm-up skips it, and the
    server loads and scans without it. Hidden from a fresh interpreter as if not installed."""
    import subprocess
    import sys

    uri = str(tmp_path / "lake")
    Lake.init(LakeConfig(uri=uri, user="t")).create_pool("logs", "ts:asc")
    script = f"""
import io, sys
class NoPandas:  # "import pandas" fails as when it is not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {{name!r}}")
sys.meta_path.insert(0, NoPandas())
from lake_core import Lake, LakeConfig
from lake_service.server import build
from lake_service.settings import ServiceSettings
build(LakeConfig(uri={uri!r}, user="t"), ServiceSettings())
pool = Lake.open({uri!r}).pool("logs")
for i in range(33):
    src = io.BytesIO(b'{{"ts": %d}}\\n' % i)
    src.name = "rows.ndjson"
    pool.load([src])
print(sum(b.num_rows for b in pool.scan(where="ts > 3").batches()), "pandas" in sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout.strip()) == (0, "29 False"), done.stderr
