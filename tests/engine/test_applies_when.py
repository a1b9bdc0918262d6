"""Write-time "applies when" phrases (issue 6, item 2): validated, stored with each memory version,
carried by replace, exported and imported, indexed for keywords and vectors, used by the gate."""

from __future__ import annotations

import os
import io
import json

import numpy as np
import pytest

from cairn import Cairn, Draft, InvalidImport, InvalidMemory, prompt_context
from cairn.context import relevant_hits, term_weights
from cairn.storage.migrations import MIGRATIONS

from tests.conftest import BACKENDS, run_cli

FLAGS = "Both services read feature flags from flags.yaml in the platform-config repo, reloaded every 60 s."
# Phrases that share no content word with FLAGS: a match on them can only come from applies_when.
PHRASES = ["rolling out a staged launch", "toggling a dark launch"]


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """The store tests run on SQLite and on Postgres (marked `postgres`)."""
    return request.param


# -- validation ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("phrases", "message"), [
    (["a", "b", "c", "d", "e"], "applies_when has 5 phrases; at most 4"),
    (["x" * 81], "applies_when phrase 1 is 81 characters; at most 80"),
    (["fixing a test", "  "], "applies_when phrase 2 is empty"),
    ("fixing a flaky test", "applies_when must be a list of short phrases"),
    ([3], "applies_when phrase 1 is not a string"),
])
def test_bad_applies_when_is_refused_with_a_clear_error_and_nothing_is_written(kw_memory, phrases, message):
    with pytest.raises(InvalidMemory, match=message):
        kw_memory.remember(FLAGS, applies_when=phrases)
    assert kw_memory.counts()["total"] == 0


def test_phrases_are_normalised_and_a_repeated_phrase_is_kept_once(kw_memory):
    made = kw_memory.remember(FLAGS, applies_when=["  adding   a feature flag ", "Adding a feature flag",
                                                   "debugging a flag"]).memory
    assert made.applies_when == ("adding a feature flag", "debugging a flag")
    assert kw_memory.get(made.id).applies_when == ("adding a feature flag", "debugging a flag")


def test_a_memory_without_phrases_has_none(kw_memory):
    made = kw_memory.remember("We use pytest for the API tests", kind="convention").memory
    assert made.applies_when == ()
    assert made.to_json()["applies_when"] == []


# -- stored with the version, carried by replace, kept in history, erased by forget ---------------------
def test_applies_when_is_stored_and_found_by_keyword_recall(kw_memory):
    made = kw_memory.remember(FLAGS, applies_when=PHRASES).memory
    kw_memory.remember("API errors are returned as RFC 7807 problem+json bodies.", kind="convention")
    assert kw_memory.get(made.id).applies_when == tuple(PHRASES)
    hits = kw_memory.recall("staged launch", k=3, use_vectors=False)
    assert [h.memory.id for h in hits] == [made.id]


def test_replace_carries_the_phrases_unless_new_ones_are_given_and_history_keeps_each_versions(kw_memory):
    old = kw_memory.remember(FLAGS, applies_when=PHRASES).memory
    carried = kw_memory.replace(old.id, FLAGS.replace("60 s", "30 s")).memory
    assert carried.applies_when == tuple(PHRASES)
    changed = kw_memory.replace(carried.id, FLAGS.replace("60 s", "10 s"), applies_when=["adding a flag"]).memory
    assert changed.applies_when == ("adding a flag",)
    dropped = kw_memory.replace(changed.id, FLAGS.replace("60 s", "5 s"), applies_when=[]).memory
    assert dropped.applies_when == ()
    chain = kw_memory.history(old.id)
    assert [m.applies_when for m in chain] == [tuple(PHRASES), tuple(PHRASES), ("adding a flag",), ()]
    # Only the current version's phrases find it.
    assert kw_memory.recall("staged launch", k=3, use_vectors=False) == []


def test_remember_many_drafts_take_phrases(kw_memory):
    results = kw_memory.remember_many([Draft(text=FLAGS, applies_when=("adding a flag",)),
                                       Draft(text="Storybook runs on port 6006.")])
    assert [r.memory.applies_when for r in results] == [("adding a flag",), ()]


def test_forget_erases_the_phrases(kw_memory):
    made = kw_memory.remember(FLAGS, applies_when=PHRASES).memory
    gone = kw_memory.forget(made.id)
    assert gone.text is None and gone.applies_when == ()
    assert kw_memory.recall("staged launch", k=3, use_vectors=False) == []


def test_export_import_round_trips_the_phrases(kw_memory, project, tmp_path, monkeypatch):
    made = kw_memory.remember(FLAGS, applies_when=PHRASES).memory
    kw_memory.replace(made.id, FLAGS.replace("60 s", "30 s"), applies_when=["adding a flag"])
    out = io.StringIO()
    kw_memory.export(out)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["applies_when"] for r in records] == [PHRASES, ["adding a flag"]]
    other = tmp_path / "other"
    other.mkdir()
    with Cairn.open("imported", create=True, embedder=None) as target:
        assert target.import_(io.BytesIO(out.getvalue().encode()))["imported"] == 2
        assert [m.applies_when for m in target.history(made.id)] == [tuple(PHRASES), ("adding a flag",)]
        assert [h.memory.text for h in target.recall("adding a flag", k=3, use_vectors=False)] == [
            FLAGS.replace("60 s", "30 s")]


def test_import_refuses_bad_phrases_naming_the_line(kw_memory):
    out = io.StringIO()
    kw_memory.remember(FLAGS)
    kw_memory.export(out)
    record = json.loads(out.getvalue())
    record["applies_when"] = ["x" * 200]
    with pytest.raises(InvalidImport, match="line 1: applies_when phrase 1 is 200 characters"):
        kw_memory.import_(io.BytesIO((json.dumps(record) + "\n").encode()))


# -- indexing: the vector is of the text and its phrases -------------------------------------------------
def test_the_vector_embeds_the_text_and_its_phrases(project, hashing):
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        made = memory.remember(FLAGS, applies_when=PHRASES).memory
        seq = memory.store.seq_of(made.id)
        stored = memory.store.vectors_of([seq])[seq]
        expected = hashing.embed([FLAGS + "\nApplies when: " + "; ".join(PHRASES)])[0]
        assert np.allclose(stored, expected)
        assert not np.allclose(stored, hashing.embed([FLAGS])[0])
        # reembed gives the same vector
        memory.reembed()
        assert np.allclose(memory.store.vectors_of([seq])[seq], expected)


def test_the_keyword_gate_injects_a_memory_whose_phrases_match_the_prompt(project):
    with Cairn.open(cwd=project, embedder=None) as memory:
        made = memory.remember(FLAGS, applies_when=["rolling out a staged launch of the checkout page"]).memory
        memory.remember("API errors are returned as RFC 7807 problem+json bodies.", kind="convention")
        text = prompt_context(memory, "plan the staged rollout launch of the checkout page")
        assert text is not None and f"[mem:{made.id}]" in text
        # The injected line shows the memory's text, not its phrases.
        assert "Applies when" not in text


# -- schema: a store written before applies_when ----------------------------------------------------------
def test_a_store_from_before_the_migration_is_migrated_and_keeps_its_keyword_index(project, hashing):
    from cairn.storage import db
    from cairn.stores.paths import choose_store

    # A store as schema 6 left it (the older Cairn's migrations, one memory written by plain SQL).
    path = choose_store(None, cwd=project, env={"CAIRN_HOME": os.environ["CAIRN_HOME"]}).path
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = db.connect(str(path))
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
    for step in MIGRATIONS[:6]:
        step.sqlite(conn)
        conn.execute("INSERT INTO migrations (name, applied_at) VALUES (?, 0)", (step.name,))
    conn.execute("PRAGMA user_version = 6")
    conn.execute("INSERT INTO memories (id, text, text_key, kind, importance, source, valid_from, recorded_at) "
                 "VALUES ('01J00000000000000000000001', 'Deploys go through blue-green on Fly', "
                 "'deploys go through blue-green on fly', 'decision', 3, 'user', 1, 1)")
    conn.execute("INSERT INTO memory_fts(rowid, body, tags) VALUES (1, 'Deploys go through blue-green on Fly', '')")
    conn.execute("INSERT INTO vector_backlog(seq) VALUES (1)")
    conn.commit()
    conn.close()
    with Cairn.open(cwd=project, embedder=hashing) as memory:
        assert memory.store.schema_version() == len(MIGRATIONS)
        old = memory.get("01J00000000000000000000001")
        assert old.applies_when == ()
        assert [h.memory.id for h in memory.recall("blue-green", k=3, use_vectors=False)] == [old.id]
        made = memory.remember(FLAGS, applies_when=PHRASES).memory
        assert [h.memory.id for h in memory.recall("staged launch", k=3, use_vectors=False)] == [made.id]
        assert memory.store.index_report()["fts_missing"] == 0


# -- the CLI ---------------------------------------------------------------------------------------------
def test_cli_remember_takes_repeated_applies_when(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    code, out, err = run_cli(capsys, ["remember", FLAGS, "--keyword-only", "--json",
                                      "--applies-when", PHRASES[0], "--applies-when", PHRASES[1]])
    assert code == 0, err
    made = json.loads(out)["memory"]
    assert made["applies_when"] == PHRASES
    code, out, err = run_cli(capsys, ["remember", FLAGS.replace("60 s", "30 s"), "--keyword-only", "--json",
                                      "--replaces", made["id"]])
    assert code == 0, err
    assert json.loads(out)["memory"]["applies_when"] == PHRASES
    code, out, err = run_cli(capsys, ["remember", "Storybook runs on port 6006.", "--keyword-only",
                                      *[a for i in range(5) for a in ("--applies-when", f"task {i}")]])
    assert code != 0
    assert "--applies-when" in err and "5 values; at most 4" in err


# -- the gate's rare-words route (issue 6, item 3) --------------------------------------------------------
SMALL_STORE = [
    (FLAGS, "fact"),
    ("API errors are returned as RFC 7807 problem+json bodies.", "convention"),
    ("Storybook runs on port 6006.", "fact"),
]


def _ids(memory) -> list[str]:
    return [memory.remember(text, kind=kind, detect=False).memory.id for text, kind in SMALL_STORE]


@pytest.mark.parametrize("hybrid", [False, True], ids=["keyword-only", "hybrid"])
def test_a_direct_question_sharing_a_memorys_rare_words_injects_it_and_a_near_miss_does_not(
        project, minilm, hybrid):
    with Cairn.open(cwd=project, embedder=minilm if hybrid else None) as memory:
        flags, *_ = _ids(memory)

        def injected(prompt: str) -> list[str]:
            vector = memory.embed([prompt], query=True)[0] if hybrid else None
            return [h.memory.id for h in relevant_hits(memory, prompt, query_vector=vector)]

        assert injected("where do our feature flags come from?") == [flags]
        assert injected("how often are feature flags reloaded?") == [flags]
        # One shared word among several the store does not hold: a different subject.
        assert injected("add a --verbose flag to the import CLI") == []
        assert injected("write a haiku about autumn leaves") == []


def test_term_weights_rate_a_word_by_how_rare_it_is_in_this_store(kw_memory):
    kw_memory.remember("The API gateway retries twice.", kind="fact")
    kw_memory.remember("The API uses OAuth.", kind="fact")
    kw_memory.remember("Nightly backups go to the eu-west bucket.", kind="fact")
    weights = term_weights(kw_memory, "API backups for the gateway of tomorrow")
    assert weights.total == 3
    assert weights.df == {"api": 2, "backup": 1, "gateway": 1, "tomorrow": 0}
    assert weights.idf["tomorrow"] > weights.idf["backup"] == weights.idf["gateway"] > weights.idf["api"] > 0
    assert weights.coverage({"api", "backup", "gateway", "tomorrow"}) == pytest.approx(1.0)
    assert weights.coverage({"api"}) < weights.coverage({"backup"}) < weights.coverage({"backup", "gateway"})
