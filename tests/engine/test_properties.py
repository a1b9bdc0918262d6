"""Property tests (hypothesis) of the bitemporal model, supersession chains and export/import."""

from __future__ import annotations

import io
import json
import tempfile
import uuid
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn import Cairn, NotCurrent
from cairn.timeutil import END_OF_TIME
from cairn.text import is_blank
from tests.conftest import BACKENDS

DAY = 86_400_000
BASE = 1_767_225_600_000  # 2026-01-01T00:00:00Z
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """Every property holds on SQLite and on Postgres (marked `postgres`)."""
    return request.param


@contextmanager
def fresh_store(name: str = "prop"):
    """A new store per example: a fresh data root, and on Postgres a fresh schema, dropped after."""
    with tempfile.TemporaryDirectory() as home:
        env = {"CAIRN_STORE": f"{name}-{uuid.uuid4().hex[:12]}", "CAIRN_HOME": home}
        import os

        old = os.environ.get("CAIRN_HOME")
        os.environ["CAIRN_HOME"] = home
        try:
            with Cairn.open(create=True, embedder=None, env=env) as memory:
                try:
                    yield memory
                finally:
                    if hasattr(memory.store, "drop"):
                        memory.store.drop()
        finally:
            os.environ["CAIRN_HOME"] = old


# One op: remember a new memory valid from `start` (days after BASE), maybe with an end, maybe
# replacing the memory at index `target` of those still current.
ops = st.lists(
    st.tuples(
        st.integers(0, 300),                      # valid_from, days
        st.one_of(st.none(), st.integers(1, 200)),  # valid_to - valid_from, days
        st.one_of(st.none(), st.integers(0, 50)),   # replace which current memory (index mod count)
    ),
    min_size=1, max_size=12,
)


@SETTINGS
@given(ops=ops, probes=st.lists(st.integers(-10, 520), min_size=1, max_size=8))
def test_as_of_returns_exactly_the_memories_valid_then(use_backend, ops, probes):
    with fresh_store() as memory:
        intervals: dict[str, list[int]] = {}
        current: list[str] = []
        for n, (start, length, target) in enumerate(ops):
            valid_from = BASE + start * DAY
            valid_to = None if length is None else valid_from + length * DAY
            replaces = current[target % len(current)] if target is not None and current else None
            # detect=False: only the explicit `replaces` supersedes here ("memory number 0 says 5" and
            # "... 1 says 5" may read as a value change to the automatic detector).
            result = memory.remember(f"memory number {n} says {start}", kind="fact", valid_from=valid_from,
                                     valid_to=valid_to, replaces=replaces, source="user", detect=False)
            new_id = result.memory.id
            intervals[new_id] = [valid_from, END_OF_TIME if valid_to is None else valid_to]
            if replaces:
                old = intervals[replaces]
                old[1] = max(old[0] + 1, min(old[1], valid_from))  # the documented clamp
                current.remove(replaces)
            current.append(new_id)
        for day in probes:
            t = BASE + day * DAY
            expected = {i for i, (vf, vt) in intervals.items() if vf <= t < vt}
            got = {m.id for m in memory.list(as_of=t, limit=None)}
            assert got == expected, f"as_of day {day}"


@SETTINGS
@given(actions=st.lists(st.tuples(st.sampled_from(["add", "replace", "forget"]), st.integers(0, 30)),
                        min_size=1, max_size=25))
def test_supersession_chains_never_form_cycles(use_backend, actions):
    with fresh_store() as memory:
        ids: list[str] = []
        for n, (action, pick) in enumerate(actions):
            if action == "add" or not ids:
                ids.append(memory.remember(f"fact {n}", kind="fact").memory.id)
                continue
            target = ids[pick % len(ids)]
            try:
                if action == "replace":
                    ids.append(memory.replace(target, f"fact {n} replacing").memory.id)
                else:
                    memory.forget(target)
            except NotCurrent:
                pass  # replacing a superseded or forgotten memory is refused: that is the guarantee
        for memory_id in ids:
            seen = set()
            node = memory.get(memory_id)
            while node.superseded_by is not None:
                assert node.id not in seen, "cycle"
                seen.add(node.id)
                node = memory.get(node.superseded_by)
            chain = memory.store.chain_ids(memory_id)
            assert len(chain) == len(set(chain))
            assert memory_id in chain


# Texts remember accepts: not blank once invisible characters are dropped (a lone soft hyphen is refused).
texts = st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=60).filter(
    lambda t: not is_blank(t))


@SETTINGS
@given(items=st.lists(st.tuples(texts, st.sampled_from(["decision", "fact", "preference"]),
                                 st.lists(st.from_regex(r"[a-z]{1,8}", fullmatch=True), max_size=3),
                                 st.integers(1, 5), st.sampled_from(["none", "replace", "forget"])),
                       min_size=1, max_size=10, unique_by=lambda i: i[0].strip().casefold()))
def test_export_then_import_round_trips_every_field(use_backend, items):
    with fresh_store("source") as memory:
        ids = []
        for text, kind, tags, importance, then in items:
            result = memory.remember(text, kind=kind, tags=tags, importance=importance, source="user",
                                     session_id="s-1", detect=False)
            if result.status == "duplicate":
                continue
            ids.append(result.memory.id)
            if then == "replace":
                ids.append(memory.replace(result.memory.id, text + " (revised)").memory.id)
            elif then == "forget":
                memory.forget(result.memory.id)
        first = io.StringIO()
        memory.export(first)
    with fresh_store("target") as other:
        counts = other.import_(io.BytesIO(first.getvalue().encode("utf-8")))
        assert counts == {"imported": len(first.getvalue().splitlines()), "skipped": 0}
        second = io.StringIO()
        other.export(second)

    def strip_store(dump: str) -> list[dict]:
        return [{k: v for k, v in json.loads(line).items() if k != "store"} for line in dump.splitlines()]

    assert strip_store(second.getvalue()) == strip_store(first.getvalue())


TEXT_PIECES = st.lists(st.sampled_from([*"aZéß_0'’-/:.+@# \t\n()[]{}<>\"“”«»,;!?…é\u0301ﬁİ東京に行ったはのポート한국어",
                                         "don't", "pre-commit", "The", "and"]), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=TEXT_PIECES)
def test_content_words_are_query_terms_words_without_stopwords(text):
    # content_words reads the words between CJK runs with one findall (text.content_words); they
    # must be exactly what query_terms makes of that text, in order.
    import unicodedata

    from cairn import text as text_module

    expected: list[str] = []
    for i, chunk in enumerate(text_module._CJK_SPLIT.split(unicodedata.normalize("NFC", text))):
        if i % 2:
            expected += text_module._cjk_content(chunk)
        else:
            expected += [w for term in text_module.query_terms(chunk) for w in term if w not in text_module.STOPWORDS]
    assert text_module.content_words(text) == expected
