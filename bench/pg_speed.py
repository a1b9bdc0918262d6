"""Recall latency on the Postgres backend against SQLite, in the same run, on the same corpus.

Builds one store of --size memories in SQLite through the engine API (`remember_many`,
detect=False, chunks of 256; the corpus generator of bench/speed.py, vectors of the default
all-MiniLM-L6-v2 model embedded once and cached in --cache-dir with --embedder model, else 384-dim
feature hashing, which gives vectors of MiniLM's size but not its meaning), and the same store on
Postgres: with --build migrate (the default) by `migrate_store` from the SQLite one (COPY: the bulk
path, memories and vectors copied as they are), with --build remember through `remember_many` as
well (a round trip per statement: about an hour at 100k on a loaded machine). Then it times recall
on both, alternating backend per query so that a burst of load elsewhere on the machine hits both:

- recall (query_vector): `Cairn.recall` with the query's vector precomputed (hybrid: BM25 + kNN,
  fusion, hits fetched), the retrieval the store is responsible for;
- recall (keyword only): `Cairn.recall(use_vectors=False)`.

Also: build rate (memories/s, vectors precomputed) and one `forget` on each (Postgres: VACUUM FULL
of the tables that held the memory, HNSW rebuild included), with what another connection's
recalls and writes do meanwhile (a thread of hybrid recall, keyword recall and remember), and how
long its VACUUM FULL took per table. On Postgres alone: the keyword statement by itself, from the
postings (m009) and from the tsvector (the statement before them), fastest of 5 on 25 queries, with
whether both ranked alike; the postings' rows and size, and the time to build them from the
tsvector column as m008 does. The bar (issue 14): Postgres p95 within 2x of SQLite.
The server is a PostgreSQL 16 + pgvector started from the pgserver wheel in a temporary folder.

    python bench/pg_speed.py [--size 100000] [--queries 200] [--build migrate|remember]
                             [--sqlite-build remember|import]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent / "engine"))

import speed  # noqa: E402  (sets CAIRN_HOME / CAIRN_CONFIG to a temporary data root)

import numpy as np  # noqa: E402

from cairn.embedder import Embedder, HashingEmbedder, make_embedder  # noqa: E402
from cairn import Cairn, Draft, create_store, migrate_store  # noqa: E402

CHUNK = 256


class Precomputed(Embedder):
    """Serves the corpus's precomputed vectors under the real embedder's name and fingerprint."""

    def __init__(self, real: Embedder, texts: list[str], vectors: np.ndarray):
        self.model_name, self.dim, self.real = real.model_name, real.dim, real
        self.backend, self.weights = getattr(real, "backend", "precomputed"), getattr(real, "weights", None)
        self.index = {t: i for i, t in enumerate(texts)}
        self.vectors = vectors

    @property
    def fingerprint(self) -> str:
        return self.real.fingerprint

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = [self.index.get(t) for t in texts]
        if all(r is not None for r in rows):
            return self.vectors[rows]
        return self.real.embed(texts)


def vectors_for(real: Embedder, texts: list[str], cache_dir: Path) -> np.ndarray:
    key = hashlib.sha256((real.fingerprint + "\n".join(texts)).encode()).hexdigest()[:16]
    path = cache_dir / f"pg-corpus-{key}.npy"
    if path.exists():
        print(f"corpus vectors: cached ({path})", flush=True)
        return np.load(path)
    cache_dir.mkdir(parents=True, exist_ok=True)
    start, parts = time.perf_counter(), []
    for i in range(0, len(texts), 2048):
        parts.append(real.embed(texts[i : i + 2048]))
        done = i + len(parts[-1])
        print(f"  embedded {done:,}/{len(texts):,}  {done / (time.perf_counter() - start):.0f} texts/s", flush=True)
    vectors = np.concatenate(parts)
    np.save(path, vectors)
    return vectors


def build(engine: Cairn, corpus) -> float:
    drafts = [Draft(text=t, kind=k, tags=tags) for t, k, tags in corpus]
    start = time.perf_counter()
    for i in range(0, len(drafts), CHUNK):
        engine.remember_many(drafts[i : i + CHUNK], detect=False)
        if (i // CHUNK) % 40 == 0:
            print(f"    {engine.status().store}: {i + CHUNK:,}/{len(drafts):,}", flush=True)
    return len(drafts) / (time.perf_counter() - start)


def build_import(engine: Cairn, corpus) -> float:
    """The SQLite store through `Cairn.import_` (export-format JSON Lines, then the backlog embedded
    from the precomputed vectors): a bulk load. `remember_many` now also looks for a near-duplicate
    (a keyword search) per memory, which makes a 100k build take most of an hour here."""
    import io

    from ulid import ULID

    start_ms = 1_700_000_000_000
    lines = []
    for i, (text, kind, tags) in enumerate(corpus):
        at = start_ms + i
        lines.append(json.dumps({"id": str(ULID.from_timestamp(at / 1000)), "text": text, "kind": kind,
                                 "tags": list(tags), "importance": 3, "source": "agent", "valid_from": at,
                                 "recorded_at": at}))
    start = time.perf_counter()
    engine.import_(io.BytesIO("\n".join(lines).encode()))
    return len(corpus) / (time.perf_counter() - start)


def watch(store: str, embedder, queries, qvecs, stop, out: dict[str, list[float]]) -> None:
    """On a connection of its own, until `stop`: hybrid recall, keyword recall and a remember in
    turn, each one's latency (s) appended to out[kind]."""
    with Cairn.open(store, embedder=embedder) as engine:
        i = 0
        while not stop.is_set():
            q, v = queries[i % len(queries)], qvecs[i % len(qvecs)]
            calls = (("recall (query_vector)", engine.recall, (q,), {"query_vector": v}),
                     ("recall (keyword only)", engine.recall, (q,), {"use_vectors": False}),
                     ("remember", engine.remember, (f"bench note {i} written during a forget",),
                      {"kind": "fact", "detect": False}))
            for kind, call, args, kwargs in calls:
                t = time.perf_counter()
                call(*args, **kwargs)
                out.setdefault(kind, []).append(time.perf_counter() - t)
            i += 1
        out["awaiting_embedding"] = [engine.counts()["awaiting_embedding"]]


def keyword_statement(engine: Cairn, queries: list[str]) -> dict[str, float]:
    """The keyword statement alone (`keyword_search`, default view, the recall's 50 candidates) on
    Postgres, from the postings and from the tsv (the statement before them), alternating: the mean
    over `queries` of each query's fastest of 5 runs (ms), and for how many queries both ranked alike."""
    from cairn.storage.sql import Filters
    from cairn.text import fts_query

    store = engine.store
    best: dict[str, list[float]] = {"postings": [], "tsv": []}
    same = 0
    for q in queries:
        match = fts_query(q)
        times: dict[str, list[float]] = {"postings": [], "tsv": []}
        results = {}
        for _ in range(5):
            for name, postings in (("postings", True), ("tsv", False)):
                t = time.perf_counter()
                results[name] = store.keyword_search(match, Filters(), 50, postings=postings)
                times[name].append(time.perf_counter() - t)
        for name in best:
            best[name].append(min(times[name]) * 1000)
        same += [s for s, _ in results["postings"]] == [s for s, _ in results["tsv"]]
    return {"postings": statistics.mean(best["postings"]), "tsv": statistics.mean(best["tsv"]), "same": same}


def postings_figures(engine: Cairn) -> dict[str, float]:
    """memory_postings' rows and size (MB, table and index), and the time to build them again from
    the tsv column as migration m008 does (into a scratch table, then its index; dropped after)."""
    conn = engine.store.conn
    rows = conn.execute("SELECT count(*) FROM memory_postings").fetchone()[0]
    size = conn.execute("SELECT pg_total_relation_size('memory_postings')").fetchone()[0]
    start = time.perf_counter()
    conn.execute("CREATE TABLE bench_postings AS SELECT p.lexeme, m.seq, p.r FROM memories m "
                 "CROSS JOIN LATERAL cairn_postings(m.tsv) p WHERE m.tsv IS NOT NULL ORDER BY 1, 2")
    conn.execute("CREATE UNIQUE INDEX ON bench_postings (lexeme, seq) INCLUDE (r)")
    build = time.perf_counter() - start
    conn.execute("DROP TABLE bench_postings")
    return {"rows": rows, "mb": size / 2**20, "build_s": build}


def pct(samples: list[float]) -> tuple[float, float]:
    qs = statistics.quantiles(samples, n=100, method="inclusive")
    return qs[49] * 1000, qs[94] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedder", choices=["hashing", "model"], default="hashing",
                        help="hashing: 384-dimensional feature hashing (fast; the vectors' size is MiniLM's, "
                             "their meaning is not); model: the default all-MiniLM-L6-v2 (slow to embed the corpus)")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "cairn-speed-cache")
    parser.add_argument("--build", choices=["migrate", "remember"], default="migrate",
                        help="how the Postgres store is built: migrate-store from the SQLite one (bulk COPY), "
                             "or remember_many as the SQLite one")
    parser.add_argument("--sqlite-build", choices=["remember", "import"], default="remember",
                        help="how the SQLite store is built: remember_many (chunks of 256) or import_ (a bulk "
                             "load of export-format lines)")
    args = parser.parse_args()

    import pgserver

    pgdata = tempfile.mkdtemp(prefix="cairn-pgbench-")
    server = pgserver.get_server(pgdata, cleanup_mode="delete")
    os.environ["CAIRN_POSTGRES_URL"] = server.get_uri()
    try:
        real = make_embedder() if args.embedder == "model" else HashingEmbedder(dim=384)
        if args.embedder == "model":
            real.load()
        corpus = speed.make_memories(args.size, seed=1)
        queries = speed.make_queries(args.queries, seed=2)
        texts = [t for t, _, _ in corpus]
        vectors = vectors_for(real, texts, args.cache_dir)
        qvecs = real.embed_queries(queries)
        embedder = Precomputed(real, texts, vectors)

        create_store("bench-sqlite")
        rates = {}
        with Cairn.open("bench-sqlite", embedder=embedder) as sqlite_engine:
            print(f"building sqlite ({args.size:,} memories) ...", flush=True)
            rates["sqlite"] = (build if args.sqlite_build == "remember" else build_import)(sqlite_engine, corpus)
        print(f"building postgres ({args.size:,} memories, {args.build}) ...", flush=True)
        if args.build == "migrate":
            start = time.perf_counter()
            marks: list[float] = []

            def progress(items, total):  # wraps migrate-store's loop over the vectors: when it starts and ends
                marks.append(time.perf_counter())
                yield from items
                marks.append(time.perf_counter())

            migrate_store("sqlite:bench-sqlite", "postgres:bench-pg", progress=progress)
            end = time.perf_counter()
            rates["postgres"] = args.size / (end - start)
            if len(marks) == 2:
                phases = {"memories (scrub, COPY)": marks[0] - start, "vectors (COPY)": marks[1] - marks[0],
                          "HNSW index build and the rest": end - marks[1]}
                print("migrate-store phases: " + ", ".join(f"{k} {v:.0f} s" for k, v in phases.items()), flush=True)
        else:
            create_store("bench-pg", postgres=os.environ["CAIRN_POSTGRES_URL"])
            with Cairn.open("bench-pg", embedder=embedder) as pg_engine:
                rates["postgres"] = build(pg_engine, corpus)
        engines = {"sqlite": Cairn.open("bench-sqlite", embedder=embedder),
                   "postgres": Cairn.open("bench-pg", embedder=embedder)}
        if hasattr(engines["postgres"].store, "conn"):
            engines["postgres"].store.conn.execute("ANALYZE")  # as autovacuum would after a bulk load

        samples: dict[tuple[str, str], list[float]] = {}
        load_before = os.getloadavg()
        for q, v in zip(queries[:10], qvecs[:10]):  # warm caches
            for engine in engines.values():
                engine.recall(q, query_vector=v)
                engine.recall(q, use_vectors=False)
        for q, v in zip(queries, qvecs):
            for name, engine in engines.items():
                t = time.perf_counter()
                engine.recall(q, query_vector=v)
                samples.setdefault((name, "recall (query_vector)"), []).append(time.perf_counter() - t)
                t = time.perf_counter()
                engine.recall(q, use_vectors=False)
                samples.setdefault((name, "recall (keyword only)"), []).append(time.perf_counter() - t)
        load_after = os.getloadavg()
        overlap = []
        for q, v in zip(queries[:50], qvecs[:50]):
            top = [{h.memory.text for h in e.recall(q, query_vector=v, k=10)} for e in engines.values()]
            overlap.append(len(top[0] & top[1]) / max(1, len(top[0])))
        statement = keyword_statement(engines["postgres"], queries[:25])
        postings = postings_figures(engines["postgres"])
        forget_ms = {}
        during: dict[str, list[float]] = {}
        for name, engine in engines.items():
            victim = engine.list(limit=1)[0]
            if name == "postgres":  # another process's view while the forget runs: what waits, for how long
                stop = threading.Event()
                watcher = threading.Thread(target=watch, args=("bench-pg", embedder, queries, qvecs, stop, during))
                watcher.start()
                time.sleep(1.0)
            t = time.perf_counter()
            engine.forget(victim.id)
            forget_ms[name] = (time.perf_counter() - t) * 1000
            if name == "postgres":
                stop.set()
                watcher.join()

        print(f"\n## Postgres vs SQLite at {args.size:,} memories ({args.queries} queries)\n")
        print("| measure | SQLite p50 / p95 ms | Postgres p50 / p95 ms | p95 ratio | bar (<= 2x) |")
        print("|---|---|---|---|---|")
        out = {"size": args.size, "queries": args.queries, "build": args.build, "build_per_s": rates,
               "forget_ms": forget_ms, "load_average": [load_before, load_after]}
        for measure in ("recall (query_vector)", "recall (keyword only)"):
            s50, s95 = pct(samples[("sqlite", measure)])
            p50, p95 = pct(samples[("postgres", measure)])
            ratio = p95 / s95
            out[measure] = {"sqlite": [s50, s95], "postgres": [p50, p95], "ratio_p95": ratio}
            print(f"| {measure} | {s50:.1f} / {s95:.1f} | {p50:.1f} / {p95:.1f} | {ratio:.2f}x | "
                  f"{'met' if ratio <= 2 else 'NOT met'} |")
        pg_build = "migrate-store from SQLite" if args.build == "migrate" else "remember_many"
        sq_build = "remember_many" if args.sqlite_build == "remember" else "import_"
        print(f"| build (SQLite: {sq_build}, vectors precomputed; Postgres: {pg_build}) | {rates['sqlite']:.0f} /s "
              f"| {rates['postgres']:.0f} /s | | |")
        print(f"| forget (incl. erase + flush) | {forget_ms['sqlite']:.0f} ms | {forget_ms['postgres']:.0f} ms | | |")
        for kind in ("recall (query_vector)", "recall (keyword only)", "remember"):
            got = during.get(kind, [])
            if got:
                print(f"during the Postgres forget, another connection: {kind} x{len(got)}, "
                      f"median {statistics.median(got) * 1000:.0f} ms, max {max(got) * 1000:.0f} ms")
        print(f"memories awaiting embedding after it: {during.get('awaiting_embedding', ['?'])[0]}")
        flush = getattr(engines["postgres"].store, "flush_ms", {})
        print("the Postgres forget's VACUUM FULL per table: " + ", ".join(f"{k} {v:.0f} ms" for k, v in flush.items()))
        print(f"keyword statement alone (mean over 25 queries of each one's fastest of 5): postings "
              f"{statement['postings']:.1f} ms, tsv {statement['tsv']:.1f} ms; same ranking for "
              f"{statement['same']} of 25")
        print(f"postings: {postings['rows']:,} rows, {postings['mb']:.0f} MB (table + index), built from the tsv "
              f"in {postings['build_s']:.1f} s (as m008 does)")
        out.update(flush_ms=flush, statement_ms=statement, postings=postings)
        out["during_forget"] = {k: [len(v), statistics.median(v) * 1000, max(v) * 1000]
                                for k, v in during.items() if k != "awaiting_embedding" and v}
        print(f"\nmean overlap of the two backends' top 10: {statistics.mean(overlap):.3f}")
        print(f"load average (1, 5, 15 min) before timing: {load_before}, after: {load_after}")
        out["top10_overlap"] = statistics.mean(overlap)
        print(json.dumps(out))
        for engine in engines.values():
            engine.close()
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
