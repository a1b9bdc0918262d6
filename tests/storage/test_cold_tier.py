"""The cold tier on both store backends, and the review queue and maintenance on both."""

from __future__ import annotations

import json

import pytest

from tests.conftest import BACKENDS, run_cli


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
    assert kw_memory.review.promote(cold.id) == {"promoted": cold.id}
    assert sorted(m.id for m in kw_memory.list()) == sorted([warm.id, cold.id])


def test_the_queue_and_maintenance_work_on_every_backend(kw_memory, backend):
    assert kw_memory.review.queue() == []
    kw_memory.remember("Run the linter before pushing.", kind="convention")
    b = kw_memory.remember("We might run the linter before pushing.", kind="convention")
    assert b.status == "created" and b.conflicts
    (p,) = kw_memory.review.queue()
    assert p.type == "conflict" and p.source_ids[1] == b.memory.id
    assert kw_memory.review.maintain()["dry_run"] is True
    status = kw_memory.review.status()
    assert status["pending"] == 1 and status["queue"] == {"pending": {"conflict": 1}} and status["cold"] == 0
    assert kw_memory.review.decide(p.id, "keep")["state"] == "rejected"
    assert kw_memory.review.status()["queue"] == {"rejected": {"conflict": 1}}


def test_cold_memories_are_counted_apart_from_current_in_counts_and_status(kw_memory, backend, project, capsys,
                                                                          monkeypatch):
    # "current" stays what the hooks and default recall see; cold memories have their own count.
    kw_memory.remember("Deploys go through the blue-green pipeline on Fly", kind="decision")
    cold = kw_memory.remember("The old deploy script copied files with rsync", kind="fact", importance=1).memory
    old = kw_memory.remember("The API listens on port 8080", kind="fact").memory
    kw_memory.replace(old.id, "The API listens on port 9090")
    kw_memory.set_cold(cold.id, True)
    counts = kw_memory.counts()
    assert {k: counts[k] for k in ("current", "cold", "superseded", "forgotten", "total")} == {
        "current": 2, "cold": 1, "superseded": 1, "forgotten": 0, "total": 4}
    assert kw_memory.status().counts == counts
    assert kw_memory.topics()["kinds"] == {"decision": 1, "fact": 1}  # the map of the store: warm only
    assert len(kw_memory.list()) == counts["current"]
    # the CLI's status, in both forms
    kw_memory.close()
    monkeypatch.chdir(project)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    code, out, err = run_cli(capsys, ["status", "--json"])
    assert code == 0, err
    assert json.loads(out)["counts"]["cold"] == 1 and json.loads(out)["counts"]["current"] == 2
    code, out, err = run_cli(capsys, ["status"])
    assert code == 0 and "memories  2 current, 1 cold, 1 superseded, 0 forgotten" in out, out + err
    code, out, err = run_cli(capsys, ["review", "promote", cold.id])
    assert code == 0, err
    code, out, err = run_cli(capsys, ["status", "--json"])
    assert (json.loads(out)["counts"]["current"], json.loads(out)["counts"]["cold"]) == (3, 0)
