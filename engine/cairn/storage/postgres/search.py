"""Keyword search on Postgres: text tokenised as SQLite's FTS5 tokenises it, and BM25-like ranking.

The text is tokenised in Python first exactly as FTS5's unicode61 does (runs of letters and digits,
diacritics removed, CJK runs as bigrams then unigrams: text.py), so `server.http.port` or `GB/s`
become the same words on both backends; each store's own text search configuration (`cairn_text`:
the snowball stemmer of its language, no stop words, since the query side drops stop words itself)
makes the tsvector. Scores are BM25-like: the sum over the query's phrases of idf(phrase) * ts_rank.
`memory_postings` (migration m009) holds each tsv's lexemes with their ts_rank, kept by triggers on
every write of a tsv: a one-word phrase is ranked from its b-tree alone (an index-only scan), the
view's filter applied to the best-scored memories only; a phrase of several words is matched
against the tsv. Same scores either way.
"""

from __future__ import annotations

import re
import unicodedata

from ...text import index_text

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _plain(char: str) -> str:
    """A Latin letter without its diacritics (as unicode61's remove_diacritics); other scripts as they are."""
    parts = unicodedata.normalize("NFD", char)
    if len(parts) > 1 and parts[0] < "\u0250" and all(unicodedata.combining(p) for p in parts[1:]):
        return parts[0]
    return char


def _words(text: str) -> str:
    plain = "".join(_plain(c) if ord(c) > 127 else c for c in unicodedata.normalize("NFC", text))
    return " ".join(_WORD.findall(plain))


def tokens(text: str) -> str:
    """What the tsvector is built from: FTS5 unicode61's tokens of `index_text(text)` (CJK runs as
    bigrams and unigrams), Latin diacritics removed, joined by spaces (so Postgres's parser sees
    only plain words and numbers)."""
    return _words(index_text(text))


def phrases(match: str) -> list[str]:
    """The phrases of an FTS5 MATCH expression as text.fts_query writes it ("a b" OR "c"), each as
    the words Postgres will see. Empty phrases are dropped."""
    out = []
    for quoted in re.findall(r'"((?:[^"]|"")*)"', match):
        phrase = _words(quoted.replace('""', '"'))
        if phrase and phrase not in out:
            out.append(phrase)
    return out


def _idf_ctes(table: str) -> str:
    """The CTEs `est`, `total` and `idf` of a ranking statement over `table`'s tsv, after a CTE
    `hits (i, seq, r)`: idf per phrase i as BM25's (Lucene's form), ln(1 + (N - n + 0.5) / (n + 0.5)),
    n the rows holding the phrase, N the rows (the planner's estimate from 1,000 on; an exact count
    costs a scan per query)."""
    return f"""est AS MATERIALIZED (SELECT reltuples AS n FROM pg_class WHERE oid = '{table}'::regclass),
             total AS MATERIALIZED (
                 SELECT CASE WHEN (SELECT n FROM est) >= 1000 THEN (SELECT n FROM est)
                        ELSE (SELECT count(*) FROM {table} WHERE tsv IS NOT NULL) END AS n),
             idf AS MATERIALIZED (
                 SELECT i, ln(1 + (greatest(total.n, count(*)) - count(*) + 0.5) / (count(*) + 0.5)) AS idf
                 FROM hits, total GROUP BY i, total.n)"""


def ranked_sql(table: str, alias: str, rank: str, where: str) -> str:
    """One statement ranking the rows of `table` (its `tsv` column) for a list of phrases, BM25-like:
    score = sum over the phrases a row holds of idf(phrase) * rank, idf as BM25's (Lucene's form)
    from the number of rows holding the phrase (counted from the same index scan that finds them)
    and the number of rows (the planner's estimate from 1,000 on; an exact count costs a scan per
    query). Parameters, in order: the text search configuration, the phrases (text[]), those of
    `rank`, those of `where` (a boolean over `alias`, applied to the hits), the limit."""
    a = alias
    return f"""WITH q AS MATERIALIZED (
                 SELECT i, phraseto_tsquery(%s::regconfig, p) AS tq
                 FROM unnest(%s::text[]) WITH ORDINALITY t(p, i)),
             hits AS MATERIALIZED (
                 SELECT q.i, {a}.seq, {rank} AS r, ({where}) AS ok
                 FROM q JOIN {table} {a} ON {a}.tsv @@ q.tq),
             {_idf_ctes(table)}
            SELECT h.seq, sum(idf.idf * h.r) AS score FROM hits h JOIN idf USING (i)
            WHERE h.ok GROUP BY h.seq ORDER BY score DESC, h.seq LIMIT %s"""


def postings_sql(where: str) -> str:
    """keyword_search's statement on the memories' postings (m009): the scores of ranked_sql over
    `memories` with rank ts_rank(m.tsv, q.tq, 1), found another way. A phrase of one lexeme is
    looked up in memory_postings (an index-only scan of (lexeme, seq) including the rank computed
    at write time); a phrase of several (`pre commit`) is matched against the tsv as in
    ranked_sql. Every hit is counted for idf, as there; the filter `where` (over `memories m`) is
    applied last, to the scored memories best first, so that only as many memory rows are read as
    it takes to find `limit` that pass. Parameters, in order: the text search configuration twice,
    the phrases (text[]), those of `where`, the limit."""
    return f"""WITH q AS MATERIALIZED (
                 SELECT i, tq, CASE WHEN numnode(tq) = 1
                                    THEN (tsvector_to_array(to_tsvector(%s::regconfig, p)))[1] END AS lexeme
                 FROM (SELECT i, p, phraseto_tsquery(%s::regconfig, p) AS tq
                       FROM unnest(%s::text[]) WITH ORDINALITY t(p, i)) t),
             hits AS MATERIALIZED (
                 SELECT q.i, p.seq, p.r FROM q JOIN memory_postings p ON p.lexeme = q.lexeme COLLATE "C"
                 UNION ALL
                 SELECT q.i, m.seq, ts_rank(m.tsv, q.tq, 1) FROM q JOIN memories m ON m.tsv @@ q.tq
                 WHERE q.lexeme IS NULL),
             {_idf_ctes("memories")}
            SELECT s.seq, s.score
            FROM (SELECT h.seq, sum(idf.idf * h.r) AS score FROM hits h JOIN idf USING (i)
                  GROUP BY h.seq ORDER BY score DESC, h.seq) s
            JOIN memories m ON m.seq = s.seq
            WHERE {where} ORDER BY s.score DESC, s.seq LIMIT %s"""
