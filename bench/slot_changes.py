"""`related` finds the changed subject: a new value of the same slot relates to the current one.

Each pair of tests/data/slot_changes.yaml (written before the detector was tuned on it) runs through
the real engine (Cairn.remember, detection on) on a fresh store: its `chain` steps and `old` are
remembered in order, then `new`. With --crowded, every pair runs instead in one store that already
holds the 547 real guidance statements of bench/guidance_retirement.py (others' subjects compete for
the candidate slots), and the pair's memories are forgotten after it. A pair is found when the old
memory is in the new write's `related` or was retired by it. Printed: the share found (bar 0.95),
how many were retired automatically, and each pair missed.

    python bench/slot_changes.py [--keyword-only] [--crowded] [--engine DIR]

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
PAIRS = REPO / "tests" / "data" / "slot_changes.yaml"
BAR = 0.95


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keyword-only", action="store_true", help="no embedding model")
    parser.add_argument("--engine", type=Path, default=REPO / "engine", help="import cairn from this folder")
    parser.add_argument("--crowded", action="store_true", help="one store holding 547 real guidance statements")
    args = parser.parse_args()
    from guidance_retirement import engine_and_model

    embedder = engine_and_model(args)
    from cairn import Cairn, Draft

    pairs = yaml.safe_load(PAIRS.read_text(encoding="utf-8"))["pairs"]
    found = retired = 0
    missed = []
    with tempfile.TemporaryDirectory() as home:
        os.environ["CAIRN_HOME"] = home
        config = Path(home) / "config.yaml"
        config.touch()
        os.environ["CAIRN_CONFIG"] = str(config)
        crowd = None
        if args.crowded:
            sys.path.insert(0, str(REPO / "bench"))
            from guidance_retirement import guidance_sets

            crowd = Cairn.open("crowd", create=True, embedder=embedder)
            for s in guidance_sets():
                crowd.remember_many([Draft(text=m["text"], kind=m["kind"]) for m in s["memories"]], detect=False)
        for n, pair in enumerate(pairs):
            engine = crowd or Cairn.open(f"s{n}", create=True, embedder=embedder)
            written = [engine.remember(step, kind=pair["kind"], detect=True).memory.id
                       for step in [*(pair.get("chain") or ()), pair["old"]]]
            old = written[-1]
            result = engine.remember(pair["new"], kind=pair["kind"], detect=True)
            hit = old in result.superseded or old in {r["id"] for r in result.related}
            found += hit
            retired += old in result.superseded
            if not hit:
                missed.append(pair)
            if crowd is None:
                engine.close()
            else:
                for memory_id in {*written, result.memory.id}:
                    crowd.forget(memory_id)
        if crowd is not None:
            crowd.close()
    share = found / len(pairs)
    layout = "one store with 547 guidance statements" if args.crowded else "fresh stores"
    print(f"cairn from {args.engine}; {layout}; embedder {embedder.fingerprint if embedder else 'none (keyword-only)'}")
    print(f"{len(pairs)} slot changes: old memory in related or retired {found}/{len(pairs)} = {share:.3f} "
          f"(bar {BAR}: {'met' if share >= BAR else 'NOT met'}); retired automatically {retired}")
    for pair in missed:
        print(f"  MISSED [{pair['slot']}] {pair['old']}  ->  {pair['new']}")


if __name__ == "__main__":
    main()
