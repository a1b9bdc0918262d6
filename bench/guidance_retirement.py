"""Real project guidance through `remember`: how many current statements are retired automatically?

Every memory of the relevance sets (tests/data/relevance*/*.yaml: atomic statements split from the
agent guidance files of public repositories, each current, none a change of another) and of
tests/data/prompt_relevance.yaml (one realistic project's memory) is remembered in file order, with
its kind and automatic supersession on, through the real engine (Cairn.remember). Nothing in these
sets is stale, so every automatic retirement is a false one: the bar is 0.

Two layouts, each on fresh stores:

- per repository: one store per file (a project loading its own guidance);
- one store: every file into the same store, in order (a store that already holds hundreds of
  memories about other subjects when a project's guidance arrives).

Printed: statements loaded, retirements per layout and split (dev: files a rule may be tuned on;
holdout: files marked `split: holdout`, never tuned on), and each retirement (old -> new, the
detector's reason). Also the writes that listed an earlier memory in `related` and queued a review
proposal, for context (not a bar).

    python bench/guidance_retirement.py [--keyword-only] [--engine DIR] [--layout per-repo|one-store|both]

A script printing figures, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # before any model library is imported: never reach a hub

import yaml

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"


def guidance_sets() -> list[dict]:
    """[{name, split, memories: [{text, kind}]}] from the relevance sets and prompt_relevance.yaml."""
    sets = []
    for path in sorted(DATA.glob("relevance*/*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        memories = data.get("memories") or []
        if memories:
            sets.append({"name": f"{path.parent.name}/{path.stem}", "split": data.get("split", "dev"),
                         "memories": [{"text": m["text"], "kind": m.get("kind", "fact")} for m in memories]})
    ledgerly = yaml.safe_load((DATA / "prompt_relevance.yaml").read_text(encoding="utf-8"))
    sets.append({"name": "prompt_relevance", "split": "dev",
                 "memories": [{"text": m["text"], "kind": m.get("kind", "fact")} for m in ledgerly["memories"]]})
    return sets


def load(engine, memories: list[dict]) -> tuple[list[tuple[str, str, str]], int, int]:
    """Remember `memories` in order; (retirements as (old text, new text, the detector's reason
    without a model), writes with a `related` entry, proposals queued)."""
    from cairn.memories.supersede import classify

    texts: dict[str, str] = {}
    retired = []
    related = 0
    for m in memories:
        result = engine.remember(m["text"], kind=m["kind"], detect=True)
        texts[result.memory.id] = m["text"]
        for old in result.superseded:
            old_text = texts.get(old) or engine.get(old).text or ""
            retired.append((old_text, m["text"], classify(old_text, m["text"], None).reason))
        related += bool(result.related)
    queued = len(engine.review.queue())
    return retired, related, queued


def run(sets: list[dict], embedder, layout: str) -> list[dict]:
    from cairn import Cairn

    out = []
    with tempfile.TemporaryDirectory() as home:
        os.environ["CAIRN_HOME"] = home
        config = Path(home) / "config.yaml"
        config.touch()
        os.environ["CAIRN_CONFIG"] = str(config)
        groups = [[s] for s in sets] if layout == "per-repo" else [sets]
        for n, group in enumerate(groups):
            with Cairn.open(f"g{n}", create=True, embedder=embedder) as engine:
                for s in group:
                    retired, related, _ = load(engine, s["memories"])
                    out.append({"name": s["name"], "split": s["split"], "n": len(s["memories"]),
                                "retired": retired, "related": related})
    return out


def engine_and_model(args: argparse.Namespace):
    """Import cairn from args.engine (first on the path) and load the default embedding model, or
    None with args.keyword_only. Shared with bench/slot_changes.py."""
    sys.path.insert(0, str(args.engine.resolve()))
    if args.keyword_only:
        return None
    from cairn.embedder import make_embedder

    embedder = make_embedder()
    embedder.load()
    return embedder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keyword-only", action="store_true", help="no embedding model")
    parser.add_argument("--engine", type=Path, default=REPO / "engine", help="import cairn from this folder")
    parser.add_argument("--layout", choices=("per-repo", "one-store", "both"), default="both")
    args = parser.parse_args()
    embedder = engine_and_model(args)
    sets = guidance_sets()
    print(f"cairn from {args.engine}; {sum(len(s['memories']) for s in sets)} current statements from "
          f"{len(sets)} files; embedder {embedder.fingerprint if embedder else 'none (keyword-only)'}")
    layouts = ("per-repo", "one-store") if args.layout == "both" else (args.layout,)
    for layout in layouts:
        runs = run(sets, embedder, layout)
        print(f"\n=== {layout}")
        for split in ("dev", "holdout", "all"):
            chosen = [r for r in runs if split in ("all", r["split"])]
            print(f"  {split:<8} {sum(r['n'] for r in chosen):>4} statements   automatic retirements "
                  f"{sum(len(r['retired']) for r in chosen):>3}   writes listing a related memory "
                  f"{sum(r['related'] for r in chosen):>4}")
        for r in runs:
            for old, new, why in r["retired"]:
                print(f"  RETIRED [{r['split']} {r['name']}]\n      old: {old}\n      new: {new}\n      why: {why}")


if __name__ == "__main__":
    main()
