"""Truth maintenance with the writer in the loop: replay the supersession truth sets write by write.

Every labelled pair (old, new) and every chain of tests/data/supersession_*.yaml is one scenario:
its texts are remembered in order through the real engine (Cairn.remember, detection on) on a fresh
store. Each scenario runs twice:

- auto: automatic retirement alone (what the engine retires by itself);
- loop: after every write a label judge reads `related` from the answer and, for each memory listed,
  says "change" exactly when the labels say that memory is stale (a pair labelled supersede: the old
  text; a chain: a step not in its `current`), then calls Cairn.replace(that id, the same text), as
  the MCP instructions teach Claude to. It stands in for Claude: the end state it reaches is what the
  loop can reach when the writer judges right, and no better than what `related` shows it.

A step is current at the end when the memory its write created (or, for a duplicate, matched) is.
Printed per split and overall, for each mode: scenarios whose end state is exactly the labelled one,
retirement precision and recall over steps, false retirements (each listed), and, for the loop,
`related` coverage: the share of required retirements whose old memory was retired automatically or
listed in `related` by a later write. Expected current: a pair labelled supersede keeps only the new
text; conflict and unrelated pairs keep both.

    python bench/supersession_loop.py [YAML ...] [--split NAME] [--keyword-only] [--engine DIR]

--engine DIR imports cairn from DIR (e.g. another worktree's engine/) to score it the same way
(an engine without `related` is scored on its `conflicts`). A script printing figures, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # before sentence_transformers is imported: never reach a hub

import yaml

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SETS = sorted((REPO / "tests" / "data").glob("supersession_*.yaml"))


def scenarios(paths: list[Path]) -> list[dict]:
    """Every pair and chain as {split, note, steps, current, kind}."""
    out = []
    for path in paths:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        for pair in data.get("pairs") or ():
            current = [1] if pair["label"] == "supersede" else [0, 1]
            out.append({"split": pair.get("split", "dev"), "note": pair.get("note", ""), "label": pair["label"],
                        "steps": [pair["old"], pair["new"]], "current": current, "kind": pair.get("kind", "fact")})
        for chain in data.get("chains") or ():
            out.append({"split": chain.get("split", "dev"), "note": chain.get("note", ""), "label": "chain",
                        "steps": chain["steps"], "current": chain["current"], "kind": chain.get("kind", "fact")})
    return out


def related_of(result) -> list[str]:
    """Ids the engine showed the writer: `related`, or on an engine without it, `conflicts`."""
    if hasattr(result, "related"):
        return [r["id"] for r in result.related]
    return [c["id"] for c in result.conflicts]


def replay(engine, scenario: dict, loop: bool) -> dict:
    """Remember the steps in order; with `loop`, the label judge resolves `related` after each."""
    expected = set(scenario["current"])
    step_ids: list[str] = []
    first_step: dict[str, int] = {}
    shown: set[int] = set()  # stale steps listed in `related` (or retired) by a later write
    judged = 0
    for j, text in enumerate(scenario["steps"]):
        result = engine.remember(text, kind=scenario["kind"], detect=True)
        step_ids.append(result.memory.id)
        first_step.setdefault(result.memory.id, j)
        for old in result.superseded:
            if old in first_step:
                shown.add(first_step[old])
        for old in related_of(result):
            i = first_step.get(old)
            if i is None:
                continue
            shown.add(i)
            if loop and i not in expected:
                judged += 1
                engine.replace(old, text)  # the text is current already: old is superseded by it
    current_ids = {m.id for m in engine.list(limit=1000)}
    current = {j for j, mid in enumerate(step_ids) if mid in current_ids}
    return {"current": current, "expected": expected, "n": len(step_ids), "shown": shown, "judged": judged}


def run_all(cases: list[dict], embedder, loop: bool) -> list[dict]:
    from cairn import Cairn

    runs = []
    with tempfile.TemporaryDirectory() as home:
        os.environ["CAIRN_HOME"] = home
        config = Path(home) / "config.yaml"
        config.touch()
        os.environ["CAIRN_CONFIG"] = str(config)
        for n, case in enumerate(cases):
            with Cairn.open(f"s{n}", create=True, embedder=embedder) as engine:
                runs.append(replay(engine, case, loop))
    return runs


def summary(cases: list[dict], runs: list[dict]) -> dict:
    tp = fp = fn = 0
    must = covered = 0
    wrong = []
    for case, run in zip(cases, runs):
        gone = set(range(run["n"])) - run["current"]
        should_go = set(range(run["n"])) - run["expected"]
        tp, fp, fn = tp + len(gone & should_go), fp + len(gone - should_go), fn + len(should_go - gone)
        must += len(should_go)
        covered += len(should_go & (run["shown"] | gone))
        if gone - should_go:
            wrong.append((case, sorted(gone - should_go)))
    exact = sum(r["current"] == r["expected"] for r in runs)
    return {"n": len(runs), "exact": exact, "tp": tp, "fp": fp, "fn": fn, "must": must, "covered": covered,
            "wrong": wrong, "writes": sum(r["n"] - 1 for r in runs)}


def line(title: str, s: dict) -> str:
    precision = s["tp"] / (s["tp"] + s["fp"]) if s["tp"] + s["fp"] else 1.0
    recall = s["tp"] / (s["tp"] + s["fn"]) if s["tp"] + s["fn"] else 1.0
    coverage = s["covered"] / s["must"] if s["must"] else 1.0
    return (f"  {title:<26} end state {s['exact']:>4}/{s['n']:<4} = {s['exact'] / s['n']:.3f}   retirement "
            f"precision {precision:.3f} recall {recall:.3f} ({s['fp']} false)   related coverage {coverage:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sets", nargs="*", type=Path, default=DEFAULT_SETS, help="truth set YAML files")
    parser.add_argument("--split", action="append", help="only these splits (repeat)")
    parser.add_argument("--keyword-only", action="store_true", help="no embedding model")
    parser.add_argument("--engine", type=Path, default=REPO / "engine", help="import cairn from this folder")
    parser.add_argument("--quiet", action="store_true", help="do not list false retirements")
    args = parser.parse_args()
    sys.path.insert(0, str(args.engine.resolve()))

    cases = scenarios(args.sets)
    if args.split:
        cases = [c for c in cases if c["split"] in args.split]
    embedder = None
    if not args.keyword_only:
        from cairn.embedder import make_embedder

        embedder = make_embedder()
        embedder.load()
    print(f"cairn from {args.engine}; {len(cases)} scenarios from {len(args.sets)} files; "
          f"embedder {embedder.fingerprint if embedder else 'none (keyword-only)'}")
    modes = {"auto": run_all(cases, embedder, loop=False), "loop": run_all(cases, embedder, loop=True)}
    by_split: dict[str, list[int]] = defaultdict(list)
    for i, case in enumerate(cases):
        by_split[case["split"]].append(i)
    for split in [*sorted(by_split), "all"]:
        chosen = by_split[split] if split != "all" else list(range(len(cases)))
        subset = [cases[i] for i in chosen]
        print(f"\n=== {split}: {len(subset)} scenarios, {sum(len(c['steps']) - 1 for c in subset)} scored writes")
        for mode, runs in modes.items():
            label = "automatic retirement" if mode == "auto" else "loop (label judge)"
            print(line(label, summary(subset, [runs[i] for i in chosen])))
    if not args.quiet:
        for mode, runs in modes.items():
            wrong = summary(cases, runs)["wrong"]
            print(f"\nfalse retirements, {mode}: {len(wrong)} scenarios")
            for case, steps in wrong:
                print(f"  [{case['split']} {case['label']}] {case['note']}: steps {steps} of {case['steps']}")


if __name__ == "__main__":
    main()
