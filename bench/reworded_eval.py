"""Recall of reworded questions: does `cairn recall` put the right memory first?

tests/data/reworded/{dev,holdout}.yaml hold small stores (about 20 memories of one fictional
project, with applies-when phrases) and questions that ask about one memory in other words, each
labelled with that memory (written by hand before any ranking was tuned on them; README.md there).
For each store a fresh store is made and every question is recalled as `cairn recall QUESTION -k 3`
does (hybrid, the packaged all-MiniLM-L6-v2), and as keyword-only.

Printed per split and mode:
- first: the share of questions whose memory is the first hit; top 3: in the first three;
- weak hits: top-3 hits that share exactly one content word (stem) with the question and have a
  cosine below 0.2 (the issue's "never"), and how many questions have one;
- score of the first hit when it is right and when it is wrong (a score that means something is
  lower when it is wrong).

    python bench/reworded_eval.py [--split dev|holdout] [--details] [--fusion evidence|convex|rrf]

Score holdout once per frozen design. A script printing figures, not a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "engine"))
DATA = REPO / "tests" / "data" / "reworded"
WEAK_COSINE = 0.2


def run(split: str, fusion: str, details: bool, settings: dict | None = None) -> None:
    from cairn import Cairn
    from cairn.embedder import make_embedder
    from cairn.memories.ranking import RankingConfig
    from cairn.text import stems

    data = yaml.safe_load((DATA / f"{split}.yaml").read_text(encoding="utf-8"))
    embedder = make_embedder(None, backend="auto")
    ranking = dataclasses.replace(RankingConfig(), fusion=fusion, **(settings or {}))
    lines: list[str] = []
    for mode in ("hybrid", "keyword"):
        n = first = top3 = weak = weak_questions = 0
        right_scores: list[float] = []
        wrong_scores: list[float] = []
        for number, store in enumerate(data["stores"]):
            engine = Cairn.open(f"rw-{mode}-{number}", create=True, embedder=embedder)
            label: dict[str, str] = {}
            texts = {m["id"]: m["text"] for m in store["memories"]}
            for m in store["memories"]:
                r = engine.remember(m["text"], kind=m["kind"], source="user", detect=False,
                                    applies_when=m.get("applies_when") or [])
                label[r.memory.id] = m["id"]
            for q in store["questions"]:
                vector = engine.embed([q["text"]], query=True)[0] if mode == "hybrid" else None
                hits = engine.recall(q["text"], k=3, query_vector=vector, use_vectors=mode == "hybrid",
                                     ranking=ranking)
                got = [label.get(h.memory.id) for h in hits]
                n += 1
                first += bool(got) and got[0] == q["memory"]
                top3 += q["memory"] in got
                if hits:
                    (right_scores if got[0] == q["memory"] else wrong_scores).append(hits[0].score)
                cosines = engine.cosines([h.memory.id for h in hits], vector) if vector is not None else {}
                bad = [h for h in hits if len(stems(q["text"]) & stems(h.memory.passage)) == 1
                       and cosines.get(h.memory.id, 1.0) < WEAK_COSINE]
                weak += len(bad)
                weak_questions += bool(bad)
                if details and (not got or got[0] != q["memory"] or bad):
                    lines.append(f"  [{mode}] {store['id']} {q['text']!r} -> want {q['memory']} "
                                 f"{texts[q['memory']][:60]!r}; got " + "; ".join(
                                     f"{g} {h.score:.2f} cos {cosines.get(h.memory.id, float('nan')):.2f}"
                                     for g, h in zip(got, hits)))
            engine.close()
        med = statistics.median
        print(f"{split}/{mode}: {n} questions, first {first / n:.3f}, top 3 {top3 / n:.3f}; weak hits in top 3: "
              f"{weak} (in {weak_questions} questions); first-hit score median right "
              f"{med(right_scores) if right_scores else 0:.3f} / wrong {med(wrong_scores) if wrong_scores else 0:.3f}")
    if details:
        print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("dev", "holdout", "holdout2"), default="dev")
    parser.add_argument("--fusion", choices=("evidence", "convex", "rrf"), default="evidence")
    parser.add_argument("--details", action="store_true")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a RankingConfig field (a number), e.g. --set evidence_alpha=0.6")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["CAIRN_HOME"] = home
        (Path(home) / "config.yaml").write_text("{}\n", encoding="utf-8")
        os.environ["CAIRN_CONFIG"] = str(Path(home) / "config.yaml")
        os.environ.pop("CAIRN_STORE", None)
        run(args.split, args.fusion, args.details,
            {k: float(v) for k, v in (item.split("=", 1) for item in args.set)})


if __name__ == "__main__":
    main()
