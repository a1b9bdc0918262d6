"""The cold tier on both store backends; the review queue and maintenance say clearly that they
need a SQLite store."""

from __future__ import annotations

import pytest

from cairn import StoreError
from tests.conftest import BACKENDS


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


def test_cold_memories_leave_default_reads_on_every_backend(kw_memory, backend):
    warm = kw_memory.remember("Deploys go through the blue-green pipeline on Fly", kind="decision").memory
    cold = kw_memory.remember("The old deploy script copied files with rsync to Fly", kind="decision",
                              importance=1, detect=False).memory
    assert kw_memory.set_cold(cold.id, True) and not kw_memory.set_cold(cold.id, True)
    assert kw_memory.get(cold.id).cold_at is not None
    assert [m.id for m in kw_memory.list()] == [warm.id]
    assert cold.id not in [h.memory.id for h in kw_memory.recall("deploy Fly rsync")]
    assert cold.id in [h.memory.id for h in kw_memory.recall("deploy Fly rsync", include_cold=True)]
    assert cold.id in [m.id for m in kw_memory.list(as_of=cold.valid_from)]
    assert kw_memory.promote(cold.id) == {"promoted": cold.id}
    assert sorted(m.id for m in kw_memory.list()) == sorted([warm.id, cold.id])


def test_the_queue_needs_a_sqlite_store(kw_memory, backend):
    if backend == "sqlite":
        assert kw_memory.review_queue() == []
        return
    for call in (kw_memory.review_queue, kw_memory.maintain, kw_memory.maintenance_status):
        with pytest.raises(StoreError, match="review queue and maintenance need a SQLite store"):
            call()
    # A write's possible conflicts are not queued there, and the write itself is not refused.
    kw_memory.remember("Run the linter before pushing.", kind="convention")
    assert kw_memory.remember("We might run the linter before pushing.", kind="convention").status == "created"
