"""A year of work in one project store: captured turns and memories at scale, warm.

    python bench/year_scale.py [--scale 1.0] [--turns 200000] [--memories 100000] [--queries 200]
                               [--pool 3000] [--retention-days 90] [--cache DIR] [--latency-only]

Builds one SQLite project store holding --turns captured turns (sessions of 40 turns spread over the
365 days before now) and --memories memories (both multiplied by --scale: 0.1 for a first check),
then prints, each also as a ratio to `python -c pass` timed in the same run (the floor of any process
on this machine at this moment):

1. capture throughput (turns/s) through the real path, `Cairn.sessions.add_turns` with the shipped
   model (all-MiniLM-L6-v2, int8 ONNX): scrubbing, index keys, vectors in context, storage; on 2,000
   fresh turns in sessions of 40, split into its stages;
2. session search p50/p95 (ms), warm (the store open, its turn codes held, as in the warm process):
   hybrid search with the query's vector given (retrieval), and with the query embedded (full);
   also a query with a time expression ("... last month");
3. recall p50/p95 (ms), warm: `Cairn.recall` with the query vector given, and embedded;
4. bytes per turn and per memory with every index (dbstat, after a TRUNCATE checkpoint): turns and
   their keyword index, int8 codes and the session catalog over turns; memories, their FTS,
   vectors, tags and postings over memories;
5. the int8 codes against float32: the top 10 and top 50 of 100 queries (sign-bit candidates,
   int8 ranking, as search runs) compared with an exact float32 search of the same vectors;
6. retention: the store's turn bytes after `sessions.vector_days` (--retention-days) drops the
   vectors of older turns, and keyword search still finding an old turn.

--cache DIR keeps a copy of the built store (turns and memories, before the throughput step writes
to it) in DIR, keyed by the sizes and seeds, and later runs with the same sizes start from that copy
instead of building again (the full scale takes about 20 minutes to build on 2 cores).
--latency-only prints steps 2 and 3 alone. --ab times each search and recall twice in turn: as shipped
(BM25 from the postings held in process memory, storage/fts_postings.py), and with FTS5 scoring
(storage/fts_prune.py's rare-first BM25: the path before); it also prints how far the held postings'
top 10 / top 50 agree with FTS5 scoring every match. Before the warm-up the script prints the cold
cost of the held postings: the rows' lengths read when the hold starts, then each query's first
keyword search (which reads its words from the index), and at the end the bytes held.

Texts are generated from bench/speed.py's seeded vocabularies (services, tools, people, numbers):
developer prompts and assistant replies of about 30-60 words, and short replies ("Yes, exactly!").
Embedding 300,000 texts would take most of an hour on 2 cores, so the bulk's vectors come from the
real model's vectors of a pool of --pool generated turns and memories, each bulk text taking a pool
vector plus Gaussian noise (sigma 0.02 a coordinate, then renormalised: cosine to the pool vector
about 0.8): the vector search does the same work on them, and its cost depends on their count, not
their meaning. The throughput step embeds every text for real. A script printing figures, not a test.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speed import _slots, make_memories, make_queries  # noqa: E402  (sets up a throwaway CAIRN_HOME)

import numpy as np  # noqa: E402

from cairn import Cairn, Draft  # noqa: E402
from cairn.embedder import Embedder, make_embedder  # noqa: E402
from cairn.models import TurnDraft, session_keys  # noqa: E402
from cairn.stores.paths import store_path  # noqa: E402
from cairn.sessions.turns import in_context, turn_passage  # noqa: E402
from cairn.storage import fts_prune  # noqa: E402
from cairn.timeutil import now_ms  # noqa: E402

DAY = 86_400_000
SESSION_TURNS = 40
PROMPTS = [
    "The {svc} tests fail on {env} with a {code} from {host}; can you check the retry policy of the {job} job?",
    "Why does the {svc} take {mins} minutes to start in {env}? It used to be under {sec} seconds.",
    "Let's move the {svc} from {a} to {b}. What has to change in the {repo} repo?",
    "{person} says the {feature} breaks when the {svc} returns {code}. Can you reproduce it?",
    "Add a {flag} flag to the {svc} and keep it off in production until {date}.",
    "The nightly {job} job ran out of memory at {mem} MB again. What did we decide last time?",
    "Can you make the {test} suite of the {svc} stop depending on {dep}?",
    "Where do the migrations of the {svc} live, and how are they named?",
]
REPLIES = [
    "I looked at the {svc}: the {job} job retries {n1} times with {ms} ms between tries, and {host} answers {code} "
    "when the pool is exhausted. I raised the pool to {n2} connections and the {test} suite passes on {env} now.",
    "The slow start comes from {a} loading {n5} rows at boot. I moved that to the first request and put the "
    "{svc} behind a readiness probe of {sec} s; it starts in under {sec} seconds again.",
    "Moving the {svc} to {b} means changing the client in the {repo} repo, the connection string in {env} and "
    "the {job} job's schedule. I opened a branch and {person} is reviewing it.",
    "Reproduced: the {feature} sends {code} to the user because the {svc} has no handler for {situation}. Fixed "
    "in the handler, with a test in the {test} suite.",
    "The {flag} flag is in, off by default, read at start from the config; {person} can switch it on in {env}.",
    "Last time we split the {job} job into batches of {n4} rows and kept the limit at {mem} MB; the batches "
    "got bigger since. I capped them again and added a check in CI ({ci}).",
    "The {test} tests now use a fake clock and a temporary directory each, so {dep} no longer leaks between them.",
    "They live in {path} of the {repo} repo, named {mig}; {lint} checks the names in CI.",
]
SHORT = ["Yes, exactly!", "ok, go ahead", "thanks, that works", "Perfect.", "No, the other one.", "Do it.",
         "Sounds good to me.", "Right, merge it."]


def make_turns(n: int, seed: int) -> list[tuple[str, str]]:
    """n (role, text) in conversation order: a prompt, a reply, and now and then a short answer."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    while len(out) < n:
        slots = _slots(rng)
        out.append(("user", rng.choice(PROMPTS).format(**slots)))
        out.append(("assistant", rng.choice(REPLIES).format(**slots)))
        if rng.random() < 0.25:
            out.append(("user", rng.choice(SHORT)))
    return out[:n]


class PoolEmbedder(Embedder):
    """The real model for a pool of texts; every other text gets a pool vector (chosen by a hash of
    the text) plus Gaussian noise, renormalised (see the module docstring)."""

    def __init__(self, real: Embedder, pool: np.ndarray):
        self.model_name, self.dim, self.real = real.model_name, real.dim, real
        self.backend, self.weights = real.backend, real.weights
        self.pool = pool

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            rng = np.random.default_rng(zlib.crc32(text.encode()))
            v = self.pool[rng.integers(len(self.pool))] + rng.normal(0, 0.02, self.dim).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self.real.embed_queries(texts)


def python_pass(runs: int = 15) -> float:
    """Median wall seconds of `python -c pass` (this interpreter)."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def pct(samples: list[float]) -> tuple[float, float]:
    p50, p95 = np.percentile(np.asarray(samples) * 1000.0, [50, 95])
    return float(p50), float(p95)


def print_latencies(timings: dict[str, list[float]], floor: float) -> None:
    print("| figure | p50 ms | p95 ms | p95 / `python -c pass` |")
    print("|---|---|---|---|")
    for label, samples in timings.items():
        p50, p95 = pct(samples)
        print(f"| {label} ({len(samples)} queries) | {p50:.1f} | {p95:.1f} | {p95 / 1000 / floor:.2f} |")


def keyword_searches(memory: Cairn) -> dict[str, Callable[[str], list[tuple[int, float]]]]:
    """The two keyword searches, as session search and recall ask them: {name: search(match)}."""
    from cairn.sessions.turns import KEY_WEIGHT
    from cairn.storage.sql import Filters

    store = memory.store
    return {"turns": lambda m: store.turn_keyword_search(m, 50, key_weight=KEY_WEIGHT),
            "memories": lambda m: store.keyword_search(m, Filters(), 50)}


def keyword_agreement(memory: Cairn, queries: list[str], held: dict[str, Any]) -> None:
    """Print how far the shipped BM25 (the postings `held`, storage/fts_postings.py) and the rare-first
    BM25 over FTS5 (storage/fts_prune.py) agree with FTS5 scoring every match: top-10 and top-50
    overlap over `queries`, for turns (as session search asks) and memories."""
    from cairn.text import fts_query

    store, shipped = memory.store, fts_prune.PRUNE_POSTINGS
    for name, search in keyword_searches(memory).items():
        sums = {"held": [0.0, 0.0], "rare-first": [0.0, 0.0]}
        asked = 0
        for q in queries:
            match = fts_query(q)
            if match is None:
                continue
            store.postings = held
            found = {"held": [s for s, _ in search(match)]}
            store.postings = {}
            found["rare-first"] = [s for s, _ in search(match)]
            fts_prune.PRUNE_POSTINGS = 10 ** 12
            full = [s for s, _ in search(match)]
            fts_prune.PRUNE_POSTINGS = shipped
            asked += 1
            for way, ranked in found.items():
                sums[way][0] += len(set(ranked[:10]) & set(full[:10])) / max(1, len(full[:10]))
                sums[way][1] += len(set(ranked) & set(full)) / max(1, len(full))
        store.postings = held
        for way, (top10, top50) in sums.items():
            print(f"{way} BM25 against FTS5 scoring every match, {name} ({asked} queries): top-10 overlap "
                  f"{top10 / asked:.3f}, top-50 {top50 / asked:.3f}")


def postings_cold(memory: Cairn, queries: list[str]) -> None:
    """Print the held postings' cold cost (module docstring) and what they hold after it."""
    from cairn.text import fts_query

    store = memory.store
    for fts, held in store.postings.items():
        started = time.perf_counter()
        held.sync(store.conn)
        print(f"held postings, {fts}: hold started in {1000 * (time.perf_counter() - started):.0f} ms "
              f"({held.rows:,} rows)", flush=True)
    for name, search in keyword_searches(memory).items():
        firsts = []
        for q in queries:
            match = fts_query(q)
            if match is not None:
                started = time.perf_counter()
                search(match)
                firsts.append(time.perf_counter() - started)
        p50, p95 = pct(firsts)
        print(f"held postings, {name}: first keyword search of each query (reads its new words) p50 {p50:.1f} / "
              f"p95 {p95:.1f} / max {1000 * max(firsts):.0f} ms, {sum(firsts):.1f} s in all", flush=True)


def postings_held(memory: Cairn) -> None:
    for fts, held in memory.store.postings.items():
        print(f"held postings, {fts}: {len(held.words):,} words and phrases, {held.postings:,} postings and "
              f"positions, {held.bytes_held() / 1e6:.1f} MB ({held.bytes_held() / max(1, held.postings):.1f} B "
              "each, row lengths included)")


def time_queries(memory: Cairn, queries: list[str], qvecs: np.ndarray, *, ab: bool) -> dict[str, list[float]]:
    """Seconds of each search and recall of each query: {figure: [seconds]}. ab: each query also with
    FTS5 scoring (the rare-first BM25, as before the held postings), in turn with the shipped path,
    so both meet the same machine load."""
    held = memory.store.postings
    variants = [("", held)] + ([(" [FTS5 rare-first]", {})] if ab else [])
    timings: dict[str, list[float]] = {}
    for q, v in zip(queries, qvecs):
        for label, call, text, options in (
                ("session search, vector given", memory.sessions.search, q, {"window": 2, "query_vector": v}),
                ("session search, embedded", memory.sessions.search, q, {"window": 2}),
                ("session search, 'last month', embedded", memory.sessions.search,
                 q.rstrip("?") + " last month", {"window": 2}),
                ("recall, vector given", memory.recall, q, {"query_vector": v}),
                ("recall, embedded", memory.recall, q, {})):
            for suffix, postings in variants:
                memory.store.postings = postings
                t = time.perf_counter()
                call(text, k=10, **options)
                timings.setdefault(label + suffix, []).append(time.perf_counter() - t)
    memory.store.postings = held
    return timings


def build_turns(memory: Cairn, n: int, embedder: PoolEmbedder, seed: int) -> float:
    """n turns in sessions of SESSION_TURNS over the last 365 days, written through the storage call
    capture ends in (index keys and vectors in context as capture makes them). Returns seconds."""
    store, turns = memory.store, make_turns(n, seed)
    start_at = now_ms() - 365 * DAY
    started = time.perf_counter()
    for s, first in enumerate(range(0, n, SESSION_TURNS)):
        chunk = turns[first:first + SESSION_TURNS]
        at = start_at + int(365 * DAY * first / n)
        drafts = [TurnDraft(uuid=f"y{first + i}", role=role, text=text, at=at + 60_000 * i)
                  for i, (role, text) in enumerate(chunk)]
        own = embedder.embed([turn_passage(None, d.text) for d in drafts])
        vectors = in_context(own, np.vstack([np.zeros_like(own[:1]), own[:-1]]))
        rows = [{"uuid": d.uuid, "role": d.role, "text": d.text, "at": d.at, "key": key, "vector": v}
                for d, key, v in zip(drafts, session_keys(drafts, 0), vectors)]
        store.add_turns(f"year-{s}", source="bench", transcript_path=None, title=chunk[0][1][:120], turns=rows,
                        read_bytes=None, last_uuid=None, skipped={}, redactions={}, private_spans=0,
                        trailing_meta={}, rekey={})
    return time.perf_counter() - started


def capture_throughput(memory: Cairn, n: int) -> dict[str, float]:
    """Turns/s through Sessions.add_turns with the real model, and the seconds of its stages."""
    from cairn.privacy.scrub import scrub_many

    turns = make_turns(n, seed=99)
    texts = [t for _, t in turns]
    t0 = time.perf_counter()
    scrub_many(texts)
    t1 = time.perf_counter()
    memory.embed(texts)
    t2 = time.perf_counter()
    base = now_ms()
    started = time.perf_counter()
    for s, first in enumerate(range(0, n, SESSION_TURNS)):
        drafts = [TurnDraft(uuid=f"c{first + i}", role=role, text=text, at=base + first + i)
                  for i, (role, text) in enumerate(turns[first:first + SESSION_TURNS])]
        memory.sessions.add_turns(f"capture-{s}", drafts, source="bench")
    elapsed = time.perf_counter() - started
    return {"turns/s": n / elapsed, "seconds": elapsed, "scrub s": t1 - t0, "embed s": t2 - t1}


def dbstat_groups(memory: Cairn) -> dict[str, int]:
    conn = memory.store.conn
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    groups: dict[str, int] = {}
    for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
        if name.startswith("turn_fts"):
            group = "turns: keyword index"
        elif name.startswith("turn_codes") or name.startswith("turn_vec"):
            group = "turns: vectors"
        elif name.startswith("turns") or name.startswith("sqlite_autoindex_turns") or name.startswith("turn_"):
            group = "turns: rows and indexes"
        elif name.startswith("sessions") or name.startswith("sqlite_autoindex_sessions"):
            group = "turns: session catalog"
        elif name.startswith("memory_vec") or name.startswith("memory_vectors"):
            group = "memories: vectors"
        elif name.startswith("memory_fts"):
            group = "memories: keyword index"
        elif name.startswith("memor") or name.startswith("sqlite_autoindex_memor") or name.startswith("memory_"):
            group = "memories: rows, tags and indexes"
        else:
            group = "other: " + name
        groups[group] = groups.get(group, 0) + int(size)
    return groups


def code_agreement(memory: Cairn, queries: np.ndarray) -> dict[str, float]:
    """Top-10 / top-50 overlap of the turn codes' search with an exact float32 search. """
    store = memory.store
    index = store.turn_index
    index.sync(store.conn)
    # The codes hold each vector to within int8 rounding; the exact reference decodes them to
    # float32 and ranks by the full dot product, so only the search's shortcuts are compared.
    exact_matrix = index.codes.astype(np.float32) * index.scales[:, None]
    out = {"top10": 0.0, "top50": 0.0}
    for q in queries:
        exact = index.seqs[np.argsort(-(exact_matrix @ q))[:50]]
        found = [seq for seq, _ in index.search(store.conn, q, 50, None, ())]
        out["top10"] += len(set(found[:10]) & set(exact[:10].tolist())) / 10
        out["top50"] += len(set(found) & set(exact.tolist())) / 50
    return {k: v / len(queries) for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--turns", type=int, default=200_000)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--pool", type=int, default=3000)
    parser.add_argument("--capture", type=int, default=2000, help="turns captured for the throughput figure")
    parser.add_argument("--retention-days", type=int, default=90)
    parser.add_argument("--cache", type=Path, default=None,
                        help="keep the built store here and start from it when it exists (same sizes)")
    parser.add_argument("--latency-only", action="store_true", help="print the search and recall latencies only")
    parser.add_argument("--ab", action="store_true",
                        help="also time each query with every keyword match scored (the ranking before issue 33)")
    args = parser.parse_args()
    n_turns, n_memories = int(args.turns * args.scale), int(args.memories * args.scale)
    floor = python_pass()
    print(f"python -c pass: {1000 * floor:.0f} ms (median of 15)", flush=True)
    real = make_embedder(None, backend="onnx")
    started = time.perf_counter()
    pool_texts = [t for _, t in make_turns(args.pool // 2, seed=7)] + [m[0] for m in make_memories(args.pool // 2, 8)]
    pool = real.embed(pool_texts)
    print(f"pool: {len(pool_texts)} texts embedded in {time.perf_counter() - started:.1f} s", flush=True)
    embedder = PoolEmbedder(real, pool)
    cached = args.cache / f"year-scale-{n_turns}-{n_memories}-{args.pool}.db" if args.cache else None
    if cached is not None and cached.exists():
        target = store_path("year-scale")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cached, target)
        print(f"store copied from {cached}", flush=True)
    with Cairn.open("year-scale", create=True, embedder=embedder) as memory:
        memory.embed(["warm-up"])
        if cached is None or not cached.exists():
            seconds = build_turns(memory, n_turns, embedder, seed=1)
            print(f"built {n_turns:,} turns in {seconds:.0f} s ({n_turns / seconds:.0f} turns/s, storage only)",
                  flush=True)
            started = time.perf_counter()
            mems = make_memories(n_memories, seed=2)
            for first in range(0, n_memories, 256):
                memory.remember_many([Draft(text=t, kind=k, tags=tags) for t, k, tags in mems[first:first + 256]],
                                     detect=False)
            print(f"built {n_memories:,} memories in {time.perf_counter() - started:.0f} s", flush=True)
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                memory.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                shutil.copyfile(store_path("year-scale"), cached)  # after the checkpoint: the whole store
        memory.hold_vectors()  # as the warm process does (adapters/service.py): the k-NN served from memory
        queries = make_queries(args.queries, seed=3)
        postings_cold(memory, queries)
        held = memory.store.postings
        qvecs = real.embed_queries(queries)
        for q, v in zip(queries[:20], qvecs[:20]):  # warm: codes and vectors held, pages cached
            memory.sessions.search(q, k=10, window=0, query_vector=v)
            memory.recall(q, k=10, query_vector=v)
        timings = time_queries(memory, queries, qvecs, ab=args.ab)
        if args.ab:
            keyword_agreement(memory, queries, held)
        postings_held(memory)
        if args.latency_only:
            floor = (floor + python_pass()) / 2
            print(f"\n`python -c pass`: {1000 * floor:.0f} ms (median of 15, start and end averaged)\n")
            print_latencies(timings, floor)
            return
        agreement = code_agreement(memory, qvecs[:100])
    with Cairn.open("year-scale", embedder=real) as memory:  # capture embeds every turn for real
        throughput = capture_throughput(memory, args.capture)
        groups = dbstat_groups(memory)
        total_turns = n_turns + args.capture
        turn_bytes = sum(v for k, v in groups.items() if k.startswith("turns"))
        memory_bytes = sum(v for k, v in groups.items() if k.startswith("memories"))
        # Retention: drop the vectors of turns older than --retention-days; keyword search still finds them.
        dropped = memory.store.drop_turn_vectors(now_ms() - args.retention_days * DAY)
        old = memory.sessions.search("retries pool connections", mode="keyword", k=5, window=0,
                                     until=now_ms() - 300 * DAY)
        after = dbstat_groups(memory)
        turn_bytes_after = sum(v for k, v in after.items() if k.startswith("turns"))
    floor_end = python_pass()
    floor = (floor + floor_end) / 2
    print(f"\n## A year in one store: {n_turns:,} captured turns (+{args.capture:,} captured for the throughput "
          f"figure), {n_memories:,} memories\n")
    print(f"`python -c pass`: {1000 * floor:.0f} ms (median of 15, start and end averaged): ratios below are to it\n")
    print_latencies(timings, floor)
    print(f"\ncapture, real model: **{throughput['turns/s']:.0f} turns/s** ({args.capture:,} turns in "
          f"{throughput['seconds']:.1f} s; alone: scrubbing {throughput['scrub s']:.1f} s, embedding "
          f"{throughput['embed s']:.1f} s); one turn's capture is {1 / throughput['turns/s'] / floor:.3f} x "
          "`python -c pass`")
    print(f"\nbytes: **{turn_bytes / total_turns:.0f} per turn**, **{memory_bytes / n_memories:.0f} per memory** "
          "(dbstat, every index)\n")
    print("| group | bytes | per turn or memory |")
    print("|---|---|---|")
    for group, size in sorted(groups.items()):
        per = size / (total_turns if group.startswith("turns") else n_memories if group.startswith("memories") else 1)
        print(f"| {group} | {size:,} | {per:.0f} |")
    print(f"\nint8 codes against an exact search of the same vectors (100 queries): top-10 overlap "
          f"{agreement['top10']:.3f}, top-50 {agreement['top50']:.3f}")
    print(f"\nretention ({args.retention_days} days): {dropped:,} vectors dropped; turns then take "
          f"{turn_bytes_after / total_turns:.0f} bytes each (text and keyword index kept); keyword search for "
          f"a turn older than 300 days: {len(old)} hits")


if __name__ == "__main__":
    main()
