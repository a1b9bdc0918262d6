"""Evaluate per-prompt injection (cairn.context.relevant_hits) on the labelled prompt set.

Builds a store through the engine (Cairn.open with create, remember with detect=False) from the
memories of tests/data/prompt_relevance.yaml, in a throwaway CAIRN_HOME, then runs relevant_hits
for every prompt on both paths:
- hybrid: the query vector from the packaged all-MiniLM-L6-v2 (offline, CPU), as the warm process
  passes it;
- keyword-only: no vector (BM25 candidates and the lexical gate), as a hook without the model.

For each path it prints injection precision and recall, micro-averaged over (prompt, memory) pairs,
the share of prompts labelled `relevant: []` that got nothing injected ("silence"), the mean number
of memories injected per prompt, figures per prompt type, and how many labelled memories recall
never offered to the gate (ranking losses, not gate losses). Then a sweep over STRONG_COSINE x
WEAK_COSINE x MIN_SHARED_STEMS and over the keyword-only rule (KEYWORD_MIN_SHARED_STEMS x
SHARED_FRACTION), which is how the constants in cairn/context.py were chosen.

    python bench/prompt_gate.py [PROMPTS.yaml] [--details] [--no-sweep] [--k 5] [--depth N]
                                [--distractors N [--locomo FOLDER]]

--details lists every wrong injection and every missed memory with its cosine and shared stems.
--distractors N adds N dialogue turns of LoCoMo (read from the folder bench/locomo.py uses, CC BY-NC,
never copied here) as memories no prompt is about: precision and candidate depth in a bigger store.
A script printing figures, not a test (tests/engine/test_context.py holds the regression bars).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # before sentence_transformers is imported: never reach a hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "engine"))  # run from a checkout without installing the package

from cairn import context  # noqa: E402

DEFAULT_PROMPTS = REPO / "tests" / "data" / "prompt_relevance.yaml"
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo10_v2"  # as bench/locomo.py; never copied here
STRONG_GRID = [round(0.30 + 0.05 * i, 2) for i in range(9)]   # 0.30 .. 0.70
WEAK_GRID = [round(0.20 + 0.05 * i, 2) for i in range(7)]     # 0.20 .. 0.50
SHARED_GRID = (1, 2, 3, 4, 5)
FRACTION_GRID = (0.0, 0.15, 0.2, 0.25, 0.3, 0.4)


@dataclass
class Scores:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    negatives: int = 0          # prompts labelled relevant: []
    silent_negatives: int = 0   # ... that got nothing injected
    prompts: int = 0
    injected: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def silence(self) -> float:
        return self.silent_negatives / self.negatives if self.negatives else 1.0

    @property
    def mean_injected(self) -> float:
        return self.injected / self.prompts if self.prompts else 0.0

    def add(self, gold: set[str], got: list[str]) -> None:
        chosen = set(got)
        self.tp += len(gold & chosen)
        self.fp += len(chosen - gold)
        self.fn += len(gold - chosen)
        self.prompts += 1
        self.injected += len(got)
        if not gold:
            self.negatives += 1
            self.silent_negatives += not got

    def line(self) -> str:
        return (f"precision {self.precision:.3f}  recall {self.recall:.3f}  silence {self.silence:.3f} "
                f"({self.silent_negatives}/{self.negatives})  mean injected {self.mean_injected:.2f}  "
                f"[tp {self.tp} fp {self.fp} fn {self.fn}]")


def load(path: Path) -> dict:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    keys = {m["key"] for m in data["memories"]}
    for prompt in data["prompts"]:
        unknown = set(prompt["relevant"]) - keys
        if unknown:
            raise SystemExit(f"unknown memory keys {sorted(unknown)} in prompt {prompt['prompt']!r}")
    return data


def distractor_turns(folder: Path, count: int) -> list[str]:
    """The first `count` dialogue turns of the LoCoMo conversations in `folder`, as "Speaker: text"."""
    turns: list[str] = []
    for path in sorted(folder.glob("*.json")):
        conversation = json.loads(path.read_text(encoding="utf-8"))
        conversation = conversation.get("conversation", conversation)
        sessions = sorted((k for k in conversation if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:]))
        for key in sessions:
            turns += [f"{t['speaker']}: {t['text']}" for t in conversation[key] if t.get("text")]
    if len(turns) < count:
        raise SystemExit(f"only {len(turns)} LoCoMo turns in {folder}, asked for {count}")
    return turns[:count]


def build_store(data: dict, embedder, distractors: list[str] = ()):
    """A fresh store holding the labelled memories (and unlabelled distractors, never relevant);
    returns (engine, {memory id: key}), distractors keyed "distractor:N"."""
    from cairn import Cairn
    from cairn import Draft

    engine = Cairn.open("prompt-gate", create=True, embedder=embedder)
    ids: dict[str, str] = {}
    for m in data["memories"]:
        result = engine.remember(m["text"], kind=m["kind"], importance=m["importance"], source="user",
                                 valid_from=str(m["date"]), detect=False)
        ids[result.memory.id] = m["key"]
    for start in range(0, len(distractors), 256):
        drafts = [Draft(text=t, kind="fact", source="import") for t in distractors[start : start + 256]]
        for n, result in enumerate(engine.remember_many(drafts, detect=False), start=start):
            ids.setdefault(result.memory.id, f"distractor:{n}")
    return engine, ids


def memoise_recall(engine) -> None:
    """Cache engine.recall per (query, k, vector): the gate's constants never change what recall
    returns, so a sweep re-runs only the gate. relevant_hits itself is what runs."""
    recall, cache = engine.recall, {}

    def cached(query, *, k=None, query_vector=None, use_vectors=True, **kw):
        key = (query, k, None if query_vector is None else query_vector.tobytes(), use_vectors, tuple(sorted(kw)))
        if key not in cache:
            cache[key] = recall(query, k=k, query_vector=query_vector, use_vectors=use_vectors, **kw)
        return cache[key]

    engine.recall = cached


@contextmanager
def constants(**values) -> Iterator[None]:
    """Temporarily set module constants of cairn.context (for the sweep)."""
    old = {name: getattr(context, name) for name in values}
    for name, value in values.items():
        setattr(context, name, value)
    try:
        yield
    finally:
        for name, value in old.items():
            setattr(context, name, value)


Run = Callable[[int], list[str]]  # prompt index -> injected keys, best first


def evaluate(prompts: list[dict], run: Run) -> tuple[Scores, dict[str, Scores], list[list[str]]]:
    total, by_type, injected = Scores(), defaultdict(Scores), []
    for i, p in enumerate(prompts):
        got = run(i)
        injected.append(got)
        total.add(set(p["relevant"]), got)
        by_type[p["type"]].add(set(p["relevant"]), got)
    return total, dict(by_type), injected


def report(title: str, prompts: list[dict], run: Run, engine, ids: dict[str, str], vectors, k: int,
           details: bool) -> None:
    total, by_type, injected = evaluate(prompts, run)
    print(f"\n=== {title}")
    print(f"all {len(prompts)} prompts: {total.line()}")
    for kind in sorted(by_type):
        print(f"  {kind:>13} ({by_type[kind].prompts:>2}): {by_type[kind].line()}")
    # Ranking losses: labelled memories that recall never offered to the gate.
    lost = 0
    for i, p in enumerate(prompts):
        if not p["relevant"] or context.is_trivial(p["prompt"]):
            continue
        offered = candidates(engine, ids, p["prompt"], None if vectors is None else vectors[i], k)
        lost += len(set(p["relevant"]) - {key for key, _, _ in offered})
    depth = 3 * k if vectors is None else max(3 * k, context.HYBRID_DEPTH)
    print(f"labelled memories never among the {depth} recall hits the gate reads: {lost} of "
          f"{sum(len(p['relevant']) for p in prompts)}")
    if not details:
        return
    print("\nerrors (cosine / shared stems for each memory):")
    for i, p in enumerate(prompts):
        gold, got = set(p["relevant"]), injected[i]
        if gold == set(got):
            continue
        offered = {key: (cos, shared) for key, cos, shared in
                   candidates(engine, ids, p["prompt"], None if vectors is None else vectors[i], k)}

        def show(key: str) -> str:
            cos, shared = offered.get(key, (None, None))
            if shared is None:
                return f"{key} (not offered)"
            return f"{key} ({'-' if cos is None else f'{cos:.2f}'}/{shared})"

        print(f"- [{p['type']}] {' '.join(p['prompt'].split())[:90]!r}")
        if set(got) - gold:
            print(f"    wrong:  {', '.join(show(key) for key in got if key not in gold)}")
        if gold - set(got):
            print(f"    missed: {', '.join(show(key) for key in sorted(gold - set(got)))}")


def candidates(engine, ids: dict[str, str], prompt: str, vector, k: int) -> list[tuple[str, float | None, int]]:
    """What relevant_hits' recall offers the gate: (key, cosine or None, shared stems), best first."""
    text = prompt[:context.MAX_PROMPT_CHARS]
    depth = k * 3 if vector is None else max(k * 3, context.HYBRID_DEPTH)
    hits = engine.recall(text, k=depth, query_vector=vector, use_vectors=vector is not None)
    cosines = {} if vector is None else context._cosines(engine, hits, vector)
    words = context.stems(text)
    return [(ids[h.memory.id], cosines.get(h.memory.id), len(words & context.stems(h.memory.text or "")))
            for h in hits]


def sweep_hybrid(prompts: list[dict], run: Run) -> None:
    for shared in SHARED_GRID:
        print(f"\n=== sweep, hybrid, MIN_SHARED_STEMS {shared}: precision/recall/silence for "
              "STRONG_COSINE (rows) x WEAK_COSINE (columns)")
        print(f"{'':>6}" + "".join(f"{w:>16.2f}" for w in WEAK_GRID))
        for strong in STRONG_GRID:
            cells = []
            for weak in WEAK_GRID:
                if weak > strong:
                    cells.append(f"{'':>16}")
                    continue
                with constants(STRONG_COSINE=strong, WEAK_COSINE=weak, MIN_SHARED_STEMS=shared):
                    s, _, _ = evaluate(prompts, run)
                cells.append(f"{s.precision:>8.2f}/{s.recall:.2f}/{s.silence:.2f}")
            print(f"{strong:>6.2f}" + "".join(cells))


def sweep_keyword(prompts: list[dict], run: Run) -> None:
    print("\n=== sweep, keyword-only: KEYWORD_MIN_SHARED_STEMS (rows) x SHARED_FRACTION (columns), "
          "precision/recall/silence")
    print(f"{'':>6}" + "".join(f"{f:>16.2f}" for f in FRACTION_GRID))
    for shared in SHARED_GRID:
        cells = []
        for fraction in FRACTION_GRID:
            with constants(KEYWORD_MIN_SHARED_STEMS=shared, SHARED_FRACTION=fraction):
                s, _, _ = evaluate(prompts, run)
            cells.append(f"{s.precision:>8.2f}/{s.recall:.2f}/{s.silence:.2f}")
        print(f"{shared:>6}" + "".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prompts", nargs="?", type=Path, default=DEFAULT_PROMPTS)
    parser.add_argument("--details", action="store_true", help="list every wrong and missed injection")
    parser.add_argument("--no-sweep", action="store_true", help="skip the constant sweeps")
    parser.add_argument("--k", type=int, default=5, help="at most k memories per prompt (hooks.prompt_k)")
    parser.add_argument("--depth", type=int, help="override context.HYBRID_DEPTH (recall hits the hybrid gate reads)")
    parser.add_argument("--distractors", type=int, default=0, metavar="N",
                        help="also store N LoCoMo dialogue turns (never relevant): precision in a bigger store")
    parser.add_argument("--locomo", type=Path, default=LOCOMO, help="LoCoMo folder for --distractors")
    args = parser.parse_args()
    if args.depth is not None:
        context.HYBRID_DEPTH = args.depth

    data = load(args.prompts)
    prompts = data["prompts"]
    with tempfile.TemporaryDirectory() as home:
        os.environ["CAIRN_HOME"] = home
        (Path(home) / "empty-config.yaml").touch()  # no settings (a missing CAIRN_CONFIG file is an error)
        os.environ["CAIRN_CONFIG"] = str(Path(home) / "empty-config.yaml")
        os.environ.pop("CAIRN_STORE", None)
        from cairn.embedder import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder()
        distractors = distractor_turns(args.locomo, args.distractors) if args.distractors else []
        engine, ids = build_store(data, embedder, distractors)
        try:
            vectors = engine.embed([p["prompt"][:context.MAX_PROMPT_CHARS] for p in prompts])
            print(f"{len(data['memories'])} memories (+{len(distractors)} distractors), {len(prompts)} prompts "
                  f"({sum(not p['relevant'] for p in prompts)} labelled relevant: []), "
                  f"{sum(len(p['relevant']) for p in prompts)} relevant (prompt, memory) pairs; k = {args.k}")
            print(f"gate: STRONG_COSINE {context.STRONG_COSINE}, WEAK_COSINE {context.WEAK_COSINE}, "
                  f"MIN_SHARED_STEMS {context.MIN_SHARED_STEMS}, KEYWORD_MIN_SHARED_STEMS "
                  f"{context.KEYWORD_MIN_SHARED_STEMS}, SHARED_FRACTION {context.SHARED_FRACTION}, "
                  f"HYBRID_DEPTH {context.HYBRID_DEPTH}")

            def hybrid(i: int) -> list[str]:
                hits = context.relevant_hits(engine, prompts[i]["prompt"], k=args.k, query_vector=vectors[i])
                return [ids[h.memory.id] for h in hits]

            def keyword(i: int) -> list[str]:
                hits = context.relevant_hits(engine, prompts[i]["prompt"], k=args.k, query_vector=None)
                return [ids[h.memory.id] for h in hits]

            report("hybrid (all-MiniLM-L6-v2 query vector)", prompts, hybrid, engine, ids, vectors, args.k,
                   args.details)
            report("keyword-only (no model)", prompts, keyword, engine, ids, None, args.k, args.details)
            if not args.no_sweep:
                memoise_recall(engine)
                sweep_hybrid(prompts, hybrid)
                sweep_keyword(prompts, keyword)
        finally:
            engine.close()


if __name__ == "__main__":
    main()
