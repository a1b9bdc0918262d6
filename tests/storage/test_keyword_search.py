"""The keyword side: queries are never FTS5 syntax; punctuation and CJK text are found."""

from __future__ import annotations

import pytest

from cairn.text import fts_query

from tests.conftest import BACKENDS


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    """Every test here runs on SQLite and on Postgres (marked `postgres`)."""
    return request.param

PUNCTUATED = [
    ("Run pre-commit before every push", "pre-commit"),
    ("The NVMe array sustains 3.2 GB/s sequential reads", "GB/s"),
    ("Ask O'Brien before touching the billing code", "O'Brien"),
    ("The renderer core is written in C++ for speed", "C++"),
    ("Import node:fs/promises instead of the callback API", "node:fs"),
    ("The config key is server.http.port", "server.http.port"),
    ("Semantic version a.b.c tags are cut from main", "a.b.c"),
]


@pytest.mark.parametrize(("text", "query"), PUNCTUATED)
def test_punctuation_inside_terms_still_finds_the_memory(kw_memory, text, query):
    target = kw_memory.remember(text, kind="fact").memory
    kw_memory.remember("Unrelated: lunch is at noon on Fridays", kind="fact")
    hits = kw_memory.recall(query, k=3)
    assert hits and hits[0].memory.id == target.id


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "deploy AND", "OR", "NOT deploy", "NEAR(deploy, fly)", "deploy*", "col:deploy", "^deploy",
     "(deploy", "deploy)", '"" AND OR NOT', "-deploy", "+", "*"],
)
def test_fts5_syntax_in_a_query_is_searched_as_text(kw_memory, query):
    target = kw_memory.remember("Deploy with Kamal, not by hand", kind="decision").memory
    kw_memory.remember("Reviews need two approvals", kind="convention")
    hits = kw_memory.recall(query, k=5)  # must not raise an FTS5 syntax error
    if "deploy" in query.casefold():
        assert hits[0].memory.id == target.id


def test_operator_words_are_found_as_words(kw_memory):
    target = kw_memory.remember("Use NOT NULL constraints and OR-mapping only where needed", kind="convention").memory
    assert kw_memory.recall("NOT NULL")[0].memory.id == target.id


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("昨日は東京で新しいデータベースを設定しました", "東京"),
        ("昨日は東京で新しいデータベースを設定しました", "設定"),
        ("我们决定使用数据库迁移工具来管理模式", "迁移"),
        ("我们决定使用数据库迁移工具来管理模式", "数据库"),
        ("우리는 서울에서 새 서버를 배포했습니다", "서울"),
        ("우리는 서울에서 새 서버를 배포했습니다", "배포"),
    ],
)
def test_cjk_two_character_words_inside_sentences_are_found(kw_memory, text, query):
    target = kw_memory.remember(text, kind="fact").memory
    kw_memory.remember("English filler about deploys", kind="fact")
    kw_memory.remember("大阪の天気は晴れです", kind="fact")
    hits = kw_memory.recall(query, k=3)
    assert hits and hits[0].memory.id == target.id


def test_cjk_question_without_spaces_finds_the_sentence(kw_memory):
    target = kw_memory.remember("昨日は東京で新しいデータベースを設定しました", kind="fact").memory
    kw_memory.remember("大阪の天気は晴れです", kind="fact")
    assert kw_memory.recall("東京のデータベースはどうなった")[0].memory.id == target.id


def test_a_stopword_only_query_has_no_keyword_side():
    assert fts_query("the") is None
    assert fts_query("the of and") is None
    assert fts_query("the", drop_stopwords=False) == '"the"'
    assert fts_query("how do we deploy?") == '"deploy"'
    assert fts_query("?!") is None


def test_tags_are_searchable(kw_memory):
    target = kw_memory.remember("Blue-green switch is manual", kind="decision", tags=["release-process"]).memory
    assert kw_memory.recall("release process")[0].memory.id == target.id


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("pre-commit", '"pre commit" OR "pre" OR "commit"'),
        ("What did Melanie's sister paint?", '"melanie" OR "sister" OR "paint"'),
        ("NEAR(deploy, fly)", '"near" OR "deploy" OR "fly"'),
        ("node:fs", '"node fs" OR "node" OR "fs"'),
        ("東京", '"東京"'),
    ],
)
def test_query_formation(query, expected):
    assert fts_query(query) == expected


def test_exact_compound_ranks_above_its_parts(kw_memory):
    parts = kw_memory.remember("Commit often, and run the pre-flight checks", kind="convention").memory
    exact = kw_memory.remember("Run pre-commit before pushing", kind="convention").memory
    assert [h.memory.id for h in kw_memory.recall("pre-commit")][:2] == [exact.id, parts.id]


def test_each_ranking_stage_can_be_switched_off(memory):
    from cairn import RankingConfig

    target = memory.remember("Melanie's sister paints landscapes in oil", kind="fact").memory
    memory.remember("The sister project paints the build badge green", kind="fact")
    full = RankingConfig()
    for stage in ("stopwords", "clitics", "bm25", "vector", "evidence", "prior"):
        cfg = full.without(stage)
        assert not cfg.has(stage)
        hits = memory.recall("What does Melanie's sister paint?", ranking=cfg)
        assert hits and hits[0].memory.id == target.id, stage


def test_term_counts_are_asked_of_the_index_once_until_the_store_changes(kw_memory, project):
    # A prompt's recall and its relevance gate want the same words' document frequencies: the
    # second ask is answered without the index, and any write (this connection's or another's)
    # makes the next one exact again.
    from cairn import Cairn

    store = kw_memory.store
    if store.backend != "sqlite":
        pytest.skip("the lookups counted are SQLite's FTS5 ones; Postgres asks its index each time")
    kw_memory.remember("Deploys go through the release workflow", kind="decision")
    lookups = []

    class Counting:
        def __init__(self, conn):
            self._conn = conn

        def execute(self, sql, *args):
            if sql.startswith("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH"):
                lookups.append(args[0][0])
            return self._conn.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self._conn, name)

    real = store.conn
    store.conn = Counting(real)
    try:
        assert kw_memory.term_counts(['"deploy"', '"workflow"']) == (1, {'"deploy"': 1, '"workflow"': 1})
        assert kw_memory.term_counts(['"workflow"', '"deploy"']) == (1, {'"workflow"': 1, '"deploy"': 1})
        assert lookups == ['"deploy"', '"workflow"']
        kw_memory.remember("The release workflow runs on tags", kind="fact")  # this connection writes
        assert kw_memory.term_counts(['"workflow"']) == (2, {'"workflow"': 2})
        with Cairn.open(cwd=project, embedder=None) as other:  # another connection writes
            other.remember("Workflow files live in .github", kind="fact")
        assert kw_memory.term_counts(['"workflow"', '"deploy"']) == (3, {'"workflow"': 3, '"deploy"': 1})
        assert lookups == ['"deploy"', '"workflow"', '"workflow"', '"workflow"', '"deploy"']
    finally:
        store.conn = real
