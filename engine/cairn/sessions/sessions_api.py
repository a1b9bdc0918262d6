"""Captured sessions, `memory.sessions`: capture Claude Code transcripts (and LoCoMo files) into the
project store, search their turns, and read them back.

Turns are scrubbed (privacy.scrub) before they are stored, indexed with the neighbouring turns
(models.session_keys) and embedded with the engine's model. The parsing, index keys and fusion
are in turns.py; this module holds the operations over an engine.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..errors import InvalidInput, SessionNotFound
from ..memories.engine import Engine
from ..memories.reads import VECTOR_FLOOR
from ..memories.render import cited_ids
from ..models import NEIGHBOURS, SESSION_MODES, SessionHit, SessionHits, SessionInfo, Turn, TurnDraft, session_keys
from .turns import (KEY_WEIGHT, blend, choose_mode, clean_text, fuse, in_context, looks_verbatim, parse_lines,
                       read_locomo, title_of, turn_passage)
from .timewindow import find_time_window
from ..stores.admin import Progress, no_progress
from ..text import fts_query
from ..timeutil import now_ms, parse_time

if TYPE_CHECKING:
    import numpy as np

    from ..storage.protocol import SessionStore
    from .timewindow import TimeWindow

TRANSCRIPT_CHUNK_BYTES = 8 * 1024 * 1024  # read per step; a longer line is skipped as "oversized"


def _skip_line(handle: IO[bytes], position: int) -> int | None:
    """The offset just past the newline at or after `position`, or None when the line is not finished."""
    handle.seek(position)
    while True:
        buf = handle.read(1024 * 1024)
        if not buf:
            return None
        end = buf.find(b"\n")
        if end >= 0:
            return position + end + 1
        position += len(buf)


class Sessions:
    """The captured sessions of an engine's project store (`memory.sessions`)."""

    def __init__(self, engine: Engine, store: SessionStore, *, claim_space: Callable[..., None]):
        """engine: whose model embeds the turns and whose config (`sessions`) applies; store: its
        project store, by the one role of it this uses; claim_space(record=True): called before
        turn vectors meet the store's, refuses a store embedded in another space (EmbeddingMismatch)
        and, with record, notes the model in a store that has none (Engine._claim_space on it)."""
        self._engine = engine
        self._store = store
        self._check_space = claim_space

    def add_turns(self, session_id: str, drafts: list[TurnDraft], *, source: str,
                  transcript_path: str | None = None, read_bytes: int | None = None,
                  last_uuid: str | None = None, skipped: dict[str, int] | None = None,
                  trailing_meta: dict[str, list[str]] | None = None) -> dict[str, Any]:
        """Scrub (privacy.scrub: `<private>` spans, secrets), index, embed and store turns of a
        session, after those it holds; a turn whose uuid it already holds is skipped (idempotent).
        Returns {"turns_added", "redactions": {type: n}, "private_spans", "cited": the memory ids the
        added assistant turns cite as [mem:ID], in order}."""
        store = self._store
        known = store.known_uuids(session_id, [d.uuid for d in drafts])
        fresh, seen = [], set(known)
        for d in drafts:
            if d.uuid not in seen:
                seen.add(d.uuid)
                fresh.append(d)
        redactions: Counter = Counter()
        private = 0
        kept: list[TurnDraft] = []
        # clean_text again: a caller of this API may not have read its turns through parse_lines.
        from ..privacy.scrub import scrub_many  # only a write scrubs (see memories/writes.py)

        for d, clean in zip(fresh, scrub_many([clean_text(d.text) for d in fresh])):
            redactions.update(clean.redactions)
            private += clean.private_spans
            if clean.text.strip():
                kept.append(replace(d, text=clean.text.strip()))
        # A key names the NEIGHBOURS turns on each side: the stored last NEIGHBOURS turns get new keys
        # now that turns follow them, and those need the NEIGHBOURS turns before them in turn.
        previous = [TurnDraft(uuid=t.uuid, role=t.role, text=t.text, at=t.at, speaker=t.speaker)
                    for t in store.last_turns(session_id, 2 * NEIGHBOURS)] if kept else []
        context = previous + kept
        keys = session_keys(context, max(0, len(previous) - NEIGHBOURS))
        rekey = {t.uuid: key for t, key in zip(previous[-NEIGHBOURS:], keys)}
        keyed = [{**asdict(d), "key": key} for d, key in zip(kept, keys[len(rekey):])]
        vectors = self._vectors(kept, previous[-1] if previous else None) if store.turn_index is not None else None
        for i, row in enumerate(keyed):
            row["vector"] = None if vectors is None else vectors[i]
        if vectors is not None:
            self._check_space()
        title = title_of(kept)
        added = store.add_turns(
            session_id, source=source, transcript_path=transcript_path, title=title, turns=keyed,
            read_bytes=read_bytes, last_uuid=last_uuid, skipped=dict(skipped or {}), redactions=dict(redactions),
            private_spans=private, trailing_meta=trailing_meta or {}, rekey=rekey)
        days = self._engine.config["sessions"].get("vector_days") or 0
        if days and added:
            store.drop_turn_vectors(now_ms() - days * 86_400_000, added)
        cited = list(dict.fromkeys(i for d in kept if d.role == "assistant" for i in cited_ids(d.text)))
        return {"turns_added": len(added), "redactions": dict(redactions), "private_spans": private, "cited": cited}

    def embed_backlog(self, limit: int = 256) -> int:
        """Embed up to `limit` turns stored without a vector (captured while no model was loaded, or
        queued by a re-embed), each read with the turn before it (sessions.in_context); returns how
        many. 0 without a model or a vector index. Raises EmbeddingMismatch (claim_space)."""
        store = self._store
        pending = store.turn_backlog(limit)
        if not pending or not store.turn_index:
            return 0
        vectors = self._in_context([(turn_passage(speaker, text), None if before is None else
                                     turn_passage(before_speaker, before))
                                    for _, speaker, text, before_speaker, before in pending])
        if vectors is None:
            return 0
        self._check_space()
        store.fill_turn_backlog({seq: v for (seq, _, _, _, _), v in zip(pending, vectors)})
        return len(pending)

    def _vectors(self, turns: list[TurnDraft], before: TurnDraft | None) -> Any:
        """The vectors of consecutive turns of one session, each read with the turn before it
        (`before`: the turn stored just before the first), or None without a model (_in_context)."""
        passage = {id(t): turn_passage(t.speaker, t.text) for t in [*turns, *([before] if before else [])]}
        previous = [before, *turns[:-1]]
        return self._in_context([(passage[id(t)], None if p is None else passage[id(p)])
                                 for t, p in zip(turns, previous)])

    def _in_context(self, pairs: list[tuple[str, str | None]]) -> Any:
        """The vectors of turns each read with the turn before it (turns.in_context), from one
        (the turn's passage, the previous turn's passage or None for a session's first) per turn:
        float32 [len(pairs), dim], each distinct passage embedded once; None without a model or turns."""
        if not pairs:
            return None
        passages = list(dict.fromkeys([own for own, _ in pairs] + [p for _, p in pairs if p is not None]))
        embedded = self._engine.embed(passages)
        if embedded is None:
            return None
        import numpy as np

        row = {p: i for i, p in enumerate(passages)}
        zero = np.zeros_like(embedded[0])  # a session's first turn has none before it
        own = embedded[[row[p] for p, _ in pairs]]
        before = np.stack([zero if p is None else embedded[row[p]] for _, p in pairs])
        return in_context(own, before)

    def ingest(self, path: str | Path, *, session_id: str | None = None,
               source: str = "claude-code") -> dict[str, Any]:
        """Capture the part of a Claude Code transcript (JSON Lines) not read yet: from the byte
        offset the session's catalog row records, to the last complete line (a line still being
        written is read next time). Idempotent: turns are keyed by (session id, message uuid).
        session_id defaults to the file's stem. Bad lines are skipped and counted, never raised.
        Returns {"session_id", "turns_added", "skipped": {reason: n}, "redactions": {type: n},
        "private_spans", "read_bytes", "cited": memory ids the new assistant turns cite as [mem:ID]}.
        Raises InvalidInput when the file cannot be read."""
        path = Path(path)
        session_id = session_id or path.stem
        store = self._store
        known_path, offset, _ = store.session_progress(session_id)
        if known_path is not None and known_path != str(path):
            offset = 0  # another file for this session: read it whole (uuids keep it idempotent)
        totals: dict[str, Any] = {"session_id": session_id, "turns_added": 0, "skipped": Counter(),
                                  "redactions": Counter(), "private_spans": 0, "cited": []}
        try:
            handle = open(path, "rb")
        except OSError as exc:
            raise InvalidInput(f"cannot read transcript {path}: {exc.strerror or exc}") from None
        with handle:
            size = os.fstat(handle.fileno()).st_size
            if offset > size:
                offset = 0  # the file was rewritten
            while offset < size:
                handle.seek(offset)
                buf = handle.read(TRANSCRIPT_CHUNK_BYTES)
                end = buf.rfind(b"\n")
                if end < 0:
                    if len(buf) < TRANSCRIPT_CHUNK_BYTES:
                        break  # the last line is still being written
                    skip = _skip_line(handle, offset + len(buf))
                    if skip is None:
                        break
                    store.add_turns(session_id, source=source, transcript_path=str(path), title=None, turns=[],
                                    read_bytes=skip, last_uuid=None, skipped={"oversized": 1}, redactions={},
                                    private_spans=0, trailing_meta={}, rekey={})
                    totals["skipped"]["oversized"] += 1
                    offset = skip
                    continue
                parsed = parse_lines(buf[: end + 1])
                offset += end + 1
                done = self.add_turns(
                    session_id, parsed.turns, source=source, transcript_path=str(path), read_bytes=offset,
                    last_uuid=parsed.last_uuid, skipped=parsed.skipped, trailing_meta=parsed.trailing_meta)
                totals["turns_added"] += done["turns_added"]
                totals["skipped"].update(parsed.skipped)
                totals["redactions"].update(done["redactions"])
                totals["private_spans"] += done["private_spans"]
                totals["cited"] += [i for i in done["cited"] if i not in totals["cited"]]
        totals.update(skipped=dict(totals["skipped"]), redactions=dict(totals["redactions"]), read_bytes=offset)
        return totals

    def import_folder(self, folder: str | Path, *, progress: Progress = no_progress) -> dict[str, Any]:
        """Capture every Claude Code transcript (`*.jsonl`) in `folder`, each resuming where an earlier
        capture or import of it stopped. Returns {"files", "turns_added", "skipped", "redactions",
        "private_spans"}. A file that cannot be read is counted under skipped["unreadable file"]."""
        files = sorted(Path(folder).glob("*.jsonl"))
        totals: dict[str, Any] = {"files": len(files), "turns_added": 0, "skipped": Counter(),
                                  "redactions": Counter(), "private_spans": 0}
        for path in progress(files, len(files)):
            try:
                done = self.ingest(path)
            except InvalidInput:
                totals["skipped"]["unreadable file"] += 1
                continue
            totals["turns_added"] += done["turns_added"]
            totals["skipped"].update(done["skipped"])
            totals["redactions"].update(done["redactions"])
            totals["private_spans"] += done["private_spans"]
        totals.update(skipped=dict(totals["skipped"]), redactions=dict(totals["redactions"]))
        return totals

    def import_locomo(self, path: str | Path) -> dict[str, Any]:
        """Capture a LoCoMo conversation file (sessions.read_locomo): one session per LoCoMo
        session, id `<file stem>/session_N`, turn uuids the dia_ids. Idempotent.
        Returns {"sessions", "turns_added"}. Raises InvalidImport."""
        sessions = read_locomo(Path(path))
        added = 0
        for session_id, turns in sessions:
            added += self.add_turns(session_id, turns, source="locomo")["turns_added"]
        return {"sessions": len(sessions), "turns_added": added}

    def search(self, query: str, *, mode: str = "auto", k: int | None = None, window: int | None = None,
               since: Any = None, until: Any = None, reference: Any = None,
               query_vector: np.ndarray | None = None) -> SessionHits:
        """Captured turns for `query`, best first, each with its context window.

        mode: "keyword" (BM25 over the turn and, at half weight, its index key: speaker, date, two
        turns before and after), "semantic" (vector cosine of the turn read with the turn before it),
        "hybrid" (both: their scores blended, sessions.blend, weighted towards keyword),
        "exact" (the turns that contain the query as a substring, ASCII case-insensitive, newest
        first), or "auto": exact for a quoted string or an identifier-like token (a path,
        snake_case, an error code), else hybrid; an exact search that finds nothing falls back to
        hybrid. k (default config sessions.k): how many turns are ranked. window (default config
        sessions.window): turns before and after each hit, returned with it but never ranked.
        since/until: ISO 8601 or epoch ms, hard bounds on the turn's time.

        A time expression in a keyword, semantic or hybrid query ("last week", "in March", "3 days
        ago", "on 2023-05-08": timewindow.find_time_window) is taken out of the words searched and
        read as a date window relative to `reference` (ISO 8601 or epoch ms; default now): the
        turns inside it are ranked first, then the others. The result's `time_window` says which
        window was used (None: the query named no time). query_vector: the vector of the words
        searched (the query less its time expression, `TimeWindow.query`), when the caller has it.
        Raises InvalidInput (empty query, unknown mode), InvalidTime."""
        if not query or not query.strip():
            raise InvalidInput("query is empty")
        if mode not in SESSION_MODES:
            raise InvalidInput(f"unknown mode {mode!r}; expected one of: {', '.join(SESSION_MODES)}")
        cfg = self._engine.config["sessions"]
        k = cfg["k"] if k is None else int(k)
        window = cfg["window"] if window is None else int(window)
        if k < 1 or window < 0:
            raise InvalidInput("k must be at least 1 and window at least 0")
        bounds = {"since": parse_time(since, field="since"), "until": parse_time(until, field="until")}
        ref = parse_time(reference, field="reference")
        mode, needle = self._mode(mode, query, bounds)
        if mode == "exact" and not needle.strip():
            raise InvalidInput("query is empty once control characters are removed")
        found = None if mode == "exact" else find_time_window(query, now_ms() if ref is None else ref)
        words = query if found is None else found.query
        if mode != "exact" and mode != "keyword" and query_vector is None:
            vectors = self._engine.embed([words], query=True)
            query_vector = None if vectors is None else vectors[0]
        ranked = self._rank(mode, needle, words, k, bounds, query_vector)
        if found is not None:
            # The window's turns first (within since/until), then the rest as ranked without it.
            since, until = bounds["since"], bounds["until"]
            inside = {"since": found.since if since is None else max(found.since, since),
                      "until": found.until if until is None else min(found.until, until)}
            first = (self._rank(mode, needle, words, k, inside, query_vector)
                     if inside["since"] < inside["until"] else [])
            seen = {seq for seq, _, _ in first}
            for _, _, reasons in first:
                reasons["time_window"] = True
            ranked = (first + [r for r in ranked if r[0] not in seen])[:k]
        return self._hits(ranked, mode, window, found)

    def _mode(self, mode: str, query: str, bounds: dict[str, int | None]) -> tuple[str, str]:
        """The mode a search runs in and its exact needle: `mode` as given, or for "auto" exact for a
        quoted string or an identifier-like token that some turn holds (else hybrid), and exact
        for a pasted error message or command found as it was written."""
        store = self._store
        # Turns are stored through clean_text (no NUL or other C0 controls): an exact needle must be too.
        needle = clean_text(query)
        if mode == "auto":
            mode, needle = choose_mode(needle)
            if mode == "exact" and not store.turn_exact_search(needle, 1, **bounds):
                mode, needle = "hybrid", query
            elif mode == "hybrid" and looks_verbatim(needle) and store.turn_exact_search(needle, 1, **bounds):
                mode = "exact"  # an error message or a command pasted whole, found as it was written
        return mode, needle

    def _hits(self, ranked: list[tuple[int, float, dict[str, Any]]], mode: str, window: int,
              found: TimeWindow | None) -> SessionHits:
        """The ranked turns as hits, each with the `window` turns before and after it."""
        store = self._store
        turns = store.turns_by_seqs([s for s, _, _ in ranked])
        hits = SessionHits()
        hits.time_window = found
        for seq, score, reasons in ranked:
            turn = turns[seq]
            start = max(0, turn.position - window)
            around = store.session_turns(turn.session_id, start, turn.position + window + 1 - start) if window else []
            hits.append(SessionHit(turn=turn, score=score, mode=mode, reasons=reasons,
                                   before=tuple(t for t in around if t.position < turn.position),
                                   after=tuple(t for t in around if t.position > turn.position)))
        return hits

    def _rank(self, mode: str, needle: str, words: str, k: int, bounds: dict[str, int | None],
              query_vector: np.ndarray | None) -> list[tuple[int, float, dict[str, Any]]]:
        """The k best turns within `bounds` for one mode: [(seq, score, {retriever: rank and score})]."""
        store = self._store
        if mode == "exact":
            return [(s, v, {"exact": {"rank": i}}) for i, (s, v) in enumerate(
                store.turn_exact_search(needle, k, **bounds), 1)]
        depth = k if mode != "hybrid" else max(k, self._engine.config["sessions"]["candidates"])
        lists: dict[str, list[tuple[int, float]]] = {}
        if mode in ("keyword", "hybrid"):
            match = fts_query(words)
            lists["bm25"] = (store.turn_keyword_search(match, depth, key_weight=KEY_WEIGHT, **bounds)
                             if match else [])
        if mode in ("semantic", "hybrid") and query_vector is not None:
            self._check_space(record=False)
            # As for memories (VECTOR_FLOOR): a nearest turn with no real similarity is filler.
            lists["vector"] = [(seq, cosine) for seq, cosine in
                               store.turn_vector_search(query_vector, depth, **bounds) if cosine > VECTOR_FLOOR]
        if mode == "hybrid":
            return blend(lists["bm25"], lists.get("vector", []))[:k]
        return fuse(lists, {})[:k]

    def catalog(self, *, limit: int = 50, since: Any = None, until: Any = None
                ) -> list[SessionInfo]:
        """The session catalog, most recently active first. since/until: ISO 8601 or epoch ms.
        Raises InvalidTime."""
        return self._store.sessions(int(limit), since=parse_time(since, field="since"),
                                    until=parse_time(until, field="until"))

    def read(self, session_id: str, *, offset: int = 0, limit: int = 50
             ) -> tuple[SessionInfo, list[Turn]]:
        """A session's catalog row and its turns at positions offset .. offset + limit - 1 (paged).
        Raises SessionNotFound."""
        info = self._store.session(session_id)
        if info is None:
            raise SessionNotFound(f"no captured session {session_id!r} in store {self._store.name!r}")
        return info, self._store.session_turns(session_id, max(0, int(offset)), max(0, int(limit)))
