"""The lake's KSUIDs (``lake_core.ids``): written by our own encoder, read by the ``ksuid``
package — the two must agree on every id, or ids would not sort or parse as KSUIDs."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from ksuid import Ksuid

from lake_core.ids import is_ksuid, ksuid_text, ksuid_time, new_id
from tests.clocks import FakeClock

KSUID_EPOCH = datetime(2014, 5, 13, 16, 53, 20, tzinfo=UTC)


def test_ids_are_the_ksuid_packages_byte_for_byte() -> None:
    rng = random.Random(3)
    edges = [b"\x00" * 16, b"\xff" * 16, b"\x00" * 15 + b"\x01"]
    for i in range(3000):
        when = KSUID_EPOCH + timedelta(seconds=rng.uniform(0, 2**32 - 1))
        if i < 6:
            when = KSUID_EPOCH + timedelta(seconds=(0, 2**32 - 1)[i % 2])
        payload = edges[i % 3] if i < 30 else rng.randbytes(16)
        assert ksuid_text(when, payload) == str(Ksuid(datetime=when, payload=payload))


def test_a_new_id_carries_its_clocks_second() -> None:
    clock = FakeClock()
    clock.t = datetime(2026, 11, 27, 21, 15, 42, 999_000, tzinfo=UTC)
    ids = {new_id(clock) for _ in range(100)}
    assert len(ids) == 100 and all(is_ksuid(i) for i in ids)
    assert {ksuid_time(i) for i in ids} == {clock.t.replace(microsecond=0)}
    assert sorted(ids) == sorted(ids, key=lambda i: Ksuid.from_base62(i).payload)
