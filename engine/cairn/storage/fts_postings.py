"""BM25 over an FTS5 table from postings held in process memory: FTS5's own scores, without FTS5
scoring every matching row.

FTS5 answers `MATCH '"a" OR "b"' ORDER BY bm25() LIMIT k` by scoring each row that holds any word of
the query, about 1 us a row (docs/benchmarks.md, issue 33): 100-200 ms when a query's words are in
100,000 captured turns. A long-lived process (the warm process, the MCP server: `hold_vectors`) keeps
here, per word, the rows holding it (int32) and how often in each column (uint8, uint16 above 255), and
every row's length in tokens, and scores a query as numpy arrays: each word's contribution for all its
rows at once, summed with `np.bincount`.

The scores are FTS5's, to the bit. fts5Bm25Function (SQLite's ext/fts5/fts5_aux.c) computes, for a
row of D tokens (all columns) and each phrase i of the query, with N and avgdl from the table's
averages record (the row count and the summed column sizes FTS5 keeps; on a contentless_delete table
they still count deleted rows, as FTS5's do) and n_i the rows matching phrase i:

    idf_i = log((N - n_i + 0.5) / (n_i + 0.5)), or 1e-6 when that is <= 0
    f_i = the column weights of the phrase's instances in the row, added up one by one
    score = sum_i idf_i * (f_i * (k1 + 1)) / (f_i + k1 * (1 - b + b * D / avgdl)),   k1 = 1.2, b = 0.75

and `bm25()` returns -score. The same operations in the same order here give the same doubles (tests/
storage/test_fts_postings.py compares them with FTS5's on every row). Words are FTS5's own tokens: a
query's phrases are tokenized by a scratch FTS5 table with the store's tokenizer, and a word's rows
are read from the table's index through `fts5vocab` (deleted rows left out), so nothing here
re-implements the tokenizer or the stemmer.

What is not held is asked of FTS5, one phrase at a time (`MATCH '"phrase"'` with the same weights:
FTS5's contribution of that phrase alone, since BM25 is a sum over phrases and each phrase's IDF is
taken from the whole table):
- a phrase of several tokens (`"pre commit"`, `"don t"`): its matches need positions;
- the rows written since the hold started (rowid >= `start`): appended rows, and on a contentless
  table the rows re-indexed since (FTS5 gives a re-inserted row a new `origin` in its docsize table);
  a word's held rows are those below `start`, which no write has touched since.

Words are read on first use through fts5vocab, about 0.35 us an occurrence (0.5 with the offsets a
phrase's words keep: ~110 ms for a word 307,000 times in 165,000 of 200,000 turns), so a process holds
only the words its queries use: 4 bytes (the row) and 1 a column (the count) a posting, 8 bytes an
occurrence for a phrase's word. The row lengths (4 bytes a row) are read when the hold starts (about
0.2 s at 200,000 turns), and again when it starts over, dropping every word: when more than FRESH_MAX
rows were written since, or rows below `start` were deleted. Any other FTS5 expression than an OR of
phrases is left to FTS5, and so is a search inside a write transaction (FTS5's pending totals reach
its averages record at commit).

Column weights with a short binary expansion (1.0, 0.5: KEY_WEIGHT) are multiplied by the counts,
which gives the same double as FTS5's adding them instance by instance; others are added one by one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .db import Connection, sqlite

if TYPE_CHECKING:  # numpy costs ~150 ms to import; a keyword-only hook never holds postings
    import numpy as np

K1 = 1.2  # fts5_aux.c, fts5Bm25Function
B = 0.75
IDF_FLOOR = 1e-6  # fts5_aux.c: an IDF <= 0 (a phrase in more than half the rows) becomes this
TOKENIZE = "porter unicode61 remove_diacritics 2"  # the store's FTS5 tables (migrations.py)
FRESH_MAX = 5000
"""Rows written since the hold started that FTS5 scores (per phrase, rowid >= start) before the hold
starts again: a few ms of FTS5 scoring at most; about 125 captures of 40 turns."""
POSTINGS_KEPT = 30_000_000
"""Postings (word, row) held at most per table (about 200 MB), then every word is dropped."""

_QUOTED = re.compile(r'^"((?:[^"]|"")*)"$')


class Tokenizer:
    """FTS5's tokenizer (TOKENIZE) through a scratch FTS5 table in a private in-memory database of
    the same SQLite: the tokens FTS5 makes of a phrase's text, cached per phrase."""

    def __init__(self, tokenize: str = TOKENIZE):
        self.conn = sqlite.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.conn.execute(f"CREATE VIRTUAL TABLE scratch USING fts5(body, tokenize = '{tokenize}')")
        self.conn.execute("CREATE VIRTUAL TABLE scratch_terms USING fts5vocab(scratch, instance)")
        self.cache: dict[str, tuple[str, ...]] = {}

    def tokens(self, text: str) -> tuple[str, ...]:
        """FTS5's tokens of `text`, in order (porter stems, case folded, diacritics removed)."""
        if text not in self.cache:
            if len(self.cache) > 65536:
                self.cache.clear()
            self.conn.execute("INSERT INTO scratch(rowid, body) VALUES (1, ?)", (text,))
            rows = self.conn.execute("SELECT term FROM scratch_terms ORDER BY offset").fetchall()
            self.conn.execute("DELETE FROM scratch")
            self.cache[text] = tuple(r[0] for r in rows)
        return self.cache[text]


def phrase_text(phrase: str) -> str | None:
    """The text inside a quoted FTS5 phrase, its doubled quotes made single; None when not one."""
    m = _QUOTED.match(phrase)
    return m.group(1).replace('""', '"') if m else None


def varints(blob: bytes) -> list[int]:
    """The FTS5 varints of `blob`, in order (big-endian groups of 7 bits, high bit: more follow)."""
    out, value = [], 0
    for byte in blob:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            out.append(value)
            value = 0
    return out


def _row_lengths(sizes: bytes, rows: int, columns: int) -> np.ndarray:
    """Tokens per row (all columns) from FTS5 docsize blobs end to end, `columns` varints a row:
    int64[rows]."""
    import numpy as np

    raw = np.frombuffer(sizes, dtype=np.uint8)
    if not raw.size:
        return np.zeros(rows, dtype=np.int64)
    last = (raw & 0x80) == 0  # the last byte of each varint
    ends = np.flatnonzero(last)
    starts = np.concatenate([[0], ends[:-1] + 1])
    values = np.zeros(len(ends), dtype=np.int64)
    for shift in range(int((ends - starts).max()) + 1):  # a varint's bytes, most significant first
        at = starts + shift
        inside = at <= ends
        values[inside] = (values[inside] << 7) | (raw[at[inside]] & 0x7F).astype(np.int64)
    return values.reshape(rows, columns).sum(axis=1)


def _dyadic(weight: float) -> bool:
    """Whether n x weight equals weight added n times for any count a row can have (weight has
    few significant bits: 1.0, 0.5, 0.25, 3.0 ...)."""
    return math.isfinite(weight) and (weight * 2**20).is_integer() and abs(weight) < 2**20


class HeldPostings:
    """One FTS5 table's postings held in process memory (the module docstring): sync before each use,
    then `scores`. Not thread-safe; one per store object (one per connection)."""

    def __init__(self, conn: Connection, fts: str):
        self.fts = fts
        self.columns = tuple(r[1] for r in conn.execute(f"PRAGMA table_info({fts})"))
        # A contentless_delete table (turn_fts) re-indexes a row in place and marks it with a new origin.
        self.contentless = "origin" in {r[1] for r in conn.execute(f"PRAGMA table_info({fts}_docsize)")}
        self.tokenizer = Tokenizer()
        self.seen: tuple[int, int] | None = None
        self.lengths: np.ndarray | None = None  # int32[start]: tokens of row r (-1 where there is none)
        self.signature: tuple[bytes, bytes] | None = None  # the structure and averages records, as synced
        self.start = 0  # rows >= start are scored by FTS5
        self.origin = 0  # highest docsize origin when the hold started (contentless tables)
        self.top = 0  # highest rowid at the last sync
        self.fresh = 0  # rows >= start at the last sync
        self.rows = 0  # N: FTS5's row count
        self.tokens = 0  # FTS5's summed column sizes
        self.words: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # tokens -> (rows int32, counts [n, columns])
        self.positions: dict[str, np.ndarray] = {}  # term -> its instances (_instances), for phrases
        self.postings = 0
        case = " ".join(f"WHEN '{c}' THEN {i}" for i, c in enumerate(self.columns))
        code = f"doc * {len(self.columns)} + CASE col {case} END"
        self._load_sql = f"SELECT group_concat((({code}) << 32) + offset) FROM temp.{fts}_held_terms WHERE term = ?"
        self._load_rows_sql = f"SELECT group_concat({code}) FROM temp.{fts}_held_terms WHERE term = ?"

    def bytes_held(self) -> int:
        """Bytes of the arrays held: row lengths and every word's rows and counts."""
        held = 0 if self.lengths is None else self.lengths.nbytes
        held += sum(rows.nbytes + counts.nbytes for rows, counts in self.words.values())
        return held + sum(instances.nbytes for instances in self.positions.values())

    def sync(self, conn: Connection) -> None:
        """Bring the hold up to date with the table: two pragmas when nothing was written, two
        records more when the table was not (FTS5 rewrites its structure record, `_data` row 10, at
        every write, and its averages record, row 1, at every insert and delete)."""
        seen = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        if seen == self.seen:
            return
        records = dict(conn.execute(f"SELECT id, block FROM {self.fts}_data WHERE id IN (1, 10)").fetchall())
        signature = (bytes(records.get(1) or b""), bytes(records.get(10) or b""))
        if signature != self.signature:
            values = varints(signature[0]) or [0]
            self.rows, self.tokens = values[0], sum(values[1:])
            self._changed(conn)
            self.signature = signature
        self.seen = (seen[0], conn.total_changes)

    def _changed(self, conn: Connection) -> None:
        """The table was written: which rows FTS5 now scores (start), or start again."""
        self.top = int(conn.execute(f"SELECT coalesce(max(id), 0) FROM {self.fts}_docsize").fetchone()[0])
        if self.lengths is None:
            self._start(conn)
        else:
            if self.contentless:  # rows re-indexed since (a turn's key rewritten) are FTS5's again
                moved = conn.execute(f"SELECT min(id) FROM {self.fts}_docsize WHERE origin > ?",
                                     (self.origin,)).fetchone()[0]
                if moved is not None and moved < self.start:
                    self.start = int(moved)
            self.fresh = int(conn.execute(f"SELECT count(*) FROM {self.fts}_docsize WHERE id >= ?",
                                          (self.start,)).fetchone()[0])
            total = int(conn.execute(f"SELECT count(*) FROM {self.fts}_docsize").fetchone()[0])
            below = int((self.lengths[:self.start] >= 0).sum())
            if self.fresh > FRESH_MAX or total != below + self.fresh:  # too many new rows, or rows deleted
                self._start(conn)

    def _start(self, conn: Connection) -> None:
        """(Re)start the hold: every row's length, no word; rows from the next rowid on are fresh."""
        import numpy as np

        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{self.fts}_held_terms "
                     f"USING fts5vocab(main, {self.fts}, instance)")
        # One row of two strings, not a row per document (about 1 us each through the binding): the
        # two aggregates walk the rows in one order, and the sizes' varints delimit themselves.
        origin = ", coalesce(max(origin), 0)" if self.contentless else ""
        ids_text, sizes, *top_origin = conn.execute(
            f"SELECT group_concat(id), group_concat(hex(sz), ''){origin} FROM {self.fts}_docsize").fetchone()
        ids = np.fromstring(ids_text, dtype=np.int64, sep=",") if ids_text else np.zeros(0, dtype=np.int64)
        self.top = max(self.top, int(ids.max(initial=0)))
        lengths = np.full(self.top + 1, -1, dtype=np.int32)
        lengths[ids] = _row_lengths(bytes.fromhex(sizes or ""), len(ids), len(self.columns))
        self.lengths, self.start, self.fresh = lengths, self.top + 1, 0
        self.words, self.positions, self.postings = {}, {}, 0
        self.origin = int(top_origin[0]) if top_origin else 0

    def _instances(self, conn: Connection, term: str, *, offsets: bool) -> np.ndarray:
        """Every instance of a word, sorted (fts5vocab lists them by row, column and offset): int64
        row x columns + column, shifted left 32 bits and plus its offset when `offsets` (a third
        faster without: 0.35 against 0.5 us an instance)."""
        import numpy as np

        text = conn.execute(self._load_sql if offsets else self._load_rows_sql, (term,)).fetchone()[0]
        return np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, dtype=np.int64)

    def _postings(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows int32, counts uint8/uint16 [n, columns]) of sorted codes row x columns + column, one
        an instance."""
        import numpy as np

        ncol = len(self.columns)
        keys, per = np.unique(codes, return_counts=True)
        rows = np.unique(keys // ncol)
        counts = np.zeros((len(rows), ncol), dtype=np.uint16 if per.size and per.max() > 255 else np.uint8)
        counts[np.searchsorted(rows, keys // ncol), keys % ncol] = per
        return rows.astype(np.int32), counts

    def _word(self, conn: Connection, tokens: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """A word's or a phrase's (rows, counts), computed on first use: a word's from its instances,
        a phrase's from its words' positions (token i at offset o + i of one column of a row)."""
        import numpy as np

        key = " ".join(tokens)  # an FTS5 token holds no space
        held = self.words.get(key)
        if held is not None:
            return held
        if self.postings > POSTINGS_KEPT:
            self.words, self.positions, self.postings = {}, {}, 0
        if len(tokens) == 1:
            self.words[key] = self._postings(self._instances(conn, key, offsets=False))
        else:
            starts = self._positions(conn, tokens[0])
            for i, token in enumerate(tokens[1:], 1):
                following = self._positions(conn, token)
                at = np.minimum(np.searchsorted(following, starts + i), max(len(following) - 1, 0))
                starts = starts[following[at] == starts + i] if len(following) else starts[:0]
            self.words[key] = self._postings(starts >> 32)
        self.postings += len(self.words[key][0])
        return self.words[key]

    def _positions(self, conn: Connection, term: str) -> np.ndarray:
        """A word's instances with their offsets (_instances), kept for the phrases that hold it."""
        if term not in self.positions:
            self.positions[term] = self._instances(conn, term, offsets=True)
            self.postings += len(self.positions[term])
        return self.positions[term]

    def scores(self, conn: Connection, phrases: Sequence[str], weights: Sequence[float]
               ) -> tuple[np.ndarray, np.ndarray]:
        """FTS5's BM25 score (-bm25, higher is better) of every row matching any of `phrases` (quoted
        FTS5 phrases, as text.fts_query writes them), with column weights `weights` (FTS5's bm25
        arguments; missing ones are 1.0): (rows int64[n], scores float64[n]), by row. Call sync first."""
        import numpy as np

        weights = [float(w) for w in weights] + [1.0] * (len(self.columns) - len(weights))
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        if self.rows <= 0:  # nothing indexed (FTS5's count, as its averages record holds it)
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        for phrase in phrases:
            text = phrase_text(phrase)
            tokens = self.tokenizer.tokens(text) if text is not None else ()
            if tokens:
                parts.append(self._held_part(conn, phrase, tokens, weights))
            else:  # no token: FTS5 scores the phrase alone, on every row
                parts.append(self._fts5_part(conn, phrase, weights, 0))
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        rows = np.concatenate([p[0] for p in parts])
        # bincount adds each row's contributions in the order given: phrase by phrase, as FTS5 does.
        total = np.bincount(rows, weights=np.concatenate([p[1] for p in parts]))
        found = np.flatnonzero(np.bincount(rows))  # every matching row, whatever its score (1e-6 IDFs)
        return found, total[found]

    def _held_part(self, conn: Connection, phrase: str, tokens: tuple[str, ...], weights: list[float]
                   ) -> tuple[np.ndarray, np.ndarray]:
        """One phrase's contributions: its held rows below start in numpy, the fresh rows by FTS5."""
        import numpy as np

        assert self.lengths is not None
        rows, counts = self._word(conn, tokens)
        cut = int(np.searchsorted(rows, self.start))
        rows, counts = rows[:cut], counts[:cut]
        fresh_rows, fresh_scores = self._fts5_part(conn, phrase, weights, self.start) if self.fresh \
            else (np.zeros(0, dtype=np.int64), np.zeros(0))
        idf = self.idf(len(rows) + len(fresh_rows))
        f = self._frequencies(counts, weights)
        avgdl = float(self.tokens) / float(self.rows)
        d = self.lengths[rows].astype(np.float64)
        held = idf * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * d / avgdl)))
        return np.concatenate([rows.astype(np.int64), fresh_rows]), np.concatenate([held, fresh_scores])

    def idf(self, matches: int) -> float:
        """FTS5's IDF of a phrase matching `matches` of the table's N rows."""
        idf = math.log((self.rows - matches + 0.5) / (matches + 0.5))
        return idf if idf > 0.0 else IDF_FLOOR

    @staticmethod
    def _frequencies(counts: np.ndarray, weights: list[float]) -> np.ndarray:
        """f per row: each instance's column weight, added in FTS5's order (columns, then offsets)."""
        import numpy as np

        f = np.zeros(len(counts))
        for column, weight in enumerate(weights):
            n = counts[:, column]
            if _dyadic(weight) and _dyadic(float(f.max(initial=0.0))):
                f = f + n * weight  # every partial sum is exact: the same double as adding one by one
            else:
                for j in range(int(n.max(initial=0))):
                    f = np.where(n > j, f + weight, f)
        return f

    def _fts5_part(self, conn: Connection, phrase: str, weights: list[float], start: int
                   ) -> tuple[np.ndarray, np.ndarray]:
        """FTS5's contribution of one phrase to each row matching it with rowid >= start."""
        import numpy as np

        marks = ", ".join("?" * len(weights))
        found = conn.execute(f"SELECT rowid, bm25({self.fts}, {marks}) FROM {self.fts} "
                             f"WHERE {self.fts} MATCH ? AND rowid >= ?", (*weights, phrase, start)).fetchall()
        rows = np.fromiter((r[0] for r in found), dtype=np.int64, count=len(found))
        return rows, -np.fromiter((r[1] for r in found), dtype=np.float64, count=len(found))


def top(rows: np.ndarray, scores: np.ndarray, limit: int, allowed: np.ndarray | None = None
        ) -> list[tuple[int, float]]:
    """The `limit` best (row, score), best first, ties by row (lower first, as FTS5's ORDER BY rank
    gives them); only rows in `allowed` (int64) when given."""
    import numpy as np

    if allowed is not None and len(rows):
        mask = np.zeros(int(max(rows.max(), allowed.max(initial=0))) + 1, dtype=bool)
        mask[allowed] = True
        rows, scores = rows[mask[rows]], scores[mask[rows]]
    if limit <= 0 or not len(rows):
        return []
    if len(rows) > limit:  # every row tied with the k-th score stays, so ties go by row as FTS5's sort does
        kth = scores[np.argpartition(-scores, limit - 1)[limit - 1]]
        keep = scores >= kth
        rows, scores = rows[keep], scores[keep]
    order = np.lexsort((rows, -scores))[:limit]
    return [(int(rows[i]), float(scores[i])) for i in order]
