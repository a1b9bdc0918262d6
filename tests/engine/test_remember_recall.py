"""Write path and read path of the engine, used the way the CLI and MCP server use them."""

from __future__ import annotations

import pytest

from cairn import Cairn, MemoryNotFound, NotCurrent

from tests.conftest import BACKENDS


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """Every test here runs on SQLite and on Postgres (marked `postgres`)."""
    return request.param


def test_recall_ranks_the_relevant_memory_first_and_says_why(memory):
    deploy = memory.remember("Deploys go through blue-green on Fly; never restart the DB in business hours",
                             kind="decision", tags=["deploy"]).memory
    memory.remember("We use pytest for the API tests", kind="convention")
    memory.remember("Alice prefers tabs over spaces in Go code", kind="preference")
    hits = memory.recall("how do we deploy?", k=3)
    assert hits[0].memory.id == deploy.id
    assert hits[0].reasons["bm25"]["rank"] == 1
    assert hits[0].reasons["vector"]["rank"] == 1
    assert hits[0].reasons["vector"]["cosine"] > 0.3
    # The others share no word with the query and their cosines are below VECTOR_FLOOR: no filler.
    assert [h.memory.id for h in hits] == [deploy.id]


def test_exact_duplicate_writes_nothing_and_returns_the_existing_id(memory):
    first = memory.remember("We use   Ruff for linting", kind="convention")
    again = memory.remember("we use ruff for LINTING", kind="convention")
    assert again.status == "duplicate"
    assert again.memory.id == first.memory.id
    assert memory.store.counts()["total"] == 1


def test_replaces_retires_the_old_memory_and_keeps_it_for_history(memory):
    old = memory.remember("We deploy with Capistrano", kind="decision").memory
    new = memory.remember("We deploy with Kamal", kind="decision", replaces=old.id)
    assert new.superseded == [old.id]
    current = [h.memory.id for h in memory.recall("deploy", k=5)]
    assert current == [new.memory.id]
    chain = memory.history(old.id)
    assert [m.id for m in chain] == [old.id, new.memory.id]
    assert chain[0].superseded_by == new.memory.id
    assert chain[0].retired_at == new.memory.recorded_at
    assert chain[0].valid_to == new.memory.valid_from
    assert memory.history(new.memory.id) == chain


def test_replacing_a_superseded_memory_is_refused(memory):
    old = memory.remember("The staging DB is Postgres 15", kind="fact").memory
    memory.replace(old.id, "The staging DB is Postgres 16")
    with pytest.raises(NotCurrent, match="already superseded"):
        memory.replace(old.id, "The staging DB is Postgres 17")
    assert memory.store.counts()["total"] == 2


def test_automatic_supersession_of_a_changed_setting(memory):
    old = memory.remember("The API listens on port 8080", kind="fact").memory
    new = memory.remember("The API now listens on port 9090", kind="fact")
    assert new.superseded == [old.id]
    assert memory.get(old.id).status == "superseded"


@pytest.mark.parametrize(
    ("old_text", "new_text"),
    [
        ("I live in Berlin", "My sister lives in Paris"),
        ("We use vitest for the web app", "We use pytest for the API"),
    ],
)
def test_unrelated_subjects_never_retire_each_other(memory, old_text, new_text):
    old = memory.remember(old_text, kind="fact").memory
    result = memory.remember(new_text, kind="fact")
    assert result.superseded == []
    assert memory.get(old.id).status == "current"


def test_other_kinds_are_never_superseded_automatically(memory):
    old = memory.remember("The API listens on port 8080", kind="decision").memory
    result = memory.remember("The API now listens on port 9090", kind="fact")
    assert result.superseded == []
    assert memory.get(old.id).status == "current"


def test_forget_erases_text_vector_and_index_but_leaves_a_tombstone(memory, backend):
    kept = memory.remember("Builds run on GitHub Actions", kind="fact").memory
    gone = memory.remember("The staging password rotates monthly", kind="fact", tags=["secrets"]).memory
    tomb = memory.forget(gone.id)
    assert tomb.text is None and tomb.tags == () and tomb.forgotten_at is not None
    conn = memory.store.conn
    seq = memory.store.seq_of(gone.id)
    if backend == "postgres":
        assert conn.execute("SELECT count(*) FROM memories WHERE seq = %s AND (tsv IS NOT NULL OR text IS NOT NULL "
                            "OR text_key IS NOT NULL)", (seq,)).fetchone()[0] == 0
        tags = conn.execute("SELECT count(*) FROM memory_tags WHERE seq = %s", (seq,)).fetchone()[0]
    else:
        assert conn.execute("SELECT count(*) FROM memory_fts WHERE rowid = ?", (seq,)).fetchone()[0] == 0
        tags = conn.execute("SELECT count(*) FROM memory_tags WHERE seq = ?", (seq,)).fetchone()[0]
    assert tags == 0
    assert memory.store.vectors_of([seq]) == {}
    for query in ("staging password", "rotates monthly"):
        assert gone.id not in {h.memory.id for h in memory.recall(query, include_superseded=True)}
    assert [m.id for m in memory.list(include_superseded=True)] == [kept.id]
    assert memory.forget(gone.id).forgotten_at == tomb.forgotten_at  # idempotent
    with pytest.raises(MemoryNotFound):
        memory.forget("01NOTANID")


def test_forgotten_superseded_memory_stays_out_of_as_of_queries(memory):
    old = memory.remember("The release branch is main", kind="convention", valid_from="2026-01-01").memory
    memory.remember("The release branch is release/2026", kind="convention", replaces=old.id, valid_from="2026-06-01")
    assert [h.memory.id for h in memory.recall("release branch", as_of="2026-03-01")] == [old.id]
    memory.forget(old.id)
    assert memory.recall("release branch", as_of="2026-03-01") == []


def test_filters_apply_before_the_k_cut(memory):
    from cairn import Draft

    memory.remember_many(
        [Draft(f"Service number {n} writes its logs to the central collector", kind="fact") for n in range(30)],
        detect=False,
    )
    rare = memory.remember("Service payments writes its logs to the audit bucket", kind="decision").memory
    hits = memory.recall("where do services write logs", k=5, kinds=["decision"])
    assert [h.memory.id for h in hits] == [rare.id]
    assert len(memory.recall("where do services write logs", k=25, kinds=["fact"])) == 25


def test_tags_filter(memory):
    tagged = memory.remember("Use the blue-green script to deploy", kind="convention", tags=["deploy", "ops"]).memory
    memory.remember("Use the release script to publish docs", kind="convention", tags=["docs"])
    assert [h.memory.id for h in memory.recall("script", tags=["OPS"])] == [tagged.id]


def test_scope_global_and_all(project, minilm, use_backend):
    with Cairn.open(cwd=project, embedder=minilm) as memory:
        memory.remember("I prefer concise commit messages", kind="preference", scope="global")
        memory.remember("This repo squashes commits on merge", kind="convention")
        assert [h.memory.text for h in memory.recall("commit messages", scope="project")] == [
            "This repo squashes commits on merge"]
        assert {h.memory.store for h in memory.recall("commit", scope="all")} == {memory.store.name, "global"}
        assert [h.memory.text for h in memory.recall("commit messages", scope="global")] == [
            "I prefer concise commit messages"]


def test_keyword_only_mode_writes_a_backlog_that_is_embedded_later(project, minilm, use_backend):
    with Cairn.open(cwd=project, embedder=None) as memory:
        memory.remember("Feature flags live in LaunchDarkly", kind="fact")
        status = memory.status()
        assert status.keyword_only is True
        assert status.counts["awaiting_embedding"] == 1
        assert [h.reasons.keys() - {"fused", "prior", "evidence"} for h in memory.recall("feature flags")] == [{"bm25"}]
    with Cairn.open(cwd=project, embedder=minilm) as memory:
        assert memory.flush_backlog() == 1
        assert memory.status().counts["awaiting_embedding"] == 0
        hit = memory.recall("toggles for features")[0]
        assert "vector" in hit.reasons


@pytest.mark.model  # sentence-transformers (PyTorch) is what finds the model missing
def test_unloadable_model_falls_back_to_keyword_only_and_says_so(project, use_backend):
    from cairn.embedder import SentenceTransformerEmbedder

    broken = SentenceTransformerEmbedder("/nonexistent/model/dir")
    with Cairn.open(cwd=project, embedder=broken) as memory:
        memory.remember("Cache keys include the tenant id", kind="convention")
        assert memory.recall("tenant cache")[0].memory.text == "Cache keys include the tenant id"
        status = memory.status()
        assert status.keyword_only is True
        assert "cannot load embedding model" in status.keyword_only_reason


def test_reads_never_write_the_memory_row(memory, backend):
    memory.remember("Errors are reported to Sentry", kind="fact")
    conn = memory.store.conn
    if backend == "postgres":  # xmin: the transaction that wrote each row version
        rows = lambda: conn.execute("SELECT xmin::text, * FROM memories ORDER BY seq").fetchall()  # noqa: E731
        changes = lambda: 0  # noqa: E731
    else:
        rows = lambda: conn.execute("SELECT * FROM memories").fetchall()  # noqa: E731
        changes = lambda: conn.total_changes  # noqa: E731
    before, changed = rows(), changes()
    memory.recall("sentry errors")
    memory.list()
    memory.status()
    assert changes() == changed
    assert rows() == before


def test_replace_with_the_text_of_another_current_memory_retires_the_old_one(memory):
    older = memory.remember("CI runs on Travis CI", kind="fact", detect=False).memory
    newer = memory.remember("CI runs on GitHub Actions", kind="fact", detect=False).memory
    result = memory.replace(older.id, "CI runs on GitHub Actions")
    assert result.status == "duplicate" and result.memory.id == newer.id
    assert result.superseded == [older.id]
    assert memory.get(older.id).superseded_by == newer.id
    assert memory.store.counts()["total"] == 2


def test_replace_several_memories_merges_them(memory):
    a = memory.remember("Run ruff before committing", kind="convention", detect=False).memory
    b = memory.remember("Format Python with ruff format", kind="convention", detect=False).memory
    merged = memory.replace([a.id, b.id], "Run ruff check and ruff format before committing")
    assert sorted(merged.superseded) == sorted([a.id, b.id])
    assert [m.id for m in memory.history(a.id)] == [a.id, merged.memory.id]
    chain = [m.id for m in memory.history(merged.memory.id)]
    assert sorted(chain[:2]) == sorted([a.id, b.id]) and chain[2] == merged.memory.id
    assert {m.id for m in memory.list()} == {merged.memory.id}


def test_replace_finds_a_global_memory(memory):
    pref = memory.remember("I prefer tabs", kind="preference", scope="global").memory
    new = memory.replace(pref.id, "I prefer four spaces")
    assert new.memory.store == "global" and new.superseded == [pref.id]


def test_dismissed_review_pairs_are_remembered(memory):
    a = memory.remember("Use Postgres for the API", kind="decision", detect=False).memory
    b = memory.remember("The API stores data in PostgreSQL", kind="decision", detect=False).memory
    assert not memory.review.is_dismissed(a.id, b.id)
    memory.review.dismiss(b.id, a.id)
    assert memory.review.is_dismissed(a.id, b.id) and memory.review.is_dismissed(b.id, a.id)
    with pytest.raises(MemoryNotFound):
        memory.review.dismiss(a.id, "01NOPE")


def test_fusion_never_erases_a_keyword_hit():
    # Min-max alone gives the weakest hit of a list 0: a memory that is BM25's #2 of 2 and the vector
    # retriever's last would fuse to 0.0000, below memories that share no word with the query.
    from cairn.memories.ranking import FOUND_FLOOR, RankingConfig, convex

    lists = {"bm25": [(1, 8.0), (2, 1.5)], "vector": [(3, 0.41), (1, 0.40), (4, 0.30), (2, 0.12)]}
    fused = convex(lists, RankingConfig())
    assert fused[2] >= FOUND_FLOOR > 0
    assert fused[1] == max(fused.values())


@pytest.mark.parametrize("order", ["importance", "newest", "oldest"])
def test_a_limited_list_is_the_head_of_the_whole_list_in_every_order(kw_memory, order):
    # The store reads a limited list its own way per order (SqlStore.memories: the seqs sorted first
    # by importance; the recorded_at index backwards in time order): the head must be the same rows.
    from cairn import Draft

    kinds = ["decision", "fact", "convention", "task"]
    results = kw_memory.remember_many([Draft(f"Memory number {i} about service {i % 7}", kind=kinds[i % 4],
                                             importance=1 + i % 5) for i in range(40)], detect=False)
    kw_memory.forget(results[3].memory.id)
    kw_memory.replace(results[5].memory.id, "Memory number 5, replaced")
    whole = kw_memory.list(limit=100, order=order)
    assert len(whole) == 39 and results[3].memory.id not in {m.id for m in whole}  # one forgotten, one replaced
    for limit in (1, 7, 38):
        assert [m.id for m in kw_memory.list(limit=limit, order=order)] == [m.id for m in whole[:limit]]
    decisions = kw_memory.list(limit=100, order=order, kinds=["decision"])
    assert [m.id for m in kw_memory.list(limit=4, order=order, kinds=["decision"])] == [m.id for m in decisions[:4]]


def test_a_memory_from_a_date_still_to_come_is_shown_as_not_in_effect_yet(kw_memory):
    from cairn.memories import render

    later = kw_memory.remember("We deploy to Fly.io", kind="decision", valid_from="2999-01-01").memory
    today = kw_memory.remember("We deploy to Heroku", kind="decision").memory
    assert render.context_line(later).startswith(f"- [mem:{later.id}] from 2999-01-01 decision:")
    assert "not in effect yet" in render.line(later) and "not in effect yet" not in render.line(today)
    assert render.memory(later)["scheduled"] is True and "scheduled" not in render.memory(today)


def test_a_short_id_names_the_one_memory_whose_id_starts_with_it(kw_memory):
    import io
    import json

    from cairn import InvalidInput, MemoryNotFound

    ids = ["01KAAAAAAA0000000000000001", "01KAAAAAAA0000000000000002", "01KBBBBBBB0000000000000003"]
    lines = [json.dumps({"id": i, "text": f"fact number {n} about the build", "kind": "fact", "importance": 3,
                         "source": "import",
                         "valid_from": 1_700_000_000_000, "recorded_at": 1_700_000_000_000, "tags": []})
             for n, i in enumerate(ids)]
    kw_memory.import_(io.BytesIO(("\n".join(lines) + "\n").encode()))
    assert kw_memory.full_id("01kbbbb") == ids[2]  # case-insensitive, as typed
    assert kw_memory.full_id(ids[0]) == ids[0]
    with pytest.raises(InvalidInput, match="starts 2 memories' ids.*give more of it"):
        kw_memory.full_id("01KAAAAAAA")
    with pytest.raises(MemoryNotFound, match="6 characters"):
        kw_memory.full_id("01KBB")
    with pytest.raises(MemoryNotFound, match="starts with"):
        kw_memory.full_id("01KCCCCC")
