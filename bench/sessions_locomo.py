"""Session search on LoCoMo, through the real capture path: turn- and session-level recall per search mode.

    python bench/sessions_locomo.py [FOLDER] [--conversations 26,30,41] [--no-time] [--hold]

FOLDER holds LoCoMo conversations in the `locomo10_v2` layout (default: ../shared/data/locomo/locomo10_v2
beside the repository; CC BY-NC data, read from there, never copied into the repository). Each
conversation goes into a fresh store through `Cairn.sessions.import_locomo`, the same code `cairn
import-sessions --locomo` runs: scrubbing, index keys (key expansion: speaker, date, neighbouring
turns), vectors. Every question with evidence is then asked with `memory.sessions.search(question, mode=M,
k=50, window=0, reference=R)` for M in keyword, semantic, hybrid, where R is the conversation's last
session date (the questions are asked after it: "last year", "in May" count from there; --no-time
leaves the reference out, so a run on an older Cairn that has none works too). Only the ranked turns
count (a context window is never a hit): recall_any@k (some evidence turn among the first k) for
k = 1, 5, 10, 20 and recall_all@10 (every evidence turn among the first 10), micro-averaged over
questions, as bench/locomo.py scores evidence (its loader is reused); and session level for the
hybrid: the sessions of the ranked turns in order of first appearance, any@5 / any@10 an evidence
session among the first 5 / 10. The constants (cairn.sessions.turns: NEIGHBOURS, KEY_WEIGHT,
CONTEXT_WEIGHT, FUSION_WEIGHTS, RRF_K) were tuned on these conversations (the development set).
--hold searches as the warm process does, with the store's vectors and keyword postings held in
process memory (`Cairn.hold_vectors`; BM25 from storage/fts_postings.py instead of FTS5's scoring).
A script printing figures, not a test; docs/benchmarks.md has the results.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo import DEFAULT_FOLDER, load_conversation  # noqa: E402  (sets up a throwaway CAIRN_HOME)

import cairn  # noqa: E402
from cairn import Cairn  # noqa: E402

MODES = ("keyword", "semantic", "hybrid")
KS = (1, 5, 10, 20)
SESSION_KS = (5, 10)
DEPTH = 50  # turns ranked per question (the first 20 are what k=20 returns: the same fused list, cut)


class Tally:
    def __init__(self) -> None:
        self.n = 0
        self.any = dict.fromkeys(KS, 0)
        self.all10 = 0
        self.sessions = dict.fromkeys(SESSION_KS, 0)

    def add(self, uuids: list[str], evidence: frozenset[str]) -> None:
        self.n += 1
        for k in KS:
            self.any[k] += bool(set(uuids[:k]) & evidence)
        self.all10 += evidence <= set(uuids[:10])
        wanted = {e.split(":")[0] for e in evidence}  # D3:5 -> session D3
        order = list(dict.fromkeys(u.split(":")[0] for u in uuids))
        for k in SESSION_KS:
            self.sessions[k] += bool(set(order[:k]) & wanted)

    def merge(self, other: Tally) -> None:
        self.n += other.n
        self.all10 += other.all10
        for k in KS:
            self.any[k] += other.any[k]
        for k in SESSION_KS:
            self.sessions[k] += other.sessions[k]

    def cells(self) -> str:
        n = self.n or 1
        return " / ".join(f"{self.any[k] / n:.3f}" for k in KS) + f" ({self.all10 / n:.3f})"

    def session_cells(self) -> str:
        n = self.n or 1
        return " / ".join(f"{self.sessions[k] / n:.3f}" for k in SESSION_KS)


def run(folder: Path, names: list[str] | None, use_time: bool, hold: bool = False) -> None:
    paths = sorted(folder.glob("*.json"), key=lambda p: (not p.stem.isdigit(), int(p.stem) if p.stem.isdigit() else 0))
    if names:
        paths = [p for p in paths if p.stem in names]
    if not paths:
        raise SystemExit(f"no conversations (*.json) in {folder}")
    use_time = use_time and "reference" in inspect.signature(cairn.Sessions.search).parameters
    total = {m: Tally() for m in MODES}
    turns = 0
    windows = 0
    clock = {"import": 0.0, **{m: 0.0 for m in MODES}}
    rows = []
    for path in paths:
        conv = load_conversation(path)
        per = {m: Tally() for m in MODES}
        with Cairn.open(f"sessions-locomo-{path.stem}", create=True) as memory:
            if memory.embed(["warm-up"]) is None:
                raise SystemExit("no embedding model: the semantic and hybrid figures would mislead")
            started = time.perf_counter()
            done = memory.sessions.import_locomo(path)
            clock["import"] += time.perf_counter() - started
            if hold:  # as the warm process: BM25 from the held postings (storage/fts_postings.py)
                memory.hold_vectors()
            turns += done["turns_added"]
            reference = max(s.ended_at or 0 for s in memory.sessions.catalog(limit=1000))
            options = {"reference": reference} if use_time else {}
            words = []
            for q in conv.questions:
                found = cairn.find_time_window(q.text, reference) if use_time else None
                windows += found is not None
                words.append(q.text if found is None else found.query)
            vectors = memory.embed(words, query=True)
            for q, vector in zip(conv.questions, vectors):
                for mode in MODES:
                    started = time.perf_counter()
                    hits = memory.sessions.search(q.text, mode=mode, k=DEPTH, window=0, query_vector=vector, **options)
                    clock[mode] += time.perf_counter() - started
                    per[mode].add([h.turn.uuid for h in hits], q.evidence)
        for mode in MODES:
            total[mode].merge(per[mode])
        rows.append(f"| {path.stem} | {per['keyword'].n} | " + " | ".join(per[m].cells() for m in MODES)
                    + f" | {per['hybrid'].session_cells()} |")
        print(rows[-1], file=sys.stderr, flush=True)
    questions = total["hybrid"].n
    print(f"LoCoMo session search, {len(paths)} conversations, {turns} turns, {questions} questions "
          f"({windows} with a time window); turn level recall_any@1 / 5 / 10 / 20 (recall_all@10); "
          f"session level (hybrid) any@5 / 10\n")
    print("| conversation | questions | " + " | ".join(MODES) + " | sessions (hybrid) |")
    print("|---" * (3 + len(MODES)) + "|")
    print("\n".join(rows))
    print(f"| all | {questions} | " + " | ".join(total[m].cells() for m in MODES)
          + f" | {total['hybrid'].session_cells()} |")
    print(f"\nimport (scrub, index, embed): {clock['import']:.1f} s, {turns / clock['import']:.0f} turns/s; "
          + ", ".join(f"{m} {1000 * clock[m] / questions:.1f} ms/query" for m in MODES))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--conversations", help="comma-separated file stems, e.g. 26,30,41")
    parser.add_argument("--no-time", action="store_true", help="no reference time: time expressions count from now")
    parser.add_argument("--hold", action="store_true",
                        help="search as the warm process does: vectors and keyword postings held in process memory")
    args = parser.parse_args()
    run(args.folder, args.conversations.split(",") if args.conversations else None, not args.no_time, args.hold)


if __name__ == "__main__":
    main()
